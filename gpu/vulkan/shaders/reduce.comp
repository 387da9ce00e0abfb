#version 450
// sum, mean, max and min over a set of axes. The table gives the kept dims with the input's
// strides for them, then the reduced dims with theirs. Large reductions: one workgroup per
// output element, a tree in shared memory; small ones (per_thread): one invocation each.
//   table: kept_rank, kept dims[], kept strides[], red_rank, red dims[], red strides[]
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer T { uint t[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(push_constant) uniform P { uint off[3]; uint nout, nred, op, per_thread; float scale; } pc;

shared float part[256];

uint base_of(uint o) {
  const uint tb = pc.off[1];
  const uint kr = t[tb];
  uint e = pc.off[2], rest = o;
  for (uint d = kr; d-- > 0u;) {
    const uint dim = t[tb + 1 + d];
    e += (rest % dim) * t[tb + 1 + kr + d];
    rest /= dim;
  }
  return e;
}

uint red_offset(uint r) {
  const uint tb = pc.off[1];
  const uint kr = t[tb];
  const uint rb = tb + 1 + 2 * kr;
  const uint rr = t[rb];
  uint e = 0, rest = r;
  for (uint d = rr; d-- > 0u;) {
    const uint dim = t[rb + 1 + d];
    e += (rest % dim) * t[rb + 1 + rr + d];
    rest /= dim;
  }
  return e;
}

float combine(float a, float b) {
  if (pc.op == 2u) return (a > b || isnan(a)) ? a : b;
  if (pc.op == 3u) return (a < b || isnan(a)) ? a : b;
  return a + b;
}

float identity() { return pc.op == 2u ? -1.0 / 0.0 : pc.op == 3u ? 1.0 / 0.0 : 0.0; }

float finish(float v) { return pc.op == 1u ? v * pc.scale : v; }

void main() {
  if (pc.per_thread != 0u) {
    GRID_LOOP(o, pc.nout) {
      const uint b = base_of(o);
      float acc = identity();
      for (uint r = 0; r < pc.nred; ++r) acc = combine(acc, x[b + red_offset(r)]);
      y[pc.off[0] + o] = finish(acc);
    }
    return;
  }
  const uint lid = gl_LocalInvocationID.x;
  for (uint o = gl_WorkGroupID.x; o < pc.nout; o += gl_NumWorkGroups.x) {
    const uint b = base_of(o);
    float acc = identity();
    for (uint r = lid; r < pc.nred; r += 256u) acc = combine(acc, x[b + red_offset(r)]);
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
