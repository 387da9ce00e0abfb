// The batch-norm fusion pass (engine/passes/norm_fusion.cpp), the pool-gradient fusion pass
// (engine/passes/pool_fusion.cpp) and the kernels of
// batch_norm_act and batch_norm_backward (engine/cpu/batch_norm_kernels.cpp): the fused
// training step computes what the unfused one did, relu's mask (recomputed by the backward
// from x, mean, var, gamma and beta) is the one the forward's y has, and the pass leaves a backend without the kernels (and the unit-activity probes' relus)
// alone. op_conformance.cpp checks both ops against their float64 references and finite
// differences on small samples; here they run at the residual CNN's shapes. The pool-gradient
// fusion (batch_norm_pool_backward, after autodiff) is checked the same ways: the step with it
// equals the unfused one, its kernel equals the two it replaces bit for bit, and it takes only
// the pools it can.
#include <cmath>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/default_passes.h"
#include "engine/exec/eager.h"
#include "engine/ops/conv.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"
#include "graph_fixtures.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

size_t count(const Graph& g, std::string_view op, std::string_view attr_text = "") {
  size_t n = 0;
  for (const Node& node : g.nodes())
    if (node.op->name == op && node.attrs.to_string().find(attr_text) != std::string::npos) ++n;
  return n;
}

// The residual example in small: conv - BN - relu - pool, a block conv - BN - relu - conv - BN
// added to its input, relu, global average pool, linear, cross-entropy; with the running
// statistics' updates as the model lowers them.
Graph residual_model() {
  Graph g("resnet");
  Ref x = g.add_input("x", {DType::F32, {6, 1, 12, 12}});
  Ref labels = g.add_input("y", {DType::I64, {6}});
  auto bn = [&](Ref h, const std::string& name, int64_t c) {
    Ref gamma = g.add_param(name + ".weight", {DType::F32, {c}});
    Ref beta = g.add_param(name + ".bias", {DType::F32, {c}});
    Ref rm = g.add_param(name + ".running_mean", {DType::F32, {c}}, {}, false);
    Ref rv = g.add_param(name + ".running_var", {DType::F32, {c}}, {}, false);
    BatchNormOut out = batch_norm_train(g, h, gamma, beta);
    ema_update(g, rm, out.mean, 0.1);
    ema_update(g, rv, scale(g, out.var, batch_norm_unbiased_factor(g.shape_of(h))), 0.1);
    return out.y;
  };
  auto conv = [&](Ref h, const std::string& name, int64_t in, int64_t out) {
    return conv2d(g, h, g.add_param(name, {DType::F32, {out, in, 3, 3}}), {.padding = {1, 1}});
  };
  Ref h = max_pool2d(g, relu(g, bn(conv(x, "stem", 1, 4), "stem_bn", 4)), {.kernel = {2, 2}});
  Ref r = relu(g, bn(conv(h, "c1", 4, 4), "bn1", 4));
  r = relu(g, add(g, bn(conv(r, "c2", 4, 4), "bn2", 4), h));
  Ref logits = matmul(g, global_avg_pool(g, r), g.add_param("fc", {DType::F32, {4, 3}}));
  g.add_output(cross_entropy(g, logits, labels));
  return g;
}

// The loss and every trainable parameter's gradient, before any pass.
Graph raw_step(Graph g) {
  Refs wrt;
  for (Ref p : g.params())
    if (g.value(p).trainable) wrt.push_back(p);
  Ref loss = g.outputs()[0];
  auto grads = append_backward(g, loss, wrt);
  REQUIRE(grads.ok());
  Refs outs{loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  return g;
}

// The pool-gradient fusion pass where the backend has neither of its kernels.
Graph fused_pool_gradients_off(const Graph& step) {
  FusionSupport none;
  none.batch_norm_pool = false;
  none.pool_relu = false;
  none.conv_pool = false;
  return fuse_pool_gradients(step, none);
}

// The same after the default passes.
Graph training_step(const Graph& g) {
  auto r = run_passes(raw_step(g), host(), default_passes());
  REQUIRE(r.ok());
  return r->back().graph;
}

std::vector<double> random_values(size_t n, uint64_t seed, double lo, double hi) {
  Rng r(seed);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(r.uniform(lo, hi));
  return v;
}

}  // namespace

