// Low-precision CPU kernels: bulk f32 <-> bf16/f16 conversions, the bf16 GEMM, and
// matmul_lowp (bf16 or f16 operands, f32 result).
//
// The bf16 GEMM (AVX-512 BF16): VDPBF16PS multiplies pairs of bf16 values along k and adds
// both exact products into an f32 lane, so both operands are packed as k-pairs (one u32
// holds A(i, 2p) and A(i, 2p+1)):
// - A 6 x 64 tile of C lives in 24 zmm accumulators. Each pair step loads 4 vectors of a
//   packed B panel (64 columns x one pair) and broadcasts 6 pairs of A: 24 dot products
//   for 10 loads, as the f32 kernel in gemm_simd.cpp does with FMAs.
// - Per K pass of at most 256 (128 pairs), A's rows are packed once, then each 64-column B
//   panel (128 x 64 pairs, 32 KB: in L1) is packed and swept by every 6-row block of A.
// - Threads split the panels (each packs its own B); with fewer panels than threads they
//   split the rows.
// - f16 has no GEMM instruction here: matmul_lowp widens f16 operands to f32 and runs the
//   f32 GEMM (cpu::gemm); f16 saves memory and bandwidth, not arithmetic.
//
// [SECTION] Conversions
// [SECTION] Scratch and masks
// [SECTION] Packing
// [SECTION] Micro-kernel
// [SECTION] Blocked GEMM
// [SECTION] matmul_lowp
// [SECTION] Registration

// GCC 12's AVX-512 headers make their "undefined" vectors by self-initialisation
// (`__m512 __Y = __Y;`), which -Wmaybe-uninitialized reports wherever they are inlined
// (GCC bug 105593, fixed in GCC 13). Set before any include, so it covers the headers.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/lowp.h"
#include "engine/cpu/scratch.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
#define MLS_BF16_DOT 1
#include <immintrin.h>
#elif defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace mls::cpu {

// [SECTION] Conversions

void f32_to_bf16_n(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#ifdef MLS_BF16_DOT
  const __m512i exp_bits = _mm512_set1_epi32(0x7F800000), man_bits = _mm512_set1_epi32(0x007FFFFF);
  // Subnormal lanes: exponent bits all 0, mantissa bits not.
  auto subnormal = [&](__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(u, exp_bits), u, man_bits);
  };
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    const __m512bh r = _mm512_cvtne2ps_pbh(hi, lo);
    std::memcpy(y + i, &r, sizeof r);
    if (subnormal(lo) | subnormal(hi))  // the instruction flushed them to zero
      for (int64_t j = i; j < i + 32; ++j) y[j] = f32_to_bf16(x[j]);
  }
#endif
  for (; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

void bf16_to_f32_n(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {  // bf16_to_f32, written to vectorise: NaNs come out quiet
    const uint32_t u = static_cast<uint32_t>(x[i]) << 16;
    y[i] = std::bit_cast<float>(u | ((u & 0x7FFFFFFFu) > 0x7F800000u ? 0x400000u : 0u));
  }
}

void f32_to_f16_n(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) y[i] = f32_to_f16(x[i]);
}

void f16_to_f32_n(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
#endif
  for (; i < n; ++i) y[i] = f16_to_f32(x[i]);
}

#ifndef MLS_BF16_DOT

