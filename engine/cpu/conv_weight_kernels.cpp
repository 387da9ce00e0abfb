// CPU kernel: conv2d_backward_weight, (x [n,c,h,w], g [n,o,oh,ow]) -> dw [o,cg,kh,kw] summed
// over the batch. Four ways, chosen by weight_plan from the shape:
// - stride 1, whole vectors of output channels a group, kernels 3, 5 or 7 wide: tiles of
//   kernel rows that broadcast straight from the padded input against the transposed output
//   gradient;
// - otherwise stride 1, 16 or more output channels a group: the column matrices of a few
//   samples side by side (copied from the padded input) and one cpu::gemm over them;
// - stride 1, fewer channels: per-lane tiles over the padded-width layout, the lanes added
//   once after the last sample;
// - otherwise: im2col + cpu::gemm per sample.
// Work splits over samples; each task sums into its own buffer and the buffers are added.
// Also conv2d_pool_backward_weight, the same with the output gradient routed from a 2x2 max
// pool of relu(y) as it is read.
//
// [SECTION] Stride 1: per-lane tiles
// [SECTION] Stride 1 weight gradient: column matrices of several samples, one GEMM
// [SECTION] Stride 1 weight gradient: tap rows against the transposed output gradient
// [SECTION] The plan and the kernel
// [SECTION] Through a 2x2 max pool of relu(y): conv2d_pool_backward_weight
#include <algorithm>
#include <array>
#include <utility>

#include "engine/cpu/conv_common.h"
#include "engine/cpu/conv_kernels.h"
#include "engine/cpu/conv_sample_lanes.h"

