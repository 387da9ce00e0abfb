// Internal to gpu/vulkan: the kernels' shared helpers and the registration of each family.
// A kernel reads its attributes, works out sizes and strides, and records one or more
// dispatches on the backend (VulkanBackend::dispatch); it never waits.
#pragma once

#include <string>
#include <vector>

#include "engine/core/op.h"
#include "engine/core/tensor.h"
#include "gpu/vulkan/vulkan_backend.h"

namespace mls::vulkan {

inline VulkanBackend& vk(const KernelCall& c) { return static_cast<VulkanBackend&>(c.backend); }

// A device table of words (a program, dims and strides), made once per distinct content.
inline const Tensor& table(VulkanBackend& be, const std::vector<uint32_t>& words) {
  return be.constant_table(std::string(reinterpret_cast<const char*>(words.data()), words.size() * 4), words);
}

inline uint32_t u32(int64_t v) { return static_cast<uint32_t>(v); }

// Element strides of input `t` read at the index of an output of shape `out` (numpy
// broadcasting: missing and size-1 dims step by 0).
std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& out);

// Registers a Vulkan kernel for an op the registry has (ops of optional families may be absent).
inline void add_kernel(OpRegistry& reg, const char* op, DType t, KernelFn fn) {
  if (reg.find(op)) reg.register_kernel(op, DeviceKind::Vulkan, t, fn);
}

// Registers the Vulkan kernels of every op family (each in its kernels_*.cpp).
void register_kernels(OpRegistry& reg);
void register_elementwise_kernels(OpRegistry& reg);
void register_linalg_kernels(OpRegistry& reg);
void register_reduce_kernels(OpRegistry& reg);
void register_layout_kernels(OpRegistry& reg);
void register_optimizer_kernels(OpRegistry& reg);
void register_conv_kernels(OpRegistry& reg);
void register_norm_kernels(OpRegistry& reg);
void register_precision_kernels(OpRegistry& reg);

}  // namespace mls::vulkan