namespace {

// The portable bf16 GEMM: both operands widened to f32 (exactly), then SGEMM. Its workspace:
// the f32 copies of A and B, then the SGEMM's.
struct Widened {
  int64_t a, b;  // floats of each copy, rounded to 64 bytes
  GemmArgs sgemm;
};
Widened widened_of(const GemmBf16Args& g) {
  const int64_t rows_a = g.trans_a ? g.k : g.m, rows_b = g.trans_b ? g.n : g.k;
  return {round_to_line(rows_a * g.lda), round_to_line(rows_b * g.ldb),
          GemmArgs{.trans_a = g.trans_a, .trans_b = g.trans_b, .m = g.m, .n = g.n, .k = g.k, .lda = g.lda,
                   .ldb = g.ldb, .c = g.c, .ldc = g.ldc}};
}

void gemm_bf16_widened(ThreadPool& pool, const GemmBf16Args& g) {
  Widened w = widened_of(g);
  const int64_t need = w.a + w.b + gemm_workspace_floats(w.sgemm, pool.size());
  std::vector<float> own;
  float* ws = g.workspace;
  if (!ws || g.workspace_floats < need || reinterpret_cast<uintptr_t>(ws) % 64 != 0) {
    own.resize(static_cast<size_t>(need));
    ws = own.data();
  }
  const int64_t rows_a = g.trans_a ? g.k : g.m, rows_b = g.trans_b ? g.n : g.k;
  bf16_to_f32_n(g.a, ws, rows_a * g.lda);
  bf16_to_f32_n(g.b, ws + w.a, rows_b * g.ldb);
  w.sgemm.a = ws;
  w.sgemm.b = ws + w.a;
  w.sgemm.workspace = ws + w.a + w.b;
  w.sgemm.workspace_floats = need - w.a - w.b;
  gemm(pool, w.sgemm);
}

}  // namespace

bool gemm_bf16_native() { return false; }
void gemm_bf16(ThreadPool& pool, const GemmBf16Args& g) { gemm_bf16_widened(pool, g); }
int64_t gemm_bf16_workspace_floats(const GemmBf16Args& g, int threads) {
  const Widened w = widened_of(g);
  return w.a + w.b + gemm_workspace_floats(w.sgemm, threads);
}

#else

bool gemm_bf16_native() { return true; }

namespace {

constexpr int kMR = 6;             // rows of a C tile
constexpr int kNV = 4;             // zmm vectors per tile row
constexpr int64_t kNR = 16 * kNV;  // columns of a C tile and of a packed B panel
constexpr int64_t kKC = 256;       // k per pass (128 pairs): a packed panel is 32 KB
// Below this many multiply-adds a product stays on the calling thread.
constexpr int64_t kMinParallelMacs = int64_t{1} << 19;

// [SECTION] Scratch and masks

// (Scratch: engine/cpu/scratch.h; 16-lane masks: first_lanes in engine/cpu/avx512.h.)
__mmask32 lanes32(int64_t n) {
  return n >= 32 ? __mmask32(0xFFFFFFFFu) : n <= 0 ? __mmask32(0) : __mmask32((1u << n) - 1);
}

uint32_t pair(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16; }

// [SECTION] Packing

// Rows [i0, i0 + rows) of op(A), k in [k0, k0 + kc), as blocks of kMR rows: block b holds
// pair p of its row r at out[b kp kMR + p kMR + r]. A missing second element of the last
// pair (odd kc) is 0; rows past the end of the last block are never read.
void pack_a(const GemmBf16Args& g, int64_t i0, int64_t rows, int64_t k0, int64_t kc, uint32_t* out) {
  const int64_t kp = (kc + 1) / 2, full = kc / 2;
  for (int64_t b = 0; b * kMR < rows; ++b) {
    uint32_t* blk = out + b * kp * kMR;
    const int64_t mr = std::min<int64_t>(kMR, rows - b * kMR), ib = i0 + b * kMR;
    if (!g.trans_a) {  // A(i, k) = a[i lda + k]: a pair is one u32 of a row
      for (int64_t r = 0; r < mr; ++r) {
        const uint16_t* row = g.a + (ib + r) * g.lda + k0;
        for (int64_t p = 0; p < full; ++p) blk[p * kMR + r] = pair(row[2 * p], row[2 * p + 1]);
        if (kc & 1) blk[full * kMR + r] = row[kc - 1];
      }
    } else {  // A(i, k) = a[k lda + i]: a pair spans two rows of a
      for (int64_t p = 0; p < kp; ++p) {
        const uint16_t* r0 = g.a + (k0 + 2 * p) * g.lda + ib;
        const uint16_t* r1 = 2 * p + 1 < kc ? r0 + g.lda : nullptr;
        for (int64_t r = 0; r < mr; ++r) blk[p * kMR + r] = pair(r0[r], r1 ? r1[r] : uint16_t{0});
      }
    }
  }
}

// Row q of r becomes column q (16 x 16 u32).
inline void transpose16(__m512i (&r)[16]) {
  __m512 x[16], t[16];
  for (int i = 0; i < 16; ++i) x[i] = _mm512_castsi512_ps(r[i]);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    auto d = [&](int j) { return _mm512_castps_pd(t[4 * i + j]); };
    x[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(0), d(2)));
    x[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(0), d(2)));
    x[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(1), d(3)));
    x[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(1), d(3)));
  }
  for (int q = 0; q < 4; ++q) {
    t[q] = _mm512_shuffle_f32x4(x[q], x[4 + q], 0x88);
    t[q + 4] = _mm512_shuffle_f32x4(x[q], x[4 + q], 0xdd);
    t[q + 8] = _mm512_shuffle_f32x4(x[8 + q], x[12 + q], 0x88);
    t[q + 12] = _mm512_shuffle_f32x4(x[8 + q], x[12 + q], 0xdd);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[q], t[q + 8], 0x88));
    r[q + 8] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[q], t[q + 8], 0xdd));
    r[q + 4] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88));
    r[q + 12] = _mm512_castps_si512(_mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xdd));
  }
}

