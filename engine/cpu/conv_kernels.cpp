// CPU kernels: convolution. Pooling kernels live in conv_pool_kernels.cpp.
//
// Each of conv2d, conv2d_backward_input (also conv_transpose2d's forward) and
// conv2d_backward_weight is a GEMM per (sample, group) against the column matrix of the
// input, col [k = cg*kh*kw, oh*ow], whose row (c, i, j) is what kernel tap (i, j) of channel
// c sees at every output pixel:
//   conv2d:                 y[n,g]  = W[g] [og, k] x col(x[n,g])
//   conv2d_backward_input:  dx[n,g] = col2im(W[g]^T x g[n,g])
//   conv2d_backward_weight: dW[g]  += g[n,g] x col(x[n,g])^T        (summed over samples)
// Two ways to run the forward and the input gradient:
// - stride 1 (the common case): no column matrix at all. In a copy of the input padded to
//   width wp, row (c, i, j) is the padded input itself, shifted; outputs are computed wp
//   wide and the extra columns dropped. A register-tiled micro-kernel (6 channels x 4
//   vectors, as the GEMM's) reads the shifted rows in place. The input gradient of a
//   stride-1 convolution is itself one (of g with the kernel flipped), so it runs on the
//   same micro-kernel. At LeNet-5's shapes these reach 150-250 GFLOP/s on two AVX-512 cores
//   (bench/conv_kernels), where im2col + GEMM spent more time copying than multiplying.
// - otherwise: im2col into a buffer, then cpu::gemm.
// Work splits over samples. The weight gradient lives in conv_weight_kernels.cpp, what both
// files share in conv_common.h.
//
// [SECTION] Stride 1: micro-kernels in padded-width layout
// [SECTION] Workspace
// [SECTION] Kernels
#include <algorithm>
#include <array>
#include <utility>

#include "engine/cpu/conv_common.h"
#include "engine/cpu/conv_kernels.h"
#include "engine/cpu/conv_sample_lanes.h"

namespace mls::cpu {

void register_pool_kernels(OpRegistry& reg);         // conv_pool_kernels.cpp
void register_conv_weight_kernels(OpRegistry& reg);  // conv_weight_kernels.cpp

namespace {

using namespace conv;

// [SECTION] Stride 1: micro-kernels in padded-width layout

// A forward micro-tile is up to 6 output channels x 4 vectors of output pixels: 24
// accumulators, and per kernel tap 4 loads of shifted input and 6 broadcast weights, as in
// the GEMM's micro-kernel (gemm_simd.cpp). With 16 vector registers (AVX2 and below) the
// tiles shrink so that accumulators, operands and a broadcast still fit.
#ifdef __AVX512F__
constexpr int kForwardRows = 6, kForwardVecs = 4;
#else
constexpr int kForwardRows = 6, kForwardVecs = 2;
#endif

// Which taps a tile runs: those with kk % per_channel in [lo, hi) (the kernel rows that reach
// a non-zero input row).
struct Taps {
  int64_t per_channel, lo, hi;
};

// yp[r, 0 : NV*kLanes] = sum_k w[r, k] * xp[off[k] : off[k] + NV*kLanes] for MR rows, over the
// taps t admits (the others would only multiply zeros).
template <int MR, int NV>
void forward_tile(const float* w, int64_t k, const float* xp, const int64_t* off, float* yp,
                  int64_t ldy, Taps t) {
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t base = 0; base < k; base += t.per_channel)
    for (int64_t kk = base + t.lo; kk < base + t.hi; ++kk) {
      const float* b = xp + off[kk];
      V bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = load(b + v * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const float wv = w[r * k + kk];
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[r][v] += wv * bv[v];
      }
    }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) store(yp + r * ldy + v * kLanes, acc[r][v]);
}

using ForwardTile = void (*)(const float*, int64_t, const float*, const int64_t*, float*, int64_t,
                             Taps);
template <int... I>
constexpr std::array<ForwardTile, sizeof...(I)> forward_table(std::integer_sequence<int, I...>) {
  return {&forward_tile<I / kForwardVecs + 1, I % kForwardVecs + 1>...};
}
constexpr auto kForwardTiles =
    forward_table(std::make_integer_sequence<int, kForwardRows * kForwardVecs>{});

