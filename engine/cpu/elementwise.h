// Internal to engine/cpu: the elementwise loops shared by the kernel families.
//
//   unary_kernel(call, [](float x) { return x * x; });
//   binary_kernel<float, bool>(call, [](float a, float b) { return a < b; });  // broadcasting
#pragma once

#include <algorithm>

#include "engine/cpu/kernels.h"

namespace mls::cpu {

template <typename F>
void unary_kernel(const KernelCall& c, F f) {
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

// Numpy broadcasting of two operands of type T into a result of type U. Same shapes take
// one flat loop; otherwise each innermost row runs with its operands' strides (1 or 0).
template <typename T, typename U, typename F>
void binary_kernel(const KernelCall& c, F f) {
  const Tensor& ta = *c.inputs[0];
  const Tensor& tb = *c.inputs[1];
  Tensor& to = *c.outputs[0];
  const T* a = in_ptr<T>(c, 0);
  const T* b = in_ptr<T>(c, 1);
  U* o = out_ptr<U>(c, 0);
  if (ta.shape() == tb.shape()) {
    pool_of(c).parallel_for(0, to.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = f(a[i], b[i]);
    });
    return;
  }
  BroadcastPlan p = make_broadcast_plan(ta.shape(), tb.shape(), to.shape());
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.inner, 1));
  pool_of(c).parallel_for(0, p.rows, grain, [&](int64_t lo, int64_t hi) {
    for_broadcast_rows(p, lo, hi, [&](int64_t oa, int64_t sa, int64_t ob, int64_t sb, int64_t oo, int64_t n) {
      const T* pa = a + oa;
      const T* pb = b + ob;
      U* po = o + oo;
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
      } else if (sa == 1) {
        T vb = pb[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
      } else if (sb == 1) {
        T va = pa[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
      } else {
        U v = f(pa[0], pb[0]);
        for (int64_t i = 0; i < n; ++i) po[i] = v;
      }
    });
  });
}

template <typename F>
void binary_f32(const KernelCall& c, F f) {
  binary_kernel<float, float>(c, f);
}

// Element strides of `s` over the axes of `out` (0 where broadcast).
Strides strides_over(const Shape& s, const Shape& out);

}  // namespace mls::cpu