// Columns [j0, j0 + cols) (cols <= 64) of op(B), k in [k0, k0 + kc): pair p of column j at
// out[p kNR + j]; columns past `cols` and a missing last element are 0.
void pack_b(const GemmBf16Args& g, int64_t j0, int64_t cols, int64_t k0, int64_t kc, uint32_t* out) {
  const int64_t kp = (kc + 1) / 2;
  if (!g.trans_b) {  // B(k, j) = b[k ldb + j]: interleave rows 2p and 2p + 1
    const __m512i zero = _mm512_setzero_si512();
    for (int64_t p = 0; p < kp; ++p) {
      const uint16_t* r0 = g.b + (k0 + 2 * p) * g.ldb + j0;
      const bool second = 2 * p + 1 < kc;
      for (int v = 0; v < kNV; ++v) {
        const __mmask16 m = first_lanes(cols - 16 * v);
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + 16 * v));
        const __m512i hi = second ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + g.ldb + 16 * v)) : zero;
        _mm512_store_si512(out + p * kNR + 16 * v, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      }
    }
    return;
  }
  // B(k, j) = b[j ldb + k]: column j's pairs are adjacent; 16 columns x 16 pairs at a time
  // are loaded as rows and transposed.
  for (int64_t p0 = 0; p0 < kp; p0 += 16) {
    const __mmask32 m = lanes32(kc - 2 * p0);  // the 16-bit elements left in this k range
    const int64_t np = std::min<int64_t>(16, kp - p0);
    for (int64_t c0 = 0; c0 < kNR; c0 += 16) {
      __m512i r[16];
      for (int64_t j = 0; j < 16; ++j)
        r[j] = c0 + j < cols ? _mm512_maskz_loadu_epi16(m, g.b + (j0 + c0 + j) * g.ldb + k0 + 2 * p0)
                             : _mm512_setzero_si512();
      transpose16(r);
      for (int64_t p = 0; p < np; ++p) _mm512_store_si512(out + (p0 + p) * kNR + c0, r[p]);
    }
  }
}

// [SECTION] Micro-kernel

