// The convolution kernels at the shapes of LeNet-5 and of the residual CNN
// (resources/examples/fashion-mnist-{lenet,resnet}.mls; batch 128, Fashion-MNIST), one by
// one: milliseconds and GFLOP/s of conv2d, its input gradient and its weight gradient, run
// eagerly on the process-wide CPU backend (all cores).
//
//   cmake --build build --target conv_kernels && build/bench/conv_kernels [repeats] [lenet|resnet]
//
// Those training steps are mostly these kernels (`mlstudio --run P.mls --profile T.json`
// shows the split); build/bench/fma_peak gives the peak to hold the GFLOP/s against.
// Figures are medians of `repeats` runs (default 50) after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "engine/autodiff/autodiff.h"
#include "engine/core/attrs.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/conv.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "engine/passes/passes.h"

namespace {

using bench::filled;
using bench::median_ms;

struct Case {
  const char* what;
  int64_t n, c, h, w, o, k, pad;
  bool pooled = false;  // followed by relu and a 2x2 max pool: its pooled weight gradient too
};

// Batch norm + relu over x [shape] and its backward, as a training step runs them: the loss
// sum(relu(bn(x)) * w) differentiated for x, gamma and beta, after the default passes;
// `fused` runs the batch-norm fusion first (batch_norm_act + batch_norm_backward).
std::unique_ptr<mls::CompiledPlan> batch_norm_step(mls::Backend& cpu, const mls::Shape& shape,
                                                   bool fused) {
  using namespace mls;
  Graph g("bn");
  Ref x = g.add_param("x", {DType::F32, shape});
  Ref gamma = g.add_param("gamma", {DType::F32, {shape[1]}});
  Ref beta = g.add_param("beta", {DType::F32, {shape[1]}});
  Ref w = g.add_input("w", {DType::F32, shape});
  BatchNormOut bn = batch_norm_train(g, x, gamma, beta);
  Ref loss = sum(g, mul(g, relu(g, bn.y), w), {}, false);
  g.add_output(loss);
  if (fused) g = fuse_batch_norm(g);
  auto grads = append_backward(g, g.outputs()[0], g.params());
  if (!grads.ok()) std::abort();
  Refs outs{g.outputs()[0]};
  outs.insert(outs.end(), grads->begin(), grads->end());
  g.set_outputs(outs);
  auto passed = run_passes(g, cpu, default_passes());
  if (!passed.ok()) std::abort();
  const Graph& h = passed->back().graph;
  auto plan = CompiledPlan::compile(h, cpu);
  if (!plan.ok()) std::abort();
  auto p = std::make_unique<CompiledPlan>(std::move(*plan));
  uint64_t seed = 1;
  for (const Refs& refs : {h.inputs(), h.params()})
    for (Ref r : refs) {
      const ValueType t = h.type_of(r);
      Tensor v = filled(cpu, t.shape, seed++);
      if (!p->bind(r, v).ok()) std::abort();
    }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mls;
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  const std::string only = argc > 2 ? argv[2] : "";
  cpu::init();
  Backend& cpu = cpu::backend();
  struct Model {
    const char* name;
    std::vector<Case> cases;
  };
  const Model models[] = {{"lenet",
                           {{"conv1 1->6 5x5 pad 2, 28x28", 128, 1, 28, 28, 6, 5, 2, true},
                            {"conv2 6->16 5x5, 14x14", 128, 6, 14, 14, 16, 5, 0}}},
                          {"resnet",
                           {{"stem 1->16 3x3 pad 1, 28x28", 128, 1, 28, 28, 16, 3, 1},
                            {"block 16->16 3x3 pad 1, 14x14", 128, 16, 14, 14, 16, 3, 1},
                            {"conv3 16->32 3x3 pad 1, 7x7", 128, 16, 7, 7, 32, 3, 1}}}};
  for (const Model& model : models) {
    if (!only.empty() && only != model.name) continue;
    std::printf("%-30s %-16s %9s %9s   (median of %d)\n", model.name, "kernel", "ms", "GFLOP/s",
                repeats);
    double total = 0;
    for (const Case& k : model.cases) {
      const Conv2dParams p{.padding = {k.pad, k.pad}};
      const int64_t oh = window_out_size(k.h, k.k, 1, k.pad),
                    ow = window_out_size(k.w, k.k, 1, k.pad);
      const double flop = 2.0 * static_cast<double>(k.n * k.o * oh * ow * k.c * k.k * k.k);
      Tensor x = filled(cpu, {k.n, k.c, k.h, k.w}, 1), w = filled(cpu, {k.o, k.c, k.k, k.k}, 2),
             g = filled(cpu, {k.n, k.o, oh, ow}, 3);
      Attrs bi = conv2d_attrs(p), bw = conv2d_attrs(p);
      bi.set("input_shape", Shape{k.n, k.c, k.h, k.w});
      bw.set("weight_shape", Shape{k.o, k.c, k.k, k.k});
      struct Run {
        const char* kernel;
        const char* op;
        bool run;  // a first convolution (of the image) needs no input gradient
      };
      // The weight and bias gradients through a 2x2 max pool of relu(y), as the pool-gradient
      // fusion makes them for LeNet's conv1.
      Tensor y = filled(cpu, {k.n, k.o, oh, ow}, 4),
             gp = filled(cpu, {k.n, k.o, oh / 2, ow / 2}, 5);
      const Run runs[] = {{"forward", "conv2d", true},
                          {"input grad", "conv2d_backward_input", k.c > 1},
                          {"weight grad", "conv2d_backward_weight", true},
                          {"pool+weight grad", "conv2d_pool_backward_weight", k.pooled}};
      for (const Run& r : runs) {
        if (!r.run) continue;
        const double ms = median_ms(repeats, [&] {
          EagerSession s(cpu);
          const Ref rx = s.leaf(x), rw = s.leaf(w), rg = s.leaf(g);
          const std::string op = r.op;
          if (op == "conv2d")
            s.emit_first(op, std::vector<Ref>{rx, rw}, conv2d_attrs(p));
          else if (op == "conv2d_backward_input")
            s.emit_first(op, std::vector<Ref>{rg, rw}, bi);
          else if (op == "conv2d_backward_weight")
            s.emit_first(op, std::vector<Ref>{rx, rg}, bw);
          else
            s.emit(op, std::vector<Ref>{rx, s.leaf(gp), s.leaf(y)}, bw);
        });
        total += ms;
        std::printf("%-30s %-16s %9.3f %9.1f\n", k.what, r.kernel, ms, flop / ms / 1e6);
      }
    }
    std::printf("%-30s %-16s %9.3f\n", "all of them", "", total);
  }
  if (only.empty() || only == "resnet") {
    // The batch norms' share of the residual CNN's step, unfused and fused, alternating.
    std::printf("%-30s %-16s %9s %9s\n", "batch norm + relu, fwd + bwd", "", "unfused", "fused");
    for (const Shape& shape :
         {Shape{128, 16, 28, 28}, Shape{128, 16, 14, 14}, Shape{128, 32, 7, 7}}) {
      auto plain = batch_norm_step(cpu, shape, false), fused = batch_norm_step(cpu, shape, true);
      std::vector<double> a, b;
      for (int r = 0; r < 5; ++r) {
        a.push_back(median_ms(std::max(1, repeats / 5), [&] { plain->run(); }));
        b.push_back(median_ms(std::max(1, repeats / 5), [&] { fused->run(); }));
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      std::printf("%-30s %-16s %9.3f %9.3f\n", shape_str(shape).c_str(), "ms", a[2], b[2]);
    }
  }
  return 0;
}