// The taps that reach a non-zero row of xp for the outputs at q in [q0, q1) (padded-width
// rows q / wp): tap row i reads padded rows r + i * dil, which are zero outside [pad, pad + h).
// An input gradient pads g by kh - 1 (LeNet's conv2: 4 rows above and below 10), so that 29 %
// of its taps only multiply zeros.
Taps live_taps(const Direct& d, int64_t q0, int64_t q1) {
  const int64_t r0 = q0 / d.wp, r1 = (q1 - 1) / d.wp, dil = d.dil[0];
  const int64_t lo = std::clamp<int64_t>(ceil_div(d.pad[0] - r1, dil), 0, d.kh);
  const int64_t hi = std::clamp<int64_t>(ceil_div(d.pad[0] + d.h - r0, dil), lo, d.kh);
  if (lo == 0 && hi == d.kh) return {.per_channel = d.k, .lo = 0, .hi = d.k};  // one run of k
  return {.per_channel = d.kh * d.kw, .lo = lo * d.kw, .hi = hi * d.kw};
}

// Column vectors [v0, v1) of yp [cout, qr] = w [cout, k] x (shifted rows of xp).
void forward_tiles(const float* w, const float* xp, float* yp, const Direct& d, int64_t v0,
                   int64_t v1) {
  // Tiles as even as the vectors allow: 13 vectors as 3 + 3 + 3 + 4, not 4 + 4 + 4 + 1 (a
  // one-vector tile loads 7 operands for 6 multiply-adds).
  const int64_t tiles = (v1 - v0 + kForwardVecs - 1) / kForwardVecs;
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t v = v0 + (v1 - v0) * t / tiles, nv = v0 + (v1 - v0) * (t + 1) / tiles - v;
    const Taps taps = live_taps(d, v * kLanes, (v + nv) * kLanes);
    for (int64_t o = 0; o < d.cout; o += kForwardRows) {
      const int64_t rows = std::min<int64_t>(kForwardRows, d.cout - o);
      kForwardTiles[static_cast<size_t>((rows - 1) * kForwardVecs + nv - 1)](
          w + o * d.k, d.k, xp + v * kLanes, d.off.data(), yp + o * d.qr + v * kLanes, d.qr, taps);
    }
  }
}

// [SECTION] Stride 1, whole vectors of output channels: pixel tiles
//
// Where the output channels fill whole vectors, a tile is RT output rows x PT pixels of a
// row x NV vectors of channels: yT[(r, c), o] = sum_kk xp[off[kk] + r wp + c] wk[kk, o], with
// wk the weights transposed [k, cout]. Per tap: NV loads of wk and RT x PT broadcasts straight
// from the padded input (a displacement each), and only real output pixels are computed:
// the flat tiles above also compute the padded-width columns and round each plane up to
// whole vectors (at the residual CNN's 7 x 7 convolution, 64 outputs for 49). yT [P, cout]
// is then transposed into y's planes.

#ifdef __AVX512F__
constexpr int kPixelSums = 28;  // the sums a tile keeps in registers (of 32)
#else
constexpr int kPixelSums = 12;  // of 16
#endif
constexpr int kPixelMaxCols = 14, kPixelMaxRows = 2, kPixelMaxVecs = 2;

template <int PT, int RT, int NV>
void pixel_tile(const float* wk, int64_t cout, int64_t k, const float* xq, int64_t wp,
                const int64_t* off, float* yt, int64_t ow) {
  V acc[RT][PT][NV];
#pragma GCC unroll 2
  for (int rt = 0; rt < RT; ++rt)
#pragma GCC unroll 16
    for (int t = 0; t < PT; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[rt][t][v] = V{};
  for (int64_t kk = 0; kk < k; ++kk) {
    // A pointer a row, so that each pixel's broadcast is a displacement from it (indexing
    // p[wp + t] made GCC keep an index register a pixel, and spill them).
    const float* row[RT];
#pragma GCC unroll 2
    for (int rt = 0; rt < RT; ++rt) row[rt] = xq + off[kk] + rt * wp;
    V wv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) wv[v] = load(wk + kk * cout + v * kLanes);
#pragma GCC unroll 2
    for (int rt = 0; rt < RT; ++rt)
#pragma GCC unroll 16
      for (int t = 0; t < PT; ++t) {
        const float a = row[rt][t];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) acc[rt][t][v] += a * wv[v];
      }
  }
#pragma GCC unroll 2
  for (int rt = 0; rt < RT; ++rt)
#pragma GCC unroll 16
    for (int t = 0; t < PT; ++t)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) store(yt + (rt * ow + t) * cout + v * kLanes, acc[rt][t][v]);
}

using PixelTile = void (*)(const float*, int64_t, int64_t, const float*, int64_t, const int64_t*,
                           float*, int64_t);
