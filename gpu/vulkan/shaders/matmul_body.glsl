// Shared by matmul.comp (f32 operands) and matmul_lowp.comp (bf16 or f16 operands, f32
// result): the tiled product. The including shader declares the buffers c, a, b, bias, the
// push constants pc, and LOAD_A(i) / LOAD_B(i): element i of an operand as a float.
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
      if (gm < M && gk < K) va = LOAD_A(abase + (pc.ta != 0u ? gk * M + gm : gm * K + gk));
      As[kk][mm] = va;
      uint nn;
      if (pc.tb != 0u) { kk = e % BK; nn = e / BK; } else { nn = e % BN; kk = e / BN; }
      const uint gn = n0 + nn;
      const uint gk2 = k0 + kk;
      float vb = 0.0;
      if (gn < N && gk2 < K) vb = LOAD_B(bbase + (pc.tb != 0u ? gn * K + gk2 : gk2 * N + gn));
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
