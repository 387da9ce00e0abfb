#version 450
// C = op(A) op(B) (+ bias[N]) then an activation: matmul and linear_act, batched with
// broadcast batch dims (up to 4). 64x64 tiles of C per workgroup of 16x16 invocations, each
// computing 4x4; the K loop stages 16-wide slices of A and B in shared memory.
#include "common.glsl"
#include "epilogue.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) writeonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform P {
  uint off[4];
  uint M, N, K, ta, tb, act, has_bias, batch_rank;
  uint bdims[4], a_bstride[4], b_bstride[4];
  uint operand_type;  // matmul_lowp.comp only: 1 f16, 2 bf16 (DType)
} pc;

#define LOAD_A(i) a[i]
#define LOAD_B(i) b[i]
#include "matmul_body.glsl"
