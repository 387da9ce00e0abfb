#include "scripting/notebook/cell_graph.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace mls::lua {

CellGraph::CellGraph(const std::vector<std::pair<std::string, CellSymbols>>& cells) {
  const int n = static_cast<int>(cells.size());
  ids_.reserve(cells.size());
  for (int i = 0; i < n; ++i) {
    ids_.push_back(cells[static_cast<size_t>(i)].first);
    index_.emplace(ids_.back(), i);
  }
  // Definers; a second definer of a name is a problem on both.
  std::unordered_map<std::string, std::vector<int>> defined_by;
  for (int i = 0; i < n; ++i)
    for (const std::string& w : cells[static_cast<size_t>(i)].second.writes) {
      auto& d = defined_by[w];
      if (d.empty()) definer_.emplace(w, i);
      d.push_back(i);
    }
  std::vector<std::pair<std::string, std::vector<int>>> twice;
  for (auto& [name, d] : defined_by)
    if (d.size() > 1) twice.emplace_back(name, d);
  std::sort(twice.begin(), twice.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second, a.first) < std::tie(b.second, b.first);
  });
  for (auto& [name, d] : twice) {
    CellProblem p;
    std::string list;
    for (size_t k = 0; k < d.size(); ++k) {
      p.cells.push_back(ids_[static_cast<size_t>(d[k])]);
      blocked_.insert(p.cells.back());
      list += (k == 0 ? "" : k + 1 == d.size() ? " and " : ", ") + p.cells.back();
    }
    p.reason = "'" + name + "' is defined by " + std::to_string(d.size()) + " cells: " + list +
               " (a global may be assigned in one cell only)";
    problems_.push_back(std::move(p));
  }
  // Edges.
  out_.assign(static_cast<size_t>(n), {});
  in_.assign(static_cast<size_t>(n), {});
  for (int i = 0; i < n; ++i)
    for (const std::string& r : cells[static_cast<size_t>(i)].second.reads) {
      readers_[r].push_back(i);
      auto it = definer_.find(r);
      if (it == definer_.end() || it->second == i) continue;
      out_[static_cast<size_t>(it->second)].push_back(i);
      in_[static_cast<size_t>(i)].push_back(it->second);
    }
  for (auto* adj : {&out_, &in_})
    for (auto& v : *adj) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
    }
  // Kahn's algorithm, the lowest notebook index first among the ready.
  std::vector<int> indeg(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    indeg[static_cast<size_t>(i)] = static_cast<int>(in_[static_cast<size_t>(i)].size());
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (int i = 0; i < n; ++i)
    if (indeg[static_cast<size_t>(i)] == 0) ready.push(i);
  topo_pos_.assign(static_cast<size_t>(n), -1);
  order_.reserve(static_cast<size_t>(n));
  while (!ready.empty()) {
    const int c = ready.top();
    ready.pop();
    topo_pos_[static_cast<size_t>(c)] = static_cast<int>(order_.size());
    order_.push_back(ids_[static_cast<size_t>(c)]);
    for (int d : out_[static_cast<size_t>(c)])
      if (--indeg[static_cast<size_t>(d)] == 0) ready.push(d);
  }
  if (static_cast<int>(order_.size()) == n) return;
  // Cycles: the cells left. From each unvisited one (notebook order), walk edges among the
  // left until a cell repeats: that walk's tail is a cycle.
  std::vector<char> left(static_cast<size_t>(n), 0), reported(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i)
    if (topo_pos_[static_cast<size_t>(i)] < 0) left[static_cast<size_t>(i)] = 1;
  for (int i = 0; i < n; ++i) {
    if (!left[static_cast<size_t>(i)]) continue;
    topo_pos_[static_cast<size_t>(i)] = static_cast<int>(order_.size());
    order_.push_back(ids_[static_cast<size_t>(i)]);
    blocked_.insert(ids_[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < n; ++i) {
    if (!left[static_cast<size_t>(i)] || reported[static_cast<size_t>(i)]) continue;
    std::vector<int> path;
    std::unordered_map<int, size_t> at;
    int c = i;
    bool closed = false;
    while (true) {
      if (at.count(c)) {
        closed = true;
        break;
      }
      at[c] = path.size();
      path.push_back(c);
      int next = -1;
      for (int d : out_[static_cast<size_t>(c)])
        if (left[static_cast<size_t>(d)]) {
          next = d;
          break;
        }
      if (next < 0) break;  // a cell downstream of a cycle, not on one
      c = next;
    }
    if (!closed) continue;
    std::vector<int> cycle(path.begin() + static_cast<std::ptrdiff_t>(at[c]), path.end());
    bool seen = false;
    for (int k : cycle) seen = seen || reported[static_cast<size_t>(k)];
    if (seen) continue;
    // Start the cycle at its first cell in notebook order.
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    CellProblem p;
    std::string walk;
    for (size_t k = 0; k < cycle.size(); ++k) {
      const int a = cycle[k], b = cycle[(k + 1) % cycle.size()];
      reported[static_cast<size_t>(a)] = 1;
      p.cells.push_back(ids_[static_cast<size_t>(a)]);
      // The name b reads from a.
      std::string name;
      for (const std::string& r : cells[static_cast<size_t>(b)].second.reads) {
        auto it = definer_.find(r);
        if (it != definer_.end() && it->second == a) {
          name = r;
          break;
        }
      }
      walk += (k == 0 ? "" : ", ") + ids_[static_cast<size_t>(b)] + " reads '" + name + "' from " +
              ids_[static_cast<size_t>(a)];
    }
    std::string names;
    for (size_t k = 0; k <= cycle.size(); ++k)
      names += (k == 0 ? "" : " -> ") + ids_[static_cast<size_t>(cycle[k % cycle.size()])];
    p.reason = "cells " + names + " form a cycle (" + walk + ")";
    std::sort(p.cells.begin(), p.cells.end(), [&](const std::string& x, const std::string& y) {
      return index_.at(x) < index_.at(y);
    });
    problems_.push_back(std::move(p));
  }
}

int CellGraph::index(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? -1 : it->second;
}

std::string CellGraph::definer(const std::string& name) const {
  auto it = definer_.find(name);
  return it == definer_.end() ? std::string() : ids_[static_cast<size_t>(it->second)];
}

std::vector<std::string> CellGraph::readers(const std::string& name) const {
  std::vector<std::string> r;
  auto it = readers_.find(name);
  if (it != readers_.end())
    for (int i : it->second) r.push_back(ids_[static_cast<size_t>(i)]);
  return r;
}

std::vector<std::string> CellGraph::collect(std::vector<int> start, bool forward,
                                            bool include_start) const {
  std::vector<char> seen(ids_.size(), 0);
  std::vector<int> found, stack;
  for (int s : start) {
    if (seen[static_cast<size_t>(s)]) continue;
    seen[static_cast<size_t>(s)] = 1;
    stack.push_back(s);
    if (include_start) found.push_back(s);
  }
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    for (int d : (forward ? out_ : in_)[static_cast<size_t>(c)]) {
      if (seen[static_cast<size_t>(d)]) continue;
      seen[static_cast<size_t>(d)] = 1;
      found.push_back(d);
      stack.push_back(d);
    }
  }
  std::sort(found.begin(), found.end(), [&](int a, int b) {
    return topo_pos_[static_cast<size_t>(a)] < topo_pos_[static_cast<size_t>(b)];
  });
  std::vector<std::string> r;
  r.reserve(found.size());
  for (int i : found) r.push_back(ids_[static_cast<size_t>(i)]);
  return r;
}

std::vector<std::string> CellGraph::dependents(const std::string& id) const {
  const int i = index(id);
  return i < 0 ? std::vector<std::string>{} : collect({i}, true, false);
}

std::vector<std::string> CellGraph::with_dependents(const std::vector<std::string>& ids) const {
  std::vector<int> start;
  for (const auto& id : ids)
    if (int i = index(id); i >= 0) start.push_back(i);
  return collect(start, true, true);
}

std::vector<std::string> CellGraph::dependencies(const std::string& id) const {
  const int i = index(id);
  return i < 0 ? std::vector<std::string>{} : collect({i}, false, false);
}

}  // namespace mls::lua
