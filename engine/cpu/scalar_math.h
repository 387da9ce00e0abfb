// Internal to engine/cpu: the float formula of every elementwise op of the list
// (engine/ops/elementwise_list.h), each written once and named after the op's `text` there,
// so an op's own kernel, the fused elementwise interpreter and the GEMM epilogue compute the
// same bits for the same input. Arguments: the operands, then the attributes (p0, p1).
//
//   unary_kernel(call, [](float x) { return scalar::gelu(x); });
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace mls::cpu::scalar {

inline constexpr float kInvSqrt2 = static_cast<float>(1.0 / std::numbers::sqrt2);
inline constexpr float kInvSqrt2Pi =
    static_cast<float>(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
inline constexpr float kGeluK = static_cast<float>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
inline constexpr float kGeluC = 0.044715f;

// [SECTION] Building blocks
//
// Written without calls or branches (ternaries become blends), so GCC vectorises the loops
// that call them; engine/cpu is compiled with -fno-trapping-math for that (engine/
// CMakeLists.txt): without it GCC keeps a loop with a float comparison scalar ("control flow
// in loop"). Every caller gets the same bits, vectorised or not: fused multiply-adds are
// spelled out (the build does not contract a * b + c on its own).

// a * b + c, fused where the CPU has FMA.
inline float madd(float a, float b, float c) {
#ifdef __FP_FAST_FMAF
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// exp(x) for x <= 0 (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, a degree-6 polynomial,
// 2^n through the exponent bits), about 1 ulp; 0 below -87 (where 2^n leaves the normals).
inline float exp_nonpositive(float x) {
  const float xc = x < -87.0f ? -87.0f : x;
  // Round to nearest by adding and taking away 1.5 * 2^23 (std::nearbyint is a call).
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = madd(n, -0.693359375f, xc);  // ln 2 in two parts: r stays exact
  r = madd(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = madd(p, r, 1.3981999507e-3f);
  p = madd(p, r, 8.3334519073e-3f);
  p = madd(p, r, 4.1665795894e-2f);
  p = madd(p, r, 1.6666665459e-1f);
  p = madd(p, r, 5.0000001201e-1f);
  p = madd(p, r * r, r + 1.0f);
  const auto two_n = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  const float e = p * std::bit_cast<float>(two_n);
  return x < -87.0f ? 0.0f : e;
}

// The standard normal's cdf Phi(x) and exp(-x^2 / 2), which its density needs too.
struct NormalCdf {
  float cdf;
  float gauss;  // exp(-x^2 / 2)
};

// erfc(z) for z = |x| / sqrt 2 as t exp(-z^2 + q(t)), t = 1 / (1 + z / 2) (the Chebyshev
// fit of Numerical Recipes' erfcc: relative error below 1.2e-7 for every z >= 0), so Phi's
// far tail keeps its relative accuracy (1 - Phi(-x) would cancel). z^2 is taken exactly,
// as hi + lo. Against float64 (tests/engine/math_test.cpp): gelu within 1.1e-7 of
// max(1, |y|) and its derivative within 1.7e-7 (libm's float erfc and exp: 1.1e-7, 1.3e-7);
// in the tail (x from -12 to -1) gelu within 4.7e-7 relative, where libm's float erfc of
// the rounded x / sqrt 2 is off by 1e-5. One thread: 2.1 ns an element, those calls 18.
inline NormalCdf normal_cdf(float x) {
  const float z = std::abs(x) * kInvSqrt2;
  const float t = 1.0f / madd(0.5f, z, 1.0f);
  float q = 0.17087277f;
  q = madd(q, t, -0.82215223f);
  q = madd(q, t, 1.48851587f);
  q = madd(q, t, -1.13520398f);
  q = madd(q, t, 0.27886807f);
  q = madd(q, t, -0.18628806f);
  q = madd(q, t, 0.09678418f);
  q = madd(q, t, 0.37409196f);
  q = madd(q, t, 1.00002368f);
  q = madd(q, t, -1.26551223f);
  const float x2 = x * x;  // z^2 = x^2 / 2 from x itself: z's rounding would cost 1e-5
  const float z2 = 0.5f * x2, z2_lo = 0.5f * madd(x, x, -x2);
  const float gauss = exp_nonpositive(-z2) * (1.0f - z2_lo);
  const float tail = 0.5f * t * gauss * exp_nonpositive(q);  // Phi(-|x|)
  return {x < 0.0f ? tail : 1.0f - tail, gauss};
}

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
  return x * normal_cdf(x).cdf;
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
// dy (Phi(x) + x phi(x)).
inline float gelu_backward(float dy, float x) {
  const NormalCdf n = normal_cdf(x);
  return dy * madd(x * kInvSqrt2Pi, n.gauss, n.cdf);
}
inline float gelu_tanh_backward(float dy, float x) {
  float t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kGeluK * (1.f + 3.f * kGeluC * x * x));
}
inline float clamp_backward(float dy, float x, float lo, float hi) {
  return x > lo && x < hi ? dy : 0.f;
}

}  // namespace mls::cpu::scalar
