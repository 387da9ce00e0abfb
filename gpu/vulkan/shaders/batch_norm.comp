#version 450
// batch_norm_train over x [N, C, S...]: one workgroup per channel computes the batch mean,
// the biased variance (two passes over the channel, in shared-memory trees), and writes
// y = (x - mean) * gamma / sqrt(var + eps) + beta.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) writeonly buffer M { float mean_out[]; };
layout(std430, binding = 2) writeonly buffer V { float var_out[]; };
layout(std430, binding = 3) readonly buffer X { float x[]; };
layout(std430, binding = 4) readonly buffer Ga { float gamma[]; };
layout(std430, binding = 5) readonly buffer Be { float beta[]; };
layout(push_constant) uniform P { uint off[6]; uint N, C, S; float eps; } pc;

shared float part[256];

float tree(uint lid, float v) {
  part[lid] = v;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (lid < s) part[lid] += part[lid + s];
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  const uint m = pc.N * pc.S;
  for (uint k = gl_WorkGroupID.x; k < pc.C; k += gl_NumWorkGroups.x) {
    float s = 0.0;
    for (uint j = lid; j < m; j += 256u) s += x[pc.off[3] + ((j / pc.S) * pc.C + k) * pc.S + j % pc.S];
    const float mu = tree(lid, s) / float(m);
    float q = 0.0;
    for (uint j = lid; j < m; j += 256u) {
      const float d = x[pc.off[3] + ((j / pc.S) * pc.C + k) * pc.S + j % pc.S] - mu;
      q += d * d;
    }
    const float v = tree(lid, q) / float(m);
    if (lid == 0u) {
      mean_out[pc.off[1] + k] = mu;
      var_out[pc.off[2] + k] = v;
    }
    const float a = gamma[pc.off[4] + k] / sqrt(v + pc.eps), b = beta[pc.off[5] + k];
    for (uint j = lid; j < m; j += 256u) {
      const uint at = ((j / pc.S) * pc.C + k) * pc.S + j % pc.S;
      y[pc.off[0] + at] = (x[pc.off[3] + at] - mu) * a + b;
    }
  }
}
