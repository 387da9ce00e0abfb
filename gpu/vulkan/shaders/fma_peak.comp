#version 450
// The device's fp32 FMA peak (bench/matmul_backends): each invocation runs 8 independent
// chains of `iters` FMAs and stores their sum, so nothing is optimised away.
layout(local_size_x = 256) in;
layout(std430, binding = 0) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint off[1]; uint iters; } pc;

void main() {
  float a0 = float(gl_GlobalInvocationID.x) * 1e-6, a1 = a0 + 1e-3, a2 = a0 + 2e-3, a3 = a0 + 3e-3;
  float a4 = a0 + 4e-3, a5 = a0 + 5e-3, a6 = a0 + 6e-3, a7 = a0 + 7e-3;
  const float m = 0.999999, c = 1e-7;
  for (uint i = 0; i < pc.iters; ++i) {
    a0 = fma(a0, m, c); a1 = fma(a1, m, c); a2 = fma(a2, m, c); a3 = fma(a3, m, c);
    a4 = fma(a4, m, c); a5 = fma(a5, m, c); a6 = fma(a6, m, c); a7 = fma(a7, m, c);
  }
  y[pc.off[0] + gl_GlobalInvocationID.x] = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}
