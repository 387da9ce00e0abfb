// CPU kernels (f32) of the fused attention ops, flash-attention style: keys in tiles of
// kKeyTile, an online softmax (a running max and sum per query), causal tiles skipped, and
// no [Tq, Tk] matrix in memory: a task holds one key tile (transposed) and the scores of its
// query tile against it, [kQueryTile][kKeyTile].
//
// attention: tasks are (batch entry, tile of kQueryTile queries), taken by whichever pool
// thread is free (causal tiles differ in cost). attention_backward (flash attention 2): one
// task per batch entry; for each key tile and each block of queries that sees it, the
// probabilities are recomputed from lse, and dq, dk and dv take their share, each in rows
// only this task writes.
//
// Every product of a tile goes through small_gemm (AVX-512 register tiles where the build
// has it; the engine's gemm packs and threads, which these 32 x 64 x d products do not
// repay). exp is scalar_math.h's Cephes polynomial, vectorised (std::exp is a scalar call per
// score).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/cpu/avx512.h"
#if !defined(__AVX512F__) && defined(__AVX2__)
#include <immintrin.h>
#endif
#include "engine/cpu/kernels.h"
#include "engine/cpu/scalar_math.h"

namespace mls::cpu {

namespace {

constexpr int64_t kKeyTile = 64;
constexpr int64_t kQueryTile = 32;

// x[j] = exp(x[j] - shift) for j < n: scalar_math.h's exp (Cephes' polynomial), which GCC
// vectorises (engine/cpu is built with -fno-trapping-math); -inf (hidden keys) gives 0.
void exp_shifted(float* x, int64_t n, float shift) {
  for (int64_t j = 0; j < n; ++j) x[j] = scalar::exp_nonpositive(x[j] - shift);
}

struct Dims {
  int64_t b, tq, tk, d, dv;
};

Dims dims_of(const KernelCall& c) {
  const Shape &q = c.inputs[0]->shape(), &v = c.inputs[2]->shape();
  return {q[0], q[1], c.inputs[1]->shape()[1], q[2], v[2]};
}

// Keys a query sees within the tile that starts at key j0 (jn keys long).
inline int64_t seen_in_tile(bool causal, int64_t i, int64_t j0, int64_t jn) {
  return causal ? std::clamp<int64_t>(i + 1 - j0, 0, jn) : jn;
}

// rows [0, rows) of x (row stride ld) into xt [cols][ldt], columns past `rows` zeroed up to
// the next multiple of 8, as far as the tile's products read (padding keys then score 0 and
// are masked after). Zeroing all ldt columns cost a short sequence more than its products.
void transpose_into(const float* x, int64_t ld, int64_t rows, int64_t cols, float* xt,
                    int64_t ldt) {
  for (int64_t c = 0; c < cols; ++c) {
    float* row = xt + c * ldt;
    for (int64_t j = 0; j < rows; ++j) row[j] = x[j * ld + c];
    std::fill(row + rows, row + std::min(ldt, (rows + 7) / 8 * 8), 0.0f);
  }
}

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
// The first n of 8 lanes (all when n >= 8, none when n <= 0), as AVX2's masked loads take it.
inline __m256i lanes8(int64_t n) {
  const auto k = static_cast<int32_t>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif

// C[m][n] = C * row_scale[r] (when given) + A[m][k] B[k][n], row-major with row strides
// lda, ldb, ldc: the products of a tile (scores, p v, dq, dk, dv). AVX-512: 4 rows of C by
// 16 columns in registers, B's row chunk loaded once for the 4 rows' broadcasts; AVX2 + FMA
// (this machine: no AVX-512) the same 4 x 16 in 8 ymm registers. The plain loop, which
// GCC vectorises but which keeps C in memory, ran the forward at 1-4 GFLOP/s here.
void small_gemm(const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                int64_t m, int64_t k, int64_t n, const float* row_scale) {
#ifdef __AVX512F__
  for (int64_t r0 = 0; r0 < m; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, m - r0);
    // Rows past m repeat the last one (computed, never stored).
    const float* a0 = a + r0 * lda;
    const float* a1 = a + std::min(r0 + 1, m - 1) * lda;
    const float* a2 = a + std::min(r0 + 2, m - 1) * lda;
    const float* a3 = a + std::min(r0 + 3, m - 1) * lda;
    for (int64_t x0 = 0; x0 < n; x0 += 16) {
      const __mmask16 mask = first_lanes(n - x0);
      __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
      for (int64_t t = 0; t < k; ++t) {
        const __m512 bt = _mm512_maskz_loadu_ps(mask, b + t * ldb + x0);
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(a0[t]), bt, c0);
        c1 = _mm512_fmadd_ps(_mm512_set1_ps(a1[t]), bt, c1);
        c2 = _mm512_fmadd_ps(_mm512_set1_ps(a2[t]), bt, c2);
        c3 = _mm512_fmadd_ps(_mm512_set1_ps(a3[t]), bt, c3);
      }
      const __m512 acc[4] = {c0, c1, c2, c3};
      for (int64_t r = 0; r < nr; ++r) {
        float* cr = c + (r0 + r) * ldc + x0;
        const __m512 old = _mm512_maskz_loadu_ps(mask, cr);
        const __m512 base = row_scale ? _mm512_mul_ps(old, _mm512_set1_ps(row_scale[r0 + r])) : old;
        _mm512_mask_storeu_ps(cr, mask, _mm512_add_ps(base, acc[r]));
      }
    }
  }
#elif defined(__AVX2__) && defined(__FMA__)
  for (int64_t r0 = 0; r0 < m; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, m - r0);
    const float* a0 = a + r0 * lda;
    const float* a1 = a + std::min(r0 + 1, m - 1) * lda;
    const float* a2 = a + std::min(r0 + 2, m - 1) * lda;
    const float* a3 = a + std::min(r0 + 3, m - 1) * lda;
    for (int64_t x0 = 0; x0 < n; x0 += 16) {
      const bool full = n - x0 >= 16;
      const __m256i m0 = lanes8(n - x0), m1 = lanes8(n - x0 - 8);
      __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
             c30 = c00, c31 = c00;
      for (int64_t t = 0; t < k; ++t) {
        const float* bt = b + t * ldb + x0;
        const __m256 b0 = full ? _mm256_loadu_ps(bt) : _mm256_maskload_ps(bt, m0);
        const __m256 b1 = full ? _mm256_loadu_ps(bt + 8) : _mm256_maskload_ps(bt + 8, m1);
        __m256 at = _mm256_broadcast_ss(a0 + t);
        c00 = _mm256_fmadd_ps(at, b0, c00);
        c01 = _mm256_fmadd_ps(at, b1, c01);
        at = _mm256_broadcast_ss(a1 + t);
        c10 = _mm256_fmadd_ps(at, b0, c10);
        c11 = _mm256_fmadd_ps(at, b1, c11);
        at = _mm256_broadcast_ss(a2 + t);
        c20 = _mm256_fmadd_ps(at, b0, c20);
        c21 = _mm256_fmadd_ps(at, b1, c21);
        at = _mm256_broadcast_ss(a3 + t);
        c30 = _mm256_fmadd_ps(at, b0, c30);
        c31 = _mm256_fmadd_ps(at, b1, c31);
      }
      const __m256 acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
      for (int64_t r = 0; r < nr; ++r) {
        float* cr = c + (r0 + r) * ldc + x0;
        const __m256 sc = _mm256_set1_ps(row_scale ? row_scale[r0 + r] : 1.0f);
        __m256 h0 = full ? _mm256_loadu_ps(cr) : _mm256_maskload_ps(cr, m0);
        __m256 h1 = full ? _mm256_loadu_ps(cr + 8) : _mm256_maskload_ps(cr + 8, m1);
        h0 = _mm256_fmadd_ps(h0, sc, acc[r][0]);
        h1 = _mm256_fmadd_ps(h1, sc, acc[r][1]);
        if (full) {
          _mm256_storeu_ps(cr, h0);
          _mm256_storeu_ps(cr + 8, h1);
        } else {
          _mm256_maskstore_ps(cr, m0, h0);
          _mm256_maskstore_ps(cr + 8, m1, h1);
        }
      }
    }
  }
#else
  for (int64_t r = 0; r < m; ++r) {
    float* cr = c + r * ldc;
    if (row_scale)
      for (int64_t x = 0; x < n; ++x) cr[x] *= row_scale[r];
    for (int64_t t = 0; t < k; ++t) {
      const float art = a[r * lda + t];
      const float* bt = b + t * ldb;
      for (int64_t x = 0; x < n; ++x) cr[x] += art * bt[x];
    }
  }
#endif
}

