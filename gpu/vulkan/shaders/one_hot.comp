#version 450
// i64 labels [N] (two words each, little-endian) -> f32 [N, C]; out-of-range labels give 0 rows.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer L { uint l[]; };
layout(push_constant) uniform P { uint off[2]; uint n, classes; } pc;

void main() {
  GRID_LOOP(i, pc.n * pc.classes) {
    const uint row = i / pc.classes, c = i % pc.classes;
    const uint lo = l[2u * (pc.off[1] + row)], hi = l[2u * (pc.off[1] + row) + 1u];
    y[pc.off[0] + i] = (hi == 0u && lo == c) ? 1.0 : 0.0;
  }
}
