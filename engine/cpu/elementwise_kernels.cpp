// Elementwise kernels (f32). Loops are written so GCC vectorises them (-O3 -march=native).
#include <cmath>

#include "engine/cpu/kernels.h"

namespace mls::cpu {

BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastPlan p;
  p.out = out;
  auto strides_for = [&](const Shape& s) {
    Strides full(out.size(), 0);
    Strides cs = contiguous_strides(s);
    size_t lead = out.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i) full[lead + i] = s[i] == 1 ? 0 : cs[i];
    return full;
  };
  p.sa = strides_for(a);
  p.sb = strides_for(b);
  p.inner = out.empty() ? 1 : out.back();
  p.rows = out.empty() ? 1 : numel(out) / std::max<int64_t>(p.inner, 1);
  return p;
}

namespace {

template <typename F>
void unary_kernel(const KernelCall& c, F f) {
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = f(x[i]);
  });
}

template <typename F>
void binary_kernel(const KernelCall& c, F f) {
  const Tensor& ta = *c.inputs[0];
  const Tensor& tb = *c.inputs[1];
  Tensor& to = *c.outputs[0];
  const float* a = in_ptr<float>(c, 0);
  const float* b = in_ptr<float>(c, 1);
  float* o = out_ptr<float>(c, 0);
  if (ta.shape() == tb.shape()) {  // the common case: one flat loop
    pool_of(c).parallel_for(0, to.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = f(a[i], b[i]);
    });
    return;
  }
  BroadcastPlan p = make_broadcast_plan(ta.shape(), tb.shape(), to.shape());
  int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.inner, 1));
  pool_of(c).parallel_for(0, p.rows, grain, [&](int64_t lo, int64_t hi) {
    for_broadcast_rows(p, lo, hi, [&](int64_t oa, int64_t sa, int64_t ob, int64_t sb, int64_t oo, int64_t n) {
      const float* pa = a + oa;
      const float* pb = b + ob;
      float* po = o + oo;
      if (sa == 1 && sb == 1) {
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
      } else if (sa == 1) {
        float vb = pb[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(pa[i], vb);
      } else if (sb == 1) {
        float va = pa[0];
        for (int64_t i = 0; i < n; ++i) po[i] = f(va, pb[i]);
      } else {
        float v = f(pa[0], pb[0]);
        for (int64_t i = 0; i < n; ++i) po[i] = v;
      }
    });
  });
}

}  // namespace

void register_elementwise_kernels(OpRegistry& reg) {
  auto R = [&](const char* op, KernelFn fn) { reg.register_kernel(op, DeviceKind::CPU, DType::F32, fn); };
  R("neg", [](const KernelCall& c) { unary_kernel(c, [](float x) { return -x; }); });
  R("exp", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::exp(x); }); });
  R("log", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::log(x); }); });
  R("relu", [](const KernelCall& c) { unary_kernel(c, [](float x) { return x > 0.f ? x : 0.f; }); });
  R("tanh", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::tanh(x); }); });
  R("sigmoid", [](const KernelCall& c) {
    unary_kernel(c, [](float x) { return 1.f / (1.f + std::exp(-x)); });
  });
  R("scale", [](const KernelCall& c) {
    auto alpha = static_cast<float>(c.attrs.get_float("alpha"));
    unary_kernel(c, [alpha](float x) { return alpha * x; });
  });
  R("add_scalar", [](const KernelCall& c) {
    auto v = static_cast<float>(c.attrs.get_float("value"));
    unary_kernel(c, [v](float x) { return x + v; });
  });
  R("add", [](const KernelCall& c) { binary_kernel(c, [](float a, float b) { return a + b; }); });
  R("sub", [](const KernelCall& c) { binary_kernel(c, [](float a, float b) { return a - b; }); });
  R("mul", [](const KernelCall& c) { binary_kernel(c, [](float a, float b) { return a * b; }); });
  R("div", [](const KernelCall& c) { binary_kernel(c, [](float a, float b) { return a / b; }); });
  R("relu_backward", [](const KernelCall& c) {
    binary_kernel(c, [](float dy, float x) { return x > 0.f ? dy : 0.f; });
  });
}

}  // namespace mls::cpu