template <int PT, int RT, int NV>
constexpr PixelTile pixel_tile_or_null() {
  if constexpr (PT * RT * NV <= kPixelSums)
    return &pixel_tile<PT, RT, NV>;
  else
    return nullptr;  // more sums than registers: never chosen (pixel_plan)
}
template <int... I>
constexpr std::array<PixelTile, sizeof...(I)> pixel_table(std::integer_sequence<int, I...>) {
  return {pixel_tile_or_null<I / (kPixelMaxRows * kPixelMaxVecs) + 1,
                             I / kPixelMaxVecs % kPixelMaxRows + 1, I % kPixelMaxVecs + 1>()...};
}
constexpr auto kPixelTiles =
    pixel_table(std::make_integer_sequence<int, kPixelMaxCols * kPixelMaxRows * kPixelMaxVecs>{});

PixelTile pixel_tile_for(int64_t pt, int64_t rt, int64_t nv) {
  return kPixelTiles[static_cast<size_t>(((pt - 1) * kPixelMaxRows + rt - 1) * kPixelMaxVecs + nv -
                                         1)];
}

// Whether a stride-1 convolution into `cout` channels a group runs on pixel tiles, and their size.
struct PixelPlan {
  int64_t nv, rt, pt;
};
bool pixel_tiles_fit(int64_t cout) {
  return cout % kLanes == 0;
}
PixelPlan pixel_plan(const Direct& d) {
  PixelPlan p{.nv = d.cout % (2 * kLanes) == 0 ? 2 : 1, .rt = std::min<int64_t>(d.oh, 2)};
  const int64_t most = std::min<int64_t>(kPixelMaxCols, kPixelSums / (p.nv * p.rt));
  p.pt = (d.ow + (d.ow + most - 1) / most - 1) / ((d.ow + most - 1) / most);  // even split
  return p;
}

// yT [oh*ow, cout] for output rows [r0, r1) = the convolution of xp with wk [k, cout].
void pixel_rows(const float* wk, const float* xp, float* yt, const Direct& d, const PixelPlan& pp,
                int64_t r0, int64_t r1) {
  for (int64_t ob = 0; ob < d.cout; ob += pp.nv * kLanes)
    for (int64_t r = r0; r < r1; r += pp.rt) {
      const int64_t rt = std::min(pp.rt, r1 - r);
      for (int64_t c0 = 0; c0 < d.ow; c0 += pp.pt) {
        const int64_t pt = std::min(pp.pt, d.ow - c0);
        pixel_tile_for(pt, rt, pp.nv)(wk + ob, d.cout, d.k, xp + r * d.wp + c0, d.wp, d.off.data(),
                                      yt + (r * d.ow + c0) * d.cout + ob, d.ow);
      }
    }
}

// y[c, :] = act(y[c, :] + bias[c]) over `channels` planes: conv2d_act's epilogue, run on a
// block just computed.
void bias_act(float* y, int64_t channels, int64_t plane, const float* bias, Activation act) {
  if (!bias && act == Activation::None) return;
  for (int64_t ch = 0; ch < channels; ++ch) {
    float* p = y + ch * plane;
    if (bias)
      for (int64_t i = 0; i < plane; ++i) p[i] += bias[ch];
    apply_activation(act, p, plane);
  }
}

