// Fused attention against scaled_dot_product_attention's composite on the CPU: forward, and
// forward + backward (the gradients of q, k and v), each as a compiled plan after the default
// passes, as the trainer compiles a step. Causal, B*heads = 64, T = 16..256, d = 16..64.
//
//   cmake --build build --target attention_kernels && build/bench/attention_kernels [repeats]
//
// GFLOP/s count the useful work of both paths alike: 4 d flops per visible (query, key) pair
// forward, 10 d backward (attention's and attention_backward's FLOPs rules), so the columns
// compare time. Figures are medians of `repeats` runs (default 20) after a warm-up, the two
// paths alternating shape by shape.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/bench_util.h"
#include "engine/autodiff/autodiff.h"
#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "engine/ops/attention.h"

namespace {

using bench::filled;
using bench::median_ms;

using namespace mls;

// One plan: attention over q, k, v [b, t, d] (fused or composite), forward only or with the
// gradients of sum(o * w).
struct Bench {
  CompiledPlan plan;
  std::vector<Tensor> bound;
};

Bench make(Backend& cpu, int64_t b, int64_t t, int64_t d, bool fused, bool backward) {
  Graph g("attention");
  Refs in;
  for (const char* name : {"q", "k", "v", "w"})
    in.push_back(g.add_input(name, {DType::F32, {b, t, d}}));
  Ref o = scaled_dot_product_attention(g, in[0], in[1], in[2], true);
  g.set_outputs({sum(g, mul(g, o, in[3]), {}, false), o});
  if (fused) g = fuse_attention(g);
  Refs outs{g.outputs()[1]};
  if (backward) {
    const Refs inputs = g.inputs();
    auto grads = append_backward(g, g.outputs()[0], std::span<const Ref>(inputs.data(), 3));
    if (!grads) std::abort();
    outs = *grads;
  }
  g.set_outputs(outs);
  auto stages = run_passes(g, cpu, default_passes());
  if (!stages) std::abort();
  const Graph& opt = stages->back().graph;
  auto plan = CompiledPlan::compile(opt, cpu);
  if (!plan) std::abort();
  Bench bench{std::move(*plan), {}};
  for (size_t i = 0; i < 4; ++i) {
    bench.bound.push_back(filled(cpu, {b, t, d}, i + 1));
    if (!bench.plan.bind(opt.inputs()[i], bench.bound.back())) std::abort();
  }
  return bench;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  cpu::init();
  Backend& cpu = cpu::backend();
  const OpDef* fwd = op_registry().find("attention");
  const OpDef* bwd = op_registry().find("attention_backward");
  std::printf("causal attention, B*heads = 64, median of %d; ms (GFLOP/s)\n", repeats);
  std::printf("%4s %3s | %-17s %-17s %7s | %-17s %-17s %7s\n", "T", "d", "fwd composite",
              "fwd fused", "speedup", "fwd+bwd composite", "fwd+bwd fused", "speedup");
  const int64_t b = 64;
  for (int64_t d : {16, 32, 64})
    for (int64_t t : {16, 32, 64, 128, 256}) {
      const ValueType x{DType::F32, {b, t, d}};
      const std::vector<ValueType> in{x, x, x}, out{x, {DType::F32, {b, t}}};
      const Attrs a{{"causal", int64_t{1}}, {"scale", 1.0 / std::sqrt(static_cast<double>(d))}};
      const double f_flop = op_flops(*fwd, in, out, a);
      const double b_flop = f_flop + op_flops(*bwd, in, out, a);
      double ms[4];
      for (int k = 0; k < 4; ++k) {
        Bench bench = make(cpu, b, t, d, k % 2 == 1, k >= 2);
        ms[k] = median_ms(repeats, [&] { bench.plan.run(); });
      }
      std::printf(
          "%4ld %3ld | %8.3f (%6.1f) %8.3f (%6.1f) %6.2fx | %8.3f (%6.1f) %8.3f (%6.1f) %6.2fx\n",
          static_cast<long>(t), static_cast<long>(d), ms[0], f_flop / ms[0] / 1e6, ms[1],
          f_flop / ms[1] / 1e6, ms[0] / ms[1], ms[2], b_flop / ms[2] / 1e6, ms[3],
          b_flop / ms[3] / 1e6, ms[2] / ms[3]);
    }
  return 0;
}