TEST_CASE("batch-norm fusion: the training step equals the unfused one", "[batch_norm][fusion]") {
  const Graph g = residual_model();
  const Graph f = fuse_batch_norm(g);
  INFO(f.to_text());
  CHECK(count(f, "batch_norm_train") == 0);
  CHECK(count(f, "batch_norm_act", "relu") == 2);  // stem_bn and bn1; bn2 feeds the add
  CHECK(count(f, "batch_norm_act", "none") == 1);
  CHECK(count(f, "relu") == count(g, "relu") - 2);
  const Graph plain = training_step(g), fused = training_step(f);
  // Each batch norm's gradient is one node; no sum over the batch axes is left for them. The
  // stem's takes its 2x2 pool's gradient in (the pool-gradient fusion, a default pass).
  CHECK(count(fused, "batch_norm_backward") == 2);
  CHECK(count(fused, "batch_norm_pool_backward") == 1);
  CHECK(count(fused, "max_pool2d_backward") == 0);
  CHECK(count(fused, "sum") < count(plain, "sum"));
  auto a = outputs_on_random_inputs(plain), b = outputs_on_random_inputs(fused);
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k)
    require_close(b[k], a[k], 1e-4, 1e-5, "output " + std::to_string(k));
}

TEST_CASE("batch-norm fusion: relus kept when asked, nothing fused without the kernels",
          "[batch_norm][fusion]") {
  const Graph g = residual_model();
  const Graph kept = fuse_batch_norm(g, {}, false);
  CHECK(count(kept, "batch_norm_act", "none") == 3);
  CHECK(count(kept, "relu") == count(g, "relu"));
  FusionSupport none;
  none.batch_norm = false;
  const Graph same = fuse_batch_norm(g, none);
  CHECK(count(same, "batch_norm_train") == 3);
  CHECK(count(same, "batch_norm_act") == 0);
  CHECK(FusionSupport::of(host()).batch_norm);  // the CPU has both kernels
  // Without a batch_norm_pool_backward kernel the pool's gradient stays its own node.
  none.batch_norm = true;
  none.batch_norm_pool = false;
  const Graph step = raw_step(fuse_batch_norm(g));
  CHECK(count(fuse_pool_gradients(step, none), "batch_norm_pool_backward") == 0);
  CHECK(count(fuse_pool_gradients(step), "batch_norm_pool_backward") == 1);
  CHECK(FusionSupport::of(host()).batch_norm_pool);
}

TEST_CASE("pool-gradient fusion: only a 2x2, stride-2 pool of batch_norm_act's own y joins",
          "[batch_norm][fusion]") {
  // The stem as the model lowers it, with a 3x3 pool (stride 2) or a 2x2 one (stride 1)
  // instead: their gradients are left to max_pool2d_backward.
  for (const Pool2dParams& p : {Pool2dParams{.kernel = {3, 3}, .stride = {2, 2}},
                                Pool2dParams{.kernel = {2, 2}, .stride = {1, 1}},
                                Pool2dParams{.kernel = {2, 2}}}) {
    Graph g("stem");
    Ref x = g.add_input("x", {DType::F32, {4, 2, 8, 8}});
    Ref gamma = g.add_param("gamma", {DType::F32, {2}});
    Ref beta = g.add_param("beta", {DType::F32, {2}});
    Ref h = max_pool2d(g, relu(g, batch_norm_train(g, x, gamma, beta).y), p);
    g.add_output(sum(g, mul(g, h, h), {}, false));
    const Graph step = training_step(fuse_batch_norm(g));
    const bool joins = p.kernel == Pair2{2, 2} && (p.stride == Pair2{0, 0} || p.stride == Pair2{2, 2});
    INFO(step.to_text());
    CHECK(count(step, "batch_norm_pool_backward") == (joins ? 1u : 0u));
    // (relu's mask is batch_norm_backward's here: no relu_backward for the pool to join.)
    CHECK(count(step, "max_pool2d_backward") == (joins ? 0u : 1u));
    CHECK(count(step, "max_pool2d_relu_backward") == 0u);
  }
}

TEST_CASE("pool-gradient fusion: a pool of a relu's output takes relu's gradient in",
          "[fusion]") {
  // LeNet in small: conv - relu - 2x2 pool twice (the second 3x3, stride 2, padding 1), then
  // linear and cross-entropy.
  Graph g("lenet");
  Ref x = g.add_input("x", {DType::F32, {5, 1, 12, 12}});
  Ref labels = g.add_input("y", {DType::I64, {5}});
  auto conv = [&](Ref h, const std::string& name, int64_t in, int64_t out) {
    return relu(g, conv2d(g, h, g.add_param(name, {DType::F32, {out, in, 3, 3}}), {.padding = {1, 1}}));
  };
  Ref h = max_pool2d(g, conv(x, "c1", 1, 3), {.kernel = {2, 2}});
  h = max_pool2d(g, conv(h, "c2", 3, 4), {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}});
  Ref flat = reshape(g, h, {5, 4 * 3 * 3});
  g.add_output(cross_entropy(g, matmul(g, flat, g.add_param("fc", {DType::F32, {36, 3}})), labels));
  const Graph raw = raw_step(g), fused = training_step(g);
  INFO(fused.to_text());
  // The first pool's gradient goes on into c1's weight gradient (x needs none): one
  // conv2d_pool_backward_weight. The second's is also read by c2's input gradient.
  CHECK(count(fused, "max_pool2d_relu_backward") == 1);
  CHECK(count(fused, "conv2d_pool_backward_weight") == 1);
  CHECK(count(fused, "max_pool2d_backward") == 0);
  CHECK(count(fused_pool_gradients_off(raw), "max_pool2d_relu_backward") == 0);
  auto a = outputs_on_random_inputs(raw), b = outputs_on_random_inputs(fused);
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k)
    require_close(b[k], a[k], 1e-4, 1e-5, "output " + std::to_string(k));
}

