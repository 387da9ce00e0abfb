#version 450
// One elementwise op over operands of the output's shape (or a scalar second operand): the
// common case of elementwise.comp without its program and register array, which a software
// device runs several times faster. The op is a FusedCode (engine/ops/fused.h).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X0 { float x0[]; };
layout(std430, binding = 2) readonly buffer X1 { float x1[]; };
layout(push_constant) uniform P { uint off[3]; uint n, op, scalar_b; float p0, p1; } pc;

float apply(uint op, float a, float b, float p0, float p1) {
  switch (op) {
    case 2u: return -a;
    case 3u: return abs(a);
    case 4u: return exp_(a);
    case 5u: return log_(a);
    case 6u: return sqrt(a);
    case 7u: return 1.0 / sqrt(a);
    case 8u: return tanh_(a);
    case 9u: return sigmoid_(a);
    case 10u: return a > 0.0 ? a : 0.0;
    case 11u: return silu_(a);
    case 12u: return gelu_(a);
    case 13u: return gelu_tanh_(a);
    case 14u: return a > 0.0 ? a : p0 * a;
    case 15u: return softplus_(a, p0, p1);
    case 16u: return min(max(a, p0), p1);
    case 17u: return p0 * a;
    case 18u: return a + p0;
    case 19u: return a + b;
    case 20u: return a - b;
    case 21u: return a * b;
    case 22u: return a / b;
    case 23u: return (a > b || isnan(a)) ? a : b;
    case 24u: return (a < b || isnan(a)) ? a : b;
    case 25u: return pow_(a, b);
    case 26u: return b > 0.0 ? a : 0.0;
    case 27u: return gelu_backward_(a, b);
    case 28u: return gelu_tanh_backward_(a, b);
    default: return (b > p0 && b < p1) ? a : 0.0;
  }
}

void main() {
  const float bs = pc.scalar_b != 0u ? x1[pc.off[2]] : 0.0;
  GRID_LOOP(i, pc.n) {
    const float a = x0[pc.off[1] + i];
    const float b = pc.op >= 19u ? (pc.scalar_b != 0u ? bs : x1[pc.off[2] + i]) : 0.0;
    y[pc.off[0] + i] = apply(pc.op, a, b, pc.p0, pc.p1);
  }
}
