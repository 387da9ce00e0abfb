// Normalisation kernels: batch_norm_train (shaders/batch_norm.comp). Its backward is written
// with other ops (reductions and elementwise), which have kernels of their own.
#include "engine/ops/nn.h"
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

void batch_norm_train_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor &x = *c.inputs[0], &gamma = *c.inputs[1], &beta = *c.inputs[2];
  for (const Tensor* t : c.inputs) MLS_CHECK(t->is_contiguous(), "vulkan: batch_norm operands must be contiguous");
  const int64_t n = x.dim(0), ch = x.dim(1), s = x.numel() / std::max<int64_t>(n * ch, 1);
  struct {
    uint32_t N, C, S;
    float eps;
  } p{u32(n), u32(ch), u32(s), static_cast<float>(c.attrs.get_float_or("eps", kNormEps))};
  be.dispatch(Shader::batch_norm, {c.outputs[0], c.outputs[1], c.outputs[2], &x, &gamma, &beta}, p,
              u32(std::min<int64_t>(ch, 65535)));
}

}  // namespace

void register_norm_kernels(OpRegistry& reg) { add_kernel(reg, "batch_norm_train", DType::F32, batch_norm_train_kernel); }

}  // namespace mls::vulkan
