// Convolution and pooling kernels over NCHW (device/conv.cu, device/pool.cu): direct
// convolutions (one thread per output element, per input element for the input gradient,
// a block per weight for the weight gradient) and the pools.
#include "engine/ops/conv.h"
#include "engine/ops/fused.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

// x [N, C, H, W], w [O, C/groups, KH, KW], y [N, O, OH, OW].
dev::ConvGeom geom(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
  const Conv2dParams p = conv2d_params(a).value();
  dev::ConvGeom g;
  g.N = x[0];
  g.C = x[1];
  g.H = x[2];
  g.W = x[3];
  g.O = w[0];
  g.OH = y[2];
  g.OW = y[3];
  g.KH = w[2];
  g.KW = w[3];
  g.sh = p.stride[0];
  g.sw = p.stride[1];
  g.ph = p.padding[0];
  g.pw = p.padding[1];
  g.dh = p.dilation[0];
  g.dw = p.dilation[1];
  g.groups = p.groups;
  return g;
}

void require_contiguous(const KernelCall& c) {
  for (const Tensor* t : c.inputs)
    MLS_CHECK(t->is_contiguous(), "cuda: convolution operands must be contiguous");
  for (const Tensor* t : c.outputs)
    MLS_CHECK(t->is_contiguous(), "cuda: convolution outputs must be contiguous");
}

void conv(const KernelCall& c, const Tensor* bias, EpilogueAct act) {
  require_contiguous(c);
  const Tensor &x = *c.inputs[0], &w = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  dev::ConvGeom g = geom(x.shape(), w.shape(), y.shape(), c.attrs);
  g.act = static_cast<int32_t>(act);
  dev::conv2d(dptr<float>(y), dptr<float>(x), dptr<float>(w), bias ? dptr<float>(*bias) : nullptr,
              g, cu(c).stream());
}

void conv2d_kernel(const KernelCall& c) {
  conv(c, nullptr, EpilogueAct::None);
}

void conv2d_act_kernel(const KernelCall& c) {
  conv(c, c.inputs.size() > 2 ? c.inputs[2] : nullptr, epilogue_act_of(c.attrs));
}

void conv2d_backward_input_kernel(const KernelCall& c) {  // (g, w) -> dx
  require_contiguous(c);
  const Tensor &g = *c.inputs[0], &w = *c.inputs[1];
  Tensor& dx = *c.outputs[0];
  dev::conv2d_backward_input(dptr<float>(dx), dptr<float>(g), dptr<float>(w),
                             geom(dx.shape(), w.shape(), g.shape(), c.attrs), cu(c).stream());
}

void conv2d_backward_weight_kernel(const KernelCall& c) {  // (x, g) -> dw
  require_contiguous(c);
  const Tensor &x = *c.inputs[0], &g = *c.inputs[1];
  Tensor& dw = *c.outputs[0];
  dev::conv2d_backward_weight(dptr<float>(dw), dptr<float>(x), dptr<float>(g),
                              geom(x.shape(), dw.shape(), g.shape(), c.attrs), cu(c).stream());
}

// x: the pooled input's shape; y: the pooled output's.
dev::PoolArgs pool(const Shape& x, const Shape& y, const Attrs& a, dev::PoolMode mode) {
  const Pool2dParams p = pool2d_params(a).value();
  dev::PoolArgs q;
  q.NC = x[0] * x[1];
  q.H = x[2];
  q.W = x[3];
  q.OH = y[2];
  q.OW = y[3];
  q.KH = p.kernel[0];
  q.KW = p.kernel[1];
  q.sh = p.stride[0];
  q.sw = p.stride[1];
  q.ph = p.padding[0];
  q.pw = p.padding[1];
  q.mode = mode;
  q.include_pad = p.count_include_pad ? 1 : 0;
  return q;
}

void max_pool_kernel(const KernelCall& c) {
  require_contiguous(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  dev::PoolArgs p = pool(x.shape(), y.shape(), c.attrs, dev::kMaxPool);
  p.y = dptr<float>(y);
  p.a = p.x = dptr<float>(x);
  dev::pool(p, cu(c).stream());
}

void max_gather_kernel(const KernelCall& c) {  // (t, x) -> t at x's argmax
  require_contiguous(c);
  const Tensor &t = *c.inputs[0], &x = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  dev::PoolArgs p = pool(x.shape(), y.shape(), c.attrs, dev::kMaxPoolGather);
  p.y = dptr<float>(y);
  p.a = dptr<float>(t);
  p.x = dptr<float>(x);
  dev::pool(p, cu(c).stream());
}

void max_backward_kernel(const KernelCall& c) {  // (g, x) -> dx
  require_contiguous(c);
  const Tensor &g = *c.inputs[0], &x = *c.inputs[1];
  Tensor& dx = *c.outputs[0];
  dev::PoolArgs p = pool(x.shape(), g.shape(), c.attrs, dev::kMaxPoolBackward);
  p.y = dptr<float>(dx);
  p.a = dptr<float>(g);
  p.x = dptr<float>(x);
  dev::pool(p, cu(c).stream());
}

void avg_pool_kernel(const KernelCall& c) {
  require_contiguous(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  dev::PoolArgs p = pool(x.shape(), y.shape(), c.attrs, dev::kAvgPool);
  p.y = dptr<float>(y);
  p.a = p.x = dptr<float>(x);
  dev::pool(p, cu(c).stream());
}

void avg_backward_kernel(const KernelCall& c) {  // (g) -> dx
  require_contiguous(c);
  const Tensor& g = *c.inputs[0];
  Tensor& dx = *c.outputs[0];
  dev::PoolArgs p = pool(dx.shape(), g.shape(), c.attrs, dev::kAvgPoolBackward);
  p.y = dptr<float>(dx);
  p.a = p.x = dptr<float>(g);
  dev::pool(p, cu(c).stream());
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

}  // namespace mls::cuda
