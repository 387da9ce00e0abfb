#version 450
// Pooling over x [N, C, H, W] in windows KH x KW moved by (sh, sw), padded by (ph, pw); the
// padding never wins a max and counts in an average only with count_include_pad.
//   mode 0 max_pool2d: y = max of the window (the first on ties)
//   mode 1 max_pool2d_gather (t, x): y = t at each window's argmax of x
//   mode 2 max_pool2d_backward (g, x): dx = sum of g over the windows whose argmax is here
//   mode 3 avg_pool2d
//   mode 4 avg_pool2d_backward (g): dx = sum of g / divisor over the windows that read here
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer X { float x[]; };
layout(push_constant) uniform P {
  uint off[3];
  uint NC, H, W, OH, OW, KH, KW, sh, sw, ph, pw, mode, include_pad;
} pc;

// The flat index (within the plane) of a window's argmax, or -1 for an empty window; the
// taps in row-major order, the first maximum kept.
int argmax_of(uint plane, uint oh, uint ow) {
  int best = -1;
  float bv = 0.0;
  for (uint kh = 0; kh < pc.KH; ++kh) {
    const int h = int(oh * pc.sh + kh) - int(pc.ph);
    if (h < 0 || h >= int(pc.H)) continue;
    for (uint kw = 0; kw < pc.KW; ++kw) {
      const int w = int(ow * pc.sw + kw) - int(pc.pw);
      if (w < 0 || w >= int(pc.W)) continue;
      const int at = h * int(pc.W) + w;
      const float v = x[pc.off[2] + plane + uint(at)];
      if (best < 0 || v > bv) { best = at; bv = v; }
    }
  }
  return best;
}

float divisor(uint oh, uint ow) {
  if (pc.include_pad != 0u) return float(pc.KH * pc.KW);
  uint n = 0;
  for (uint kh = 0; kh < pc.KH; ++kh) {
    const int h = int(oh * pc.sh + kh) - int(pc.ph);
    if (h < 0 || h >= int(pc.H)) continue;
    for (uint kw = 0; kw < pc.KW; ++kw) {
      const int w = int(ow * pc.sw + kw) - int(pc.pw);
      if (w >= 0 && w < int(pc.W)) ++n;
    }
  }
  return float(n);
}

void main() {
  const uint HW = pc.H * pc.W, OHW = pc.OH * pc.OW;
  if (pc.mode <= 1u || pc.mode == 3u) {  // one invocation per output
    GRID_LOOP(i, pc.NC * OHW) {
      const uint p = i / OHW, oh = (i % OHW) / pc.OW, ow = i % pc.OW;
      float v = 0.0;
      if (pc.mode == 3u) {
        for (uint kh = 0; kh < pc.KH; ++kh) {
          const int h = int(oh * pc.sh + kh) - int(pc.ph);
          if (h < 0 || h >= int(pc.H)) continue;
          for (uint kw = 0; kw < pc.KW; ++kw) {
            const int w = int(ow * pc.sw + kw) - int(pc.pw);
            if (w >= 0 && w < int(pc.W)) v += a[pc.off[1] + p * HW + uint(h) * pc.W + uint(w)];
          }
        }
        v /= divisor(oh, ow);
      } else {
        // max_pool2d binds x twice; the gather reads t (x's shape) at x's argmax.
        const int at = argmax_of(p * HW, oh, ow);
        if (at >= 0) v = pc.mode == 0u ? x[pc.off[2] + p * HW + uint(at)] : a[pc.off[1] + p * HW + uint(at)];
      }
      y[pc.off[0] + i] = v;
    }
    return;
  }
  // One invocation per input element: the windows that contain (h, w).
  GRID_LOOP(i, pc.NC * HW) {
    const uint p = i / HW, h = (i % HW) / pc.W, w = i % pc.W;
    const int hp = int(h + pc.ph), wp = int(w + pc.pw);
    const int oh_lo = max(0, (hp - int(pc.KH) + int(pc.sh)) / int(pc.sh));
    const int ow_lo = max(0, (wp - int(pc.KW) + int(pc.sw)) / int(pc.sw));
    const int oh_hi = min(int(pc.OH) - 1, hp / int(pc.sh));
    const int ow_hi = min(int(pc.OW) - 1, wp / int(pc.sw));
    float acc = 0.0;
    for (int oh = oh_lo; oh <= oh_hi; ++oh) {
      if (hp - oh * int(pc.sh) >= int(pc.KH)) continue;
      for (int ow = ow_lo; ow <= ow_hi; ++ow) {
        if (wp - ow * int(pc.sw) >= int(pc.KW)) continue;
        const float gv = a[pc.off[1] + p * OHW + uint(oh) * pc.OW + uint(ow)];
        if (pc.mode == 2u) {
          if (argmax_of(p * HW, uint(oh), uint(ow)) == int(h * pc.W + w)) acc += gv;
        } else {
          acc += gv / divisor(uint(oh), uint(ow));
        }
      }
    }
    y[pc.off[0] + i] = acc;
  }
}