namespace mls::cpu {

namespace {

using namespace conv;

// [SECTION] Stride 1: per-lane tiles

// Keeps v in a register: without it GCC folds the loads of b into each FMA that uses it,
// MR loads (most of them split across cache lines) where one would do.
inline void in_register([[maybe_unused]] V& v) {
#if defined(__x86_64__) && defined(__AVX__)  // V fits one register (zmm or ymm)
  asm("" : "+v"(v));
#endif
}

// The weight gradient sums over output pixels: dw[r, s] = sum_q gp[r, q] * xp[off[s] + q].
// A micro-tile holds MR x NR sums lane by lane, lanes[(r, s)] += gp[r, q : q+kLanes] *
// xp[off[s] + q : ...] over the vectors of q: NR + MR loads for MR * NR multiply-adds. The
// lanes are added up only once, after the last sample (weight_lanes_sum), so a sample's
// share costs no horizontal sums.
#ifdef __AVX512F__
constexpr int kWeightRows = 4, kWeightCols = 6;  // 24 sums, 6 + 1 operands
#else
constexpr int kWeightRows = 4, kWeightCols = 3;  // 12 sums, 3 + 1 operands
#endif

template <int MR, int NR>
void weight_tile(const float* gp, int64_t qr, const float* xp, const int64_t* off, float* lanes,
                 int64_t k) {
  V acc[MR][NR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < NR; ++s) acc[r][s] = load(lanes + (r * k + s) * kLanes);
  for (int64_t q = 0; q < qr; q += kLanes) {
    V b[NR];
#pragma GCC unroll 8
    for (int s = 0; s < NR; ++s) {
      b[s] = load(xp + off[s] + q);
      in_register(b[s]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const V a = load(gp + r * qr + q);
#pragma GCC unroll 8
      for (int s = 0; s < NR; ++s) acc[r][s] += a * b[s];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int s = 0; s < NR; ++s) store(lanes + (r * k + s) * kLanes, acc[r][s]);
}

using WeightTile = void (*)(const float*, int64_t, const float*, const int64_t*, float*, int64_t);
template <int... I>
constexpr std::array<WeightTile, sizeof...(I)> weight_table(std::integer_sequence<int, I...>) {
  return {&weight_tile<I / kWeightCols + 1, I % kWeightCols + 1>...};
}
constexpr auto kWeightTiles =
    weight_table(std::make_integer_sequence<int, kWeightRows * kWeightCols>{});

// dw [groups*og, k] += the weight gradient of samples [lo, hi); ws: this task's
// direct_weight_floats.
size_t direct_weight_floats(const ConvShape& s, const Direct& d) {
  return scratch_floats(d) + static_cast<size_t>(s.o * d.k * kLanes);
}
// fill(n, gi, gp) writes sample n's output gradient of group gi into gp [og, qr]'s
// padded-width rows (copy_rows for g itself); the dropped columns stay zero.
template <typename Fill>
void direct_weight_samples(const ConvShape& s, const Direct& d, const float* x, Fill fill,
                           float* dw, int64_t lo, int64_t hi, float* ws) {
  Scratch sc(d, ws);
  // Per-lane sums [groups*og, k, kLanes], added across lanes after the last sample.
  float* lanes = ws + scratch_floats(d);
  std::fill(lanes, lanes + s.o * d.k * kLanes, 0.f);
  // gp [og, qr]: g in padded-width layout, zero in the dropped columns (which no sample's
  // copy writes).
  std::fill(sc.yp, sc.yp + d.cout * d.qr, 0.f);
  for (int64_t n = lo; n < hi; ++n)
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      pad_input(x + (n * s.c + gi * s.cg) * s.h * s.w, sc.xp, d);
      fill(n, gi, sc.yp);
      float* lg = lanes + gi * s.og * d.k * kLanes;
      for (int64_t o = 0; o < s.og; o += kWeightRows) {
        const int64_t rows = std::min<int64_t>(kWeightRows, s.og - o);
        for (int64_t kk = 0; kk < d.k; kk += kWeightCols) {
          const int64_t cols = std::min<int64_t>(kWeightCols, d.k - kk);
          kWeightTiles[static_cast<size_t>((rows - 1) * kWeightCols + cols - 1)](
              sc.yp + o * d.qr, d.qr, sc.xp, d.off.data() + kk, lg + (o * d.k + kk) * kLanes, d.k);
        }
      }
    }
  for (int64_t i = 0; i < s.o * d.k; ++i) {
    float t = 0;
    for (int l = 0; l < kLanes; ++l) t += lanes[i * kLanes + l];
    dw[i] += t;
  }
}

// [SECTION] Stride 1 weight gradient: column matrices of several samples, one GEMM
//
// Where a group has 16 or more output channels, the weight gradient is one GEMM per chunk
// of S samples: dW[g]^T [k, og] += col [k, S*P] x G^T [S*P, og], where col holds the column
// matrices of the chunk's samples side by side and G [og, S*P] their output gradients. Its
// K (S*P, a few hundred) lets the GEMM's micro-kernel run long, where the per-lane tiles
// above stop every qr floats and also multiply the padded-width columns that are dropped.

// Floats of one chunk's column matrix (128 KB): the GEMM reads from L2 what the copies just
// wrote. bench/conv_kernels on the 2-core Zen 3, weight gradients, medians of 4 alternated
// runs: 64K and 128K floats were 4-17 % slower than 16K or 32K (which read level).
constexpr int64_t kColumnFloats = 1 << 15;

struct Columns {
  int64_t k;                 // taps
  int64_t samples;           // S per chunk
  int64_t ld;                // col's and G's row stride: S*P and room for a vector's overrun
  int64_t acc, xp, col, gt;  // floats of each region of a task's scratch (line multiples)
  GemmArgs gemm(const ConvShape& s) const {
    return GemmArgs{.trans_b = true,
                    .m = k,
                    .n = s.og,
                    .k = samples * s.pixels(),
                    .lda = ld,
                    .ldb = ld,
                    .ldc = s.og,
                    .beta = 1.f};
  }
};

bool columns_weight(const ConvShape& s) {
  return s.unit_stride() && !s.pointwise() && s.og >= 16 && s.k() >= 16;
}

Columns columns_of(const ConvShape& s, const Direct& d) {
  Columns c{.k = d.k};
  const int64_t per = d.k * s.pixels();
  // Few enough that each chunk's GEMM stays on the calling thread (tasks split samples).
  const int64_t single = (kGemmParallelMacs - 1) / (per * s.og);
  c.samples = std::clamp<int64_t>(std::min(kColumnFloats / per, single), 1, s.n);
  c.ld = c.samples * s.pixels() + kLanes;
  c.acc = round_to_line(s.o * d.k);
  c.xp = round_to_line(static_cast<int64_t>(d.padded_size) + kLanes);
  c.col = round_to_line(d.k * c.ld);
  c.gt = round_to_line(s.og * c.ld);
  return c;
}

// col[kk, 0 : P] <- the output pixels' view of tap kk in xp (padded-width layout), for every
// tap: whole vectors, each row's overrun landing where the next row (or the row's slack,
// or a later sample's block) is written after it.
void columns_from_padded(const float* xp, const Direct& d, float* col, int64_t ld) {
  const int64_t vecs = (d.ow + kLanes - 1) / kLanes;
  for (int64_t kk = 0; kk < d.k; ++kk) {
    const float* src = xp + d.off[static_cast<size_t>(kk)];
    float* dst = col + kk * ld;
    for (int64_t r = 0; r < d.oh; ++r, src += d.wp, dst += d.ow)
      for (int64_t v = 0; v < vecs; ++v) store(dst + v * kLanes, load(src + v * kLanes));
  }
}

// acc [groups][k, og] += the weight gradient of samples [lo, hi), chunk by chunk.
void columns_weight_samples(ThreadPool& pool, const ConvShape& s, const Direct& d, const Columns& c,
                            const float* x, const float* g, float* acc, int64_t lo, int64_t hi,
                            float* ws, FloatSpan gemm_ws) {
  float* xp = ws;
  float* col = xp + c.xp;
  float* gt = col + c.col;
  const int64_t px = s.pixels();
  std::fill(xp, xp + c.xp, 0.f);  // the overrun reads past the padded input see zeros
  for (int64_t n0 = lo; n0 < hi; n0 += c.samples) {
    const int64_t chunk = std::min(c.samples, hi - n0);
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      for (int64_t i = 0; i < chunk; ++i) {
        pad_input(x + ((n0 + i) * s.c + gi * s.cg) * s.h * s.w, xp, d);
        columns_from_padded(xp, d, col + i * px, c.ld);
        const float* gg = g + ((n0 + i) * s.o + gi * s.og) * px;
        for (int64_t o = 0; o < s.og; ++o) copy_floats(gt + o * c.ld + i * px, gg + o * px, px);
      }
      GemmArgs a = c.gemm(s);
      a.k = chunk * px;
      a.a = col;
      a.b = gt;
      a.c = acc + gi * c.k * s.og;
      a.workspace = gemm_ws.p;
      a.workspace_floats = gemm_ws.n;
      cpu::gemm(pool, a);
    }
  }
}

// [SECTION] Stride 1 weight gradient: tap rows against the transposed output gradient
//
// Where a group's output channels fill whole vectors and the kernel is 3, 5 or 7 wide
// (dilation 1), no column matrix is made at all: dW[g]^T [k, og] += the sum over output
// pixels (r, c) of xp[off[kk] + r wp + c] * gT[(r, c), 0 : og], gT the sample's output
// gradient transposed. A tile is KR kernel rows of one input channel (KR x KW taps) against
// NV vectors of output channels: per pixel NV loads of gT and KR x KW broadcasts, read from
// KR row pointers into the padded input at displacements 0 .. KW - 1, so the taps' reads
// need neither a copy nor the padded-width columns that are dropped. The Columns path above
// spent as long copying its column matrices as multiplying them.

#ifdef __AVX512F__
constexpr int kTapSums = 28;  // the sums a tile keeps in registers (of 32)
#else
constexpr int kTapSums = 12;                     // of 16
#endif
constexpr int kTapMaxRows = 7, kTapMaxVecs = 2;

// acc [KR*KW taps, og] (its first NV vectors of each row) += the tile's sums over the
// oh x ow output pixels; xp points at the tile's first kernel row in the padded input. Sums
// start from zero for each block of rows of about kTapBlock pixels and are then added to acc,
// as the GEMM's are after each K pass: one chain over a sample's 784 pixels (the stem of the
// residual CNN) lost about 4 digits to cancellation against the float64 reference.
constexpr int64_t kTapBlock = 128;
template <int KW, int KR, int NV>
void tap_tile(const float* xp, int64_t wp, int64_t oh, int64_t ow, const float* gt, int64_t og,
              float* acc) {
  const int64_t block_rows = std::max<int64_t>(1, kTapBlock / ow);
  for (int64_t r0 = 0; r0 < oh; r0 += block_rows) {
    V sum[KR * KW][NV];
#pragma GCC unroll 32
    for (int t = 0; t < KR * KW; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) sum[t][v] = V{};
    for (int64_t r = r0; r < std::min(oh, r0 + block_rows); ++r) {
      const float* row[KR];
#pragma GCC unroll 8
      for (int i = 0; i < KR; ++i) row[i] = xp + (r + i) * wp;
      const float* gr = gt + r * ow * og;
      for (int64_t c = 0; c < ow; ++c) {
        V b[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) b[v] = load(gr + c * og + v * kLanes);
#pragma GCC unroll 8
        for (int i = 0; i < KR; ++i)
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j) {
            const float a = row[i][c + j];
#pragma GCC unroll 2
            for (int v = 0; v < NV; ++v) sum[i * KW + j][v] += a * b[v];
          }
      }
    }
#pragma GCC unroll 32
    for (int t = 0; t < KR * KW; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) {
        float* at = acc + t * og + v * kLanes;
        store(at, load(at) + sum[t][v]);
      }
  }
}

using TapTile = void (*)(const float*, int64_t, int64_t, int64_t, const float*, int64_t, float*);
template <int KW, int KR, int NV>
constexpr TapTile tap_tile_or_null() {
  if constexpr (KR * KW * NV <= kTapSums)
    return &tap_tile<KW, KR, NV>;
  else
    return nullptr;  // more sums than registers: never chosen (tap_rows_of)
}
template <int KW, int... I>
constexpr std::array<TapTile, sizeof...(I)> tap_table(std::integer_sequence<int, I...>) {
  return {tap_tile_or_null<KW, I / kTapMaxVecs + 1, I % kTapMaxVecs + 1>()...};
}
using TapTiles = std::make_integer_sequence<int, kTapMaxRows * kTapMaxVecs>;
constexpr auto kTap3 = tap_table<3>(TapTiles{});
constexpr auto kTap5 = tap_table<5>(TapTiles{});
constexpr auto kTap7 = tap_table<7>(TapTiles{});

TapTile tap_tile_for(int64_t kw, int64_t kr, int64_t nv) {
  const auto i = static_cast<size_t>((kr - 1) * kTapMaxVecs + nv - 1);
  return kw == 3 ? kTap3[i] : kw == 5 ? kTap5[i] : kTap7[i];
}

struct TapRows {
  int64_t nv, kr;       // vectors of output channels and kernel rows of a tile
  int64_t acc, xp, gt;  // floats of each region of a task's scratch (line multiples)
};

bool tap_rows_weight(const ConvShape& s) {
  return s.unit_stride() && !s.pointwise() && s.p.dilation == Pair2{1, 1} && s.og % kLanes == 0 &&
         (s.kw == 3 || s.kw == 5 || s.kw == 7);
}

TapRows tap_rows_of(const ConvShape& s, const Direct& d) {
  TapRows t{.nv = s.og % (2 * kLanes) == 0 && 2 * s.kw <= kTapSums ? 2 : 1};
  t.kr = std::min<int64_t>({s.kh, kTapSums / (s.kw * t.nv), kTapMaxRows});
  t.acc = round_to_line(s.o * d.k);
  t.xp = round_to_line(static_cast<int64_t>(d.padded_size));
  t.gt = round_to_line(s.og * s.pixels());
  return t;
}

// acc [groups][k, og] += the weight gradient of samples [lo, hi).
void tap_rows_samples(const ConvShape& s, const Direct& d, const TapRows& t, const float* x,
                      const float* g, float* acc, int64_t lo, int64_t hi, float* ws) {
  float* xp = ws;
  float* gt = ws + t.xp;
  const int64_t px = s.pixels(), step = t.nv * kLanes;
  zero_padded(xp, d);
  for (int64_t n = lo; n < hi; ++n)
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      pad_input(x + (n * s.c + gi * s.cg) * s.h * s.w, xp, d);
      transpose(g + (n * s.o + gi * s.og) * px, px, s.og, px, gt, s.og);  // gt [px, og]
      float* ag = acc + gi * d.k * s.og;
      for (int64_t ob = 0; ob < s.og; ob += step)
        for (int64_t ch = 0; ch < s.cg; ++ch)
          for (int64_t i0 = 0; i0 < s.kh; i0 += t.kr) {
            const int64_t kr = std::min(t.kr, s.kh - i0);
            tap_tile_for(s.kw, kr, t.nv)(xp + (ch * d.hp + i0) * d.wp, d.wp, d.oh, d.ow, gt + ob,
                                         s.og, ag + (ch * s.kh + i0) * s.kw * s.og + ob);
          }
    }
}

