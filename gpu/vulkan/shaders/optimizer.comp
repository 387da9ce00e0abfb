#version 450
// The optimizers' in-place updates of (param, grad, state1, state2), the same float
// expressions as their CPU kernels (engine/cpu/optimizer_kernels.cpp):
//   mode 0 sgd: a = momentum, b = weight decay, flag = nesterov
//   mode 1 adam: a = beta1, b = beta2, c = eps, d = weight decay, e = lr / bc1 (the step),
//          f = 1 / sqrt(bc2), lr: 1 - lr wd (the decay), flag = decoupled
//   mode 2 rmsprop: a = alpha, b = eps, c = weight decay
//   mode 3 adagrad: lr = the decayed rate, a = eps, b = weight decay
//   mode 4 ema (state, value): a = momentum
#include "common.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer Param { float p[]; };
layout(std430, binding = 1) readonly buffer Grad { float g[]; };
layout(std430, binding = 2) buffer S1 { float s1[]; };
layout(std430, binding = 3) buffer S2 { float s2[]; };
layout(push_constant) uniform P { uint off[4]; uint n, mode, flag; float lr, a, b, c, d, e, f; } pc;

void main() {
  GRID_LOOP(i, pc.n) {
    const uint ip = pc.off[0] + i, ig = pc.off[1] + i, i1 = pc.off[2] + i, i2 = pc.off[3] + i;
    float pv = p[ip];
    float gv = g[ig];
    if (pc.mode == 0u) {
      gv = gv + pc.b * pv;
      const float v = pc.a * s1[i1] + gv;
      s1[i1] = v;
      p[ip] = pv - pc.lr * (pc.flag != 0u ? gv + pc.a * v : v);
    } else if (pc.mode == 1u) {
      if (pc.flag != 0u) pv *= pc.lr; else gv += pc.d * pv;
      const float m = pc.a * s1[i1] + (1.0 - pc.a) * gv;
      const float v = pc.b * s2[i2] + (1.0 - pc.b) * gv * gv;
      s1[i1] = m;
      s2[i2] = v;
      p[ip] = pv - pc.e * m / (sqrt(v) * pc.f + pc.c);
    } else if (pc.mode == 2u) {
      gv += pc.c * pv;
      const float s = pc.a * s1[i1] + (1.0 - pc.a) * gv * gv;
      s1[i1] = s;
      p[ip] = pv - pc.lr * gv / (sqrt(s) + pc.b);
    } else if (pc.mode == 3u) {
      gv += pc.b * pv;
      const float s = s1[i1] + gv * gv;
      s1[i1] = s;
      p[ip] = pv - pc.lr * gv / (sqrt(s) + pc.a);
    } else {
      p[ip] = pv + pc.a * (gv - pv);
    }
  }
}
