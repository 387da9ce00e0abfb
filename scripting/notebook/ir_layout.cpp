// One layered layout of an IR graph (see ir_layout.h).
#include "scripting/notebook/ir_layout.h"

#include <algorithm>

namespace mls::lua {

size_t IrRanks::widest() const {
  size_t w = 1;
  for (const auto& row : rows) w = std::max(w, row.size());
  return w;
}

IrRanks rank_ir(const Graph& g, const IrLayoutOptions& options) {
  const auto& nodes = g.nodes();
  IrRanks out;
  out.drawn.assign(nodes.size(), false);
  out.node_rank.assign(nodes.size(), 0);
  out.source_rank.assign(g.values().size(), -1);
  out.node_x.assign(nodes.size(), 0);
  out.value_x.assign(g.values().size(), 0);
  // The backward starts below the forward seen so far: forward above, backward below, as a
  // student reads it (nodes with no inputs, such as the loss gradient's seed, included).
  int max_rank = 0, forward_rank = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (options.forward_only && nodes[i].backward) continue;
    out.drawn[i] = true;
    int r = options.backward_below && nodes[i].backward ? forward_rank + 1 : 1;
    for (Ref in : nodes[i].inputs) {
      const Value& v = g.value(in);
      if (v.kind == ValueKind::Node && v.node >= 0 && out.drawn[static_cast<size_t>(v.node)])
        r = std::max(r, out.node_rank[static_cast<size_t>(v.node)] + 1);
    }
    out.node_rank[i] = r;
    max_rank = std::max(max_rank, r);
    if (!nodes[i].backward) forward_rank = std::max(forward_rank, r);
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!out.drawn[i]) continue;
    for (Ref in : nodes[i].inputs) {
      const Value& v = g.value(in);
      if (v.kind != ValueKind::Input && v.kind != ValueKind::Param) continue;
      int& s = out.source_rank[static_cast<size_t>(in.id)];
      s = s < 0 ? out.node_rank[i] - 1 : std::min(s, out.node_rank[i] - 1);
    }
  }
  out.rows.resize(static_cast<size_t>(max_rank + 1));
  for (size_t v = 0; v < out.source_rank.size(); ++v)
    if (out.source_rank[v] >= 0)
      out.rows[static_cast<size_t>(out.source_rank[v])].push_back({false, v});
  for (size_t i = 0; i < nodes.size(); ++i)
    if (out.drawn[i]) out.rows[static_cast<size_t>(out.node_rank[i])].push_back({true, i});
  return out;
}

void place_ir_rows(const Graph& g, IrRanks& r, const IrLayoutOptions& options, double middle,
                   const std::function<double(size_t k, size_t count)>& column_x) {
  const auto& nodes = g.nodes();
  for (auto& row : r.rows) {
    std::vector<double> key(row.size());
    for (size_t k = 0; k < row.size(); ++k) {
      const IrRanks::Entry& e = row[k];
      double sum = 0;
      int n = 0;
      if (e.node)
        for (Ref in : nodes[e.index].inputs) {
          const Value& v = g.value(in);
          if (v.kind == ValueKind::Node && v.node >= 0 && r.drawn[static_cast<size_t>(v.node)]) {
            sum += r.node_x[static_cast<size_t>(v.node)];
            ++n;
          } else if (options.order_by_sources &&
                     (v.kind == ValueKind::Input || v.kind == ValueKind::Param)) {
            sum += r.value_x[static_cast<size_t>(in.id)];
            ++n;
          }
        }
      key[k] = static_cast<double>(k) * 1e-3 + (n > 0 ? sum / n : middle);  // ties: graph order
    }
    std::vector<size_t> order(row.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key[a] < key[b]; });
    std::vector<IrRanks::Entry> sorted;
    sorted.reserve(row.size());
    for (size_t k : order) sorted.push_back(row[k]);
    row = std::move(sorted);
    for (size_t k = 0; k < row.size(); ++k)
      (row[k].node ? r.node_x : r.value_x)[row[k].index] = column_x(k, row.size());
  }
}

}  // namespace mls::lua