// [SECTION] The plan and the kernel

// The partial sums of dw (for tasks 1.., task 0 sums into dw), then each task's scratch.
// Four ways: tap rows (stride 1, whole vectors of output channels, 3/5/7 wide), per-lane
// tiles (stride 1, few output channels), column matrices of several samples (stride 1; these
// two sum dW transposed into each task's scratch), or im2col + GEMM per sample.
struct WeightPlan {
  enum Kind { Taps, Lanes, ColumnGemm, Blas } kind;
  Direct d;           // all but Blas
  Columns cols = {};  // ColumnGemm
  TapRows taps = {};  // Taps
  int64_t tasks = 1;
  size_t per_task = 0;  // each task's scratch
  size_t gemm_per = 0;  // each task's GEMM scratch (ColumnGemm and Blas; 64-byte aligned)
  // Each task sums dW^T [groups][k, og] at the start of its scratch (else into dw / partials).
  bool transposed() const { return kind == ColumnGemm || kind == Taps; }
  int64_t partials() const { return transposed() ? 0 : tasks - 1; }
  // The whole workspace: partial sums, the tasks' scratch, then their GEMM scratch.
  size_t floats(const ConvShape& s) const {
    const size_t before =
        static_cast<size_t>(partials() * s.o * s.k()) + static_cast<size_t>(tasks) * per_task;
    return static_cast<size_t>(round_to_line(static_cast<int64_t>(before))) +
           static_cast<size_t>(tasks) * gemm_per;
  }
};
WeightPlan weight_plan(const ConvShape& s, int64_t threads) {
  WeightPlan wp{.kind = !forward_direct(s)   ? WeightPlan::Blas
                        : tap_rows_weight(s) ? WeightPlan::Taps
                        : columns_weight(s)  ? WeightPlan::ColumnGemm
                                             : WeightPlan::Lanes};
  if (wp.kind == WeightPlan::Blas) {
    wp.tasks = blas_tasks(threads, s);
    wp.per_task = col_floats(s);
    wp.gemm_per = gemm_floats(s, ConvGemm::BackwardWeight, threads);
    return wp;
  }
  wp.d = forward_direct_of(s);
  if (wp.kind == WeightPlan::Lanes) {
    wp.tasks = batch_tasks(threads, s.n, static_cast<double>(s.o * s.k() * wp.d.qr));
    wp.per_task = direct_weight_floats(s, wp.d);
  } else if (wp.kind == WeightPlan::Taps) {
    wp.tasks = batch_tasks(threads, s.n, static_cast<double>(s.o * s.k() * s.pixels()));
    wp.taps = tap_rows_of(s, wp.d);
    wp.per_task = static_cast<size_t>(wp.taps.acc + wp.taps.xp + wp.taps.gt);
  } else {
    wp.tasks = batch_tasks(threads, s.n, static_cast<double>(s.o * s.k() * s.pixels()));
    wp.cols = columns_of(s, wp.d);
    wp.per_task = static_cast<size_t>(wp.cols.acc + wp.cols.xp + wp.cols.col + wp.cols.gt);
    wp.gemm_per =
        static_cast<size_t>(gemm_workspace_floats(wp.cols.gemm(s), static_cast<int>(threads)));
  }
  return wp;
}

