#version 450
// conv2d_backward_weight: dw[o, c, kh, kw] = sum over n, oh, ow of g[n, o, oh, ow] *
// x[n, c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]; one workgroup per weight element, its
// invocations splitting the sum and adding up in shared memory.
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer DW { float dw[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer G { float g[]; };
#define CONV_BINDINGS 3
#include "conv_common.glsl"

shared float part[256];

// The sum for weight element e over n, oh, ow from `first` in steps of `step`.
float partial(uint e, uint first, uint step) {
  const uint cg = pc.C / pc.groups, og = pc.O / pc.groups;
  const uint per = pc.N * pc.OH * pc.OW;
  const uint kw = e % pc.KW, kh = (e / pc.KW) % pc.KH, cc = (e / (pc.KW * pc.KH)) % cg;
  const uint o = e / (pc.KW * pc.KH * cg);
  const uint c = (o / og) * cg + cc;
  float acc = 0.0;
  for (uint j = first; j < per; j += step) {
    const uint ow = j % pc.OW, oh = (j / pc.OW) % pc.OH, n = j / (pc.OW * pc.OH);
    const int h = int(oh * pc.sh + kh * pc.dh) - int(pc.ph);
    const int ww = int(ow * pc.sw + kw * pc.dw) - int(pc.pw);
    if (h < 0 || h >= int(pc.H) || ww < 0 || ww >= int(pc.W)) continue;
    acc += g[pc.off[2] + ((n * pc.O + o) * pc.OH + oh) * pc.OW + ow] *
           x[pc.off[1] + ((n * pc.C + c) * pc.H + uint(h)) * pc.W + uint(ww)];
  }
  return acc;
}

void main() {
  const uint cg = pc.C / pc.groups;
  const uint total = pc.O * cg * pc.KH * pc.KW;
  const uint lid = gl_LocalInvocationID.x;
  for (uint e = gl_WorkGroupID.x; e < total; e += gl_NumWorkGroups.x) {
    part[lid] = partial(e, lid, 256u);
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
      if (lid < s) part[lid] += part[lid + s];
      barrier();
    }
    if (lid == 0u) dw[pc.off[0] + e] = part[0];
    barrier();
  }
}
