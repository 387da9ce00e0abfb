// The SGEMM behind cpu::gemm, written once over the vector width (engine/cpu/simd.h: W = 16
// floats with AVX-512, 8 with AVX2 + FMA): register tiles, B packing, K blocking, threading.
//
// Shape of the computation (row-major C [m, n] = op(A) [m, k] x op(B) [k, n]):
// - A 6 x (NV W) tile of C lives in 6 NV vector accumulators: 6 x 64 in 24 of AVX-512's 32
//   zmm registers, 6 x 16 in 12 of AVX2's 16 ymm (the rest hold B's row and A's broadcast).
//   Each step of k loads NV vectors of a B row and broadcasts 6 values of A: 6 NV FMAs that
//   keep both FMA pipes busy and cover their latency.
// - A block of C takes its rows of A by chunks that stay in L2 (AVX2: 192 rows x 256 of K),
//   each chunk against every panel of B. Where the block has 8 panels or more (A^T: always)
//   the chunk is packed into 6-row tiles, so each tile is one contiguous stream (without it
//   the six rows of a tile came lda apart from L3 at every panel: 2048x2048x512 ran at 45
//   GFLOP/s on 1 thread against OpenBLAS's 75; packed, 70). Fewer panels read A in place,
//   broadcast straight from memory row by row. B is packed per NV W-column panel and per K
//   pass (AVX-512: 128 rows x 64 floats, AVX2: 256 x 16; 16 or 32 KB, in L1 while every
//   6-row tile of A walks past it), zero-filled past the last column so the micro-kernel
//   loads whole vectors; a block of several chunks packs a group of panels (512 KB) once
//   and runs every chunk against it. B^T is packed with W x W in-register transposes. A
//   problem of at most 12 rows with plain B reads B in place: each B value would be used
//   once or twice after packing.
// - The epilogue (beta on the first K pass; bias and activation on the last) runs on the
//   tile while it is still in registers; activations other than relu run over the tile's
//   rows just stored, in L1.
// - From kGemmParallelMacs on, threads take tasks (blocks of C, 4 a thread, as square as the
//   shape allows) from a shared counter; each packs its own A and B. Every element of C is
//   summed in the same order whichever thread computes it, so results do not depend on the
//   thread count.
//   Products of few rows share B instead: by contiguous panels per thread, or, with a long
//   K (a dense layer's forward), by halves of K added before the epilogue (gemm_split_k),
//   each thread then reading the half of W that the optimizer's update left in its cache.
//   The MLP training step went from 45 % to 53 % of the FMA peak (bench/fma_peak, AVX-512).
// - m == 1 or n == 1 is a matrix-vector product (batch-1 inference): no packing, up to 16
//   (AVX2: 12) accumulators across a chunk of W's columns, or dot products when W is
//   transposed.
//
// [SECTION] Scratch
// [SECTION] Micro-kernel
// [SECTION] Packing B
// [SECTION] Blocked GEMM
// [SECTION] Matrix-vector
// [SECTION] Entry point
#include "engine/cpu/gemm_simd.h"

#include <cstdlib>

#include "engine/cpu/scratch.h"
#include "engine/cpu/simd.h"

#ifdef MLS_SIMD
#include <algorithm>
#include <array>
#include <atomic>
#include <utility>
#endif

