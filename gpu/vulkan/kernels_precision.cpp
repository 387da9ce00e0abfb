// cast between every element type the engine has (shaders/cast.comp), the conversion that
// mixed precision training runs on every weight each step; matmul_lowp is with the GEMMs
// (kernels_linalg.cpp).
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

void cast_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(x.is_contiguous() && y.is_contiguous(), "vulkan: cast of a strided view");
  const int64_t n = y.numel();
  if (n == 0) return;
  const size_t out_size = dtype_size(y.dtype());
  // Output units: 64-bit elements, whole words, or the words that narrow elements touch
  // (from the word holding the first to the one holding the last).
  int64_t units = n;
  if (out_size < 4) {
    const auto per = static_cast<int64_t>(4 / out_size);
    const int64_t first = be.element_offset(y);
    units = (first + n - 1) / per - first / per + 1;
  }
  struct {
    uint32_t n, from, to, units;
  } p{u32(n), static_cast<uint32_t>(x.dtype()), static_cast<uint32_t>(y.dtype()), u32(units)};
  be.dispatch(Shader::cast, {&y, &x}, p, be.groups_for(p.units));
}

}  // namespace

void register_precision_kernels(OpRegistry& reg) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::I8, DType::Bool})
    add_kernel(reg, "cast", t, cast_kernel);
}

}  // namespace mls::vulkan