// y [groups*cout, oh, ow] = x [groups*cin, h, w] (*) w for one sample: w is [groups][cout, k],
// or with `pixel` [groups][k, cout] for the pixel tiles. The tiles split over the pool when
// `split` (few samples, much work each).
void direct_sample(const KernelCall& c, const float* x, const float* w, bool pixel, float* y,
                   const Direct& d, int64_t groups, Scratch& s, bool split, const float* bias,
                   Activation act) {
  const int64_t vecs = d.qr / kLanes, units = (vecs + kForwardVecs - 1) / kForwardVecs;
  const PixelPlan pp = pixel ? pixel_plan(d) : PixelPlan{};
  const int64_t planes = d.oh * d.ow;
  for (int64_t g = 0; g < groups; ++g) {
    pad_input(x + g * d.cin * d.h * d.w, s.xp, d);
    const float* wg = w + g * d.cout * d.k;
    float* yg = y + g * d.cout * planes;
    if (pixel) {
      // Row pairs split over the pool; yT [P, cout] in the scratch's output buffer.
      const int64_t pairs = (d.oh + pp.rt - 1) / pp.rt;
      auto rows = [&](int64_t lo, int64_t hi) {
        pixel_rows(wg, s.xp, s.yp, d, pp, lo * pp.rt, std::min(d.oh, hi * pp.rt));
      };
      if (split) {
        const int64_t grain =
            std::max<int64_t>(1, static_cast<int64_t>(kTaskMacs) / (pp.rt * d.ow * d.cout * d.k));
        pool_of(c).parallel_for(0, pairs, grain, rows);
      } else {
        rows(0, pairs);
      }
      transpose(s.yp, d.cout, planes, d.cout, yg, planes);
    } else {
      if (split) {
        // Units of kForwardVecs vectors: whole micro-tiles.
        const int64_t grain = std::max<int64_t>(
            1, static_cast<int64_t>(kTaskMacs) / (kForwardVecs * kLanes * d.cout * d.k));
        pool_of(c).parallel_for(0, units, grain, [&](int64_t lo, int64_t hi) {
          forward_tiles(wg, s.xp, s.yp, d, lo * kForwardVecs, std::min(vecs, hi * kForwardVecs));
        });
      } else {
        forward_tiles(wg, s.xp, s.yp, d, 0, vecs);
      }
      // The copy out of the padded-width rows adds the bias and applies relu on the way,
      // where a pass each over y cost more than the copy (LeNet's conv1).
      const bool fused = (act == Activation::None && bias) || act == Activation::Relu;
      for (int64_t o = 0; o < d.cout; ++o) {
        const float b = fused && bias ? bias[g * d.cout + o] : 0.f;
        for (int64_t r = 0; r < d.oh; ++r) {
          float* out = yg + (o * d.oh + r) * d.ow;
          const float* in = s.yp + o * d.qr + r * d.wp;
          if (fused)
            copy_bias_relu(out, in, d.ow, b, act == Activation::Relu);
          else
            copy_floats(out, in, d.ow);
        }
      }
      if (fused) continue;
    }
    bias_act(yg, d.cout, planes, bias ? bias + g * d.cout : nullptr, act);
  }
}

// The stride-1 convolution of n samples: over samples, or over tiles when samples are few
// (direct_split); a task's scratch at ws + task * scratch_floats(d).
bool direct_split(int64_t threads, int64_t n, int64_t groups, const Direct& d) {
  return n < threads && static_cast<double>(groups * d.cout * d.k * d.qr) >= 2 * kTaskMacs;
}
int64_t direct_tasks(int64_t threads, int64_t n, int64_t groups, const Direct& d) {
  return direct_split(threads, n, groups, d)
             ? 1
             : batch_tasks(threads, n, static_cast<double>(groups * d.cout * d.k * d.qr));
}
void direct_conv(const KernelCall& c, const float* x, const float* w, bool pixel, float* y,
                 int64_t n, int64_t groups, const Direct& d, float* ws, const float* bias = nullptr,
                 Activation act = Activation::None) {
  const int64_t threads = pool_of(c).size();
  const bool split = direct_split(threads, n, groups, d);
  const int64_t tasks = direct_tasks(threads, n, groups, d);
  const int64_t in_size = groups * d.cin * d.h * d.w, out_size = groups * d.cout * d.oh * d.ow;
  for_sample_tasks(c, n, tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    Scratch s(d, ws + static_cast<size_t>(task) * scratch_floats(d));
    for (int64_t i = lo; i < hi; ++i)
      direct_sample(c, x + i * in_size, w, pixel, y + i * out_size, d, groups, s, split, bias, act);
  });
}

// The input gradient of a stride-1 convolution is a stride-1 convolution of g padded by
// dilation*(k-1) - padding with the kernel flipped and its channel axes swapped.
bool direct_input_ok(const ConvShape& s) {
  return s.unit_stride() && s.p.padding[0] <= s.p.dilation[0] * (s.kh - 1) &&
         s.p.padding[1] <= s.p.dilation[1] * (s.kw - 1);
}

Direct backward_input_direct(const ConvShape& s) {
  Pair2 pad{s.p.dilation[0] * (s.kh - 1) - s.p.padding[0],
            s.p.dilation[1] * (s.kw - 1) - s.p.padding[1]};
  return make_direct(s.og, s.oh, s.ow, s.cg, s.kh, s.kw, pad, s.p.dilation);
}

// Workspace: the flipped kernel wt [o*k], then direct_conv's per-task scratch. The flipped
// kernel of group gi maps input channel ch and tap (o, kh-1-i, kw-1-j) of the direct
// convolution to w[gi][o][ch, i, j]; it is laid out [cg, og*taps] (each output channel's
// row), or [og*taps, cg] for the pixel tiles.
void direct_backward_input(const KernelCall& c, const ConvShape& s, const float* g, const float* w,
                           float* dx, float* ws) {
  Direct d = backward_input_direct(s);
  const bool pixel = pixel_tiles_fit(s.cg);
  float* wt = ws;
  const int64_t taps = s.kh * s.kw, k = s.og * taps;
  for (int64_t gi = 0; gi < s.groups; ++gi)
    for (int64_t o = 0; o < s.og; ++o)
      for (int64_t ch = 0; ch < s.cg; ++ch)
        for (int64_t t = 0; t < taps; ++t) {
          const int64_t kk = o * taps + (taps - 1 - t);
          wt[gi * s.cg * k + (pixel ? kk * s.cg + ch : ch * k + kk)] =
              w[((gi * s.og + o) * s.cg + ch) * taps + t];
        }
  direct_conv(c, g, wt, pixel, dx, s.n, s.groups, d, ws + s.o * s.k());
}

