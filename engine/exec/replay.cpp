#include "engine/exec/replay.h"

#include <string>

namespace mls {

Result<void> replay(EagerSession& s, const Graph& g, std::vector<Ref>& map,
                    const std::function<bool(size_t node, std::span<const Ref> outs)>& after) {
  map.resize(g.values().size());
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].kind == ValueKind::Const) map[i] = s.leaf(g.values()[i].constant);
  Refs ins;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    ins.clear();
    for (Ref r : n.inputs) ins.push_back(map[static_cast<size_t>(r.id)]);
    Refs outs = s.emit(n.op->name, ins, n.attrs);
    if (s.failed())
      return make_error("node '" + n.label + "' (" + std::string(n.op->name) + "): " + s.error());
    for (size_t j = 0; j < outs.size(); ++j) map[static_cast<size_t>(n.outputs[j].id)] = outs[j];
    if (after && !after(k, outs)) break;
  }
  return {};
}

}  // namespace mls
