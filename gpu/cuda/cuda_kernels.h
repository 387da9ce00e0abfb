// Internal to gpu/cuda: the kernels' shared helpers and the registration of each family.
// A kernel (kernels_*.cpp) reads its attributes, works out sizes and strides, fills the
// argument struct of a device entry point (device/launch.h) and enqueues it on the
// backend's stream; it never waits, allocates or copies from the host, so a CUDA graph can
// capture it.
#pragma once

#include <vector>

#include "engine/core/op.h"
#include "engine/core/tensor.h"
#include "gpu/cuda/cuda_backend.h"
#include "gpu/cuda/device/launch.h"

namespace mls::cuda {

// A cuBLAS call after the device opened, as check(cudaError_t) (device/launch.h).
void check(cublasStatus_t s, const char* what);

inline CudaBackend& cu(const KernelCall& c) {
  return static_cast<CudaBackend&>(c.backend);
}

// The device address of a tensor's first element.
template <typename T>
T* dptr(const Tensor& t) {
  return reinterpret_cast<T*>(static_cast<char*>(t.buffer()->native_handle()) + t.byte_offset());
}

// Element strides of input `t` read at the index of an output of shape `out` (numpy
// broadcasting: missing and size-1 dims step by 0).
std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& out);

// Dims and the strides of each operand over them, with size-1 dims dropped and neighbours
// merged wherever every operand steps through both as through one (fewer divisions per
// element on the device). Asserts the result fits dev::kMaxRank.
struct Collapsed {
  int32_t rank = 0;
  int64_t dims[dev::kMaxRank] = {};
};
// `strides` holds one vector per operand over `shape`; each comes back over the result's dims.
Collapsed collapse(const Shape& shape, std::vector<std::vector<int64_t>>& strides);

// Registers a CUDA kernel for an op the registry has (ops of optional families may be absent).
inline void add_kernel(OpRegistry& reg, const char* op, DType t, KernelFn fn) {
  if (reg.find(op)) reg.register_kernel(op, DeviceKind::CUDA, t, fn);
}

// Registers the CUDA kernels of every op family (each in its kernels_*.cpp).
void register_kernels(OpRegistry& reg);
void register_elementwise_kernels(OpRegistry& reg);
void register_linalg_kernels(OpRegistry& reg);
void register_reduce_kernels(OpRegistry& reg);
void register_layout_kernels(OpRegistry& reg);
void register_optimizer_kernels(OpRegistry& reg);
void register_conv_kernels(OpRegistry& reg);
void register_norm_kernels(OpRegistry& reg);
void register_precision_kernels(OpRegistry& reg);

}  // namespace mls::cuda