// C[MR x cols] (+)= A B over kp pairs, cols in (16 (NV - 1), 16 NV]; `first`: C is
// overwritten (its old contents may be NaN), else added to.
template <int MR, int NV>
void micro_kernel(int64_t kp, const uint32_t* a, const uint32_t* b, float* c, int64_t ldc, int64_t cols,
                  bool first) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kp; ++p, a += kMR, b += kNR) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_load_si512(b + 16 * v);
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r]));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
  const __mmask16 tail = first_lanes(cols - 16 * (NV - 1));
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? tail : __mmask16(0xFFFF);
      float* cr = c + r * ldc + 16 * v;
      __m512 x = acc[r][v];
      if (!first) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, cr));
      _mm512_mask_storeu_ps(cr, m, x);
    }
}

using MicroFn = void (*)(int64_t, const uint32_t*, const uint32_t*, float*, int64_t, int64_t, bool);

template <int... I>
constexpr std::array<MicroFn, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
  return {&micro_kernel<I / kNV + 1, I % kNV + 1>...};
}
constexpr auto kMicro = micro_table(std::make_integer_sequence<int, kMR * kNV>{});

MicroFn micro_for(int64_t rows, int64_t cols) {
  return kMicro[static_cast<size_t>((rows - 1) * kNV + (cols + 15) / 16 - 1)];
}

// [SECTION] Blocked GEMM

// How gemm_bf16 splits a product over `threads`: `slots` parts that run at once, each over
// whole 64-column panels (all rows) or over blocks of rows (all panels). Each slot packs A's
// rows (at most max_rows) and one B panel into its own part of the workspace.
struct Split {
  int64_t slots = 1, max_rows = 0;
  bool by_panels = true;
  int64_t a_words() const { return round_to_line((max_rows + kMR - 1) / kMR * (kKC / 2) * kMR); }
  static constexpr int64_t b_words() { return (kKC / 2) * kNR; }
  int64_t slot_words() const { return a_words() + b_words(); }
};
Split split_of(const GemmBf16Args& g, int threads) {
  const int64_t panels = (g.n + kNR - 1) / kNR, row_blocks = (g.m + kMR - 1) / kMR;
  if (threads == 1 || g.m * g.n * g.k < kMinParallelMacs) return {1, g.m, true};
  if (panels >= threads) return {threads, g.m, true};
  const int64_t slots = std::min<int64_t>(threads, row_blocks);
  return {slots, (row_blocks + slots - 1) / slots * kMR, false};
}

// Panels [q0, q1) (64 columns each) of rows [i0, i1) of C, every K pass; ap and bp: this
// slot's packing buffers (Split).
void gemm_block(const GemmBf16Args& g, int64_t q0, int64_t q1, int64_t i0, int64_t i1, uint32_t* ap, uint32_t* bp) {
  const int64_t rows = i1 - i0, blocks = (rows + kMR - 1) / kMR;
  for (int64_t k0 = 0; k0 < g.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - k0), kp = (kc + 1) / 2;
    pack_a(g, i0, rows, k0, kc, ap);
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t cols = std::min(kNR, g.n - q * kNR);
      pack_b(g, q * kNR, cols, k0, kc, bp);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t mr = std::min<int64_t>(kMR, rows - b * kMR);
        micro_for(mr, cols)(kp, ap + b * kp * kMR, bp, g.c + (i0 + b * kMR) * g.ldc + q * kNR, g.ldc, cols,
                            k0 == 0);
      }
    }
  }
}

}  // namespace

int64_t gemm_bf16_workspace_floats(const GemmBf16Args& g, int threads) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  const Split sp = split_of(g, threads);
  return sp.slots * sp.slot_words();
}