namespace mls::cpu {

#ifndef MLS_SIMD

bool gemm_simd_compiled() { return false; }
const char* gemm_simd_name() { return "CBLAS"; }
void gemm_simd(ThreadPool&, const GemmArgs&) { std::abort(); }  // gemm.cpp checks first
int64_t gemm_simd_workspace_floats(const GemmArgs&, int) { return 0; }

#else

bool gemm_simd_compiled() { return true; }
const char* gemm_simd_name() { return Simd::kName; }

namespace {

using V = Simd::V;
using Mask = Simd::Mask;
constexpr int kW = Simd::kLanes;        // floats per vector
constexpr int kMR = 6;                  // rows of a C tile
constexpr int kNV = kW == 16 ? 4 : 2;   // vectors per tile row
constexpr int64_t kNR = kW * kNV;       // columns of a C tile (and of a packed B panel)
constexpr int64_t kMaxKC = kW == 16 ? 128 : 256;  // K per pass: panels of 32 KB / 16 KB
constexpr int kGemvVecs = kW == 16 ? 16 : 12;    // a GEMV's accumulators across W's columns
constexpr int64_t kDirectRows = 12;    // up to this many rows, plain B is read in place
// A matrix-vector product reads each weight once from L2 (~40 B/cycle): 2M weights take
// ~15 us, worth a fork-join.
constexpr int64_t kMinParallelGemv = int64_t{1} << 21;

// [SECTION] Scratch

// K per pass for a product of depth k: passes of at most kMaxKC, as even as can be.
int64_t k_step(int64_t k) {
  const int64_t passes = (k + kMaxKC - 1) / kMaxKC;
  return (k + passes - 1) / passes;
}

// Where a call's scratch lives: the caller's workspace (GemmArgs::workspace), laid out as the
// panels of each part that runs at once (panel_floats each) followed by the auxiliary floats;
// or, without one, this thread's buffers. gemm_workspace_floats() sizes the same layout.
struct Scratch {
  float* ws = nullptr;
  int64_t panels = 0, panel_floats = 0;
  // Part `part`'s panels (a part runs on one thread at a time; without a workspace, the
  // calling thread's).
  float* panel(int64_t part) const {
    const auto floats = static_cast<size_t>(panel_floats);
    return ws ? ws + part * panel_floats : thread_scratch<float>(floats, ScratchSlot::GemmPanel);
  }
  // The calling thread's auxiliary floats (split-K's partial C).
  float* aux(int64_t floats) const {
    return ws ? ws + panels * panel_floats : thread_scratch<float>(static_cast<size_t>(floats), ScratchSlot::GemmAux);
  }
};

// [SECTION] Micro-kernel

// Fetches the cache lines of p[0, n) into L1 (WRITE: for writing).
template <bool WRITE = false>
inline void prefetch_floats(const float* p, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) __builtin_prefetch(p + i, WRITE, 3);
  __builtin_prefetch(p + n - 1, WRITE, 3);
}

// What a micro-kernel does with its sums.
struct Tile {
  float beta;         // first pass: C = sums + beta C (beta == 0: C is not read)
  bool first, last;   // first K pass / last K pass (bias and activation)
  const float* bias;  // at the tile's first row (BiasAxis::Row) or first column (Col)
  BiasAxis axis;
  Activation act;
};

template <int MR, int NV>
__attribute__((always_inline)) inline void store_tile(V (&acc)[MR][NV], float* c, int64_t ldc, int64_t cols,
                                                      const Tile& tile) {
  const Tile t = tile;  // a copy: stores to C cannot alias it, so its fields stay in registers
  const Mask tail = Simd::first(cols - kW * (NV - 1));
  const bool load_c = !t.first || t.beta != 0.0f;
  const V scale = Simd::set1(t.first ? t.beta : 1.0f);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const bool last = v == NV - 1;
      V x = acc[r][v];
      if (load_c) x = Simd::fmadd(scale, last ? Simd::load(tail, cr + kW * v) : Simd::load(cr + kW * v), x);
      if (t.last) {
        if (t.axis == BiasAxis::Col)
          x = Simd::add(x, last ? Simd::load(tail, t.bias + kW * v) : Simd::load(t.bias + kW * v));
        else if (t.axis == BiasAxis::Row)
          x = Simd::add(x, Simd::set1(t.bias[r]));
        if (t.act == Activation::Relu) x = Simd::max(x, Simd::zero());
      }
      if (last)
        Simd::store(cr + kW * v, tail, x);
      else
        Simd::store(cr + kW * v, x);
    }
    if (t.last && t.act != Activation::None && t.act != Activation::Relu) apply_activation(t.act, cr, cols);
  }
}

// C[MR x cols] (+)= A[MR x kc] B[kc x cols], cols in (W (NV-1), W NV]. B's rows are ldb
// apart: a packed panel (PACKED: zero past `cols`, whole vectors are loaded), or B itself
// (lanes past `cols` are never loaded). A's element (r, p) is a[r lda + p], or a[p lda + r]
// when TA.
template <int MR, int NV, bool TA, bool PACKED>
void micro_kernel(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc, int64_t cols, const Tile& t) {
  V acc[MR][NV];
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[r][v] = Simd::zero();
  const Mask tail = Simd::first(cols - kW * (NV - 1));
  // The tile of C, fetched while the sums run: a large C lies in memory, rows ldc apart, and
  // loading it at the end stalled each tile (2048x2048x512 on one thread: 67 -> 76 GFLOP/s
  // at best, 2 threads 88 -> 110).
  #pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) prefetch_floats<true>(c + r * ldc, cols);
  for (int64_t p = 0; p < kc; ++p) {
    V bv[NV];
    #pragma GCC unroll 16
    for (int v = 0; v < NV - 1; ++v) bv[v] = Simd::load(b + kW * v);
    bv[NV - 1] = PACKED ? Simd::load(b + kW * (NV - 1)) : Simd::load(tail, b + kW * (NV - 1));
    #pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V av = Simd::set1(TA ? a[r] : a[r * lda]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[r][v] = Simd::fmadd(av, bv[v], acc[r][v]);
    }
    a += TA ? lda : 1;
    b += ldb;
  }
  store_tile<MR, NV>(acc, c, ldc, cols, t);
}

using MicroFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                         const Tile&);

template <bool TA, bool PACKED, int... I>
constexpr std::array<MicroFn, sizeof...(I)> micro_table(std::integer_sequence<int, I...>) {
  return {&micro_kernel<I / kNV + 1, I % kNV + 1, TA, PACKED>...};
}
using Tiles = std::make_integer_sequence<int, kMR * kNV>;
constexpr auto kMicroA = micro_table<false, true>(Tiles{});
constexpr auto kMicroAT = micro_table<true, true>(Tiles{});
constexpr auto kMicroDirect = micro_table<false, false>(Tiles{});
constexpr auto kMicroDirectAT = micro_table<true, false>(Tiles{});

