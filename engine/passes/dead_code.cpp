#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.values().size(), false);
  for (Ref r : g.outputs()) live[static_cast<size_t>(r.id)] = true;
  std::vector<bool> keep(g.nodes().size(), false);
  for (size_t k = g.nodes().size(); k-- > 0;) {
    const Node& n = g.nodes()[k];
    bool any = n.op->kind == OpKind::Update;  // in-place updates are their own purpose
    for (Ref o : n.outputs) any = any || live[static_cast<size_t>(o.id)];
    if (!any) continue;
    keep[k] = true;
    for (Ref i : n.inputs) live[static_cast<size_t>(i.id)] = true;
  }
  Rewriter rw(g);
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (keep[k]) rw.copy(g.nodes()[k]);
  return rw.finish();
}

}  // namespace mls
