// fuse_batch_norm: on a forward graph before autodiff (build_step runs it beside
// fuse_attention), each batch_norm_train becomes a batch_norm_act, whose gradient is one
// batch_norm_backward node (two passes over the activations) instead of the dozen primitives
// of batch_norm_train's rule. A relu that alone reads the normalised output joins it
// (act = relu): y is written once, already rectified, and the backward reads relu's mask
// from it. The fused node sits where the batch norm was, so readers of mean and var (the
// running statistics' updates) keep their order; the relu's readers come after it anyway.
//
// fuse_pool_batch_norm_backward: on a step graph, after autodiff (a default pass), the
// gradient of a 2x2, stride-2 max pool of batch_norm_act's y, read only by that batch norm's
// batch_norm_backward, joins it as one batch_norm_pool_backward node, which rebuilds y from x
// where it needs it: the pool gradient's [N, C, H, W] tensor is neither written nor read, nor
// is y read again. The forward pool still reads y.
#include <optional>
#include <vector>

#include "engine/ops/conv.h"
#include "engine/ops/nn.h"

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

namespace {

// The batch_norm_pool_backward inputs for a batch_norm_backward node b, when its gradient is
// max_pool2d_backward's of a 2x2, stride-2 pool of the y of the batch_norm_act that made b's
// x, mean and var (same gamma, beta, eps and act), and b alone reads that gradient.
std::optional<Refs> pool_gradient_match(const Graph& g, const Node& b,
                                        const std::vector<int32_t>& readers) {
  if (b.op->name != "batch_norm_backward" || b.inputs.size() < 5) return std::nullopt;
  auto producer = [&](Ref r) -> const Node* {
    const Value& v = g.values()[static_cast<size_t>(r.id)];
    return v.kind == ValueKind::Node ? &g.nodes()[static_cast<size_t>(v.node)] : nullptr;
  };
  const Ref gy = b.inputs[0];
  const Node* p = producer(gy);
  if (!p || p->op->name != "max_pool2d_backward" || readers[static_cast<size_t>(gy.id)] != 1)
    return std::nullopt;
  const auto pool = pool2d_params(p->attrs);
  if (!pool || pool->kernel != Pair2{2, 2} || pool->stride != Pair2{2, 2} ||
      pool->padding != Pair2{0, 0})
    return std::nullopt;
  const Node* f = producer(p->inputs[1]);
  if (!f || f->op->name != "batch_norm_act" || p->inputs[1] != f->outputs[0]) return std::nullopt;
  const bool relu = b.attrs.has("act") && b.attrs.get_string("act") == "relu";
  const bool f_relu = f->attrs.has("act") && f->attrs.get_string("act") == "relu";
  if (relu != f_relu || b.attrs.get_float_or("eps", kNormEps) != f->attrs.get_float_or("eps", kNormEps))
    return std::nullopt;
  if (b.inputs[1] != f->inputs[0] || b.inputs[2] != f->outputs[1] || b.inputs[3] != f->outputs[2] ||
      b.inputs[4] != f->inputs[1] || (relu && b.inputs[5] != f->inputs[2]))
    return std::nullopt;
  const ValueType x = g.type_of(b.inputs[1]);
  if (x.dtype != DType::F32 || x.shape.size() != 4 || x.shape[2] % 2 || x.shape[3] % 2)
    return std::nullopt;
  return Refs{p->inputs[0], b.inputs[1], b.inputs[2], b.inputs[3], b.inputs[4], f->inputs[2]};
}

}  // namespace

Graph fuse_pool_batch_norm_backward(const Graph& g, const FusionSupport& s) {
  if (!s.batch_norm_pool) return g;
  std::vector<int32_t> readers(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (Ref r : n.inputs) ++readers[static_cast<size_t>(r.id)];
  for (Ref r : g.outputs()) readers[static_cast<size_t>(r.id)] += 2;  // an output escapes
  std::vector<std::optional<Refs>> match(g.nodes().size());
  bool any = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    match[i] = pool_gradient_match(g, g.nodes()[i], readers);
    any = any || match[i].has_value();
  }
  if (!any) return g;
  // The pool gradients left without readers go with the dead-code pass after this one.
  Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!match[i]) {
      rw.copy(n);
      continue;
    }
    Refs in;
    for (Ref r : *match[i]) in.push_back(rw.map(r));
    Attrs a;
    a.set("eps", n.attrs.get_float_or("eps", kNormEps));
    a.set("act", std::string(n.attrs.has("act") ? n.attrs.get_string("act") : "none"));
    Refs out = rw.emit(n, "batch_norm_pool_backward", in, a);
    for (size_t k = 0; k < n.outputs.size(); ++k) rw.replace(n.outputs[k], out[k]);
  }
  return rw.finish();
}

}  // namespace mls
