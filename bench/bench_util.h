// Shared by the kernel benchmarks (bench/conv_kernels, bench/attention_kernels): a tensor of
// deterministic values and the median time of repeated runs.
//
//   mls::Tensor x = bench::filled(cpu, {128, 16, 28, 28}, 1);
//   double ms = bench::median_ms(21, [&] { plan.run(); });
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"

namespace bench {

// Values in [-0.5, 0.5) from a fixed pattern: the same inputs on every run.
inline mls::Tensor filled(mls::Backend& cpu, const mls::Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(mls::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(((i + seed) * 7919) % 1000) * 1e-3f - 0.5f;
  return mls::Tensor::from_f32(cpu, shape, v, mls::AllocTag::Input);
}

// The median of `repeats` timed runs of fn, in milliseconds, after 3 warm-up runs.
template <typename F>
double median_ms(int repeats, F fn) {
  using Clock = std::chrono::steady_clock;
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

}  // namespace bench