void gemm_bf16(ThreadPool& pool, const GemmBf16Args& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) {
    for (int64_t i = 0; i < g.m; ++i) std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, 0.0f);
    return;
  }
  const int64_t panels = (g.n + kNR - 1) / kNR, row_blocks = (g.m + kMR - 1) / kMR;
  const Split sp = split_of(g, pool.size());
  // The caller's workspace where it is aligned and large enough; else this thread's buffers.
  auto* ws = reinterpret_cast<uint32_t*>(g.workspace);
  if (ws && (reinterpret_cast<uintptr_t>(ws) % 64 != 0 || g.workspace_floats < sp.slots * sp.slot_words())) ws = nullptr;
  auto run_slot = [&](int64_t s) {
    uint32_t* ap = ws ? ws + s * sp.slot_words()
                      : thread_scratch<uint32_t>(static_cast<size_t>(sp.a_words()), ScratchSlot::Bf16A);
    uint32_t* bp = ws ? ap + sp.a_words() : thread_scratch<uint32_t>(static_cast<size_t>(Split::b_words()), ScratchSlot::Bf16B);
    if (sp.by_panels)
      gemm_block(g, panels * s / sp.slots, panels * (s + 1) / sp.slots, 0, g.m, ap, bp);
    else
      gemm_block(g, 0, panels, row_blocks * s / sp.slots * kMR, std::min(g.m, row_blocks * (s + 1) / sp.slots * kMR),
                 ap, bp);
  };
  if (sp.slots == 1) return run_slot(0);
  pool.parallel_for(0, sp.slots, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t s = lo; s < hi; ++s) run_slot(s);
  });
}

#endif  // MLS_BF16_DOT

