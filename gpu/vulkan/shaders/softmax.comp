#version 450
// softmax and log_softmax along an axis: one invocation per line (len elements, inner apart).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint off[2]; uint lines, len, inner, log_form; } pc;

void main() {
  GRID_LOOP(l, pc.lines) {
    const uint o = l / pc.inner, i = l % pc.inner;
    const uint base = o * pc.len * pc.inner + i;
    float mx = -1.0 / 0.0;
    for (uint k = 0; k < pc.len; ++k) mx = max(mx, x[pc.off[1] + base + k * pc.inner]);
    float s = 0.0;
    for (uint k = 0; k < pc.len; ++k) s += exp_(x[pc.off[1] + base + k * pc.inner] - mx);
    const float ls = log_(s);
    for (uint k = 0; k < pc.len; ++k) {
      const float v = x[pc.off[1] + base + k * pc.inner] - mx;
      y[pc.off[0] + base + k * pc.inner] = pc.log_form != 0u ? v - ls : exp_(v) / s;
    }
  }
}