MicroFn micro_for(bool ta, bool packed, int64_t rows, int64_t cols) {
  auto i = static_cast<size_t>((rows - 1) * kNV + (cols + kW - 1) / kW - 1);
  return packed ? (ta ? kMicroAT[i] : kMicroA[i]) : (ta ? kMicroDirectAT[i] : kMicroDirect[i]);
}

// [SECTION] Packing B

// The packs of B and of A^T read a row segment every ldb (lda) floats, from L3 or memory
// where the operand is large, one row per step: they fetch the row kPackAhead steps ahead
// (the hardware's prefetchers do not follow such strides). Rows fetched past the pass or the
// matrix are harmless: a prefetch never faults. 2 threads, alternating with the build before:
// 512x512x2048 A^T 83 -> 101 GFLOP/s (median), 2048x512x2048 A^T 99 -> 112.
constexpr int64_t kPackAhead = 16;

// B(p, j) = b[p ldb + j] for p < kc, j < cols (<= kNR) into out[p * kNR + j], zero past cols.
void pack_b(const float* b, int64_t ldb, int64_t kc, int64_t cols, float* out) {
  if (cols == kNR) {
    for (int64_t p = 0; p < kc; ++p, b += ldb, out += kNR) {
      prefetch_floats(b + kPackAhead * ldb, kNR);
      for (int v = 0; v < kNV; ++v) Simd::store_aligned(out + kW * v, Simd::load(b + kW * v));
    }
    return;
  }
  for (int64_t p = 0; p < kc; ++p, b += ldb, out += kNR)
    for (int v = 0; v < kNV; ++v) Simd::store_aligned(out + kW * v, Simd::load(Simd::first(cols - kW * v), b + kW * v));
}

// B(p, j) = b[j ldb + p] (B stored transposed) for p < kc, j < cols into out[p * kNR + j],
// zero past cols.
void pack_bt(const float* b, int64_t ldb, int64_t kc, int64_t cols, float* out) {
  for (int64_t j = 0; j < kNR; j += kW) {
    if (j >= cols) {
      for (int64_t p = 0; p < kc; ++p) Simd::store_aligned(out + p * kNR + j, Simd::zero());
      continue;
    }
    for (int64_t p = 0; p < kc; p += kW) {
      const Mask m = Simd::first(kc - p);
      V r[kW];
      for (int q = 0; q < kW; ++q) r[q] = j + q < cols ? Simd::load(m, b + (j + q) * ldb + p) : Simd::zero();
      Simd::transpose(r);
      const int64_t rows = std::min<int64_t>(kW, kc - p);
      for (int64_t q = 0; q < rows; ++q) Simd::store_aligned(out + (p + q) * kNR + j, r[q]);
    }
  }
}

// Rows [i0, i1) of A, A stored transposed (A(r, p) = a[p lda + r], p < kc), into tiles of
// kMR rows: tile q holds A(i0 + q kMR + r, p) at out[q kMR kc + p kMR + r], a layout the
// transposed-A micro-kernels read with lda = kMR. Row p of A^T is read once, left to right,
// a tile's kMR floats by one masked vector load. Their whole-vector store runs kW - kMR floats
// into the places of the next k, stored after it; near a tile's end it would reach the next
// tile's, stored before, so there the store is masked too.
void pack_at(const float* a, int64_t lda, int64_t i0, int64_t i1, int64_t kc, float* out) {
  for (int64_t p = 0; p < kc; ++p) {
    const float* src = a + p * lda;
    prefetch_floats(src + kPackAhead * lda + i0, i1 - i0);
    const bool whole = p * kMR + kW <= kc * kMR;
    for (int64_t i = i0; i < i1; i += kMR) {
      float* dst = out + (i - i0) * kc + p * kMR;
      const Mask m = Simd::first(std::min<int64_t>(kMR, i1 - i));
      const V v = Simd::load(m, src + i);
      if (whole)
        Simd::store(dst, v);
      else
        Simd::store(dst, m, v);
    }
  }
}

// Rows [i0, i1) of plain A (A(r, p) = a[r lda + p], p < kc) into the same tiles as pack_at:
// kW columns of a tile's rows at a time, transposed in registers (rows past the tile's are
// zero), each column stored whole at its place. A column's store runs kW - kMR floats into
// the next one's place, which that store then writes; the last spills into the next tile
// (packed after) or into the kW floats of slack past the buffer (kPackSlack).
constexpr int64_t kPackSlack = kW;
void pack_a_rows(const float* a, int64_t lda, int64_t i0, int64_t i1, int64_t kc, float* out) {
  for (int64_t i = i0; i < i1; i += kMR) {
    float* dst = out + (i - i0) * kc;
    const int64_t rows = std::min<int64_t>(kMR, i1 - i);
    for (int64_t p = 0; p < kc; p += kW) {
      const Mask m = Simd::first(kc - p);
      V r[kW];
      for (int q = 0; q < kW; ++q)
        r[q] = q < rows ? Simd::load(m, a + (i + q) * lda + p) : Simd::zero();
      Simd::transpose(r);
      const int64_t cols = std::min<int64_t>(kW, kc - p);
      for (int64_t q = 0; q < cols; ++q) Simd::store(dst + (p + q) * kMR, r[q]);
    }
  }
}