TEST_CASE("pool-gradient fusion: a first convolution's weight and bias gradients take the pool's",
          "[fusion]") {
  // LeNet's front in small, with biases: conv + b - relu - 2x2 pool, conv + b - relu - 2x2
  // pool, linear. conv1's gradient (its input needs none) is read by its weight gradient and
  // its bias sum only: one conv2d_pool_backward_weight takes both. conv2's is also read by its
  // input gradient, so its pool's gradient stays a max_pool2d_relu_backward node.
  auto model = [](int64_t pool2) {
    Graph g("lenet");
    Ref x = g.add_input("x", {DType::F32, {6, 1, 12, 12}});
    Ref labels = g.add_input("y", {DType::I64, {6}});
    auto conv = [&](Ref h, const std::string& name, int64_t in, int64_t out, int64_t k) {
      Ref y = conv2d(g, h, g.add_param(name, {DType::F32, {out, in, k, k}}), {.padding = {k / 2, k / 2}});
      return relu(g, add(g, y, g.add_param(name + ".b", {DType::F32, {out, 1, 1}})));
    };
    Ref h = max_pool2d(g, conv(x, "c1", 1, 3, 5), {.kernel = {2, 2}});
    h = max_pool2d(g, conv(h, "c2", 3, 4, 3), {.kernel = {pool2, pool2}});
    const int64_t side = 6 / pool2;
    Ref flat = reshape(g, h, {6, 4 * side * side});
    g.add_output(cross_entropy(
        g, matmul(g, flat, g.add_param("fc", {DType::F32, {4 * side * side, 3}})), labels));
    return g;
  };
  const Graph g = model(2);
  const Graph raw = raw_step(g), fused = training_step(g);
  INFO(fused.to_text());
  CHECK(count(fused, "conv2d_pool_backward_weight") == 1);
  CHECK(count(fused, "conv2d_backward_weight") == 1);  // conv2's
  CHECK(count(fused, "max_pool2d_relu_backward") == 1);
  CHECK(count(fused, "sum", "axes=[0,2,3]") == 1);  // conv2's bias
  // The step's loss and gradients: the fused weight and bias gradients sum in another order.
  auto a = outputs_on_random_inputs(raw), b = outputs_on_random_inputs(fused);
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k)
    require_close(b[k], a[k], 1e-4, 1e-5, "output " + std::to_string(k));
  // Without the kernel (a GPU backend), the pool's gradient and the two readers stay.
  FusionSupport no_conv_pool;
  no_conv_pool.conv_pool = false;
  const Graph kept = fuse_pool_gradients(raw, no_conv_pool);
  CHECK(count(kept, "conv2d_pool_backward_weight") == 0);
  CHECK(count(kept, "max_pool2d_relu_backward") == 2);
  // A convolution feeding a 3x3 pool keeps its weight gradient: only 2x2, stride-2 pools fuse.
  const Graph other = training_step(model(3));
  CHECK(count(other, "conv2d_pool_backward_weight") == 1);  // conv1's 2x2 pool still does
  CHECK(count(other, "conv2d_backward_weight") == 1);
}

