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

// The formula of every op of the elementwise list (engine/ops/elementwise_list.h), each
// written once and named after its `text` there with the suffix _f (relu_f,
// gelu_tanh_backward_f): operands, then attributes. elementwise.cu dispatches to them.
__device__ inline float neg_f(float x) {
  return -x;
}
__device__ inline float abs_f(float x) {
  return fabsf(x);
}
__device__ inline float exp_f(float x) {
  return expf(x);
}
__device__ inline float log_f(float x) {
  return logf(x);
}
__device__ inline float sqrt_f(float x) {
  return sqrtf(x);
}
__device__ inline float rsqrt_f(float x) {
  return 1.f / sqrtf(x);
}
__device__ inline float tanh_f(float x) {
  return tanhf(x);
}
__device__ inline float sigmoid_f(float x) {
  return 1.f / (1.f + expf(-x));
}
__device__ inline float relu_f(float x) {
  return x > 0.f ? x : 0.f;
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
__device__ inline float leaky_relu_f(float x, float alpha) {
  return x > 0.f ? x : alpha * x;
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
__device__ inline float scale_f(float x, float alpha) {
  return alpha * x;
}
__device__ inline float add_scalar_f(float x, float value) {
  return x + value;
}
// sinf and cosf (not the __sinf intrinsics): full range reduction, a few ulp.
__device__ inline float sin_f(float x) {
  return sinf(x);
}
__device__ inline float cos_f(float x) {
  return cosf(x);
}
__device__ inline float add_f(float a, float b) {
  return a + b;
}
__device__ inline float sub_f(float a, float b) {
  return a - b;
}
__device__ inline float mul_f(float a, float b) {
  return a * b;
}
__device__ inline float div_f(float a, float b) {
  return a / b;
}
// maximum / minimum: a NaN in either operand wins.
__device__ inline float maximum_f(float a, float b) {
  return (a > b || isnan(a)) ? a : b;
}
__device__ inline float minimum_f(float a, float b) {
  return (a < b || isnan(a)) ? a : b;
}
__device__ inline float pow_f(float a, float b) {
  return powf(a, b);
}
__device__ inline float relu_backward_f(float dy, float x) {
  return x > 0.f ? dy : 0.f;
}
__device__ inline float gelu_backward_f(float dy, float x) {
  return dy * (0.5f * erfcf(-x * kInvSqrt2) + x * kInvSqrt2Pi * expf(-0.5f * x * x));
}
__device__ inline float gelu_tanh_backward_f(float dy, float x) {
  const float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x));
}
__device__ inline float clamp_backward_f(float dy, float x, float lo, float hi) {
  return (x > lo && x < hi) ? dy : 0.f;
}

// The activation of a GEMM or convolution epilogue (Act: EpilogueAct's numbering): one case
// per act of MLS_EPILOGUE_ACTS (engine/ops/elementwise_list.h), calling its elementwise
// entry's formula above. An act without a formula fails nvcc here, naming `text_f`.
__device__ inline float epilogue(float v, int32_t act) {
  switch (act) {
#define MLS_DEV_EPILOGUE(Name, text) \
  case kAct##Name:                   \
    return text##_f(v);
    MLS_EPILOGUE_ACTS(MLS_DEV_EPILOGUE)
#undef MLS_DEV_EPILOGUE
    default:
      return v;
  }
}

}  // namespace mls::cuda::dev
