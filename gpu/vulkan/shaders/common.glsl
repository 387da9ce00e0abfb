// Shared by the compute shaders: the element math every kernel computes the same way, and
// the grid-stride loop (a dispatch is capped at 65535 groups; shaders loop over the rest).
#extension GL_EXT_control_flow_attributes : enable

#define GRID_LOOP(i, n) for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)

// Mesa's llvmpipe (lavapipe) ends an invocation's loops after about 65535 iterations in all
// (nesting does not help): kernels keep each invocation's trips below that on software
// devices (VulkanBackend::kSoftwareLoopLimit).

const float kInvSqrt2 = 0.70710678118654752;
const float kInvSqrt2Pi = 0.39894228040143268;
const float kGeluK = 0.79788456080286536;  // sqrt(2 / pi)
const float kGeluC = 0.044715;

// exp and log to about 1 ulp, as the CPU's libm: a device's own exp and log may be far less
// accurate (GLSL allows log an absolute error of 2^-21 near 1, thousands of ulp of a
// log-softmax's small terms), and a training run on the device must follow the CPU's.
// exp: x = k ln2 + r with |r| <= ln2/2 (ln2 in two parts, subtracted in order: `precise`
// keeps a compiler from merging them), a degree-7 Taylor polynomial for e^r (its remainder
// is below 1e-8 there), scaled by 2^k.
float exp_(float x) {
  if (x > 88.7228394) return 1.0 / 0.0;
  if (x < -103.972084) return 0.0;
  if (isnan(x)) return x;
  const float k = round(x * 1.44269504);
  precise const float hi = x - k * 0.693145752;
  precise const float r = hi - k * 1.42860677e-6;
  const float p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
  // 2^k built from its bits (a device's ldexp may go through an approximate exp2), in two
  // factors: k reaches -150 where the result is subnormal.
  const int ki = int(k), k1 = ki / 2, k2 = ki - k1;
  return p * intBitsToFloat((k1 + 127) << 23) * intBitsToFloat((k2 + 127) << 23);
}

// log: x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f / (2 + f), and
// log(m) = f - f^2/2 + s (f^2/2 + R(s^2)), R the series of 2 atanh(s)/s - 2 to s^8.
float log_(float x) {
  if (!(x > 0.0)) return x == 0.0 ? -1.0 / 0.0 : 0.0 / 0.0;
  if (isinf(x)) return x;
  int e;
  float m = frexp(x, e);  // m in [0.5, 1)
  if (m < 0.70710678) {
    m *= 2.0;
    e -= 1;
  }
  const float f = m - 1.0;
  const float s = f / (2.0 + f);
  const float z = s * s;
  const float R = z * (0.666666627 + z * (0.400009722 + z * (0.284987867 + z * 0.242790788)));
  const float hfsq = 0.5 * f * f;
  const float k = float(e);
  // precise: the order of these sums is what makes the result exact to an ulp.
  precise const float lo = (hfsq - (s * (hfsq + R) + k * 1.42860677e-6)) - f;
  precise const float result = k * 0.693145752 - lo;
  return result;
}

// exp(x) - 1 without the cancellation near 0 (a Taylor polynomial below |x| = 0.35).
float expm1_(float x) {
  if (abs(x) < 0.35)
    return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x * (1.0 / 720.0 +
           x * (1.0 / 5040.0 + x * (1.0 / 40320.0))))))));
  return exp_(x) - 1.0;
}

// tanh, accurate near 0 as well (GLSL's may lose relative precision there).
float tanh_(float x) {
  float a = abs(x);
  if (a > 9.0) return sign(x);
  float e = expm1_(2.0 * a);
  return sign(x) * e / (e + 2.0);
}

float log1p_(float x) {
  float u = 1.0 + x;
  if (u == 1.0) return x;
  return log_(u) * x / (u - 1.0);
}

