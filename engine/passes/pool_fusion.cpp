// fuse_pool_gradients: on a step graph, after autodiff (a default pass), the gradient of a max
// pool joins the node that alone reads it:
// - relu_backward(max_pool2d_backward(g, y), y), the pool of a relu's output (LeNet's, the
//   residual CNN's second pool), becomes one max_pool2d_relu_backward: the [N, C, H, W]
//   gradient is written once, where it was written, then read and written again;
// - batch_norm_backward of a 2x2, stride-2 pool's gradient of batch_norm_act's y (the
//   residual CNN's stem) becomes one batch_norm_pool_backward, which rebuilds y from x where
//   it needs it: the pool's gradient is neither written nor read, nor is y read again.
// - then conv2d_backward_weight(x, g) and the bias gradient sum(g, [0, 2, 3]) of g =
//   max_pool2d_relu_backward(gp, y), a 2x2, stride-2 pool, when nothing else reads g (LeNet's
//   conv1, whose input needs no gradient), become one conv2d_pool_backward_weight(x, gp, y):
//   the [N, O, OH, OW] gradient is neither written nor read back.
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

// A 2x2, stride-2 pool without padding whose windows tile its input (y, input 1 of its
// gradient nodes).
bool tiled_2x2(const Graph& g, const Node& pool) {
  const auto p = pool2d_params(pool.attrs);
  const Shape& y = g.type_of(pool.inputs[1]).shape;
  return p && p->kernel == Pair2{2, 2} && p->stride == Pair2{2, 2} && p->padding == Pair2{0, 0} &&
         y.size() == 4 && y[2] % 2 == 0 && y[3] % 2 == 0;
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
  if (!tiled_2x2(g, *p)) return std::nullopt;
  const Node* f = producer(p->inputs[1]);
  if (!f || f->op->name != "batch_norm_act" || p->inputs[1] != f->outputs[0]) return std::nullopt;
  const bool relu = b.attrs.has("act") && b.attrs.get_string("act") == "relu";
  const bool f_relu = f->attrs.has("act") && f->attrs.get_string("act") == "relu";
  if (relu != f_relu || b.attrs.get_float_or("eps", kNormEps) != f->attrs.get_float_or("eps", kNormEps))
    return std::nullopt;
  if (b.inputs[1] != f->inputs[0] || b.inputs[2] != f->outputs[1] || b.inputs[3] != f->outputs[2] ||
      b.inputs[4] != f->inputs[1] || (relu && b.inputs[5] != f->inputs[2]))
    return std::nullopt;
  if (g.type_of(b.inputs[1]).dtype != DType::F32) return std::nullopt;  // x: y's shape
  return Refs{p->inputs[0], b.inputs[1], b.inputs[2], b.inputs[3], b.inputs[4], f->inputs[2]};
}

Graph fuse_pool_gradient_readers(const Graph& g, const FusionSupport& s) {
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

// conv2d_backward_weight W and, if any, the bias sum S that read a 2x2 max_pool2d_relu_backward
// P's gradient that nothing else reads.
struct ConvPool {
  size_t w, s;  // node indices; s == w when there is no bias sum
  const Node* pool;
};

Graph fuse_conv_pool_gradients(const Graph& g) {
  std::vector<std::vector<size_t>> users(g.values().size());
  std::vector<size_t> made_at(g.values().size(), 0);  // producer's index + 1 (0: not a node's)
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (Ref r : g.nodes()[i].inputs) users[static_cast<size_t>(r.id)].push_back(i);
    for (Ref r : g.nodes()[i].outputs) made_at[static_cast<size_t>(r.id)] = i + 1;
  }
  std::vector<char> escapes(g.values().size(), 0);
  for (Ref r : g.outputs()) escapes[static_cast<size_t>(r.id)] = 1;
  auto bias_sum = [&](const Node& n) {
    if (n.op->name != "sum" || n.attrs.get_int_or("keepdims", 0) != 1 || !n.attrs.has("axes"))
      return false;
    return n.attrs.get_ints("axes") == std::vector<int64_t>{0, 2, 3};
  };
  std::vector<ConvPool> found;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& w = g.nodes()[i];
    if (w.op->name != "conv2d_backward_weight") continue;
    const Ref gv = w.inputs[1];
    const Node* p = producer_or_null(g, gv);
    const auto& readers = users[static_cast<size_t>(gv.id)];
    if (!p || p->op->name != "max_pool2d_relu_backward" || !tiled_2x2(g, *p) ||
        escapes[static_cast<size_t>(gv.id)] || g.type_of(gv).dtype != DType::F32 ||
        readers.size() > 2 || w.inputs[0] == gv)
      continue;
    ConvPool m{i, i, p};
    bool ok = true;
    for (size_t r : readers)
      if (r != i) {
        if (bias_sum(g.nodes()[r])) m.s = r;
        else ok = false;
      }
    // The fused node stands where the first of W and S stood: x must be made before it.
    if (!ok || made_at[static_cast<size_t>(w.inputs[0].id)] > std::min(m.w, m.s)) continue;
    found.push_back(m);
  }
  if (found.empty()) return g;
  std::vector<const ConvPool*> at(g.nodes().size(), nullptr);
  for (const ConvPool& m : found) at[m.w] = at[m.s] = &m;
  Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (!at[i]) {
      rw.copy(n);
      continue;
    }
    if (rw.mapped(n.outputs[0])) continue;  // made with the other node of its match
    const ConvPool& m = *at[i];
    const Node& w = g.nodes()[m.w];
    Refs in{rw.map(w.inputs[0]), rw.map(m.pool->inputs[0]), rw.map(m.pool->inputs[1])};
    // Labelled as the convolution's gradient ("conv1 (backward)" in a profile).
    Refs out = rw.emit(w, "conv2d_pool_backward_weight", in, w.attrs);
    rw.replace(w.outputs[0], out[0]);
    if (m.s != m.w) rw.replace(g.nodes()[m.s].outputs[0], out[1]);
  }
  return rw.finish();
}

}  // namespace

Graph fuse_pool_gradients(const Graph& g, const FusionSupport& s) {
  Graph out = fuse_pool_gradient_readers(g, s);
  return s.conv_pool ? fuse_conv_pool_gradients(out) : out;
}

}  // namespace mls
