// Convolution and pooling kernels over NCHW: direct convolutions (one invocation per output
// element, per input element for the input gradient, a workgroup per weight for the weight
// gradient) and the pools (shaders/pool.comp).
#include "engine/ops/conv.h"
#include "engine/ops/fused.h"
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

struct ConvGeom {
  uint32_t N, C, H, W, O, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups, act, has_bias;
};

ConvGeom geom(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
  const Conv2dParams p = conv2d_params(a).value();
  return {u32(x[0]), u32(x[1]), u32(x[2]), u32(x[3]), u32(w[0]), u32(y[2]), u32(y[3]), u32(w[2]), u32(w[3]),
          u32(p.stride[0]), u32(p.stride[1]), u32(p.padding[0]), u32(p.padding[1]), u32(p.dilation[0]),
          u32(p.dilation[1]), u32(p.groups), 0, 0};
}

void require_contiguous(const KernelCall& c) {
  for (const Tensor* t : c.inputs) MLS_CHECK(t->is_contiguous(), "vulkan: convolution operands must be contiguous");
}

void conv(const KernelCall& c, const Tensor* bias, EpilogueAct act) {
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor &x = *c.inputs[0], &w = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  ConvGeom g = geom(x.shape(), w.shape(), y.shape(), c.attrs);
  g.act = static_cast<uint32_t>(act);
  g.has_bias = bias != nullptr;
  be.dispatch(Shader::conv2d, {&y, &x, &w, bias ? bias : &y}, g, be.groups_for(y.numel()));
}

void conv2d_kernel(const KernelCall& c) { conv(c, nullptr, EpilogueAct::None); }

void conv2d_act_kernel(const KernelCall& c) {
  conv(c, c.inputs.size() > 2 ? c.inputs[2] : nullptr, epilogue_act_of(c.attrs));
}

void conv2d_backward_input_kernel(const KernelCall& c) {  // (g, w) -> dx
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor &g = *c.inputs[0], &w = *c.inputs[1];
  Tensor& dx = *c.outputs[0];
  const ConvGeom p = geom(dx.shape(), w.shape(), g.shape(), c.attrs);
  be.dispatch(Shader::conv2d_backward_input, {&dx, &g, &w}, p, be.groups_for(dx.numel()));
}

void conv2d_backward_weight_kernel(const KernelCall& c) {  // (x, g) -> dw
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor &x = *c.inputs[0], &g = *c.inputs[1];
  Tensor& dw = *c.outputs[0];
  const ConvGeom p = geom(x.shape(), dw.shape(), g.shape(), c.attrs);
  be.dispatch(Shader::conv2d_backward_weight, {&dw, &x, &g}, p, u32(std::min<int64_t>(dw.numel(), 65535)));
}

struct PoolParams {
  uint32_t NC, H, W, OH, OW, KH, KW, sh, sw, ph, pw, mode, include_pad;
};

PoolParams pool(const Shape& x, const Shape& y, const Attrs& a, uint32_t mode) {
  const Pool2dParams p = pool2d_params(a).value();
  return {u32(x[0] * x[1]), u32(x[2]), u32(x[3]), u32(y[2]), u32(y[3]), u32(p.kernel[0]), u32(p.kernel[1]),
          u32(p.stride[0]), u32(p.stride[1]), u32(p.padding[0]), u32(p.padding[1]), mode, p.count_include_pad};
}

void max_pool_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  be.dispatch(Shader::pool, {&y, &x, &x}, pool(x.shape(), y.shape(), c.attrs, 0), be.groups_for(y.numel()));
}

void max_gather_kernel(const KernelCall& c) {  // (t, x) -> t at x's argmax
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor &t = *c.inputs[0], &x = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  be.dispatch(Shader::pool, {&y, &t, &x}, pool(x.shape(), y.shape(), c.attrs, 1), be.groups_for(y.numel()));
}

void max_backward_kernel(const KernelCall& c) {  // (g, x) -> dx
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor &g = *c.inputs[0], &x = *c.inputs[1];
  Tensor& dx = *c.outputs[0];
  be.dispatch(Shader::pool, {&dx, &g, &x}, pool(x.shape(), g.shape(), c.attrs, 2), be.groups_for(dx.numel()));
}

void avg_pool_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  be.dispatch(Shader::pool, {&y, &x, &x}, pool(x.shape(), y.shape(), c.attrs, 3), be.groups_for(y.numel()));
}

void avg_backward_kernel(const KernelCall& c) {  // (g) -> dx
  VulkanBackend& be = vk(c);
  require_contiguous(c);
  const Tensor& g = *c.inputs[0];
  Tensor& dx = *c.outputs[0];
  be.dispatch(Shader::pool, {&dx, &g, &g}, pool(dx.shape(), g.shape(), c.attrs, 4), be.groups_for(dx.numel()));
}

}  // namespace

void register_conv_kernels(OpRegistry& reg) {
  add_kernel(reg, "conv2d", DType::F32, conv2d_kernel);
  add_kernel(reg, "conv2d_act", DType::F32, conv2d_act_kernel);
  add_kernel(reg, "conv2d_backward_input", DType::F32, conv2d_backward_input_kernel);
  add_kernel(reg, "conv2d_backward_weight", DType::F32, conv2d_backward_weight_kernel);
  add_kernel(reg, "max_pool2d", DType::F32, max_pool_kernel);
  add_kernel(reg, "max_pool2d_gather", DType::F32, max_gather_kernel);
  add_kernel(reg, "max_pool2d_backward", DType::F32, max_backward_kernel);
  add_kernel(reg, "avg_pool2d", DType::F32, avg_pool_kernel);
  add_kernel(reg, "avg_pool2d_backward", DType::F32, avg_backward_kernel);
}

}  // namespace mls::vulkan