// The max and the sum of a tile's kKeyTile scores, in 16 lanes: a float reduction in one
// accumulator does not vectorise (it would reassociate) and is a chain of dependent adds.
inline float lane_max(const float* x) {
  float l[16];
  for (int k = 0; k < 16; ++k) l[k] = x[k];
  for (int64_t b = 16; b < kKeyTile; b += 16)
    for (int k = 0; k < 16; ++k) l[k] = x[b + k] > l[k] ? x[b + k] : l[k];
  float m = l[0];
  for (int k = 1; k < 16; ++k) m = std::max(m, l[k]);
  return m;
}
inline float lane_sum(const float* x) {
  float l[16];
  for (int k = 0; k < 16; ++k) l[k] = x[k];
  for (int64_t b = 16; b < kKeyTile; b += 16)
    for (int k = 0; k < 16; ++k) l[k] += x[b + k];
  float s = 0;
  for (int k = 0; k < 16; ++k) s += l[k];
  return s;
}

// Runs fn(task) for every task: on the pool when the work is worth waking threads for.
template <typename Fn>
void run_tasks(const KernelCall& c, int64_t tasks, double flops, Fn&& fn) {
  if (flops < 2e5 || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t);
    return;
  }
  pool_of(c).run_tasks(tasks, fn);
}