// g's rows copied into the padded-width layout: the plain weight gradient's fill.
auto copy_rows(const ConvShape& s, const Direct& d, const float* g) {
  return [&s, &d, g](int64_t, int64_t n, int64_t gi, float* gp) {
    const float* gg = g + (n * s.o + gi * s.og) * s.pixels();
    for (int64_t o = 0; o < s.og; ++o)
      for (int64_t r = 0; r < s.oh; ++r)
        copy_floats(gp + o * d.qr + r * d.wp, gg + (o * s.oh + r) * s.ow, s.ow);
  };
}

// dw [o,cg,kh,kw] from x [n,c,h,w] and g [n,o,oh,ow] the plan's way, in wp.floats(s) floats at
// `base`: each task sums its samples into its own buffer (task 0 into dw itself; on the
// Columns path every task into its scratch's acc, which holds dW transposed), then the buffers
// are added. The per-lane path takes each sample's gradient from fill(task, n, gi, gp) (see
// direct_weight_samples); the others read g.
template <typename Fill>
void weight_gradient(const KernelCall& c, const ConvShape& s, const WeightPlan& wp, const float* x,
                     const float* g, float* dw, float* base, Fill fill) {
  const int64_t k = s.k(), px = s.pixels(), size = s.o * k;
  const int64_t tasks = wp.tasks;
  float* partial = base;  // [partials, size], then each task's scratch
  float* scratch = base + wp.partials() * size;
  const size_t gemm_per = wp.gemm_per;
  float* gemm_base =
      base + round_to_line(wp.partials() * size + tasks * static_cast<int64_t>(wp.per_task));
  const Columns& cols = wp.cols;
  std::fill(dw, dw + size, 0.f);
  std::fill(partial, partial + wp.partials() * size, 0.f);
  for_sample_tasks(c, s.n, tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* acc = task == 0 ? dw : partial + (task - 1) * size;
    float* mine = scratch + static_cast<size_t>(task) * wp.per_task;
    const FloatSpan gemm_ws{gemm_base + static_cast<size_t>(task) * gemm_per,
                            static_cast<int64_t>(gemm_per)};
    if (wp.kind == WeightPlan::Lanes)
      return direct_weight_samples(
          s, wp.d, x, [&](int64_t n, int64_t gi, float* gp) { fill(task, n, gi, gp); }, acc, lo, hi,
          mine);
    if (wp.kind == WeightPlan::Taps) {
      std::fill(mine, mine + wp.taps.acc, 0.f);
      return tap_rows_samples(s, wp.d, wp.taps, x, g, mine, lo, hi, mine + wp.taps.acc);
    }
    if (wp.kind == WeightPlan::ColumnGemm) {
      std::fill(mine, mine + cols.acc, 0.f);
      return columns_weight_samples(pool_of(c), s, wp.d, cols, x, g, mine, lo, hi, mine + cols.acc,
                                    gemm_ws);
    }
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        const float* xg = x + (n * s.c + gi * s.cg) * s.h * s.w;
        if (!s.pointwise()) im2col(xg, mine, s);
        gemm(pool_of(c), false, true, s.og, k, px, g + (n * s.o + gi * s.og) * px, px,
             s.pointwise() ? xg : mine, px, 1.f, acc + gi * s.og * k, k, gemm_ws);
      }
  });
  if (wp.transposed()) {
    // dw[(gi, o), kk] = sum over tasks of acc[gi][kk, o]
    for (int64_t t = 0; t < tasks; ++t) {
      const float* acc = scratch + static_cast<size_t>(t) * wp.per_task;
      for (int64_t gi = 0; gi < s.groups; ++gi)
        for (int64_t o = 0; o < s.og; ++o)
          for (int64_t kk = 0; kk < k; ++kk)
            dw[(gi * s.og + o) * k + kk] += acc[(gi * k + kk) * s.og + o];
    }
    return;
  }
  for (int64_t t = 1; t <= wp.partials(); ++t) {
    const float* p = partial + (t - 1) * size;
    for (int64_t i = 0; i < size; ++i) dw[i] += p[i];
  }
}

