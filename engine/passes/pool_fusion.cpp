// fuse_pool_gradients: on a step graph, after autodiff (a default pass), the gradient of a max
// pool joins the node that alone reads it:
// - relu_backward(max_pool2d_backward(g, y), y), the pool of a relu's output (LeNet's, the
//   residual CNN's second pool), becomes one max_pool2d_relu_backward: the [N, C, H, W]
//   gradient is written once, where it was written, then read and written again;
// - batch_norm_backward of a 2x2, stride-2 pool's gradient of batch_norm_act's y (the
//   residual CNN's stem) becomes one batch_norm_pool_backward, which rebuilds y from x where
//   it needs it: the pool's gradient is neither written nor read, nor is y read again.
// The forward pools still read y. Backends without the kernels (the GPU backends today) keep
// the nodes apart.
#include <optional>
#include <vector>

#include "engine/ops/conv.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

const Node* producer_or_null(const Graph& g, Ref r) {
  const Value& v = g.values()[static_cast<size_t>(r.id)];
  return v.kind == ValueKind::Node ? &g.nodes()[static_cast<size_t>(v.node)] : nullptr;
}
const Node& producer_of(const Graph& g, Ref r) {
  return *producer_or_null(g, r);
}

// The max_pool2d_relu_backward inputs (g, y) for relu_backward(gy, y) when gy is
// max_pool2d_backward(g, y) of the same y and read by nothing else.
std::optional<Refs> relu_pool_match(const Graph& g, const Node& r,
                                    const std::vector<int32_t>& readers) {
  const Ref gy = r.inputs[0], y = r.inputs[1];
  const Node* p = producer_or_null(g, gy);
  if (!p || p->op->name != "max_pool2d_backward" || p->inputs[1] != y ||
      readers[static_cast<size_t>(gy.id)] != 1 || g.type_of(y).dtype != DType::F32)
    return std::nullopt;
  return Refs{p->inputs[0], y};
}

// The batch_norm_pool_backward inputs for a batch_norm_backward node b, when its gradient is
// max_pool2d_backward's of a 2x2, stride-2 pool of the y of the batch_norm_act that made b's
// x, mean and var (same gamma, beta, eps and act), and b alone reads that gradient.
std::optional<Refs> pool_gradient_match(const Graph& g, const Node& b,
                                        const std::vector<int32_t>& readers) {
  if (b.inputs.size() < 5) return std::nullopt;
  auto producer = [&](Ref r) { return producer_or_null(g, r); };
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

Graph fuse_pool_gradients(const Graph& g, const FusionSupport& s) {
  if (!s.batch_norm_pool && !s.pool_relu) return g;
  std::vector<int32_t> readers(g.values().size(), 0);
  for (const Node& n : g.nodes())
    for (Ref r : n.inputs) ++readers[static_cast<size_t>(r.id)];
  for (Ref r : g.outputs()) readers[static_cast<size_t>(r.id)] += 2;  // an output escapes
  std::vector<std::optional<Refs>> match(g.nodes().size());
  bool any = false;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op->name == "batch_norm_backward" && s.batch_norm_pool)
      match[i] = pool_gradient_match(g, n, readers);
    else if (n.op->name == "relu_backward" && s.pool_relu)
      match[i] = relu_pool_match(g, n, readers);
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
    if (n.op->name == "relu_backward") {
      // Labelled as the pool's gradient ("pool1 (backward)" in a profile).
      const Node& pool = producer_of(g, n.inputs[0]);
      rw.replace(n.outputs[0], rw.emit(pool, "max_pool2d_relu_backward", in, pool.attrs)[0]);
      continue;
    }
    Attrs a;
    a.set("eps", n.attrs.get_float_or("eps", kNormEps));
    a.set("act", std::string(n.attrs.has("act") ? n.attrs.get_string("act") : "none"));
    Refs out = rw.emit(n, "batch_norm_pool_backward", in, a);
    for (size_t k = 0; k < n.outputs.size(); ++k) rw.replace(n.outputs[k], out[k]);
  }
  return rw.finish();
}

}  // namespace mls