// [SECTION] Stride 1, few input channels: multiply, then fold
//
// Where a group's input channels are too few for the pixel tiles, the direct input gradient
// runs the flat tiles over dx's padded planes: LeNet's conv2 computes 6 channels of 14 rows
// 18 wide from g 10 x 10 padded by 4, most of it multiplying g's zero border. Instead:
//   T [cg*taps, P] = Wt [cg*taps, og] x g [og, P]      (P = oh*ow, on the flat tiles: k = og)
//   dx[c, y, x]    = sum over taps (i, j) of T[(c, i, j), y + pad - i*dil, x + pad - j*dil]
// T's rows are g's planes times one tap; each dx row is summed in registers from the T rows
// its taps reach, so only real products are computed and nothing is zeroed or scattered.
// bench/conv_kernels, LeNet's conv2 on two AVX-512 cores: 0.55 -> 0.49 ms (the product 0.38,
// the fold 0.11).

// The flat tiles' view of T = Wt x g for one sample: og "taps", each a plane of g as one row;
// T's rows are qr (P rounded up to whole vectors) apart.
Direct fold_gemm(const ConvShape& s) {
  return make_direct(s.og, 1, s.pixels(), s.cg * s.kh * s.kw, 1, 1, Pair2{0, 0}, Pair2{1, 1});
}

// Multiply-adds per sample and group of the fold path and of the flat path it replaces (the
// fold's adds counted as one each).
bool fold_pays(const ConvShape& s, const Direct& flat, int64_t threads) {
  if (pixel_tiles_fit(s.cg) || s.w > kLanes || s.kw > 16 || s.n < threads) return false;
  const Direct m = fold_gemm(s);
  const int64_t rows = (m.cout + kForwardRows - 1) / kForwardRows * kForwardRows;
  const double fold = static_cast<double>(rows * m.qr * s.og + s.h * s.w * m.cout);
  const double direct = static_cast<double>((s.cg + kForwardRows - 1) / kForwardRows *
                                            kForwardRows * flat.qr * flat.k);
  return fold < direct;
}

// dx [cg, h, w] from T [cg*taps, ldt] (row (c, i, j): g's oh x ow pixels times that tap), in
// two steps of whole-register adds:
//   R[i, oy, x] = sum_j T[(c, i, j), oy, x + pad - j*dil]   (rows kLanes wide, x < w <= kLanes)
//   dx[c, y, x] = sum_i R[i, y + pad - i*dil, x]
// (fold_pays keeps wider planes, and kernels over 16 wide, on the flat path.)
#ifdef __AVX512F__
// R rows [0, N) of one kernel row i: r[q] = sum over the kernel's columns j of T row (c, i, j)
// from element from[j] + q * ow, masked to the lanes column j reaches.
constexpr int64_t kFoldRows = 8;
template <int N>
void fold_chunk(intptr_t row0, const int64_t* from, const __mmask16* mask, int64_t cols, int64_t ow,
                float* r) {
  V acc[N]{};
  for (int64_t j = 0; j < cols; ++j) {
    const intptr_t at = row0 + static_cast<intptr_t>(sizeof(float)) * from[j];
#pragma GCC unroll 8
    for (int q = 0; q < N; ++q)
      acc[q] += V(_mm512_maskz_loadu_ps(
          mask[j],
          reinterpret_cast<const float*>(at + static_cast<intptr_t>(sizeof(float)) * q * ow)));
  }
#pragma GCC unroll 8
  for (int q = 0; q < N; ++q) store(r + q * kLanes, acc[q]);
}
using FoldChunk = void (*)(intptr_t, const int64_t*, const __mmask16*, int64_t, int64_t, float*);
template <int... I>
constexpr std::array<FoldChunk, sizeof...(I)> fold_table(std::integer_sequence<int, I...>) {
  return {&fold_chunk<I + 1>...};
}
constexpr auto kFoldChunks = fold_table(std::make_integer_sequence<int, kFoldRows>{});
#endif

