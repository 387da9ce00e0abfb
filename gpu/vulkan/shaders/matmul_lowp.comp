#version 450
// C = op(A) op(B) with bf16 or f16 operands (pc.operand_type: 1 f16, 2 bf16, as DType) and an f32
// result: matmul_lowp. The tiles of matmul.comp; the operands are widened exactly as they
// are staged in shared memory, and the sums are f32, as the CPU's kernel sums.
#include "common.glsl"
#include "epilogue.glsl"
#include "lowp.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) writeonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer A { uint a[]; };
layout(std430, binding = 2) readonly buffer B { uint b[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform P {
  uint off[4];
  uint M, N, K, ta, tb, act, has_bias, batch_rank;
  uint bdims[4], a_bstride[4], b_bstride[4];
  uint operand_type;  // matmul_lowp.comp only: 1 f16, 2 bf16 (DType)
} pc;

float widen(uint h) { return uintBitsToFloat(pc.operand_type == 2u ? bf16_to_f32_bits(h) : f16_to_f32_bits(h)); }
#define LOAD_A(i) widen(PACKED_READ(a, (i), 2u))
#define LOAD_B(i) widen(PACKED_READ(b, (i), 2u))
#include "matmul_body.glsl"
