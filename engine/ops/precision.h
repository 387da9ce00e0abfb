// Mixed precision ops (engine/ops/precision_ops.cpp): `cast` between element types (its
// builder is in math.h) and `matmul_lowp`, a matrix product of bf16 or f16 operands with
// an f32 result.
//
//   Ref xb = cast(e, x, DType::BF16), wb = cast(e, w, DType::BF16);
//   Ref y = matmul_lowp(e, xb, wb);            // f32, as matmul(x, w) up to bf16 rounding
//
// Derivatives of 16-bit values are carried in f32: the gradient (and tangent) of a bf16 or
// f16 value is an f32 tensor of its shape. So a parameter's gradient through
// cast(w, bf16) is f32, no gradient is rounded twice, and the f32-only elementwise kernels
// serve the backward pass. matmul_lowp's rule rounds the output gradient to the operands'
// dtype once, and computes both products in low precision with f32 results.
#pragma once

#include "engine/ir/emitter.h"

namespace mls {

// op(A) op(B) over the last two dims (batch dims broadcast, as matmul); A and B both bf16
// or both f16; the result is f32.
Ref matmul_lowp(Emitter& e, Ref a, Ref b, bool transpose_a = false, bool transpose_b = false);

}  // namespace mls