void fold_rows(const float* t, int64_t ldt, const ConvShape& s, float* r, float* dx) {
  const int64_t taps = s.kh * s.kw;
  // Per kernel column j: the lanes it reaches and where lane 0 reads, from T's row (c, i, 0).
  // (The masked-off lanes are not read, so that address may lie before the row.)
  std::array<int64_t, 16> from{}, lo{}, hi{};
  int64_t cols = 0;
  for (int64_t j = 0; j < s.kw; ++j) {
    const int64_t shift = j * s.p.dilation[1] - s.p.padding[1];  // lane x reads x - shift
    const int64_t l = std::max<int64_t>(0, shift), h = std::min(s.w, s.ow + shift);
    if (l >= h) continue;
    from[cols] = j * ldt - shift, lo[cols] = l, hi[cols] = h, ++cols;
  }
#ifdef __AVX512F__
  std::array<__mmask16, 16> mask{};
  for (int64_t j = 0; j < cols; ++j)
    mask[j] = static_cast<__mmask16>(first_lanes(hi[j]) & ~first_lanes(lo[j]));
#endif
  for (int64_t c = 0; c < s.cg; ++c) {
    for (int64_t i = 0; i < s.kh; ++i) {
      const auto row0 = reinterpret_cast<intptr_t>(t + (c * taps + i * s.kw) * ldt);
      float* ri = r + i * s.oh * kLanes;
#ifdef __AVX512F__
      // Rows of R in even chunks of at most kFoldRows, each chunk's sums independent: one
      // chain of kw adds a row waited on each add's latency.
      const int64_t chunks = (s.oh + kFoldRows - 1) / kFoldRows;
      for (int64_t ch = 0; ch < chunks; ++ch) {
        const int64_t oy0 = s.oh * ch / chunks, n = s.oh * (ch + 1) / chunks - oy0;
        kFoldChunks[static_cast<size_t>(n - 1)](
            row0 + static_cast<intptr_t>(sizeof(float)) * oy0 * s.ow, from.data(), mask.data(),
            cols, s.ow, ri + oy0 * kLanes);
      }
#else
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        V acc{};
        for (int64_t j = 0; j < cols; ++j) {
          const auto* at = reinterpret_cast<const float*>(
              row0 + static_cast<intptr_t>(sizeof(float)) * (from[j] + oy * s.ow));
          for (int64_t l = lo[j]; l < hi[j]; ++l) acc[l] += at[l];
        }
        store(ri + oy * kLanes, acc);
      }
#endif
    }
    for (int64_t y = 0; y < s.h; ++y) {
      V acc{};
      for (int64_t i = 0; i < s.kh; ++i) {
        const int64_t oy = y + s.p.padding[0] - i * s.p.dilation[0];
        if (oy >= 0 && oy < s.oh) acc += load(r + (i * s.oh + oy) * kLanes);
      }
      float* out = dx + (c * s.h + y) * s.w;
#ifdef __AVX512F__
      _mm512_mask_storeu_ps(out, first_lanes(s.w), acc);
#else
      for (int64_t l = 0; l < s.w; ++l) out[l] = acc[l];
#endif
    }
  }
}

// Workspace: Wt [groups][cg*taps, og], then each task's scratch: g's planes as rows, T, and
// fold_rows' R.
size_t fold_task_floats(const ConvShape& s, const Direct& m) {
  return scratch_floats(m) + static_cast<size_t>(s.kh * s.oh * kLanes);
}
int64_t fold_tasks(const ConvShape& s, const Direct& m, int64_t threads) {
  return batch_tasks(threads, s.n, static_cast<double>(s.groups * m.cout * m.k * m.qr));
}
size_t fold_floats(const ConvShape& s, int64_t threads) {
  const Direct m = fold_gemm(s);
  return static_cast<size_t>(s.o * s.k()) +
         static_cast<size_t>(fold_tasks(s, m, threads)) * fold_task_floats(s, m);
}

void fold_backward_input(const KernelCall& c, const ConvShape& s, const float* g, const float* w,
                         float* dx, float* ws) {
  const Direct m = fold_gemm(s);
  const int64_t rows = m.cout;  // cg * taps
  float* wt = ws;
  for (int64_t gi = 0; gi < s.groups; ++gi)
    for (int64_t o = 0; o < s.og; ++o)
      for (int64_t r = 0; r < rows; ++r)
        wt[(gi * rows + r) * s.og + o] = w[(gi * s.og + o) * rows + r];
  const int64_t threads = pool_of(c).size();
  const int64_t tasks = fold_tasks(s, m, threads);
  float* scratch = ws + s.o * s.k();
  const int64_t g_size = s.o * s.pixels(), dx_size = s.c * s.h * s.w;
  for_sample_tasks(c, s.n, tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* mine = scratch + static_cast<size_t>(task) * fold_task_floats(s, m);
    Scratch sc(m, mine);
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        pad_input(g + i * g_size + gi * s.og * s.pixels(), sc.xp, m);
        forward_tiles(wt + gi * rows * s.og, sc.xp, sc.yp, m, 0, m.qr / kLanes);
        fold_rows(sc.yp, m.qr, s, mine + scratch_floats(m),
                  dx + i * dx_size + gi * s.cg * s.h * s.w);
      }
  });
}

