// Internal to engine/cpu: the float formula of every elementwise op of the list
// (engine/ops/elementwise_list.h), each written once and named after the op's `text` there,
// so an op's own kernel, the fused elementwise interpreter and the GEMM epilogue compute the
// same bits for the same input. Arguments: the operands, then the attributes (p0, p1).
//
//   unary_kernel(call, [](float x) { return scalar::gelu(x); });
#pragma once

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mls::cpu::scalar {

inline constexpr float kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
inline constexpr float kInvSqrt2Pi =
    static_cast<float>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
inline constexpr float kGeluK = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
inline constexpr float kGeluC = 0.044715f;

// [SECTION] Unary

inline float neg(float x) {
  return -x;
}
inline float abs(float x) {
  return std::abs(x);
}
inline float exp(float x) {
  return std::exp(x);
}
inline float log(float x) {
  return std::log(x);
}
inline float sqrt(float x) {
  return std::sqrt(x);
}
inline float rsqrt(float x) {
  return 1.f / std::sqrt(x);
}
inline float tanh(float x) {
  return std::tanh(x);
}
inline float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
}
inline float relu(float x) {
  return x > 0.f ? x : 0.f;
}
inline float silu(float x) {
  return x / (1.f + std::exp(-x));
}
// x Phi(x), Phi through erfc (accurate for large negative x, as PyTorch).
inline float gelu(float x) {
  return 0.5f * x * std::erfc(-x * kInvSqrt2);
}
inline float gelu_tanh(float x) {
  return 0.5f * x * (1.f + std::tanh(kGeluK * (x + kGeluC * x * x * x)));
}
inline float leaky_relu(float x, float alpha) {
  return x > 0.f ? x : alpha * x;
}
// log(1 + e^(beta x)) / beta, linear above the threshold; no overflow.
inline float softplus(float x, float beta, float threshold) {
  float z = beta * x;
  if (z > threshold) return x;
  return (std::max(z, 0.f) + std::log1p(std::exp(-std::abs(z)))) / beta;
}
// A NaN x stays NaN.
inline float clamp(float x, float lo, float hi) {
  return std::min(std::max(x, lo), hi);
}
inline float scale(float x, float alpha) {
  return alpha * x;
}
inline float add_scalar(float x, float value) {
  return x + value;
}
inline float sin(float x) {
  return std::sin(x);
}
inline float cos(float x) {
  return std::cos(x);
}

// [SECTION] Binary

inline float add(float a, float b) {
  return a + b;
}
inline float sub(float a, float b) {
  return a - b;
}
inline float mul(float a, float b) {
  return a * b;
}
inline float div(float a, float b) {
  return a / b;
}
// NaN propagates, as in PyTorch (std::max would drop a NaN in a).
inline float maximum(float a, float b) {
  return a > b || std::isnan(a) ? a : b;
}
inline float minimum(float a, float b) {
  return a < b || std::isnan(a) ? a : b;
}
inline float pow(float a, float b) {
  return std::pow(a, b);
}
inline float relu_backward(float dy, float x) {
  return x > 0.f ? dy : 0.f;
}
inline float gelu_backward(float dy, float x) {
  return dy * (0.5f * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x));
}
inline float gelu_tanh_backward(float dy, float x) {
  float t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x));
}
inline float clamp_backward(float dy, float x, float lo, float hi) {
  return x > lo && x < hi ? dy : 0.f;
}

}  // namespace mls::cpu::scalar