// [SECTION] Blocked GEMM

// The rows of A a block takes at a time, against every panel of B, so that they stay in L2
// (up to kChunkRows x kMaxKC floats: 192 KB on AVX2) while the panels go past: the block's
// rows in even chunks of whole tiles.
constexpr int64_t kChunkRows = kW == 16 ? 384 : 192;
int64_t chunk_rows(int64_t rows) {
  const int64_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  return ((rows + chunks - 1) / chunks + kMR - 1) / kMR * kMR;
}

// A block packs its rows of A (A^T always) when it has this many panels of B at least to
// spread the packing over.
constexpr int64_t kPackPanels = 8;

// The panels of B a block of more than one chunk packs at once, each K pass, and runs every
// chunk against (128 K floats: AVX2 32 panels of 256 x 16, AVX-512 16 of 128 x 64; 512 KB,
// read back from L3 a panel at a time). Packed per chunk instead, a 2048-row block read each
// panel of B, 64 bytes a row 8 KB apart, from L3 eleven times.
constexpr int64_t kGroupPanels = (int64_t{1} << 17) / (kMaxKC * kNR);

// The panels a block of rows x cols packs at once. A block of one chunk packs each panel just
// before its tiles: its chunk of A stays packed across all of them.
int64_t group_panels(int64_t rows, int64_t cols) {
  if (chunk_rows(rows) >= rows) return 1;
  return std::clamp<int64_t>((cols + kNR - 1) / kNR, 1, kGroupPanels);
}

// Rows [i0, i1) x columns [j0, j1) of C, on the calling thread.
// `panels`: group_panels(i1 - i0, j1 - j0) x k_step(g.k) x kNR floats, 64-byte aligned,
// this call's alone (unused where the block reads B in place).
//
// Each K pass: a group of panels of B is packed, then each chunk of A's rows is packed (A^T
// always, plain A where the block has kPackPanels panels) and run against the group's panels.
// Packed A^T matters most: its tiles would read A^T's rows kc times lda apart, and with lda
// a power of two (x^T dy of a 2048-wide layer) those lines share a few cache sets, so each
// tile fetched them again from L3 (22 GFLOP/s on 2 threads where OpenBLAS did 124).
// The sums are taken in the same order either way: the bits do not change.
void gemm_block(const GemmArgs& g, int64_t i0, int64_t i1, int64_t j0, int64_t j1, float* panels) {
  const bool direct = !g.trans_b && i1 - i0 <= kDirectRows;
  const bool pack_a = i1 - i0 > kMR && (g.trans_a || j1 - j0 >= kPackPanels * kNR);
  const int64_t kstep = k_step(g.k);
  const int64_t chunk = chunk_rows(i1 - i0);
  const int64_t group = direct ? j1 - j0 : group_panels(i1 - i0, j1 - j0) * kNR;
  const auto apack_floats = static_cast<size_t>(kChunkRows * kMaxKC + kPackSlack);
  float* apack = pack_a ? thread_scratch<float>(apack_floats, ScratchSlot::GemmA) : nullptr;
  for (int64_t p0 = 0; p0 < g.k; p0 += kstep) {
    const int64_t kc = std::min(kstep, g.k - p0);
    Tile t{g.beta, p0 == 0, p0 + kc == g.k, nullptr, g.bias ? g.bias_axis : BiasAxis::None, g.act};
    for (int64_t jg = j0; jg < j1; jg += group) {
      const int64_t jg1 = std::min(j1, jg + group);
      auto panel_of = [&](int64_t j) { return panels + (j - jg) / kNR * kstep * kNR; };
      for (int64_t j = jg; j < jg1 && !direct; j += kNR) {
        if (g.trans_b)
          pack_bt(g.b + j * g.ldb + p0, g.ldb, kc, std::min(kNR, jg1 - j), panel_of(j));
        else
          pack_b(g.b + p0 * g.ldb + j, g.ldb, kc, std::min(kNR, jg1 - j), panel_of(j));
      }
      for (int64_t c0 = i0; c0 < i1; c0 += chunk) {
        const int64_t c1 = std::min(i1, c0 + chunk);
        // One chunk stays packed from the first group on.
        const bool pack_now = pack_a && (jg == j0 || chunk < i1 - i0);
        if (pack_now && g.trans_a)
          pack_at(g.a + p0 * g.lda, g.lda, c0, c1, kc, apack);
        else if (pack_now)
          pack_a_rows(g.a + p0, g.lda, c0, c1, kc, apack);
        for (int64_t j = jg; j < jg1; j += kNR) {
          const int64_t cols = std::min(kNR, jg1 - j);
          const float* bp = direct ? g.b + p0 * g.ldb + j : panel_of(j);
          const int64_t ldbp = direct ? g.ldb : kNR;
          for (int64_t i = c0; i < c1; i += kMR) {
            const int64_t rows = std::min<int64_t>(kMR, c1 - i);
            const float* ap = pack_a      ? apack + (i - c0) * kc
                              : g.trans_a ? g.a + p0 * g.lda + i
                                          : g.a + i * g.lda + p0;
            t.bias = t.axis == BiasAxis::Col   ? g.bias + j
                     : t.axis == BiasAxis::Row ? g.bias + i
                                               : nullptr;
            // Packed tiles of either A are read as A^T with lda = kMR.
            const MicroFn micro = micro_for(g.trans_a || pack_a, !direct, rows, cols);
            micro(kc, ap, pack_a ? kMR : g.lda, bp, ldbp, g.c + i * g.ldc + j, g.ldc, cols, t);
          }
        }
      }
    }
  }
}

