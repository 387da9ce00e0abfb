// Elementwise kernels (f32). Loops are written so GCC vectorises them (-O3 -march=native).
#include <cmath>

#include "engine/cpu/elementwise.h"
#include "engine/cpu/scalar_math.h"

namespace mls::cpu {

Strides strides_over(const Shape& s, const Shape& out) {
  Strides full(out.size(), 0);
  Strides cs = contiguous_strides(s);
  size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) full[lead + i] = s[i] == 1 ? 0 : cs[i];
  return full;
}

BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastPlan p;
  p.out = out;
  p.sa = strides_over(a, out);
  p.sb = strides_over(b, out);
  p.inner = out.empty() ? 1 : out.back();
  p.rows = out.empty() ? 1 : numel(out) / std::max<int64_t>(p.inner, 1);
  return p;
}

namespace {

}  // namespace

void register_elementwise_kernels(OpRegistry& reg) {
  auto R = [&](const char* op, KernelFn fn) { reg.register_kernel(op, DeviceKind::CPU, DType::F32, fn); };
  R("neg", [](const KernelCall& c) { unary_kernel(c, [](float x) { return -x; }); });
  R("exp", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::exp(x); }); });
  R("log", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::log(x); }); });
  R("relu", [](const KernelCall& c) { unary_kernel(c, [](float x) { return x > 0.f ? x : 0.f; }); });
  R("tanh", [](const KernelCall& c) { unary_kernel(c, [](float x) { return std::tanh(x); }); });
  R("sigmoid", [](const KernelCall& c) {
    unary_kernel(c, scalar::sigmoid);
  });
  R("scale", [](const KernelCall& c) {
    auto alpha = static_cast<float>(c.attrs.get_float("alpha"));
    unary_kernel(c, [alpha](float x) { return alpha * x; });
  });
  R("add_scalar", [](const KernelCall& c) {
    auto v = static_cast<float>(c.attrs.get_float("value"));
    unary_kernel(c, [v](float x) { return x + v; });
  });
  R("add", [](const KernelCall& c) { binary_f32(c, [](float a, float b) { return a + b; }); });
  R("sub", [](const KernelCall& c) { binary_f32(c, [](float a, float b) { return a - b; }); });
  R("mul", [](const KernelCall& c) { binary_f32(c, [](float a, float b) { return a * b; }); });
  R("div", [](const KernelCall& c) { binary_f32(c, [](float a, float b) { return a / b; }); });
  R("relu_backward", [](const KernelCall& c) {
    binary_f32(c, [](float dy, float x) { return x > 0.f ? dy : 0.f; });
  });
}

}  // namespace mls::cpu
