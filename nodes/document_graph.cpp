// The graph rules of a document (every input linked, acyclic, exactly one loss) and the
// walks that lowering and the editor need (topological order, look-ups).
#include <algorithm>
#include <functional>
#include <queue>

#include "nodes/document.h"

namespace mls::nodes {

namespace {

// Successors of each node, in link order. Links to ids that do not exist are skipped: a
// document built in code may be half-edited, and the parser already rejects them.
std::vector<std::vector<size_t>> successors(const Document& doc) {
  std::vector<std::vector<size_t>> out(doc.nodes.size());
  for (const LinkDoc& l : doc.links) {
    std::optional<size_t> from = find_node(doc, l.from_node), to = find_node(doc, l.to_node);
    if (from && to) out[*from].push_back(*to);
  }
  return out;
}

// The first cycle met by a depth-first walk in file order, as node indices with the first
// repeated at the end (fc1 -> relu1 -> fc1); empty when there is none.
std::vector<size_t> find_cycle(const Document& doc) {
  enum class Mark { New, OnPath, Done };
  const std::vector<std::vector<size_t>> next = successors(doc);
  std::vector<Mark> mark(doc.nodes.size(), Mark::New);
  std::vector<size_t> path, cycle;
  std::function<bool(size_t)> visit = [&](size_t n) {
    mark[n] = Mark::OnPath;
    path.push_back(n);
    for (size_t m : next[n]) {
      if (mark[m] == Mark::OnPath) {
        cycle.assign(std::find(path.begin(), path.end(), m), path.end());
        cycle.push_back(m);
        return true;
      }
      if (mark[m] == Mark::New && visit(m)) return true;
    }
    path.pop_back();
    mark[n] = Mark::Done;
    return false;
  };
  for (size_t n = 0; n < doc.nodes.size(); ++n)
    if (mark[n] == Mark::New && visit(n)) break;
  return cycle;
}

}  // namespace

std::vector<std::string> graph_problems(const Document& doc, const std::string& source_name,
                                        const NodeCatalogue& catalogue) {
  std::vector<std::string> problems;
  auto problem = [&](const std::string& msg) { problems.push_back(source_name + ": " + msg); };
  std::vector<size_t> losses;
  for (size_t i = 0; i < doc.nodes.size(); ++i) {
    const NodeDoc& node = doc.nodes[i];
    const std::string where = "/model/nodes/" + std::to_string(i);
    const NodeTypeDef* def = catalogue.find(node.type);
    if (!def) {
      problem(where + "/type: unknown node type '" + node.type + "'");
      continue;
    }
    if (def->role == NodeRole::Loss) losses.push_back(i);
    for (const PortDef& port : def->inputs)
      if (!find_input_link(doc, node.id, port.name))
        problem("node '" + node.id + "' (" + where + "): input '" + port.name + "' is not linked");
  }

  if (std::vector<size_t> cycle = find_cycle(doc); !cycle.empty()) {
    std::string names;
    for (size_t n : cycle) names += (names.empty() ? "" : " -> ") + doc.nodes[n].id;
    problem("cycle through nodes " + names);
  }

  if (losses.empty()) {
    std::string kinds;
    for (const NodeTypeDef& t : catalogue.all())
      if (t.role == NodeRole::Loss) kinds += (kinds.empty() ? "" : ", ") + t.id;
    problem("/model/nodes: the graph has no loss node (add one: " + kinds + ")");
  }
  for (size_t k = 1; k < losses.size(); ++k)
    problem("/model/nodes/" + std::to_string(losses[k]) + ": a second loss node '" +
            doc.nodes[losses[k]].id + "' (the first is '" + doc.nodes[losses[0]].id +
            "'); a graph has exactly one");
  return problems;
}

Result<void> check_graph(const Document& doc, const std::string& source_name,
                         const NodeCatalogue& catalogue) {
  std::vector<std::string> problems = graph_problems(doc, source_name, catalogue);
  if (!problems.empty()) return make_error(problems.front());
  return {};
}

std::vector<size_t> topological_order(const Document& doc) {
  const std::vector<std::vector<size_t>> next = successors(doc);
  std::vector<size_t> pending(doc.nodes.size(), 0);
  for (const std::vector<size_t>& succ : next)
    for (size_t m : succ) ++pending[m];
  // Kahn's algorithm with the smallest ready index first, so ties keep file order and the
  // order is the same on every load.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t n = 0; n < doc.nodes.size(); ++n)
    if (pending[n] == 0) ready.push(n);
  std::vector<size_t> order;
  order.reserve(doc.nodes.size());
  while (!ready.empty()) {
    size_t n = ready.top();
    ready.pop();
    order.push_back(n);
    for (size_t m : next[n])
      if (--pending[m] == 0) ready.push(m);
  }
  return order;
}

std::optional<size_t> find_node(const Document& doc, std::string_view node_id) {
  for (size_t i = 0; i < doc.nodes.size(); ++i)
    if (doc.nodes[i].id == node_id) return i;
  return std::nullopt;
}

const LinkDoc* find_input_link(const Document& doc, std::string_view node_id,
                               std::string_view port) {
  for (const LinkDoc& l : doc.links)
    if (l.to_node == node_id && l.to_port == port) return &l;
  return nullptr;
}

std::optional<size_t> find_loss_node(const Document& doc, const NodeCatalogue& catalogue) {
  for (size_t i = 0; i < doc.nodes.size(); ++i) {
    const NodeTypeDef* def = catalogue.find(doc.nodes[i].type);
    if (def && def->role == NodeRole::Loss) return i;
  }
  return std::nullopt;
}

}  // namespace mls::nodes
