// Builders for the math ops of engine/ops/math_ops.cpp: more unary activations, binary ops
// with numpy broadcasting, comparisons (bool results), where and cast.
//
//   Ref h = gelu(e, x);                                   // exact (erf) form, as PyTorch's default
//   Ref pos = greater(e, x, fill(e, {DType::F32, {}}, 0));  // bool mask, broadcast against []
//   Ref y = where(e, pos, x, scale(e, x, 0.1));           // leaky relu by hand
//   Ref z = cast(e, clamp(e, y, -1, 1), DType::F16);
#pragma once

#include <limits>
#include <string_view>

#include "engine/ir/emitter.h"

namespace mls {

Ref abs(Emitter& e, Ref x);
Ref sign(Emitter& e, Ref x);  // -1, 0 or 1; no gradient (piecewise constant)
Ref round(Emitter& e, Ref x);  // halves to even; no gradient (piecewise constant)
Ref sqrt(Emitter& e, Ref x);
Ref rsqrt(Emitter& e, Ref x);
Ref leaky_relu(Emitter& e, Ref x, double alpha = 0.01);
// approximate: "none" (x * Phi(x), with erf) or "tanh".
Ref gelu(Emitter& e, Ref x, std::string_view approximate = "none");
Ref silu(Emitter& e, Ref x);
Ref softplus(Emitter& e, Ref x, double beta = 1.0, double threshold = 20.0);
// An infinite bound is left out (no clamping on that side).
Ref clamp(Emitter& e, Ref x, double min = -std::numeric_limits<double>::infinity(),
          double max = std::numeric_limits<double>::infinity());

// Broadcasting binary ops.
Ref pow(Emitter& e, Ref a, Ref b);
Ref maximum(Emitter& e, Ref a, Ref b);
Ref minimum(Emitter& e, Ref a, Ref b);

// Broadcasting comparisons: bool results, no gradient.
Ref equal(Emitter& e, Ref a, Ref b);
Ref not_equal(Emitter& e, Ref a, Ref b);
Ref less(Emitter& e, Ref a, Ref b);
Ref less_equal(Emitter& e, Ref a, Ref b);
Ref greater(Emitter& e, Ref a, Ref b);
Ref greater_equal(Emitter& e, Ref a, Ref b);

// cond ? a : b elementwise, all three broadcast; cond is bool.
Ref where(Emitter& e, Ref cond, Ref a, Ref b);
// Converts the element type (no gradient yet). Returns x itself when it has that dtype.
Ref cast(Emitter& e, Ref x, DType dtype);

}  // namespace mls
