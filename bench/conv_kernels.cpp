// The convolution kernels at LeNet-5's shapes (batch 128, Fashion-MNIST), one by one:
// milliseconds and GFLOP/s of conv2d, its input gradient and its weight gradient, run
// eagerly on the process-wide CPU backend (all cores).
//
//   cmake --build build --target conv_kernels && build/bench/conv_kernels [repeats]
//
// LeNet's training step is mostly these five kernels (`mlstudio graph P.mls --profile`
// shows the split); build/bench/fma_peak gives the peak to hold the GFLOP/s against.
// Figures are medians of `repeats` runs (default 50) after a warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/eager.h"
#include "engine/ops/conv.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
  const char* what;
  int64_t n, c, h, w, o, k, pad;
};

mls::Tensor filled(mls::Backend& cpu, mls::Shape shape, uint64_t seed) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  std::vector<float> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(((i + seed) * 7919) % 1000) * 1e-3f - 0.5f;
  return mls::Tensor::from_f32(cpu, shape, v, mls::AllocTag::Input);
}

template <typename F>
double median_ms(int repeats, F fn) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t(static_cast<size_t>(repeats));
  for (double& v : t) {
    const auto t0 = Clock::now();
    fn();
    v = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + repeats / 2, t.end());
  return t[static_cast<size_t>(repeats / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mls;
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  cpu::init();
  Backend& cpu = cpu::backend();
  const Case cases[] = {{"conv1 1->6 5x5 pad 2, 28x28", 128, 1, 28, 28, 6, 5, 2},
                        {"conv2 6->16 5x5, 14x14", 128, 6, 14, 14, 16, 5, 0}};
  std::printf("%-30s %-16s %9s %9s   (median of %d)\n", "LeNet-5, batch 128", "kernel", "ms", "GFLOP/s", repeats);
  double total = 0;
  for (const Case& k : cases) {
    const Conv2dParams p{.padding = {k.pad, k.pad}};
    const int64_t oh = window_out_size(k.h, k.k, 1, k.pad), ow = window_out_size(k.w, k.k, 1, k.pad);
    const double flop = 2.0 * static_cast<double>(k.n * k.o * oh * ow * k.c * k.k * k.k);
    Tensor x = filled(cpu, {k.n, k.c, k.h, k.w}, 1), w = filled(cpu, {k.o, k.c, k.k, k.k}, 2),
           g = filled(cpu, {k.n, k.o, oh, ow}, 3);
    Attrs bi = conv2d_attrs(p), bw = conv2d_attrs(p);
    bi.set("input_shape", Shape{k.n, k.c, k.h, k.w});
    bw.set("weight_shape", Shape{k.o, k.c, k.k, k.k});
    struct Run {
      const char* kernel;
      const char* op;
      bool input_grad;  // LeNet's first convolution needs no input gradient
    };
    const Run runs[] = {{"forward", "conv2d", true},
                        {"input grad", "conv2d_backward_input", k.c > 1},
                        {"weight grad", "conv2d_backward_weight", true}};
    for (const Run& r : runs) {
      if (!r.input_grad) continue;
      const double ms = median_ms(repeats, [&] {
        EagerSession s(cpu);
        const Ref rx = s.leaf(x), rw = s.leaf(w), rg = s.leaf(g);
        const std::string op = r.op;
        if (op == "conv2d")
          s.emit_first(op, std::vector<Ref>{rx, rw}, conv2d_attrs(p));
        else if (op == "conv2d_backward_input")
          s.emit_first(op, std::vector<Ref>{rg, rw}, bi);
        else
          s.emit_first(op, std::vector<Ref>{rx, rg}, bw);
      });
      total += ms;
      std::printf("%-30s %-16s %9.3f %9.1f\n", k.what, r.kernel, ms, flop / ms / 1e6);
    }
  }
  std::printf("%-30s %-16s %9.3f\n", "all five", "", total);
  return 0;
}
