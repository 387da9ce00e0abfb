// Shared by the .cu files: the grid-stride loop, the launch size, and the element math
// every kernel computes the same way. The formulas are engine/cpu/scalar_math.h's, written
// with CUDA's single-precision functions (erfcf, tanhf, log1pf: IEEE-accurate to a few ulp;
// nvcc builds without --use_fast_math, so division and sqrt are correctly rounded).
#pragma once

#include <cstdint>

#include "gpu/cuda/device/launch.h"

namespace mls::cuda::dev {

// i over [0, n), the grid's threads striding through it (the launch caps its blocks).
#define MLS_GRID_LOOP(i, n)                                                              \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// Blocks of kThreads that cover n items, capped (the grid-stride loops do the rest).
inline unsigned blocks_for(int64_t n) {
  if (n <= 0) return 0;
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 ? b : 65535);
}

// One block per item for up to 65535 items (the kernels loop over the rest).
inline unsigned blocks_per_item(int64_t n) {
  return static_cast<unsigned>(n < 65535 ? n : 65535);
}

// scalar_math.h's constants, from the same double values.
constexpr float kInvSqrt2 = static_cast<float>(0.70710678118654752440);    // 1 / sqrt(2)
constexpr float kInvSqrt2Pi = static_cast<float>(0.39894228040143267794);  // 1 / sqrt(2 pi)
constexpr float kGeluK = static_cast<float>(0.79788456080286535588);       // sqrt(2 / pi)
constexpr float kGeluC = 0.044715f;

__device__ inline float sigmoid_f(float x) {
  return 1.f / (1.f + expf(-x));
}
__device__ inline float silu_f(float x) {
  return x / (1.f + expf(-x));
}
// x Phi(x), Phi through erfc (accurate for large negative x).
__device__ inline float gelu_f(float x) {
  return 0.5f * x * erfcf(-x * kInvSqrt2);
}
__device__ inline float gelu_tanh_f(float x) {
  return 0.5f * x * (1.f + tanhf(kGeluK * (x + kGeluC * x * x * x)));
}
__device__ inline float gelu_backward_f(float dy, float x) {
  return dy * (0.5f * erfcf(-x * kInvSqrt2) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
}
__device__ inline float gelu_tanh_backward_f(float dy, float x) {
  const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x));
}
// log(1 + e^(beta x)) / beta, linear above the threshold; no overflow.
__device__ inline float softplus_f(float x, float beta, float threshold) {
  const float z = beta * x;
  if (z > threshold) return x;
  return (fmaxf(z, 0.f) + log1pf(expf(-fabsf(z)))) / beta;
}
// std::min(std::max(x, lo), hi): a NaN x stays NaN.
__device__ inline float clamp_f(float x, float lo, float hi) {
  const float m = x < lo ? lo : x;
  return hi < m ? hi : m;
}
// maximum / minimum: a NaN in either operand wins.
__device__ inline float max_nan(float a, float b) {
  return (a > b || isnan(a)) ? a : b;
}
__device__ inline float min_nan(float a, float b) {
  return (a < b || isnan(a)) ? a : b;
}

// The activation of a GEMM or convolution epilogue (Act: EpilogueAct's numbering).
__device__ inline float epilogue(float v, int32_t act) {
  switch (act) {
    case kActRelu:
      return v > 0.f ? v : 0.f;
    case kActSigmoid:
      return sigmoid_f(v);
    case kActTanh:
      return tanhf(v);
    case kActGelu:
      return gelu_f(v);
    case kActSilu:
      return silu_f(v);
    default:
      return v;
  }
}

}  // namespace mls::cuda::dev
