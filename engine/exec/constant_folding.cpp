#include "engine/exec/default_passes.h"
#include "engine/exec/eager.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {
// Larger results stay computed at run time: a folded constant holds its memory for the
// plan's lifetime, while an intermediate's bytes are reused by the arena.
constexpr int64_t kMaxFoldedElements = 1 << 14;
}  // namespace

Result<Graph> fold_constants(const Graph& g, Backend& backend) {
  Rewriter rw(g);
  int folded = 0;
  std::vector<Tensor> known(g.values().size());  // source value -> its constant value
  for (size_t i = 0; i < g.values().size(); ++i)
    if (g.values()[i].kind == ValueKind::Const) known[i] = g.values()[i].constant;
  for (const Node& n : g.nodes()) {
    bool all_known = n.op->kind != OpKind::Update && !n.outputs.empty();
    for (Ref r : n.inputs) all_known = all_known && known[static_cast<size_t>(r.id)].defined();
    for (Ref o : n.outputs) all_known = all_known && numel(g.type_of(o).shape) <= kMaxFoldedElements;
    if (!all_known) {
      rw.copy(n);
      continue;
    }
    EagerSession s(backend);
    Refs ins;
    for (Ref r : n.inputs) ins.push_back(s.leaf(known[static_cast<size_t>(r.id)]));
    Refs outs = s.emit(n.op->name, ins, n.attrs);
    for (size_t k = 0; k < outs.size(); ++k) {
      // A fill on its own stays a node: as a kernel it costs nothing and its bytes are planned.
      Tensor t = s.value(outs[k]).contiguous(AllocTag::Other);
      known[static_cast<size_t>(n.outputs[k].id)] = t;
    }
    if (n.inputs.empty()) {
      rw.copy(n);
      continue;
    }
    for (size_t k = 0; k < outs.size(); ++k)
      rw.replace(n.outputs[k], rw.graph().add_constant("folded" + std::to_string(folded++),
                                                       known[static_cast<size_t>(n.outputs[k].id)]));
  }
  return rw.finish();
}

}  // namespace mls
