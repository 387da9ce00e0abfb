#version 450
// conv2d_backward_input: dx[n, c, h, w] = sum over the outputs whose window reads (h, w) of
// g[n, o, oh, ow] * w[o, c, kh, kw]; one invocation per element of dx (no atomics).
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer DX { float dx[]; };
layout(std430, binding = 1) readonly buffer G { float g[]; };
layout(std430, binding = 2) readonly buffer Wt { float w[]; };
#define CONV_BINDINGS 3
#include "conv_common.glsl"

void main() {
  const uint cg = pc.C / pc.groups, og = pc.O / pc.groups;
  GRID_LOOP(i, pc.N * pc.C * pc.H * pc.W) {
    const uint xw = i % pc.W, xh = (i / pc.W) % pc.H, c = (i / (pc.W * pc.H)) % pc.C;
    const uint n = i / (pc.W * pc.H * pc.C);
    const uint grp = c / cg, cc = c % cg;
    float acc = 0.0;
    for (uint kh = 0; kh < pc.KH; ++kh) {
      const int th = int(xh + pc.ph) - int(kh * pc.dh);
      if (th < 0 || th % int(pc.sh) != 0) continue;
      const uint oh = uint(th) / pc.sh;
      if (oh >= pc.OH) continue;
      for (uint kw = 0; kw < pc.KW; ++kw) {
        const int tw = int(xw + pc.pw) - int(kw * pc.dw);
        if (tw < 0 || tw % int(pc.sw) != 0) continue;
        const uint ow = uint(tw) / pc.sw;
        if (ow >= pc.OW) continue;
        for (uint oo = 0; oo < og; ++oo) {
          const uint o = grp * og + oo;
          acc += g[pc.off[1] + ((n * pc.O + o) * pc.OH + oh) * pc.OW + ow] *
                 w[pc.off[2] + ((o * cg + cc) * pc.KH + kh) * pc.KW + kw];
        }
      }
    }
    dx[pc.off[0] + i] = acc;
  }
}