// [SECTION] Workspace: what each kernel carves from its workspace, from the shapes and the
// pool's threads (the same choices the kernels make).

// The BLAS paths: each task's column matrix, then (64-byte aligned) each task's GEMM scratch.
size_t blas_floats(const ConvShape& s, ConvGemm which, int64_t threads) {
  const auto tasks = static_cast<size_t>(blas_tasks(threads, s));
  return static_cast<size_t>(round_to_line(static_cast<int64_t>(tasks * col_floats(s)))) +
         tasks * gemm_floats(s, which, threads);
}
FloatSpan blas_gemm_scratch(const ConvShape& s, ConvGemm which, int64_t threads, float* base,
                            int64_t task) {
  const auto tasks = static_cast<size_t>(blas_tasks(threads, s));
  const size_t per = gemm_floats(s, which, threads);
  return {base + static_cast<size_t>(round_to_line(static_cast<int64_t>(tasks * col_floats(s)))) +
              static_cast<size_t>(task) * per,
          static_cast<int64_t>(per)};
}

// Few output channels, where the flat tiles would run: 16 samples across the lanes pay more
// (conv_sample_lanes.cpp).
bool forward_lanes_pay(const ConvShape& s) {
  return forward_direct(s) && !pixel_tiles_fit(s.og) && lanes_forward_pays(s);
}

size_t forward_floats(const ConvShape& s, int64_t threads) {
  if (forward_lanes_pay(s)) return lanes_forward_floats(s, threads);
  if (forward_direct(s)) {
    const Direct d = forward_direct_of(s);
    const size_t wk = pixel_tiles_fit(s.og) ? static_cast<size_t>(s.o * s.k()) : 0;
    return wk + static_cast<size_t>(direct_tasks(threads, s.n, s.groups, d)) * scratch_floats(d);
  }
  return blas_floats(s, ConvGemm::Forward, threads);
}

// Where the fold would pay, 16 samples across the lanes pay more (conv_sample_lanes.cpp).
bool input_lanes_pay(const ConvShape& s, int64_t threads) {
  return direct_input_ok(s) && !s.pointwise() && fold_pays(s, backward_input_direct(s), threads) &&
         lanes_input_pays(s);
}

size_t backward_input_floats(const ConvShape& s, int64_t threads) {
  if (input_lanes_pay(s, threads)) return lanes_input_floats(s, threads);
  if (direct_input_ok(s) && !s.pointwise()) {
    const Direct d = backward_input_direct(s);
    if (fold_pays(s, d, threads)) return fold_floats(s, threads);
    return static_cast<size_t>(s.o * s.k()) +
           static_cast<size_t>(direct_tasks(threads, s.n, s.groups, d)) * scratch_floats(d);
  }
  return blas_floats(s, ConvGemm::BackwardInput, threads);
}

// [SECTION] Kernels

void conv2d_kernel(const KernelCall& c) {
  conv2d_forward(c, nullptr, Activation::None);
}

}  // namespace

void conv2d_forward(const KernelCall& c, const float* bias, Activation act) {
  const Tensor &tx = *c.inputs[0], &tw = *c.inputs[1];
  ConvShape s = conv_shape(tx.shape(), tw.shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  const float* w = in_ptr<float>(c, 1);
  float* y = out_ptr<float>(c, 0);
  const int64_t threads = pool_of(c).size();
  Workspace ws(c, forward_floats(s, threads));
  if (forward_lanes_pay(s)) return lanes_forward(c, s, x, w, y, ws.base, bias, act);
  if (forward_direct(s)) {
    if (!pixel_tiles_fit(s.og))
      return direct_conv(c, x, w, false, y, s.n, s.groups, forward_direct_of(s), ws.base, bias,
                         act);
    // wk [groups][k, og] first in the workspace, then direct_conv's scratch.
    for (int64_t g = 0; g < s.groups; ++g)
      transpose(w + g * s.og * s.k(), s.k(), s.og, s.k(), ws.base + g * s.og * s.k(), s.og);
    return direct_conv(c, x, ws.base, true, y, s.n, s.groups, forward_direct_of(s),
                       ws.base + s.o * s.k(), bias, act);
  }
  const int64_t k = s.k(), px = s.pixels();
  for_sample_tasks(c, s.n, blas_tasks(threads, s), [&](int64_t lo, int64_t hi, int64_t task) {
    float* col = ws.base + static_cast<size_t>(task) * col_floats(s);
    const FloatSpan gs = blas_gemm_scratch(s, ConvGemm::Forward, threads, ws.base, task);
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t g = 0; g < s.groups; ++g) {
        const float* xg = x + (n * s.c + g * s.cg) * s.h * s.w;
        if (!s.pointwise()) im2col(xg, col, s);
        gemm(pool_of(c), false, false, s.og, px, k, w + g * s.og * k, k, s.pointwise() ? xg : col,
             px, 0.f, y + (n * s.o + g * s.og) * px, px, gs);
        bias_act(y + (n * s.o + g * s.og) * px, s.og, px, bias ? bias + g * s.og : nullptr, act);
      }
  });
}

