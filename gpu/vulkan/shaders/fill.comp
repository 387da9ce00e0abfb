#version 450
// Fills n 32-bit words with a pattern of two words (an f32 or i32 value twice, or an i64).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { uint y[]; };
layout(push_constant) uniform P { uint off[1]; uint n, w0, w1, wpe; } pc;  // wpe: words per element

void main() {
  GRID_LOOP(i, pc.n) y[pc.off[0] * pc.wpe + i] = (i & 1u) == 0u ? pc.w0 : pc.w1;
}