// erfc with relative error below 1.2e-7 everywhere (the Chebyshev fit of Numerical Recipes'
// erfcc), so x Phi(x) is accurate for large negative x as well.
float erfc_(float x) {
  float z = abs(x);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp_(-z * z - 1.26551223 +
                    t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
                    t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
  return x >= 0.0 ? r : 2.0 - r;
}

// sin and cos to a few ulp, as the CPU's libm (GLSL only promises an absolute error of 2^-11
// within [-pi, pi]). x = j pi/2 + r with |r| <= pi/4 (pi/2 in three parts, subtracted in
// order), then cephes' minimax polynomials for sin and cos on [-pi/4, pi/4], chosen and
// signed by the quadrant j mod 4. A C++ copy of this code against double: within 2 ulp for
// |x| < 100, 8 ulp for |x| < 1e4; past that the reduction loses bits (1e-6 absolute near
// 1e5). On lavapipe the conformance suite checks it over [-7, 7].
float sincos_poly_(float r, bool want_cos) {
  const float z = r * r;
  if (want_cos)
    return 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
  return r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
}
// sin(x) when phase is 0, cos(x) when it is 1 (cos x = sin(x + pi/2): one quadrant on).
float sin_quadrant_(float x, int phase) {
  if (isnan(x) || isinf(x)) return 0.0 / 0.0;
  const float j = round(x * 0.636619772);
  precise const float r1 = x - j * 1.5703125;
  precise const float r2 = r1 - j * 4.837512969970703125e-4;
  precise const float r = r2 - j * 7.54978995489188216e-8;
  const int q = (int(j) + phase) & 3;
  const float v = sincos_poly_(r, (q & 1) == 1);
  return q >= 2 ? -v : v;
}

// The formula of every op of the elementwise list (engine/ops/elementwise_list.h), each
// written once and named after its `text` there with a trailing underscore (relu_,
// gelu_tanh_backward_): operands, then attributes. shaders/ew_apply.glsl dispatches to them;
// exp_, log_, tanh_ (above) and pow_ (below) are the list's exp, log, tanh and pow.
float neg_(float x) { return -x; }
float abs_(float x) { return abs(x); }
float sqrt_(float x) { return sqrt(x); }
float rsqrt_(float x) { return 1.0 / sqrt(x); }
float relu_(float x) { return x > 0.0 ? x : 0.0; }
float leaky_relu_(float x, float alpha) { return x > 0.0 ? x : alpha * x; }
float clamp_(float x, float lo, float hi) { return min(max(x, lo), hi); }
float scale_(float x, float alpha) { return alpha * x; }
float add_scalar_(float x, float value) { return x + value; }
float sin_(float x) { return sin_quadrant_(x, 0); }
float cos_(float x) { return sin_quadrant_(x, 1); }
float add_(float a, float b) { return a + b; }
float sub_(float a, float b) { return a - b; }
float mul_(float a, float b) { return a * b; }
float div_(float a, float b) { return a / b; }
// A NaN in either operand wins, as in PyTorch.
float maximum_(float a, float b) { return (a > b || isnan(a)) ? a : b; }
float minimum_(float a, float b) { return (a < b || isnan(a)) ? a : b; }
float relu_backward_(float dy, float x) { return x > 0.0 ? dy : 0.0; }
float clamp_backward_(float dy, float x, float lo, float hi) { return (x > lo && x < hi) ? dy : 0.0; }
float sigmoid_(float x) { return 1.0 / (1.0 + exp_(-x)); }
float silu_(float x) { return x / (1.0 + exp_(-x)); }
float gelu_(float x) { return 0.5 * x * erfc_(-x * kInvSqrt2); }
float gelu_tanh_(float x) { return 0.5 * x * (1.0 + tanh_(kGeluK * (x + kGeluC * x * x * x))); }
float gelu_backward_(float dy, float x) {
  return dy * (0.5 * erfc_(-x * kInvSqrt2) + x * kInvSqrt2Pi * exp_(-0.5 * x * x));
}
float gelu_tanh_backward_(float dy, float x) {
  float t = tanh_(kGeluK * (x + kGeluC * x * x * x));
  return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluK * (1.0 + 3.0 * kGeluC * x * x));
}
float softplus_(float x, float beta, float threshold) {
  float z = beta * x;
  if (z > threshold) return x;
  return (max(z, 0.0) + log1p_(exp_(-abs(z)))) / beta;
}

// std::pow's cases that GLSL's pow leaves undefined: a negative base with an integer
// exponent, and zero.
float pow_(float a, float b) {
  if (b == 0.0) return 1.0;
  if (a == 0.0) return b > 0.0 ? 0.0 : 1.0 / 0.0;
  if (a < 0.0) {
    if (floor(b) != b) return 0.0 / 0.0;
    float m = exp_(b * log_(-a));
    return mod(b, 2.0) == 1.0 ? -m : m;
  }
  return exp_(b * log_(a));
}
