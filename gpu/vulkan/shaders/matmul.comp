#version 450
// C = op(A) op(B) (+ bias[N]) then an activation: matmul and linear_act, batched with
// broadcast batch dims (up to 4). 64x64 tiles of C per workgroup of 16x16 invocations, each
// computing 4x4; the K loop stages 16-wide slices of A and B in shared memory.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, binding = 0) writeonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform P {
  uint off[4];
  uint M, N, K, ta, tb, act, has_bias, batch_rank;
  uint bdims[4], a_bstride[4], b_bstride[4];
} pc;

const uint BM = 64, BN = 64, BK = 16;
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * 16 + tx;
  const uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  // This batch entry's matrices (broadcast dims have stride 0).
  uint rest = gl_WorkGroupID.z, abase = pc.off[1], bbase = pc.off[2];
  for (uint d = pc.batch_rank; d-- > 0u;) {
    const uint i = rest % pc.bdims[d];
    rest /= pc.bdims[d];
    abase += i * pc.a_bstride[d];
    bbase += i * pc.b_bstride[d];
  }
  const uint M = pc.M, N = pc.N, K = pc.K;
  float acc[4][4];
  [[unroll]] for (uint i = 0; i < 4; ++i)
    [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] = 0.0;
  for (uint k0 = 0; k0 < K; k0 += BK) {
    // 1024 elements of each tile, 4 per invocation.
    [[unroll]] for (uint l = 0; l < 4; ++l) {
      const uint e = tid + l * 256;
      // A tile: row m (0..63), column k (0..15).
      uint mm, kk;
      if (pc.ta != 0u) { mm = e % BM; kk = e / BM; } else { kk = e % BK; mm = e / BK; }
      const uint gm = m0 + mm, gk = k0 + kk;
      float va = 0.0;
      if (gm < M && gk < K) va = a[abase + (pc.ta != 0u ? gk * M + gm : gm * K + gk)];
      As[kk][mm] = va;
      uint nn;
      if (pc.tb != 0u) { kk = e % BK; nn = e / BK; } else { nn = e % BN; kk = e / BN; }
      const uint gn = n0 + nn;
      const uint gk2 = k0 + kk;
      float vb = 0.0;
      if (gn < N && gk2 < K) vb = b[bbase + (pc.tb != 0u ? gn * K + gk2 : gk2 * N + gn)];
      Bs[kk][nn] = vb;
    }
    barrier();
    [[unroll]] for (uint k = 0; k < BK; ++k) {
      float ra[4], rb[4];
      [[unroll]] for (uint i = 0; i < 4; ++i) ra[i] = As[k][ty + 16 * i];
      [[unroll]] for (uint j = 0; j < 4; ++j) rb[j] = Bs[k][tx + 16 * j];
      [[unroll]] for (uint i = 0; i < 4; ++i)
        [[unroll]] for (uint j = 0; j < 4; ++j) acc[i][j] += ra[i] * rb[j];
    }
    barrier();
  }
  const uint cbase = pc.off[0] + gl_WorkGroupID.z * M * N;
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    const uint gm = m0 + ty + 16 * i;
    if (gm >= M) continue;
    [[unroll]] for (uint j = 0; j < 4; ++j) {
      const uint gn = n0 + tx + 16 * j;
      if (gn >= N) continue;
      float v = acc[i][j];
      if (pc.has_bias != 0u) v += bias[pc.off[3] + gn];
      c[cbase + gm * N + gn] = epilogue(v, pc.act);
    }
  }
}
