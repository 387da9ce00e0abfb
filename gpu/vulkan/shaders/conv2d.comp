#version 450
// conv2d and conv2d_act: one invocation per output element, the bias and activation applied
// before it is stored.
#include "common.glsl"
#include "epilogue.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer Wt { float w[]; };
layout(std430, binding = 3) readonly buffer B { float bias[]; };
#define CONV_BINDINGS 4
#include "conv_common.glsl"

void main() {
  const uint cg = pc.C / pc.groups, og = pc.O / pc.groups;
  GRID_LOOP(i, pc.N * pc.O * pc.OH * pc.OW) {
    const uint ow = i % pc.OW, oh = (i / pc.OW) % pc.OH, o = (i / (pc.OW * pc.OH)) % pc.O;
    const uint n = i / (pc.OW * pc.OH * pc.O);
    const uint c0 = (o / og) * cg;
    float acc = 0.0;
    for (uint c = 0; c < cg; ++c) {
      const uint xb = pc.off[1] + ((n * pc.C + c0 + c) * pc.H) * pc.W;
      const uint wb = pc.off[2] + ((o * cg + c) * pc.KH) * pc.KW;
      for (uint kh = 0; kh < pc.KH; ++kh) {
        const int h = int(oh * pc.sh + kh * pc.dh) - int(pc.ph);
        if (h < 0 || h >= int(pc.H)) continue;
        for (uint kw = 0; kw < pc.KW; ++kw) {
          const int ww = int(ow * pc.sw + kw * pc.dw) - int(pc.pw);
          if (ww < 0 || ww >= int(pc.W)) continue;
          acc += x[xb + uint(h) * pc.W + uint(ww)] * w[wb + kh * pc.KW + kw];
        }
      }
    }
    if (pc.has_bias != 0u) acc += bias[pc.off[3] + o];
    y[pc.off[0] + i] = epilogue(acc, pc.act);
  }
}