TEST_CASE("batch_norm_act and batch_norm_backward kernels against float64 at the block's shapes",
          "[batch_norm]") {
  // The block's shape, and the stem's at batch 24 (rows of 784 floats, 301,056 in all).
  for (const Shape& xs : {Shape{4, 16, 14, 14}, Shape{24, 16, 28, 28}})
  for (const char* act : {"relu", "none"}) {
    INFO(act << " " << shape_str(xs));
    const Shape cs{16};
    const auto n = static_cast<size_t>(numel(xs));
    const Attrs a{{"eps", 1e-5}, {"act", std::string(act)}};
    const bool relu = std::string(act) == "relu";
    // Forward: x with a channel offset, so mean and var matter.
    const std::vector<double> x = random_values(n, 1, 0.5, 3.0),
                              gamma = random_values(16, 2, 0.5, 2),
                              beta = random_values(16, 3, -0.5, 0.5);
    EagerSession s(host());
    const Ref in[] = {s.leaf(to_tensor(RefArray{xs, x}, DType::F32)),
                      s.leaf(to_tensor(RefArray{cs, gamma}, DType::F32)),
                      s.leaf(to_tensor(RefArray{cs, beta}, DType::F32))};
    Refs out = s.emit("batch_norm_act", in, a);
    const OpDef* fwd = op_registry().find("batch_norm_act");
    std::vector<RefArray> want =
        fwd->reference(std::vector<RefArray>{{xs, x}, {cs, gamma}, {cs, beta}}, a);
    for (size_t k = 0; k < 3; ++k)
      require_close(s.value(out[k]).to_f64(), want[k].v, 1e-4, 1e-5,
                    "forward output " + std::to_string(k));
    // Backward, with pre-activations of both signs (x and mean drawn from one range: about
    // half the mask off under relu).
    const std::vector<double> g = random_values(n, 4, -1, 1),
                              mean = random_values(16, 6, 0.5, 3.0),
                              var = random_values(16, 7, 0.2, 2.0);
    std::vector<RefArray> bin{{xs, g}, {xs, x}, {cs, mean}, {cs, var}, {cs, gamma}};
    if (relu) bin.push_back({cs, beta});
    Refs brefs;
    for (const RefArray& r : bin) brefs.push_back(s.leaf(to_tensor(r, DType::F32)));
    Refs grads = s.emit("batch_norm_backward", brefs, a);
    std::vector<RefArray> bwant = op_registry().find("batch_norm_backward")->reference(bin, a);
    for (size_t k = 0; k < 3; ++k)
      require_close(s.value(grads[k]).to_f64(), bwant[k].v, 1e-4, 1e-4,
                    "backward output " + std::to_string(k));
    // batch_norm_pool_backward rebuilds y from x, as the forward wrote it, to route a 2x2
    // pool's gradient: with the forward's statistics it is max_pool2d_backward on the forward's
    // own y, then batch_norm_backward, to the last bit.
    {
      const Shape ps{xs[0], xs[1], xs[2] / 2, xs[3] / 2};
      const Ref gp = s.leaf(to_tensor(
          RefArray{ps, random_values(static_cast<size_t>(numel(ps)), 8, -1, 1)}, DType::F32));
      const Ref gy = s.emit("max_pool2d_backward", Refs{gp, out[0]},
                            Attrs{{"kernel", std::vector<int64_t>{2, 2}}})[0];
      Refs plain_in{gy, in[0], out[1], out[2], in[1]};
      if (relu) plain_in.push_back(in[2]);
      const Refs want_p = s.emit("batch_norm_backward", plain_in, a);
      const Refs got = s.emit("batch_norm_pool_backward", Refs{gp, in[0], out[1], out[2], in[1], in[2]}, a);
      for (size_t k = 0; k < 3; ++k)
        require_close(s.value(got[k]).to_f64(), s.value(want_p[k]).to_f64(), 0, 0,
                      "pooled backward output " + std::to_string(k));
    }
    if (!relu) continue;
    // The mask the backward recomputes is the forward's own: with the forward's mean and var,
    // the fused backward equals the plain one of g masked where the forward's y is 0.
    const std::vector<double> yf = s.value(out[0]).to_f64(), mf = s.value(out[1]).to_f64(),
                              vf = s.value(out[2]).to_f64();
    std::vector<double> gm = g;
    size_t off = 0;
    for (size_t k = 0; k < n; ++k)
      if (!(yf[k] > 0)) gm[k] = 0, ++off;
    CHECK(off > n / 8);
    CHECK(off < n - n / 8);
    Refs frefs{s.leaf(to_tensor(RefArray{xs, g}, DType::F32)), in[0],
               s.leaf(to_tensor(RefArray{cs, mf}, DType::F32)),
               s.leaf(to_tensor(RefArray{cs, vf}, DType::F32)), in[1], in[2]};
    Refs fused = s.emit("batch_norm_backward", frefs, a);
    const Attrs plain{{"eps", 1e-5}, {"act", std::string("none")}};
    std::vector<RefArray> pwant = op_registry().find("batch_norm_backward")->reference(
        std::vector<RefArray>{{xs, gm}, {xs, x}, {cs, mf}, {cs, vf}, {cs, gamma}}, plain);
    for (size_t k = 0; k < 3; ++k)
      require_close(s.value(fused[k]).to_f64(), pwant[k].v, 1e-4, 1e-4,
                    "backward with the forward's statistics, output " + std::to_string(k));
  }
}