// Threads take tasks, blocks of C, from a shared counter: a worker that starts late (waking a
// sleeping thread costs tens of microseconds on a VM) leaves its tasks to the caller instead
// of making it wait. Each task packs its own A and B: its share of the packing falls as its
// block grows square, so the tasks are few (up to kTasksPerPart a thread) and as square as the
// shape allows (2048 x 2048 x 512 on 2 threads: 96-row tasks of 8 panels packed 3x more than
// one thread did, and ran at 90 GFLOP/s against 1 thread's 64).
constexpr int64_t kWholeColumnRows = 256;
constexpr int64_t kSplitK = 512;  // from this K on, whole-column products split K instead
// Tasks per thread: up to kTasksPerPart, one per kTaskMacs of work (~0.2 ms on one core),
// the same number for each thread.
constexpr int64_t kTaskMacs = int64_t{1} << 23;
constexpr int64_t kTasksPerPart = 4;

// Where split-K divides K: any point works; a multiple of the tile rows keeps it tidy.
int64_t split_point(const GemmArgs& g) { return (g.k / 2 + kMR - 1) / kMR * kMR; }

// A few rows of A against a tall B (a dense layer's forward, x [128, 784] W [784, 256]),
// on two threads: each thread takes one half of K, so it reads one contiguous half of B's
// rows, the half that the optimizer's update (split the same way, by contiguous halves) left
// in its cache. The halves are added, then the bias and activation: always in that order, on
// any number of threads, so the bits do not depend on the thread count.
void gemm_split_k(ThreadPool& pool, const GemmArgs& g, int parts, const Scratch& sc) {
  const int64_t k0 = split_point(g);
  float* partial = sc.aux(g.m * g.n);
  GemmArgs lo = g, hi = g;
  lo.k = k0;
  lo.bias = nullptr;
  lo.bias_axis = BiasAxis::None;
  lo.act = Activation::None;
  hi = lo;
  hi.k = g.k - k0;
  hi.a = g.trans_a ? g.a + k0 * g.lda : g.a + k0;
  hi.b = g.trans_b ? g.b + k0 : g.b + k0 * g.ldb;
  hi.c = partial;
  hi.ldc = g.n;
  hi.beta = 0.0f;
  pool.parallel_for(0, 2, 1, [&](int64_t first, int64_t last) {
    for (int64_t half = first; half < last; ++half) {
      const GemmArgs& h = half == 0 ? lo : hi;
      gemm_block(h, 0, h.m, 0, h.n, sc.panel(half));
    }
  });
  pool.parallel_for(0, g.m, std::max<int64_t>(1, (g.m + parts - 1) / parts), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      float* c = g.c + i * g.ldc;
      const float* q = partial + i * g.n;
      if (g.bias && g.bias_axis == BiasAxis::Col)
        for (int64_t j = 0; j < g.n; ++j) c[j] = c[j] + q[j] + g.bias[j];
      else if (g.bias && g.bias_axis == BiasAxis::Row)
        for (int64_t j = 0; j < g.n; ++j) c[j] = c[j] + q[j] + g.bias[i];
      else
        for (int64_t j = 0; j < g.n; ++j) c[j] += q[j];
      apply_activation(g.act, c, g.n);
    }
  });
}

// How a blocked product is shared out, decided by its shape and thread count alone (the sums'
// order is the same under any split, so one thread computes the same bits as two).
struct Blocking {
  enum Kind { Single, SplitK, WholeColumns, Grid } kind = Single;
  int parts = 1;
  int64_t rows = 0, width = 0;  // a task's rows (whole tiles) and columns (whole panels)
  int64_t row_blocks = 1, col_blocks = 1;
  int64_t pass = 0;             // the longest K pass any part packs (k_step of its depth)
};

