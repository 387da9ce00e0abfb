#version 450
// sum, mean, max and min of x seen as [outer, red, inner] over its middle dim: the
// reductions whose axes are one contiguous block (all axes, the leading ones, the trailing
// ones: a bias's gradient, a row sum), without reduce.comp's index tables and divisions.
// per_thread: one invocation per output walks its line; else one workgroup per output adds
// up in shared memory.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint off[2]; uint outer, red, inner, op, per_thread; float scale; } pc;

shared float part[256];

float combine(float a, float b) {
  if (pc.op == 2u) return (a > b || isnan(a)) ? a : b;
  if (pc.op == 3u) return (a < b || isnan(a)) ? a : b;
  return a + b;
}

float identity() { return pc.op == 2u ? -1.0 / 0.0 : pc.op == 3u ? 1.0 / 0.0 : 0.0; }

float finish(float v) { return pc.op == 1u ? v * pc.scale : v; }

void main() {
  const uint nout = pc.outer * pc.inner;
  if (pc.per_thread != 0u) {
    GRID_LOOP(o, nout) {
      const uint q = o / pc.inner, i = o - q * pc.inner;
      const uint base = pc.off[1] + q * pc.red * pc.inner + i;
      float acc = identity();
      for (uint r = 0; r < pc.red; ++r) acc = combine(acc, x[base + r * pc.inner]);
      y[pc.off[0] + o] = finish(acc);
    }
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  for (uint o = gl_WorkGroupID.x; o < nout; o += gl_NumWorkGroups.x) {
    const uint q = o / pc.inner, i = o - q * pc.inner;
    const uint base = pc.off[1] + q * pc.red * pc.inner + i;
    float acc = identity();
    for (uint r = lid; r < pc.red; r += 256u) acc = combine(acc, x[base + r * pc.inner]);
    part[lid] = acc;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
      if (lid < s) part[lid] = combine(part[lid], part[lid + s]);
      barrier();
    }
    if (lid == 0u) y[pc.off[0] + o] = finish(part[0]);
    barrier();
  }
}
