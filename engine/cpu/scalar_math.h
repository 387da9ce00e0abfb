// Internal to engine/cpu: the float formulas of the activations and their derivatives, in
// one place, so an op's own kernel, the fused elementwise interpreter and the GEMM epilogue
// compute the same bits for the same input.
//
//   unary_kernel(call, [](float x) { return scalar::gelu(x); });
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mls::cpu::scalar {

inline constexpr float kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
inline constexpr float kInvSqrt2Pi = static_cast<float>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
inline constexpr float kGeluK = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
inline constexpr float kGeluC = 0.044715f;

inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
inline float silu(float x) { return x / (1.f + std::exp(-x)); }
// x Phi(x), Phi through erfc (accurate for large negative x, as PyTorch).
inline float gelu(float x) { return 0.5f * x * std::erfc(-x * kInvSqrt2); }
inline float gelu_tanh(float x) { return 0.5f * x * (1.f + std::tanh(kGeluK * (x + kGeluC * x * x * x))); }
inline float gelu_backward(float dy, float x) {
  return dy * (0.5f * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x));
}
inline float gelu_tanh_backward(float dy, float x) {
  float t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x));
}
// log(1 + e^(beta x)) / beta, linear above the threshold; no overflow.
inline float softplus(float x, float beta, float threshold) {
  float z = beta * x;
  if (z > threshold) return x;
  return (std::max(z, 0.f) + std::log1p(std::exp(-std::abs(z)))) / beta;
}

}  // namespace mls::cpu::scalar
