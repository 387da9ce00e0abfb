#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

void register_kernels(OpRegistry& reg) {
  register_elementwise_kernels(reg);
  register_linalg_kernels(reg);
  register_reduce_kernels(reg);
  register_layout_kernels(reg);
  register_optimizer_kernels(reg);
  register_conv_kernels(reg);
  register_norm_kernels(reg);
  register_precision_kernels(reg);
}

}  // namespace mls::vulkan