Blocking blocking(const GemmArgs& g, int threads) {
  Blocking b;
  const int64_t macs = g.m * g.n * g.k;
  b.parts = macs < kGemmParallelMacs
                ? 1
                : static_cast<int>(std::min<int64_t>(threads, macs / kGemmParallelMacs + 1));
  b.rows = g.m;
  b.width = g.n;
  b.pass = k_step(g.k);
  const int64_t panels = (g.n + kNR - 1) / kNR, tiles = (g.m + kMR - 1) / kMR;
  if (macs >= kGemmParallelMacs && g.m <= kWholeColumnRows && g.n >= g.m && g.k >= kSplitK) {
    b.kind = Blocking::SplitK;
    // The panels hold one K pass of either half. k_step is not monotonic in k (AVX-512: 516
    // runs in 5 passes of 104, 508 in 4 of 127): sized by the larger half's pass, the other's
    // packed B ran past its panels into split-K's partial C and corrupted the first rows of a
    // 128 x 512 x 1024 product (the MLP at width 1024 then diverged where PyTorch's trained).
    const int64_t k0 = split_point(g);
    b.pass = std::max(k_step(k0), k_step(g.k - k0));
  } else if (b.parts <= 1) {
    b.kind = Blocking::Single;
  } else if (g.n >= g.m && g.m <= kWholeColumnRows && panels >= b.parts) {
    // B is the larger operand and A has few rows (a dense layer's forward: x [128, 784] by
    // W [784, 256]): each thread its own contiguous share of panels, all rows, so it reads
    // only its own columns of B, the same ones every call.
    b.kind = Blocking::WholeColumns;
    b.col_blocks = b.parts;
    b.width = (panels + b.parts - 1) / b.parts * kNR;
  } else {
    // A grid of tasks: the divisor pair of their count whose blocks pack least (1/rows +
    // 1/cols of their work), within the shape's tiles and panels.
    b.kind = Blocking::Grid;
    const int64_t tasks =
        b.parts * std::clamp<int64_t>(macs / (b.parts * kTaskMacs), 1, kTasksPerPart);
    double best = 0;
    for (int64_t gc = 1; gc <= tasks; ++gc) {
      const int64_t gr = tasks / gc;
      if (gr * gc != tasks || gc > panels || gr > tiles) continue;
      const int64_t rows = (tiles + gr - 1) / gr * kMR, width = (panels + gc - 1) / gc * kNR;
      const double cost = 1.0 / static_cast<double>(rows) + 1.0 / static_cast<double>(width);
      if (best == 0 || cost < best) {
        best = cost;
        b.rows = rows;
        b.width = width;
      }
    }
    if (best == 0) {  // too few tiles or panels for every pair: row blocks of a tile or more
      b.rows = (tiles + tasks - 1) / tasks * kMR;
      b.width = g.n;
    }
    b.row_blocks = (g.m + b.rows - 1) / b.rows;
    b.col_blocks = (g.n + b.width - 1) / b.width;
  }
  return b;
}

// The blocked product's scratch: a panel group per part that runs at once (split-K: one per
// half; none where every block reads B in place), then split-K's partial C.
int64_t blocked_panels(const GemmArgs& g, const Blocking& b) {
  if (!g.trans_b && g.m <= kDirectRows) return 0;
  return b.kind == Blocking::SplitK ? 2 : b.parts;
}
int64_t blocked_panel_floats(const Blocking& b) {
  return round_to_line(group_panels(b.rows, b.width) * b.pass * kNR);
}
int64_t blocked_aux(const GemmArgs& g, const Blocking& b) {
  return b.kind == Blocking::SplitK ? round_to_line(g.m * g.n) : 0;
}

void gemm_blocked(ThreadPool& pool, const GemmArgs& g, const Blocking& b, const Scratch& sc) {
  switch (b.kind) {
    case Blocking::SplitK:
      return gemm_split_k(pool, g, b.parts, sc);
    case Blocking::Single:
      return gemm_block(g, 0, g.m, 0, g.n, sc.panel(0));
    case Blocking::WholeColumns:
      pool.parallel_for(0, b.parts, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t part = lo; part < hi; ++part) {
          const int64_t j0 = part * b.width, j1 = std::min(g.n, j0 + b.width);
          if (j0 < j1) gemm_block(g, 0, g.m, j0, j1, sc.panel(part));
        }
      });
      return;
    case Blocking::Grid:
      break;
  }
  // Row blocks one after another, a block's columns in turn: the two threads start on the
  // same rows of A.
  const int64_t tasks = b.row_blocks * b.col_blocks;
  std::atomic<int64_t> next{0};
  pool.parallel_for(0, b.parts, 1, [&](int64_t part, int64_t) {
    float* panels = sc.panel(part);
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
      const int64_t i = t / b.col_blocks * b.rows, j = t % b.col_blocks * b.width;
      gemm_block(g, i, std::min(g.m, i + b.rows), j, std::min(g.n, j + b.width), panels);
    }
  });
}

// [SECTION] Matrix-vector

