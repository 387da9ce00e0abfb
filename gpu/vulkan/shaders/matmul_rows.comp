#version 450
// matmul and linear_act without shared memory, for software devices (lavapipe): there every
// buffer access costs a trip through the lanes, so the kernel does the most arithmetic per
// load it can keep in registers: each invocation computes an 8 x 4 block of C (8 loads of A
// and 4 of B per step of k for 32 multiply-adds). Every accumulator index is a constant
// (unrolled), so they stay in registers; rows and columns past the edge read the last row
// or column and are not stored. The same push constants as matmul.comp.
#include "common.glsl"
#include "epilogue.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform P {
  uint off[4];
  uint M, N, K, ta, tb, act, has_bias, batch_rank;
  uint bdims[4], a_bstride[4], b_bstride[4];
} pc;

const uint R = 8, S = 4;

void main() {
  const uint n0 = gl_GlobalInvocationID.x * S;
  const uint m0 = gl_WorkGroupID.y * R;
  if (n0 >= pc.N) return;
  uint rest = gl_WorkGroupID.z, abase = pc.off[1], bbase = pc.off[2];
  for (uint d = pc.batch_rank; d-- > 0u;) {
    const uint i = rest % pc.bdims[d];
    rest /= pc.bdims[d];
    abase += i * pc.a_bstride[d];
    bbase += i * pc.b_bstride[d];
  }
  const uint M = pc.M, N = pc.N, K = pc.K;
  // Strides of A's rows and k (transposed or not), and of B's k and columns.
  const uint a_row = pc.ta != 0u ? 1u : K, a_k = pc.ta != 0u ? M : 1u;
  const uint b_k = pc.tb != 0u ? 1u : N, b_n = pc.tb != 0u ? K : 1u;
  uint ar[R], bc[S];
  [[unroll]] for (uint r = 0; r < R; ++r) ar[r] = abase + min(m0 + r, M - 1u) * a_row;
  [[unroll]] for (uint s = 0; s < S; ++s) bc[s] = bbase + min(n0 + s, N - 1u) * b_n;
  float acc[R][S];
  [[unroll]] for (uint r = 0; r < R; ++r)
    [[unroll]] for (uint s = 0; s < S; ++s) acc[r][s] = 0.0;
  uint ak = 0, bk = 0;
  for (uint k = 0; k < K; ++k, ak += a_k, bk += b_k) {
    float av[R], bv[S];
    [[unroll]] for (uint r = 0; r < R; ++r) av[r] = a[ar[r] + ak];
    [[unroll]] for (uint s = 0; s < S; ++s) bv[s] = b[bc[s] + bk];
    [[unroll]] for (uint r = 0; r < R; ++r)
      [[unroll]] for (uint s = 0; s < S; ++s) acc[r][s] += av[r] * bv[s];
  }
  const uint cbase = pc.off[0] + gl_WorkGroupID.z * M * N;
  [[unroll]] for (uint s = 0; s < S; ++s) {
    if (n0 + s >= N) continue;
    const float bb = pc.has_bias != 0u ? bias[pc.off[3] + n0 + s] : 0.0;
    [[unroll]] for (uint r = 0; r < R; ++r)
      if (m0 + r < M) c[cbase + (m0 + r) * N + n0 + s] = epilogue(acc[r][s] + bb, pc.act);
  }
}
