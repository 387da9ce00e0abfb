// Reductions (f32). A contiguous run of reduced axes becomes (outer, mid, inner) loops;
// other axis sets take a general odometer walk.
#include <algorithm>
#include <cstring>

#include "engine/cpu/kernels.h"
#include "engine/ops/op_helpers.h"

namespace mls::cpu {

namespace {

// Sum of n contiguous floats with 16 partial sums, so the loop vectorises without
// -ffast-math and rounding error grows more slowly than with one accumulator.
float sum_contiguous(const float* x, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 16; ++k) acc[k] += x[i + k];
  float s = 0;
  for (; i < n; ++i) s += x[i];
  for (float a : acc) s += a;
  return s;
}

void reduce_sum(const KernelCall& c, bool average) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  const Shape& s = tx.shape();
  auto rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> axes = ops::norm_axes(c.attrs.get_ints("axes"), rank);
  int64_t out_n = c.outputs[0]->numel();
  int64_t count = tx.numel() / std::max<int64_t>(out_n, 1);
  float post = average ? 1.0f / static_cast<float>(std::max<int64_t>(count, 1)) : 1.0f;
  bool contiguous_run = axes.empty() || axes.back() - axes.front() + 1 == static_cast<int64_t>(axes.size());
  if (tx.numel() == 0) {
    std::fill(y, y + out_n, 0.f);
    return;
  }
  if (contiguous_run && !axes.empty()) {
    int64_t outer = 1, mid = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t n = s[static_cast<size_t>(d)];
      (d < axes.front() ? outer : d <= axes.back() ? mid : inner) *= n;
    }
    if (inner == 1) {  // row sums
      pool_of(c).parallel_for(0, outer, std::max<int64_t>(1, kParallelGrain / mid), [&](int64_t lo, int64_t hi) {
        for (int64_t o = lo; o < hi; ++o) y[o] = sum_contiguous(x + o * mid, mid) * post;
      });
      return;
    }
    pool_of(c).parallel_for(0, inner, std::max<int64_t>(16, kParallelGrain / (outer * mid)), [&](int64_t lo, int64_t hi) {
      for (int64_t o = 0; o < outer; ++o) {
        float* yo = y + o * inner;
        for (int64_t i = lo; i < hi; ++i) yo[i] = 0.f;
        for (int64_t m = 0; m < mid; ++m) {
          const float* xr = x + (o * mid + m) * inner;
          for (int64_t i = lo; i < hi; ++i) yo[i] += xr[i];
        }
        for (int64_t i = lo; i < hi; ++i) yo[i] *= post;
      }
    });
    return;
  }
  // Leading and trailing axes reduced around a kept block (a conv bias gradient: [N,C,H,W]
  // over {0,2,3}): out[m] = sum over o and i of x[(o*M + m)*I + i], contiguous in i.
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
  int64_t first_kept = 0, last_kept = rank - 1;
  while (first_kept < rank && reduced[static_cast<size_t>(first_kept)]) ++first_kept;
  while (last_kept >= 0 && reduced[static_cast<size_t>(last_kept)]) --last_kept;
  bool middle_kept = first_kept <= last_kept;
  for (int64_t d = first_kept; middle_kept && d <= last_kept; ++d) middle_kept = !reduced[static_cast<size_t>(d)];
  if (middle_kept) {
    int64_t outer = 1, mid = 1, inner = 1;
    for (int64_t d = 0; d < rank; ++d)
      (d < first_kept ? outer : d <= last_kept ? mid : inner) *= s[static_cast<size_t>(d)];
    pool_of(c).parallel_for(0, mid, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(outer * inner, 1)),
                            [&](int64_t lo, int64_t hi) {
                              for (int64_t m = lo; m < hi; ++m) {
                                float acc = 0;
                                for (int64_t o = 0; o < outer; ++o) acc += sum_contiguous(x + (o * mid + m) * inner, inner);
                                y[m] = acc * post;
                              }
                            });
    return;
  }
  // General: accumulate each input element into its output slot.
  Shape keep = s;
  for (int64_t a : axes) keep[static_cast<size_t>(a)] = 1;
  Strides ks = contiguous_strides(keep);
  for (int64_t a : axes) ks[static_cast<size_t>(a)] = 0;
  std::fill(y, y + out_n, 0.f);
  int64_t i = 0;
  for_each_offset(s, ks, [&](int64_t off) { y[off] += x[i++]; });
  for (int64_t i = 0; i < out_n; ++i) y[i] *= post;
}

}  // namespace

void register_reduce_kernels(OpRegistry& reg) {
  reg.register_kernel("sum", DeviceKind::CPU, DType::F32, [](const KernelCall& c) { reduce_sum(c, false); });
  reg.register_kernel("mean", DeviceKind::CPU, DType::F32, [](const KernelCall& c) { reduce_sum(c, true); });
}

}  // namespace mls::cpu