// y[j] = sum_p x[p] w[p ldw + j], j < cols (<= W NV), with contiguous x.
template <int NV>
void gemv_cols(int64_t k, const float* x, const float* w, int64_t ldw, float* y, int64_t cols) {
  // Narrow chunks keep two sets of accumulators so the FMA latency is still covered.
  constexpr int U = NV <= kGemvVecs / 2 ? 2 : 1;
  V acc[U][NV];
  #pragma GCC unroll 16
  for (int u = 0; u < U; ++u)
    #pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[u][v] = Simd::zero();
  const Mask tail = Simd::first(cols - kW * (NV - 1));
  int64_t p = 0;
  for (; p + U <= k; p += U)
    #pragma GCC unroll 16
    for (int u = 0; u < U; ++u) {
      const float* wr = w + (p + u) * ldw;
      const V xv = Simd::set1(x[p + u]);
      #pragma GCC unroll 16
      for (int v = 0; v < NV - 1; ++v) acc[u][v] = Simd::fmadd(xv, Simd::load(wr + kW * v), acc[u][v]);
      acc[u][NV - 1] = Simd::fmadd(xv, Simd::load(tail, wr + kW * (NV - 1)), acc[u][NV - 1]);
    }
  for (; p < k; ++p) {
    const float* wr = w + p * ldw;
    const V xv = Simd::set1(x[p]);
    #pragma GCC unroll 16
    for (int v = 0; v < NV - 1; ++v) acc[0][v] = Simd::fmadd(xv, Simd::load(wr + kW * v), acc[0][v]);
    acc[0][NV - 1] = Simd::fmadd(xv, Simd::load(tail, wr + kW * (NV - 1)), acc[0][NV - 1]);
  }
  #pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) {
    V s = acc[0][v];
    if constexpr (U == 2) s = Simd::add(s, acc[1][v]);
    if (v == NV - 1)
      Simd::store(y + kW * v, tail, s);
    else
      Simd::store(y + kW * v, s);
  }
}

using GemvFn = void (*)(int64_t, const float*, const float*, int64_t, float*, int64_t);
template <int... I>
constexpr std::array<GemvFn, sizeof...(I)> gemv_table(std::integer_sequence<int, I...>) {
  return {&gemv_cols<I + 1>...};
}
constexpr int64_t kGemvCols = kW * kGemvVecs;
constexpr auto kGemv = gemv_table(std::make_integer_sequence<int, kGemvVecs>{});

// y[j] = sum_p x[p] w[j ldw + p] for R rows of w: dot products with a horizontal sum.
template <int R>
void gemv_rows(int64_t k, const float* x, const float* w, int64_t ldw, float* y) {
  V acc[R];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = Simd::zero();
  for (int64_t p = 0; p < k; p += kW) {
    const Mask m = Simd::first(k - p);
    const V xv = Simd::load(m, x + p);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[r] = Simd::fmadd(xv, Simd::load(m, w + r * ldw + p), acc[r]);
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) y[r] = Simd::sum(acc[r]);
}

using GemvRowsFn = void (*)(int64_t, const float*, const float*, int64_t, float*);
constexpr std::array<GemvRowsFn, 8> kGemvRows = {&gemv_rows<1>, &gemv_rows<2>, &gemv_rows<3>, &gemv_rows<4>,
                                                 &gemv_rows<5>, &gemv_rows<6>, &gemv_rows<7>, &gemv_rows<8>};

// y = x W as a product of one row (m == 1) or one column (n == 1): `outs` outputs, out j at
// y[j incy], bias for output j at bias[j incb] (incb 0: one value for all).
struct Gemv {
  int64_t outs, k;
  const float* x;  // contiguous, k floats
  const float* w;
  int64_t ldw;
  bool w_kn;  // W(p, j) = w[p ldw + j]; else w[j ldw + p]
  float* y;
  int64_t incy;
  const float* bias;
  int64_t incb;
};

// `sums`: the outputs' sums where they cannot be written in place (indexed by output).
void gemv_range(const Gemv& v, const GemmArgs& g, int64_t lo, int64_t hi, float* sums) {
  const bool in_place = v.incy == 1 && g.beta == 0.0f;
  // Without a workspace, this thread's panel buffer (GemmAux may hold x).
  float* s = in_place ? v.y + lo
             : sums   ? sums + lo
                      : thread_scratch<float>(static_cast<size_t>(hi - lo), ScratchSlot::GemmPanel);
  if (v.w_kn) {
    for (int64_t j = lo; j < hi; j += kGemvCols) {
      const int64_t cols = std::min(kGemvCols, hi - j);
      kGemv[static_cast<size_t>((cols + kW - 1) / kW - 1)](v.k, v.x, v.w + j, v.ldw, s + (j - lo), cols);
    }
  } else {
    for (int64_t j = lo; j < hi; j += 8)
      kGemvRows[static_cast<size_t>(std::min<int64_t>(8, hi - j) - 1)](v.k, v.x, v.w + j * v.ldw, v.ldw, s + (j - lo));
  }
  for (int64_t j = lo; j < hi; ++j) {
    float* yj = v.y + j * v.incy;
    float r = s[j - lo];
    if (g.beta != 0.0f) r += g.beta * *yj;
    if (v.bias) r += v.bias[j * v.incb];
    *yj = r;
    if (v.incy != 1) apply_activation(g.act, yj, 1);
  }
  if (v.incy == 1) apply_activation(g.act, v.y + lo, hi - lo);
}