// (x [n,c,h,w], g [n,o,oh,ow]) -> dw [o,cg,kh,kw].
void conv2d_backward_weight_kernel(const KernelCall& c) {
  const Tensor &tx = *c.inputs[0], &tg = *c.inputs[1];
  Tensor& tdw = *c.outputs[0];
  ConvShape s = conv_shape(tx.shape(), tdw.shape(), tg.shape(), c.attrs);
  const float* g = in_ptr<float>(c, 1);
  if (lanes_weight_pays(s)) {
    Workspace ws(c, lanes_weight_floats(s, pool_of(c).size()));
    return lanes_backward_weight(c, s, in_ptr<float>(c, 0), g, out_ptr<float>(c, 0), ws.base);
  }
  const WeightPlan wp = weight_plan(s, pool_of(c).size());
  Workspace ws(c, wp.floats(s));
  weight_gradient(c, s, wp, in_ptr<float>(c, 0), g, out_ptr<float>(c, 0), ws.base,
                  copy_rows(s, wp.d, g));
}

// [SECTION] Through a 2x2 max pool of relu(y): conv2d_pool_backward_weight
//
// (x, gp, y) -> (dw, db) with g = max_pool2d_relu_backward(gp, y) routed where it is read. On
// the per-lane path each sample's g goes straight into the padded-width rows the tiles read
// (the pool's own row function, rows wp apart) and the bias sums are taken from those rows
// lane by lane: the [n,o,oh,ow] gradient is never written to memory nor read back (LeNet's
// conv1). The other paths route g into the workspace first and read it as the plain kernel
// does.