// Per task: a tile of query rows [i0, i1) of batch entry bi. For each key tile: the scores
// S = scale q k^T [rows][kKeyTile], then per row the running max, the rescale of what is
// summed so far and p = exp(s - max), then acc = acc * rescale + p v.
void attention_kernel(const KernelCall& c) {
  const Dims n = dims_of(c);
  const float* q = in_ptr<float>(c, 0);
  const float* k = in_ptr<float>(c, 1);
  const float* v = in_ptr<float>(c, 2);
  float* o = out_ptr<float>(c, 0);
  float* lse = out_ptr<float>(c, 1);
  const bool causal = c.attrs.get_int("causal") != 0;
  const auto alpha = static_cast<float>(c.attrs.get_float("scale"));
  const int64_t qtiles = (n.tq + kQueryTile - 1) / kQueryTile;
  const double flops = 2.0 * static_cast<double>(n.b * n.tq * n.tk * (n.d + n.dv));
  run_tasks(c, n.b * qtiles, flops, [&](int64_t task) {
    const int64_t bi = task / qtiles, i0 = (task % qtiles) * kQueryTile;
    const int64_t i1 = std::min(n.tq, i0 + kQueryTile), rows = i1 - i0;
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(n.d * kKeyTile + rows * n.dv + rows * kKeyTile + 3 * rows));
    float* kt = scratch.data();        // [d][kKeyTile]
    float* acc = kt + n.d * kKeyTile;  // [rows][dv]
    float* s = acc + rows * n.dv;      // [rows][kKeyTile]
    float* mx = s + rows * kKeyTile;
    float* sum = mx + rows;
    float* corr = sum + rows;
    std::fill(acc, acc + rows * n.dv, 0.0f);
    std::fill(mx, mx + rows, -INFINITY);
    std::fill(sum, sum + rows, 0.0f);
    const float* qb = q + (bi * n.tq + i0) * n.d;
    const float* kb = k + bi * n.tk * n.d;
    const float* vb = v + bi * n.tk * n.dv;
    const int64_t key_end = causal ? std::min(n.tk, i1) : n.tk;
    for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
      const int64_t jn = std::min(kKeyTile, n.tk - j0);
      transpose_into(kb + j0 * n.d, n.d, jn, n.d, kt, kKeyTile);
      const int64_t width = (jn + 7) / 8 * 8;  // a short sequence's one tile: not 64 columns
      std::fill(s, s + rows * kKeyTile, 0.0f);
      small_gemm(qb, n.d, kt, kKeyTile, s, kKeyTile, rows, n.d, width, nullptr);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t seen = seen_in_tile(causal, i0 + r, j0, jn);
        float* sr = s + r * kKeyTile;
        if (seen == 0) {  // the whole tile is hidden from this query: nothing changes
          std::fill(sr, sr + kKeyTile, 0.0f);
          corr[r] = 1.0f;
          continue;
        }
        for (int64_t j = 0; j < kKeyTile; ++j) sr[j] *= alpha;
        std::fill(sr + seen, sr + kKeyTile, -INFINITY);  // hidden and padding keys
        const float m = std::max(mx[r], lane_max(sr));
        corr[r] = std::exp(mx[r] - m);  // 0 on the first tile (mx = -inf)
        exp_shifted(sr, width, m);
        std::fill(sr + seen, sr + kKeyTile, 0.0f);
        sum[r] = sum[r] * corr[r] + lane_sum(sr);
        mx[r] = m;
      }
      const int64_t widest = seen_in_tile(causal, i1 - 1, j0, jn);  // the last row sees most
      small_gemm(s, kKeyTile, vb + j0 * n.dv, n.dv, acc, n.dv, rows, widest, n.dv, corr);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = bi * n.tq + i0 + r;
      const float inv = 1.0f / sum[r];
      const float* ar = acc + r * n.dv;
      float* orow = o + row * n.dv;
      for (int64_t x = 0; x < n.dv; ++x) orow[x] = ar[x] * inv;
      lse[row] = mx[r] + std::log(sum[r]);
    }
  });
}