namespace {

// [SECTION] matmul_lowp

// How matmul_lowp runs a shape: one product (one matrix, or one B for the whole batch with
// A's rows in order) or one per batch entry in turn; f16 operands are widened to f32 once
// (exact), then the f32 GEMM. Its workspace: the widened copies (f16), then one product's
// GEMM scratch.
struct LowpPlan {
  bool f16 = false;
  int64_t rows = 0;  // of each product
  int64_t wide_a = 0, wide_b = 0, gemm = 0;  // floats, each a multiple of 64 bytes
  int64_t total() const { return wide_a + wide_b + gemm; }
};

LowpPlan lowp_plan(DType t, const Shape& as, const Shape& bs, const Shape& ys, const Attrs& attrs, int threads) {
  LowpPlan p;
  const bool ta = attrs.get_int("transpose_a") != 0, tb = attrs.get_int("transpose_b") != 0;
  const int64_t m = ys[ys.size() - 2], n = ys.back(), k = ta ? as[as.size() - 2] : as.back();
  const int64_t batch = numel(ys) / std::max<int64_t>(m * n, 1);
  const bool single = ys.size() == 2 || (numel(bs) == k * n && !ta && numel(as) == batch * m * k);
  p.f16 = t == DType::F16;
  p.rows = single ? batch * m : m;
  if (p.f16) {
    p.wide_a = round_to_line(numel(as));
    p.wide_b = round_to_line(numel(bs));
    p.gemm = gemm_workspace_floats(
        GemmArgs{.trans_a = ta, .trans_b = tb, .m = p.rows, .n = n, .k = k, .lda = as.back(), .ldb = bs.back(), .ldc = n},
        threads);
  } else {
    p.gemm = gemm_bf16_workspace_floats(
        GemmBf16Args{.trans_a = ta, .trans_b = tb, .m = p.rows, .n = n, .k = k, .lda = as.back(), .ldb = bs.back(),
                     .ldc = n},
        threads);
  }
  return p;
}

size_t matmul_lowp_workspace(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& a,
                             const Backend& be) {
  return static_cast<size_t>(lowp_plan(in[0].dtype, in[0].shape, in[1].shape, out[0].shape, a, be.num_threads()).total()) *
         sizeof(float);
}

// C = op(A) op(B) over the last two dims with broadcast batch dims (as matmul), A and B
// both bf16 or both f16, C f32.
void matmul_lowp_kernel(const KernelCall& c) {
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  const bool ta = c.attrs.get_int("transpose_a") != 0, tb = c.attrs.get_int("transpose_b") != 0;
  const uint16_t* pa = in_ptr<uint16_t>(c, 0);
  const uint16_t* pb = in_ptr<uint16_t>(c, 1);
  float* py = out_ptr<float>(c, 0);
  const int64_t m = y.dim(-2), n = y.dim(-1), k = ta ? a.dim(-2) : a.dim(-1);
  const int64_t lda = a.dim(-1), ldb = b.dim(-1);
  ThreadPool& pool = pool_of(c);
  const LowpPlan plan = lowp_plan(a.dtype(), a.shape(), b.shape(), y.shape(), c.attrs, pool.size());
  // The declared workspace, or (called without one) a buffer of the same layout.
  Workspace scratch(c, static_cast<size_t>(plan.total()));
  float* ws = scratch.base;
  const bool f16 = plan.f16;
  float* wa = ws;
  float* wb = ws + plan.wide_a;
  float* gemm_ws = ws + plan.wide_a + plan.wide_b;
  if (f16) {
    f16_to_f32_n(pa, wa, a.numel());
    f16_to_f32_n(pb, wb, b.numel());
  }
  auto product = [&](int64_t rows, int64_t off_a, int64_t off_b, float* out) {
    if (f16)
      gemm(pool, GemmArgs{.trans_a = ta, .trans_b = tb, .m = rows, .n = n, .k = k, .a = wa + off_a, .lda = lda,
                          .b = wb + off_b, .ldb = ldb, .c = out, .ldc = n, .workspace = gemm_ws,
                          .workspace_floats = plan.gemm});
    else
      gemm_bf16(pool, GemmBf16Args{.trans_a = ta, .trans_b = tb, .m = rows, .n = n, .k = k, .a = pa + off_a,
                                   .lda = lda, .b = pb + off_b, .ldb = ldb, .c = out, .ldc = n,
                                   .workspace = gemm_ws, .workspace_floats = plan.gemm});
  };
  const int64_t batch = y.numel() / std::max<int64_t>(m * n, 1);
  // One matrix, or one B for the whole batch with A's rows in order: a single GEMM.
  if (y.rank() == 2 || (b.numel() == k * n && !ta && a.numel() == batch * m * k)) {
    product(batch * m, 0, 0, py);
    return;
  }
  // Each operand's matrix offset per batch entry (0 strides where it broadcasts).
  const Shape bshape(y.shape().begin(), y.shape().end() - 2);
  auto batch_strides = [&](const Tensor& t) {
    const auto lead = static_cast<int64_t>(bshape.size()) - (t.rank() - 2);
    const Shape own(t.shape().begin(), t.shape().end() - 2);
    Strides ts = contiguous_strides(own), s(bshape.size(), 0);
    const int64_t mat = t.dim(-2) * t.dim(-1);
    for (int64_t d = std::max<int64_t>(lead, 0); d < static_cast<int64_t>(bshape.size()); ++d)
      if (own[static_cast<size_t>(d - lead)] != 1) s[static_cast<size_t>(d)] = ts[static_cast<size_t>(d - lead)] * mat;
    return s;
  };
  std::vector<int64_t> off_a, off_b;
  for_each_offset(bshape, batch_strides(a), [&](int64_t o) { off_a.push_back(o); });
  for_each_offset(bshape, batch_strides(b), [&](int64_t o) { off_b.push_back(o); });
  for (int64_t i = 0; i < batch; ++i)
    product(m, off_a[static_cast<size_t>(i)], off_b[static_cast<size_t>(i)], py + i * m * n);
}

}  // namespace

// [SECTION] Registration

void register_lowp_kernels(OpRegistry& reg) {
  reg.register_kernel("matmul_lowp", DeviceKind::CPU, DType::BF16, matmul_lowp_kernel);
  reg.register_kernel("matmul_lowp", DeviceKind::CPU, DType::F16, matmul_lowp_kernel);
  reg.register_workspace("matmul_lowp", DeviceKind::CPU, DType::BF16, matmul_lowp_workspace);
  reg.register_workspace("matmul_lowp", DeviceKind::CPU, DType::F16, matmul_lowp_workspace);
}

}  // namespace mls::cpu
