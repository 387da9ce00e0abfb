#version 450
// Index of the largest element along an axis (the first on ties), written as i64 words.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { uint y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint off[2]; uint lines, len, inner; } pc;

void main() {
  GRID_LOOP(l, pc.lines) {
    const uint o = l / pc.inner, i = l % pc.inner;
    const uint base = pc.off[1] + o * pc.len * pc.inner + i;
    uint best = 0;
    float bv = x[base];
    for (uint k = 1; k < pc.len; ++k) {
      const float v = x[base + k * pc.inner];
      if (v > bv) { bv = v; best = k; }
    }
    y[2u * (pc.off[0] + l)] = best;
    y[2u * (pc.off[0] + l) + 1u] = 0u;
  }
}
