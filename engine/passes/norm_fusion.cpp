// fuse_batch_norm: on a forward graph before autodiff (build_step runs it beside
// fuse_attention), each batch_norm_train becomes a batch_norm_act, whose gradient is one
// batch_norm_backward node (two passes over the activations) instead of the dozen primitives
// of batch_norm_train's rule. A relu that alone reads the normalised output joins it
// (act = relu): y is written once, already rectified, and the backward reads relu's mask
// from it. The fused node sits where the batch norm was, so readers of mean and var (the
// running statistics' updates) keep their order; the relu's readers come after it anyway.
#include <vector>

#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

bool f32(const Graph& g, Ref r) {
  return g.type_of(r).dtype == DType::F32;
}

}  // namespace

Graph fuse_batch_norm(const Graph& g, const FusionSupport& s, bool with_relu) {
  if (!s.batch_norm) return g;
  const size_t count = g.nodes().size();
  std::vector<int32_t> readers(g.values().size(), 0), reader(g.values().size(), -1);
  for (size_t i = 0; i < count; ++i)
    for (Ref r : g.nodes()[i].inputs) {
      ++readers[static_cast<size_t>(r.id)];
      reader[static_cast<size_t>(r.id)] = static_cast<int32_t>(i);
    }
  for (Ref r : g.outputs()) readers[static_cast<size_t>(r.id)] += 2;  // an output escapes
  std::vector<int32_t> relu_of(count, -1);  // batch norm node -> the relu that joins it
  std::vector<bool> joined(count, false);
  bool any = false;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes()[i];
    if (n.op->name != "batch_norm_train" || !f32(g, n.inputs[0])) continue;
    any = true;
    const Ref y = n.outputs[0];
    const int32_t r = reader[static_cast<size_t>(y.id)];
    if (!with_relu || readers[static_cast<size_t>(y.id)] != 1) continue;
    if (g.nodes()[static_cast<size_t>(r)].op->name != "relu") continue;
    relu_of[i] = r;
    joined[static_cast<size_t>(r)] = true;
  }
  if (!any) return g;
  Rewriter rw(g);
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g.nodes()[i];
    if (joined[i]) continue;
    if (n.op->name != "batch_norm_train" || !f32(g, n.inputs[0])) {
      rw.copy(n);
      continue;
    }
    Attrs a = n.attrs;
    a.set("act", std::string(relu_of[i] >= 0 ? "relu" : "none"));
    Refs out = rw.emit(n, "batch_norm_act",
                       {rw.map(n.inputs[0]), rw.map(n.inputs[1]), rw.map(n.inputs[2])}, a);
    const Ref y =
        relu_of[i] >= 0 ? g.nodes()[static_cast<size_t>(relu_of[i])].outputs[0] : n.outputs[0];
    rw.replace(y, out[0]);
    rw.replace(n.outputs[1], out[1]);
    rw.replace(n.outputs[2], out[2]);
  }
  return rw.finish();
}

}  // namespace mls