// Per task: batch entry bi. For each key tile and each block of kQueryTile query rows that
// sees it: P = exp(scale q k^T - lse) and dS = scale P (dO v^T - delta), then dq += dS k,
// dk += dS^T q and dv += P^T dO (the tile's rows of dk and dv, the block's rows of dq).
void attention_backward_kernel(const KernelCall& c) {
  const Dims n = dims_of(c);
  const float* q = in_ptr<float>(c, 0);
  const float* k = in_ptr<float>(c, 1);
  const float* v = in_ptr<float>(c, 2);
  const float* dout = in_ptr<float>(c, 3);
  const float* lse = in_ptr<float>(c, 4);
  const float* delta = in_ptr<float>(c, 5);
  float* dq = out_ptr<float>(c, 0);
  float* dk = out_ptr<float>(c, 1);
  float* dv = out_ptr<float>(c, 2);
  const bool causal = c.attrs.get_int("causal") != 0;
  const auto alpha = static_cast<float>(c.attrs.get_float("scale"));
  const double flops = 2.0 * static_cast<double>(n.b * n.tq * n.tk * (3 * n.d + 2 * n.dv));
  constexpr int64_t kB = kQueryTile;
  run_tasks(c, n.b, flops, [&](int64_t bi) {
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>((n.d + n.dv) * kKeyTile + 4 * kB * kKeyTile));
    float* kt = scratch.data();       // [d][kKeyTile]
    float* vt = kt + n.d * kKeyTile;  // [dv][kKeyTile]
    float* p = vt + n.dv * kKeyTile;  // [kB][kKeyTile]
    float* ds = p + kB * kKeyTile;    // [kB][kKeyTile]
    float* pt = ds + kB * kKeyTile;   // [kKeyTile][kB]
    float* dst = pt + kB * kKeyTile;  // [kKeyTile][kB]
    const float* qb = q + bi * n.tq * n.d;
    const float* kb = k + bi * n.tk * n.d;
    const float* vb = v + bi * n.tk * n.dv;
    const float* db = dout + bi * n.tq * n.dv;
    float* dqb = dq + bi * n.tq * n.d;
    float* dkb = dk + bi * n.tk * n.d;
    float* dvb = dv + bi * n.tk * n.dv;
    std::fill(dqb, dqb + n.tq * n.d, 0.0f);
    std::fill(dkb, dkb + n.tk * n.d, 0.0f);
    std::fill(dvb, dvb + n.tk * n.dv, 0.0f);
    for (int64_t j0 = 0; j0 < n.tk; j0 += kKeyTile) {
      const int64_t jn = std::min(kKeyTile, n.tk - j0);
      if (causal && j0 >= n.tq) break;  // no query sees these keys
      transpose_into(kb + j0 * n.d, n.d, jn, n.d, kt, kKeyTile);
      transpose_into(vb + j0 * n.dv, n.dv, jn, n.dv, vt, kKeyTile);
      for (int64_t i0 = causal ? j0 : 0; i0 < n.tq; i0 += kB) {
        const int64_t rows = std::min(kB, n.tq - i0);
        std::fill(p, p + 2 * kB * kKeyTile, 0.0f);  // p and ds
        const int64_t width = (jn + 7) / 8 * 8;
        small_gemm(qb + i0 * n.d, n.d, kt, kKeyTile, p, kKeyTile, rows, n.d, width, nullptr);
        small_gemm(db + i0 * n.dv, n.dv, vt, kKeyTile, ds, kKeyTile, rows, n.dv, width,
                   nullptr);  // dO v^T
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r, seen = seen_in_tile(causal, i, j0, jn);
          const float li = lse[bi * n.tq + i], dli = delta[bi * n.tq + i];
          float* pr = p + r * kKeyTile;
          float* dsr = ds + r * kKeyTile;
          for (int64_t j = 0; j < width; ++j) pr[j] *= alpha;
          exp_shifted(pr, width, li);
          for (int64_t j = 0; j < width; ++j)
            dsr[j] = alpha * pr[j] * (dsr[j] - dli);  // scale folded in: dq and dk both take it
          std::fill(pr + seen, pr + kKeyTile, 0.0f);
          std::fill(dsr + seen, dsr + kKeyTile, 0.0f);
        }
        const int64_t widest = seen_in_tile(causal, i0 + rows - 1, j0, jn);
        small_gemm(ds, kKeyTile, kb + j0 * n.d, n.d, dqb + i0 * n.d, n.d, rows, widest, n.d,
                   nullptr);
        transpose_into(p, kKeyTile, rows, jn, pt, kB);
        transpose_into(ds, kKeyTile, rows, jn, dst, kB);
        small_gemm(dst, kB, qb + i0 * n.d, n.d, dkb + j0 * n.d, n.d, jn, rows, n.d, nullptr);
        small_gemm(pt, kB, db + i0 * n.dv, n.dv, dvb + j0 * n.dv, n.dv, jn, rows, n.dv, nullptr);
      }
    }
  });
}

}  // namespace

void register_attention_kernels(OpRegistry& reg) {
  reg.register_kernel("attention", DeviceKind::CPU, DType::F32, attention_kernel);
  reg.register_kernel("attention_backward", DeviceKind::CPU, DType::F32, attention_backward_kernel);
}

}  // namespace mls::cpu