namespace {

// (g [n,o,oh,ow], w [o,cg,kh,kw]) -> dx [n,c,h,w]; also conv_transpose2d's forward, with the
// transposed convolution's input as g.
void conv2d_backward_input_kernel(const KernelCall& c) {
  const Tensor &tg = *c.inputs[0], &tw = *c.inputs[1];
  ConvShape s = conv_shape(c.outputs[0]->shape(), tw.shape(), tg.shape(), c.attrs);
  const float* g = in_ptr<float>(c, 0);
  const float* w = in_ptr<float>(c, 1);
  float* dx = out_ptr<float>(c, 0);
  const int64_t threads = pool_of(c).size();
  Workspace ws(c, backward_input_floats(s, threads));
  if (input_lanes_pay(s, threads)) return lanes_backward_input(c, s, g, w, dx, ws.base);
  if (direct_input_ok(s) && !s.pointwise()) {
    if (fold_pays(s, backward_input_direct(s), threads))
      return fold_backward_input(c, s, g, w, dx, ws.base);
    return direct_backward_input(c, s, g, w, dx, ws.base);
  }
  const int64_t k = s.k(), px = s.pixels(), plane = s.cg * s.h * s.w;
  for_sample_tasks(c, s.n, blas_tasks(threads, s), [&](int64_t lo, int64_t hi, int64_t task) {
    float* col = ws.base + static_cast<size_t>(task) * col_floats(s);
    const FloatSpan gs = blas_gemm_scratch(s, ConvGemm::BackwardInput, threads, ws.base, task);
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        float* dxg = dx + (n * s.c + gi * s.cg) * s.h * s.w;
        float* out = s.pointwise() ? dxg : col;
        gemm(pool_of(c), true, false, k, px, s.og, w + gi * s.og * k, k,
             g + (n * s.o + gi * s.og) * px, px, 0.f, out, px, gs);
        if (s.pointwise()) continue;
        std::fill(dxg, dxg + plane, 0.f);
        col2im(col, dxg, s);
      }
  });
}

}  // namespace

size_t conv2d_forward_workspace(std::span<const ValueType> in, std::span<const ValueType> out,
                                const Attrs& a, const Backend& b) {
  return forward_floats(conv_shape(in[0].shape, in[1].shape, out[0].shape, a), b.num_threads()) *
         sizeof(float);
}

namespace {

size_t backward_input_workspace(std::span<const ValueType> in, std::span<const ValueType> out,
                                const Attrs& a,
                                const Backend& b) {  // (g, w) -> dx
  return backward_input_floats(conv_shape(out[0].shape, in[1].shape, in[0].shape, a),
                               b.num_threads()) *
         sizeof(float);
}

}  // namespace

void register_conv_kernels(OpRegistry& reg) {
  reg.register_kernel("conv2d", DeviceKind::CPU, DType::F32, conv2d_kernel);
  reg.register_kernel("conv2d_backward_input", DeviceKind::CPU, DType::F32,
                      conv2d_backward_input_kernel);
  reg.register_kernel("conv_transpose2d", DeviceKind::CPU, DType::F32,
                      conv2d_backward_input_kernel);
  reg.register_workspace("conv2d", DeviceKind::CPU, DType::F32, conv2d_forward_workspace);
  reg.register_workspace("conv2d_backward_input", DeviceKind::CPU, DType::F32,
                         backward_input_workspace);
  reg.register_workspace("conv_transpose2d", DeviceKind::CPU, DType::F32, backward_input_workspace);
  register_conv_weight_kernels(reg);
  register_pool_kernels(reg);
}

}  // namespace mls::cpu
