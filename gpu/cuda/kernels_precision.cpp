// cast between every element type the engine has (device/cast.cu), the conversion that
// mixed precision training runs on every weight each step; matmul_lowp is with the GEMMs
// (kernels_linalg.cpp).
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

static_assert(static_cast<int>(DType::F32) == 0 && static_cast<int>(DType::F16) == 1 &&
                  static_cast<int>(DType::BF16) == 2 && static_cast<int>(DType::I64) == 3 &&
                  static_cast<int>(DType::I32) == 4 && static_cast<int>(DType::U8) == 5 &&
                  static_cast<int>(DType::I8) == 6 && static_cast<int>(DType::Bool) == 7,
              "device/cast.cu numbers the element types as DType does");

void cast_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(x.is_contiguous() && y.is_contiguous(), "cuda: cast of a strided view");
  const bool done = dev::cast(dptr<void>(y), static_cast<int32_t>(y.dtype()), dptr<const void>(x),
                              static_cast<int32_t>(x.dtype()), y.numel(), cu(c).stream());
  MLS_CHECK(done, "cuda: cast to a type it does not convert to (u8 or i8)");
}

}  // namespace

void register_precision_kernels(OpRegistry& reg) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32, DType::U8, DType::I8, DType::Bool})
    add_kernel(reg, "cast", t, cast_kernel);
}

}  // namespace mls::cuda
