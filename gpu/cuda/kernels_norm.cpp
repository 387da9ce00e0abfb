// Normalisation kernels: batch_norm_train (device/batch_norm.cu). Its backward is written
// with other ops (reductions and elementwise), which have kernels of their own.
#include "engine/ops/nn.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

void batch_norm_train_kernel(const KernelCall& c) {
  const Tensor &x = *c.inputs[0], &gamma = *c.inputs[1], &beta = *c.inputs[2];
  for (const Tensor* t : c.inputs)
    MLS_CHECK(t->is_contiguous(), "cuda: batch_norm operands must be contiguous");
  for (const Tensor* t : c.outputs)
    MLS_CHECK(t->is_contiguous(), "cuda: batch_norm outputs must be contiguous");
  const int64_t n = x.dim(0), ch = x.dim(1);
  dev::BatchNormArgs a;
  a.y = dptr<float>(*c.outputs[0]);
  a.mean = dptr<float>(*c.outputs[1]);
  a.var = dptr<float>(*c.outputs[2]);
  a.x = dptr<float>(x);
  a.gamma = dptr<float>(gamma);
  a.beta = dptr<float>(beta);
  a.N = n;
  a.C = ch;
  a.S = x.numel() / std::max<int64_t>(n * ch, 1);
  a.eps = c.attrs.get_float_or("eps", kNormEps);
  dev::batch_norm_train(a, cu(c).stream());
}

}  // namespace

void register_norm_kernels(OpRegistry& reg) {
  add_kernel(reg, "batch_norm_train", DType::F32, batch_norm_train_kernel);
}

}  // namespace mls::cuda