// Floats after the weight gradient's workspace: the per-lane path's bias lanes
// [tasks, o, kLanes], or the routed g.
size_t pool_backward_extra(const ConvShape& s, const WeightPlan& wp) {
  return static_cast<size_t>(wp.kind == WeightPlan::Lanes ? wp.tasks * s.o * kLanes
                                                          : s.n * s.o * s.pixels());
}

// The sum of n floats from p, by lanes.
inline V row_lanes(const float* p, int64_t n) {
  V acc{};
#ifdef __AVX512F__
  for (; n > 0; n -= kLanes, p += kLanes) acc += V(_mm512_maskz_loadu_ps(first_lanes(n), p));
#else
  for (int64_t i = 0; i < n; ++i) acc[i % kLanes] += p[i];
#endif
  return acc;
}

void conv_pool_backward_weight_kernel(const KernelCall& c) {
  const Tensor &tx = *c.inputs[0], &ty = *c.inputs[2];
  Tensor& tdw = *c.outputs[0];
  const ConvShape s = conv_shape(tx.shape(), tdw.shape(), ty.shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  const float* gp = in_ptr<float>(c, 1);
  const float* y = in_ptr<float>(c, 2);
  float* dw = out_ptr<float>(c, 0);
  float* db = out_ptr<float>(c, 1);
  if (lanes_pool_weight_pays(s)) {
    Workspace ws(c, lanes_pool_weight_floats(s, pool_of(c).size()));
    return lanes_pool_backward_weight(c, s, x, gp, y, dw, db, ws.base);
  }
  const WeightPlan wp = weight_plan(s, pool_of(c).size());
  Workspace ws(c, wp.floats(s) + pool_backward_extra(s, wp));
  float* extra = ws.base + wp.floats(s);
  const int64_t px = s.pixels(), pw = s.ow / 2;
  // Plane `plane`'s gradient rows into `out`, rows `ld` apart.
  auto route = [&](int64_t plane, float* out, int64_t ld) {
    for (int64_t r = 0; r < s.oh; r += 2)
      max_pool_relu_2x2_backward_row(y + plane * px + r * s.ow, s.ow,
                                     gp + plane * (px / 4) + r / 2 * pw, out + r * ld, ld, pw);
  };
  if (wp.kind == WeightPlan::Lanes) {
    float* lanes = extra;
    std::fill(lanes, lanes + wp.tasks * s.o * kLanes, 0.f);
    weight_gradient(c, s, wp, x, nullptr, dw, ws.base,
                    [&](int64_t task, int64_t n, int64_t gi, float* gpad) {
                      for (int64_t o = 0; o < s.og; ++o) {
                        const int64_t ch = gi * s.og + o;
                        float* rows = gpad + o * wp.d.qr;
                        route(n * s.o + ch, rows, wp.d.wp);
                        float* bl = lanes + (task * s.o + ch) * kLanes;
                        V acc = load(bl);
                        for (int64_t r = 0; r < s.oh; ++r)
                          acc += row_lanes(rows + r * wp.d.wp, s.ow);
                        store(bl, acc);
                      }
                    });
    for (int64_t ch = 0; ch < s.o; ++ch) {
      float t = 0;
      for (int64_t task = 0; task < wp.tasks; ++task)
        for (int l = 0; l < kLanes; ++l) t += lanes[(task * s.o + ch) * kLanes + l];
      db[ch] = t;
    }
    return;
  }
  float* g = extra;  // [n, o, oh, ow]
  pool_of(c).parallel_for(0, s.n * s.o,
                          std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(px, 1)),
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t plane = lo; plane < hi; ++plane)
                              route(plane, g + plane * px, s.ow);
                          });
  for (int64_t ch = 0; ch < s.o; ++ch) {
    V acc{};
    for (int64_t n = 0; n < s.n; ++n) acc += row_lanes(g + (n * s.o + ch) * px, px);
    float t = 0;
    for (int l = 0; l < kLanes; ++l) t += acc[l];
    db[ch] = t;
  }
  weight_gradient(c, s, wp, x, g, dw, ws.base, copy_rows(s, wp.d, g));
}