// A GEMV's scratch in a workspace: x gathered where it is strided, then a sum per output
// where they cannot be written in place (a strided y, or beta != 0). As gemv() decides.
int64_t gemv_x_floats(const GemmArgs& g) {
  const int64_t incx = g.m == 1 ? (g.trans_a ? g.lda : 1) : (g.trans_b ? 1 : g.ldb);
  return incx != 1 ? round_to_line(g.k) : 0;
}
int64_t gemv_floats(const GemmArgs& g) {
  const int64_t incy = g.m == 1 ? 1 : g.ldc;
  const bool in_place = incy == 1 && g.beta == 0.0f;
  return gemv_x_floats(g) + (in_place ? 0 : round_to_line(g.m == 1 ? g.n : g.m));
}

void gemv(ThreadPool& pool, const GemmArgs& g, float* ws) {
  Gemv v;
  const float* x;
  int64_t incx;
  const bool bias = g.bias && g.bias_axis != BiasAxis::None;
  if (g.m == 1) {  // y[j] = sum_p A(0, p) B(p, j)
    x = g.a;
    incx = g.trans_a ? g.lda : 1;
    v = Gemv{g.n, g.k, nullptr, g.b, g.ldb, !g.trans_b, g.c, 1, bias ? g.bias : nullptr,
             g.bias_axis == BiasAxis::Col ? 1 : 0};
  } else {  // n == 1: y[i] = sum_p B(p, 0) A(i, p)
    x = g.b;
    incx = g.trans_b ? 1 : g.ldb;
    v = Gemv{g.m, g.k, nullptr, g.a, g.lda, g.trans_a, g.c, g.ldc, bias ? g.bias : nullptr,
             g.bias_axis == BiasAxis::Row ? 1 : 0};
  }
  float* sums = ws ? ws + gemv_x_floats(g) : nullptr;
  if (incx != 1) {
    float* xc = ws ? ws : thread_scratch<float>(static_cast<size_t>(g.k), ScratchSlot::GemmAux);
    for (int64_t p = 0; p < g.k; ++p) xc[p] = x[p * incx];
    x = xc;
  }
  v.x = x;
  // Parts take whole vectors of columns (or 8-row groups) of the outputs.
  const int64_t unit = v.w_kn ? kW : 8, units = (v.outs + unit - 1) / unit;
  const int parts = static_cast<int>(
      std::min<int64_t>({pool.size(), units, std::max<int64_t>(1, v.outs * v.k / kMinParallelGemv)}));
  if (parts <= 1) return gemv_range(v, g, 0, v.outs, sums);
  // A strided x was gathered into this thread's scratch: the workers read it from there.
  pool.parallel_for(0, parts, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      gemv_range(v, g, std::min(v.outs, units * t / parts * unit), std::min(v.outs, units * (t + 1) / parts * unit),
                 sums);
  });
}

// k == 0: C = act(beta C + bias).
void scale_only(const GemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    for (int64_t j = 0; j < g.n; ++j) {
      float r = g.beta != 0.0f ? g.beta * row[j] : 0.0f;
      if (g.bias && g.bias_axis == BiasAxis::Col) r += g.bias[j];
      if (g.bias && g.bias_axis == BiasAxis::Row) r += g.bias[i];
      row[j] = r;
    }
    apply_activation(g.act, row, g.n);
  }
}

}  // namespace

// [SECTION] Entry point

int64_t gemm_simd_workspace_floats(const GemmArgs& g, int threads) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  if (g.m == 1 || g.n == 1) return gemv_floats(g);
  const Blocking b = blocking(g, threads);
  return blocked_panels(g, b) * blocked_panel_floats(b) + blocked_aux(g, b);
}

void gemm_simd(ThreadPool& pool, const GemmArgs& g) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k <= 0) return scale_only(g);
  // The caller's workspace where it is aligned and large enough for this pool; else this
  // thread's buffers.
  float* ws = g.workspace;
  if (ws && (reinterpret_cast<uintptr_t>(ws) % 64 != 0 || g.workspace_floats < gemm_simd_workspace_floats(g, pool.size())))
    ws = nullptr;
  if (g.m == 1 || g.n == 1) return gemv(pool, g, ws);
  const Blocking b = blocking(g, pool.size());
  gemm_blocked(pool, g, b, Scratch{ws, ws ? blocked_panels(g, b) : 0, blocked_panel_floats(b)});
}

#endif  // MLS_SIMD

}  // namespace mls::cpu
