#version 450
// One elementwise op over operands of the output's shape (or a scalar second operand): the
// common case of elementwise.comp without its program and register array, which a software
// device runs several times faster. The op is a FusedCode (engine/ops/fused.h).
#include "common.glsl"
#include "ew_apply.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X0 { float x0[]; };
layout(std430, binding = 2) readonly buffer X1 { float x1[]; };
layout(push_constant) uniform P { uint off[3]; uint n, op, scalar_b; float p0, p1; } pc;

void main() {
  const float bs = pc.scalar_b != 0u ? x1[pc.off[2]] : 0.0;
  const bool binary = ew_operands(pc.op) == 2u;
  GRID_LOOP(i, pc.n) {
    const float a = x0[pc.off[1] + i];
    const float b = binary ? (pc.scalar_b != 0u ? bs : x1[pc.off[2] + i]) : 0.0;
    y[pc.off[0] + i] = ew_apply(pc.op, a, b, pc.p0, pc.p1);
  }
}