size_t backward_weight_workspace(std::span<const ValueType> in, std::span<const ValueType> out,
                                 const Attrs& a,
                                 const Backend& b) {  // (x, g) -> dw
  const ConvShape s = conv_shape(in[0].shape, out[0].shape, in[1].shape, a);
  if (lanes_weight_pays(s)) return lanes_weight_floats(s, b.num_threads()) * sizeof(float);
  return weight_plan(s, b.num_threads()).floats(s) * sizeof(float);
}
size_t pool_backward_workspace(std::span<const ValueType> in, std::span<const ValueType> out,
                               const Attrs& a, const Backend& b) {  // (x, gp, y) -> (dw, db)
  const ConvShape s = conv_shape(in[0].shape, out[0].shape, in[2].shape, a);
  if (lanes_pool_weight_pays(s))
    return lanes_pool_weight_floats(s, b.num_threads()) * sizeof(float);
  const WeightPlan wp = weight_plan(s, b.num_threads());
  return (wp.floats(s) + pool_backward_extra(s, wp)) * sizeof(float);
}

}  // namespace

void register_conv_weight_kernels(OpRegistry& reg) {
  reg.register_kernel("conv2d_backward_weight", DeviceKind::CPU, DType::F32,
                      conv2d_backward_weight_kernel);
  reg.register_workspace("conv2d_backward_weight", DeviceKind::CPU, DType::F32,
                         backward_weight_workspace);
  reg.register_kernel("conv2d_pool_backward_weight", DeviceKind::CPU, DType::F32,
                      conv_pool_backward_weight_kernel);
  reg.register_workspace("conv2d_pool_backward_weight", DeviceKind::CPU, DType::F32,
                         pool_backward_workspace);
}

}  // namespace mls::cpu
