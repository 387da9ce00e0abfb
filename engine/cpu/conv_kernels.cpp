// CPU kernels: convolution. Pooling kernels live in conv_pool_kernels.cpp.
//
// Each of conv2d, conv2d_backward_input (also conv_transpose2d's forward) and
// conv2d_backward_weight is a GEMM per (sample, group) against the column matrix of the
// input, col [k = cg*kh*kw, oh*ow], whose row (c, i, j) is what kernel tap (i, j) of channel
// c sees at every output pixel:
//   conv2d:                 y[n,g]  = W[g] [og, k] x col(x[n,g])
//   conv2d_backward_input:  dx[n,g] = col2im(W[g]^T x g[n,g])
//   conv2d_backward_weight: dW[g]  += g[n,g] x col(x[n,g])^T        (summed over samples)
// Two ways to run them:
// - stride 1 (the common case): no column matrix at all. In a copy of the input padded to
//   width wp, row (c, i, j) is the padded input itself, shifted; outputs are computed wp
//   wide and the extra columns dropped. A register-tiled micro-kernel (6 channels x 4
//   vectors, as the GEMM's) reads the shifted rows in place. The input gradient of a
//   stride-1 convolution is itself one (of g with the kernel flipped), so it runs on the
//   same micro-kernel. The weight gradient, with 16 or more output channels a group, lays
//   the column matrices of a few samples side by side (copied from the padded input) and
//   runs one cpu::gemm over them; with fewer it keeps per-lane sums across samples and adds
//   the lanes once at the end. At LeNet-5's shapes these reach 150-250 GFLOP/s on two cores
//   (bench/conv_kernels), where im2col + GEMM spent more time copying than multiplying.
// - otherwise: im2col into a buffer, then cpu::gemm.
// Work splits over samples (per-task weight-gradient buffers are added at the end).
//
// [SECTION] Shapes and task splitting
// [SECTION] Stride 1: micro-kernels in padded-width layout
// [SECTION] Stride 1 weight gradient: column matrices of several samples, one GEMM
// [SECTION] Any stride: im2col + SGEMM
// [SECTION] Kernels
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "engine/cpu/avx512.h"
#include "engine/cpu/conv_kernels.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/kernels.h"
#include "engine/ops/conv.h"

namespace mls::cpu {

void register_pool_kernels(OpRegistry& reg);  // conv_pool_kernels.cpp

namespace {

// [SECTION] Shapes and task splitting

// A convolution of x [n,c,h,w] with w [o,cg,kh,kw] into y [n,o,oh,ow], cut into groups.
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups, cg, og;
  Conv2dParams p;
  int64_t k() const { return cg * kh * kw; }
  int64_t pixels() const { return oh * ow; }
  // 1x1, stride 1, no padding: a sample's input is its own column matrix (one SGEMM).
  bool pointwise() const {
    return kh == 1 && kw == 1 && p.stride == Pair2{1, 1} && p.padding == Pair2{0, 0};
  }
  bool unit_stride() const { return p.stride == Pair2{1, 1}; }
};

ConvShape conv_shape(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
  Conv2dParams p = conv2d_params(a).value();
  return {.n = x[0],
          .c = x[1],
          .h = x[2],
          .w = x[3],
          .o = w[0],
          .kh = w[2],
          .kw = w[3],
          .oh = y[2],
          .ow = y[3],
          .groups = p.groups,
          .cg = w[1],
          .og = w[0] / p.groups,
          .p = p};
}

constexpr double kTaskMacs = 1 << 18;  // at least this much work per task

// How many tasks to cut a batch of n samples into, each of `macs` multiply-adds, on a pool
// of `threads`.
int64_t batch_tasks(int64_t threads, int64_t n, double macs) {
  auto by_work = static_cast<int64_t>(macs * static_cast<double>(n) / kTaskMacs);
  return std::clamp<int64_t>(by_work, 1, std::max<int64_t>(1, std::min<int64_t>(n, threads)));
}


// fn(sample_lo, sample_hi, task) for `tasks` contiguous ranges of n samples.
template <typename Fn>
void for_sample_tasks(const KernelCall& c, int64_t n, int64_t tasks, Fn fn) {
  pool_of(c).parallel_for(0, tasks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) fn(n * t / tasks, n * (t + 1) / tasks, t);
  });
}

// [SECTION] Stride 1: micro-kernels in padded-width layout

// GCC/Clang vector extensions: kLanes floats, one zmm register where the build has
// AVX-512 (else one AVX register, or two SSE/NEON ones). load(p) and store(p, v) move
// kLanes floats at any float address with unaligned vector moves: through memcpy under
// clang (which loads through a reduced-alignment vector typedef with an aligned move, and
// faults), through such a typedef under GCC. Always inlined: no vector crosses a call
// boundary by value, whose ABI would depend on -march.
#ifdef __AVX512F__
constexpr int kLanes = 16;
#else
constexpr int kLanes = 8;
#endif
typedef float V __attribute__((vector_size(4 * kLanes)));
#if defined(__clang__)
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}
#else
// GCC keeps the tiles' sums in registers better through a reduced-alignment view (the
// weight-gradient tile runs twice as fast as through memcpy).
typedef float Vu __attribute__((vector_size(4 * kLanes), aligned(4), may_alias));
[[gnu::always_inline]] inline V load(const float* p) {
  return *reinterpret_cast<const Vu*>(p);
}
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  *reinterpret_cast<Vu*>(p) = v;
}
#endif

// A forward micro-tile is up to 6 output channels x 4 vectors of output pixels: 24
// accumulators, and per kernel tap 4 loads of shifted input and 6 broadcast weights, as in
// the GEMM's micro-kernel (gemm_simd.cpp). With 16 vector registers (AVX2 and below) the
// tiles shrink so that accumulators, operands and a broadcast still fit.
#ifdef __AVX512F__
constexpr int kForwardRows = 6, kForwardVecs = 4;
#else
constexpr int kForwardRows = 6, kForwardVecs = 2;
#endif

// A stride-1 convolution of one sample and group: input [cin, h, w], output [cout, oh, ow],
// weights [cout, k]. The padded input has planes hp x wp; output row r lives at r*wp of a
// buffer row of qr >= oh*wp floats (qr a multiple of kLanes).
struct Direct {
  int64_t cin, h, w, cout, kh, kw;
  Pair2 pad, dil;
  int64_t hp, wp, oh, ow, qr, k;
  std::vector<int64_t> off;  // row (c, i, j) of the column matrix starts at xp + off[row]
  size_t padded_size;        // floats of the padded input, with room for the last tile's reads
};

Direct make_direct(int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t kh, int64_t kw,
                   Pair2 pad, Pair2 dil) {
  Direct d{.cin = cin, .h = h, .w = w, .cout = cout, .kh = kh, .kw = kw, .pad = pad, .dil = dil};
  d.hp = h + 2 * pad[0];
  d.wp = w + 2 * pad[1];
  d.oh = d.hp - dil[0] * (kh - 1);
  d.ow = d.wp - dil[1] * (kw - 1);
  d.qr = (d.oh * d.wp + kLanes - 1) / kLanes * kLanes;
  d.k = cin * kh * kw;
  for (int64_t c = 0; c < cin; ++c)
    for (int64_t i = 0; i < kh; ++i)
      for (int64_t j = 0; j < kw; ++j) d.off.push_back((c * d.hp + i * dil[0]) * d.wp + j * dil[1]);
  d.padded_size = static_cast<size_t>(std::max(cin * d.hp * d.wp, d.off.back() + d.qr));
  return d;
}

// Short row copies (a convolution's rows are often 5-30 floats): inline vector moves, where
// a memcpy or fill call would cost more than the copy itself.
inline void zero_floats(float* out, int64_t n) {
#ifdef __AVX512F__
  for (; n > 0; n -= 16, out += 16) _mm512_mask_storeu_ps(out, first_lanes(n), _mm512_setzero_ps());
#else
  std::fill(out, out + std::max<int64_t>(n, 0), 0.f);
#endif
}

inline void copy_floats(float* out, const float* in, int64_t n) {
#ifdef __AVX512F__
  for (; n > 0; n -= 16, out += 16, in += 16) {
    const __mmask16 m = first_lanes(n);
    _mm512_mask_storeu_ps(out, m, _mm512_maskz_loadu_ps(m, in));
  }
#else
  if (n > 0) std::memcpy(out, in, sizeof(float) * static_cast<size_t>(n));
#endif
}

// xp <- x [cin, h, w] with zero borders.
void pad_input(const float* x, float* xp, const Direct& d) {
  std::fill(xp, xp + d.padded_size, 0.f);
  for (int64_t c = 0; c < d.cin; ++c)
    for (int64_t r = 0; r < d.h; ++r)
      copy_floats(xp + (c * d.hp + r + d.pad[0]) * d.wp + d.pad[1], x + (c * d.h + r) * d.w, d.w);
}

// yp[r, 0 : NV*kLanes] = sum_k w[r, k] * xp[off[k] : off[k] + NV*kLanes] for MR rows.
template <int MR, int NV>
void forward_tile(const float* w, int64_t k, const float* xp, const int64_t* off, float* yp,
                  int64_t ldy) {
  V acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (int64_t kk = 0; kk < k; ++kk) {
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

using ForwardTile = void (*)(const float*, int64_t, const float*, const int64_t*, float*, int64_t);
template <int... I>
constexpr std::array<ForwardTile, sizeof...(I)> forward_table(std::integer_sequence<int, I...>) {
  return {&forward_tile<I / kForwardVecs + 1, I % kForwardVecs + 1>...};
}
constexpr auto kForwardTiles = forward_table(std::make_integer_sequence<int, kForwardRows * kForwardVecs>{});

// Column vectors [v0, v1) of yp [cout, qr] = w [cout, k] x (shifted rows of xp).
void forward_tiles(const float* w, const float* xp, float* yp, const Direct& d, int64_t v0,
                   int64_t v1) {
  for (int64_t v = v0; v < v1; v += kForwardVecs) {
    const int64_t nv = std::min<int64_t>(kForwardVecs, v1 - v);
    for (int64_t o = 0; o < d.cout; o += kForwardRows) {
      const int64_t rows = std::min<int64_t>(kForwardRows, d.cout - o);
      kForwardTiles[static_cast<size_t>((rows - 1) * kForwardVecs + nv - 1)](
          w + o * d.k, d.k, xp + v * kLanes, d.off.data(), yp + o * d.qr + v * kLanes, d.qr);
    }
  }
}

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
constexpr auto kWeightTiles = weight_table(std::make_integer_sequence<int, kWeightRows * kWeightCols>{});

// Per-task scratch: the padded input and an output (or gradient) buffer [cout, qr], at `at`
// in the kernel's workspace.
size_t scratch_floats(const Direct& d) { return d.padded_size + static_cast<size_t>(d.cout * d.qr); }
struct Scratch {
  float* xp;
  float* yp;
  Scratch(const Direct& d, float* at) : xp(at), yp(at + d.padded_size) {}
};

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

// y [groups*cout, oh, ow] = x [groups*cin, h, w] (*) w [groups*cout, k] for one sample; the
// tiles split over the pool when `split` (few samples, much work each).
void direct_sample(const KernelCall& c, const float* x, const float* w, float* y, const Direct& d,
                   int64_t groups, Scratch& s, bool split, const float* bias, Activation act) {
  const int64_t vecs = d.qr / kLanes, units = (vecs + kForwardVecs - 1) / kForwardVecs;
  for (int64_t g = 0; g < groups; ++g) {
    pad_input(x + g * d.cin * d.h * d.w, s.xp, d);
    const float* wg = w + g * d.cout * d.k;
    if (split) {
      // Units of kForwardVecs vectors: whole micro-tiles.
      const int64_t grain = std::max<int64_t>(
          1, static_cast<int64_t>(kTaskMacs) / (kForwardVecs * kLanes * d.cout * d.k));
      pool_of(c).parallel_for(0, units, grain, [&](int64_t lo, int64_t hi) {
        forward_tiles(wg, s.xp, s.yp, d, lo * kForwardVecs,
                      std::min(vecs, hi * kForwardVecs));
      });
    } else {
      forward_tiles(wg, s.xp, s.yp, d, 0, vecs);
    }
    float* yg = y + g * d.cout * d.oh * d.ow;
    for (int64_t o = 0; o < d.cout; ++o)
      for (int64_t r = 0; r < d.oh; ++r)
        copy_floats(yg + (o * d.oh + r) * d.ow, s.yp + o * d.qr + r * d.wp, d.ow);
    bias_act(yg, d.cout, d.oh * d.ow, bias ? bias + g * d.cout : nullptr, act);
  }
}

// The stride-1 convolution of n samples: over samples, or over tiles when samples are few
// (direct_split); a task's scratch at ws + task * scratch_floats(d).
bool direct_split(int64_t threads, int64_t n, int64_t groups, const Direct& d) {
  return n < threads && static_cast<double>(groups * d.cout * d.k * d.qr) >= 2 * kTaskMacs;
}
int64_t direct_tasks(int64_t threads, int64_t n, int64_t groups, const Direct& d) {
  return direct_split(threads, n, groups, d) ? 1 : batch_tasks(threads, n, static_cast<double>(groups * d.cout * d.k * d.qr));
}
void direct_conv(const KernelCall& c, const float* x, const float* w, float* y, int64_t n,
                 int64_t groups, const Direct& d, float* ws, const float* bias = nullptr,
                 Activation act = Activation::None) {
  const int64_t threads = pool_of(c).size();
  const bool split = direct_split(threads, n, groups, d);
  const int64_t tasks = direct_tasks(threads, n, groups, d);
  const int64_t in_size = groups * d.cin * d.h * d.w, out_size = groups * d.cout * d.oh * d.ow;
  for_sample_tasks(c, n, tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    Scratch s(d, ws + static_cast<size_t>(task) * scratch_floats(d));
    for (int64_t i = lo; i < hi; ++i)
      direct_sample(c, x + i * in_size, w, y + i * out_size, d, groups, s, split, bias, act);
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

// Workspace: the flipped kernel wt [o*k], then direct_conv's per-task scratch.
void direct_backward_input(const KernelCall& c, const ConvShape& s, const float* g, const float* w,
                           float* dx, float* ws) {
  Direct d = backward_input_direct(s);
  // wt[g][c][o, kh-1-i, kw-1-j] = w[g][o][c, i, j]
  float* wt = ws;
  const int64_t taps = s.kh * s.kw;
  for (int64_t gi = 0; gi < s.groups; ++gi)
    for (int64_t o = 0; o < s.og; ++o)
      for (int64_t ch = 0; ch < s.cg; ++ch)
        for (int64_t t = 0; t < taps; ++t)
          wt[((gi * s.cg + ch) * s.og + o) * taps + (taps - 1 - t)] =
              w[((gi * s.og + o) * s.cg + ch) * taps + t];
  direct_conv(c, g, wt, dx, s.n, s.groups, d, ws + s.o * s.k());
}

// dw [groups*og, k] += the weight gradient of samples [lo, hi); ws: this task's
// direct_weight_floats.
size_t direct_weight_floats(const ConvShape& s, const Direct& d) {
  return scratch_floats(d) + static_cast<size_t>(s.o * d.k * kLanes);
}
void direct_weight_samples(const ConvShape& s, const Direct& d, const float* x, const float* g,
                           float* dw, int64_t lo, int64_t hi, float* ws) {
  Scratch sc(d, ws);
  // Per-lane sums [groups*og, k, kLanes], added across lanes after the last sample.
  float* lanes = ws + scratch_floats(d);
  std::fill(lanes, lanes + s.o * d.k * kLanes, 0.f);
  for (int64_t n = lo; n < hi; ++n)
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      pad_input(x + (n * s.c + gi * s.cg) * s.h * s.w, sc.xp, d);
      // gp [og, qr]: g in padded-width layout, zero in the dropped columns.
      std::fill(sc.yp, sc.yp + d.cout * d.qr, 0.f);
      const float* gg = g + (n * s.o + gi * s.og) * s.pixels();
      for (int64_t o = 0; o < s.og; ++o)
        for (int64_t r = 0; r < s.oh; ++r)
          copy_floats(sc.yp + o * d.qr + r * d.wp, gg + (o * s.oh + r) * s.ow, s.ow);
      float* lg = lanes + gi * s.og * d.k * kLanes;
      for (int64_t o = 0; o < s.og; o += kWeightRows) {
        const int64_t rows = std::min<int64_t>(kWeightRows, s.og - o);
        for (int64_t kk = 0; kk < d.k; kk += kWeightCols) {
          const int64_t cols = std::min<int64_t>(kWeightCols, d.k - kk);
          kWeightTiles[static_cast<size_t>((rows - 1) * kWeightCols + cols - 1)](
              sc.yp + o * d.qr, d.qr, sc.xp, d.off.data() + kk,
              lg + (o * d.k + kk) * kLanes, d.k);
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
// runs: 64K floats and 128K floats were 5-10 % slower than 16K or 32K.
constexpr int64_t kColumnFloats = 1 << 15;

struct Columns {
  Direct d;
  int64_t samples;  // S per chunk
  int64_t ld;       // col's and G's row stride: S*P and room for a vector's overrun
  int64_t acc, xp, col, gt;  // floats of each region of a task's scratch (line multiples)
  GemmArgs gemm(const ConvShape& s) const {
    return GemmArgs{.trans_b = true, .m = d.k, .n = s.og, .k = samples * s.pixels(), .lda = ld,
                    .ldb = ld, .ldc = s.og, .beta = 1.f};
  }
};

bool columns_weight(const ConvShape& s) { return s.unit_stride() && !s.pointwise() && s.og >= 16 && s.k() >= 16; }

Columns columns_of(const ConvShape& s, const Direct& d) {
  Columns c{.d = d};
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
void columns_weight_samples(ThreadPool& pool, const ConvShape& s, const Columns& c, const float* x,
                            const float* g, float* acc, int64_t lo, int64_t hi, float* ws,
                            FloatSpan gemm_ws) {
  float* xp = ws;
  float* col = xp + c.xp;
  float* gt = col + c.col;
  const int64_t px = s.pixels();
  std::fill(xp, xp + c.xp, 0.f);  // the overrun reads past the padded input see zeros
  for (int64_t n0 = lo; n0 < hi; n0 += c.samples) {
    const int64_t chunk = std::min(c.samples, hi - n0);
    for (int64_t gi = 0; gi < s.groups; ++gi) {
      for (int64_t i = 0; i < chunk; ++i) {
        pad_input(x + ((n0 + i) * s.c + gi * s.cg) * s.h * s.w, xp, c.d);
        columns_from_padded(xp, c.d, col + i * px, c.ld);
        const float* gg = g + ((n0 + i) * s.o + gi * s.og) * px;
        for (int64_t o = 0; o < s.og; ++o) copy_floats(gt + o * c.ld + i * px, gg + o * px, px);
      }
      GemmArgs a = c.gemm(s);
      a.k = chunk * px;
      a.a = col;
      a.b = gt;
      a.c = acc + gi * c.d.k * s.og;
      a.workspace = gemm_ws.p;
      a.workspace_floats = gemm_ws.n;
      cpu::gemm(pool, a);
    }
  }
}

// [SECTION] Any stride: im2col + SGEMM

int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

// The outputs [lo, hi) of a row whose tap ow * stride + offset lies inside [0, extent).
struct Span {
  int64_t lo, hi;
};
Span inside(int64_t offset, int64_t stride, int64_t extent, int64_t out) {
  int64_t lo = std::clamp<int64_t>(ceil_div(-offset, stride), 0, out);
  return {lo, std::clamp<int64_t>(ceil_div(extent - offset, stride), lo, out)};
}

// Calls fn(col_offset, x_offset, span, stride, dx) for every row of the column matrix of one
// (sample, group) and every output row in it; x_offset is -1 where the tap lies in the
// padding. im2col and col2im are this walk with a copy in either direction.
template <typename Fn>
void for_col_rows(const ConvShape& s, Fn fn) {
  const int64_t sh = s.p.stride[0], sw = s.p.stride[1];
  for (int64_t ch = 0; ch < s.cg; ++ch)
    for (int64_t i = 0; i < s.kh; ++i)
      for (int64_t j = 0; j < s.kw; ++j) {
        int64_t row = (ch * s.kh + i) * s.kw + j;
        int64_t dy = i * s.p.dilation[0] - s.p.padding[0];
        int64_t dx = j * s.p.dilation[1] - s.p.padding[1];
        Span span = inside(dx, sw, s.w, s.ow);
        for (int64_t oh = 0; oh < s.oh; ++oh) {
          int64_t ih = oh * sh + dy;
          bool in = ih >= 0 && ih < s.h;
          fn(row * s.pixels() + oh * s.ow, in ? (ch * s.h + ih) * s.w : int64_t{-1}, span, sw, dx);
        }
      }
}

// col [k, oh*ow] <- x [cg,h,w] (one sample, one group), zeros for the padding.
void im2col(const float* x, float* col, const ConvShape& s) {
  for_col_rows(s, [&](int64_t ci, int64_t xi, Span sp, int64_t sw, int64_t dx) {
    float* out = col + ci;
    if (xi < 0) return zero_floats(out, s.ow);
    const float* in = x + xi;
    zero_floats(out, sp.lo);
    if (sw == 1) {
      copy_floats(out + sp.lo, in + sp.lo + dx, sp.hi - sp.lo);
    } else {
      for (int64_t ow = sp.lo; ow < sp.hi; ++ow) out[ow] = in[ow * sw + dx];
    }
    zero_floats(out + sp.hi, s.ow - sp.hi);
  });
}

// x [cg,h,w] += col [k, oh*ow] folded back (the adjoint of im2col).
void col2im(const float* col, float* x, const ConvShape& s) {
  for_col_rows(s, [&](int64_t ci, int64_t xi, Span sp, int64_t sw, int64_t dx) {
    if (xi < 0) return;
    const float* in = col + ci;
    float* out = x + xi;
    for (int64_t ow = sp.lo; ow < sp.hi; ++ow) out[ow * sw + dx] += in[ow];
  });
}

void gemm(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc, FloatSpan ws) {
  cpu::gemm(pool, GemmArgs{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .a = a, .lda = lda,
                           .b = b, .ldb = ldb, .c = c, .ldc = ldc, .beta = beta, .workspace = ws.p,
                           .workspace_floats = ws.n});
}

// The GEMM scratch of one task of each BLAS path (cpu::gemm_workspace_floats: a multiple of
// 16 floats, so each task's starts 64-byte aligned).
enum class ConvGemm { Forward, BackwardInput, BackwardWeight };
size_t gemm_floats(const ConvShape& s, ConvGemm which, int64_t threads) {
  GemmArgs g;
  switch (which) {
    case ConvGemm::Forward:
      g = GemmArgs{.m = s.og, .n = s.pixels(), .k = s.k(), .lda = s.k(), .ldb = s.pixels(), .ldc = s.pixels()};
      break;
    case ConvGemm::BackwardInput:
      g = GemmArgs{.trans_a = true, .m = s.k(), .n = s.pixels(), .k = s.og, .lda = s.k(), .ldb = s.pixels(),
                   .ldc = s.pixels()};
      break;
    case ConvGemm::BackwardWeight:  // accumulates (beta 1) over the task's samples
      g = GemmArgs{.trans_b = true, .m = s.og, .n = s.k(), .k = s.pixels(), .lda = s.pixels(), .ldb = s.pixels(),
                   .ldc = s.k(), .beta = 1.f};
      break;
  }
  return static_cast<size_t>(gemm_workspace_floats(g, static_cast<int>(threads)));
}

// cpu::gemm keeps a GEMM on the calling thread below M*N*K = kGemmParallelMacs.
// Convolutions made of such GEMMs split their samples over our pool; larger ones run the
// samples in turn and let gemm's threads share each GEMM.
int64_t blas_tasks(int64_t threads, const ConvShape& s) {
  double mnk = static_cast<double>(s.og) * static_cast<double>(s.k() * s.pixels());
  if (mnk >= static_cast<double>(kGemmParallelMacs)) return 1;
  return batch_tasks(threads, s.n, mnk * static_cast<double>(s.groups));
}

// An im2col path's per-task column matrix [k, oh*ow] (none for a pointwise convolution).
size_t col_floats(const ConvShape& s) { return s.pointwise() ? 0 : static_cast<size_t>(s.k() * s.pixels()); }

// [SECTION] Workspace: what each kernel carves from its workspace, from the shapes and the
// pool's threads (the same choices the kernels make).

bool forward_direct(const ConvShape& s) { return s.unit_stride() && !s.pointwise(); }
Direct forward_direct_of(const ConvShape& s) {
  return make_direct(s.cg, s.h, s.w, s.og, s.kh, s.kw, s.p.padding, s.p.dilation);
}

// The BLAS paths: each task's column matrix, then (64-byte aligned) each task's GEMM scratch.
size_t blas_floats(const ConvShape& s, ConvGemm which, int64_t threads) {
  const auto tasks = static_cast<size_t>(blas_tasks(threads, s));
  return static_cast<size_t>(round_to_line(static_cast<int64_t>(tasks * col_floats(s)))) + tasks * gemm_floats(s, which, threads);
}
FloatSpan blas_gemm_scratch(const ConvShape& s, ConvGemm which, int64_t threads, float* base, int64_t task) {
  const auto tasks = static_cast<size_t>(blas_tasks(threads, s));
  const size_t per = gemm_floats(s, which, threads);
  return {base + static_cast<size_t>(round_to_line(static_cast<int64_t>(tasks * col_floats(s)))) + static_cast<size_t>(task) * per, static_cast<int64_t>(per)};
}

size_t forward_floats(const ConvShape& s, int64_t threads) {
  if (forward_direct(s)) {
    const Direct d = forward_direct_of(s);
    return static_cast<size_t>(direct_tasks(threads, s.n, s.groups, d)) * scratch_floats(d);
  }
  return blas_floats(s, ConvGemm::Forward, threads);
}

size_t backward_input_floats(const ConvShape& s, int64_t threads) {
  if (direct_input_ok(s) && !s.pointwise()) {
    const Direct d = backward_input_direct(s);
    return static_cast<size_t>(s.o * s.k()) +
           static_cast<size_t>(direct_tasks(threads, s.n, s.groups, d)) * scratch_floats(d);
  }
  return blas_floats(s, ConvGemm::BackwardInput, threads);
}

// The partial sums of dw (for tasks 1.., task 0 sums into dw), then each task's scratch.
// Three ways: per-lane tiles (stride 1, few output channels), column matrices of several
// samples (stride 1; each task sums into its scratch, dW transposed), or im2col + GEMM per
// sample.
struct WeightPlan {
  enum Kind { Lanes, Columns, Blas } kind;
  Direct d;
  int64_t tasks;
  size_t per_task;
  int64_t partials() const { return kind == Columns ? 0 : tasks - 1; }
};
WeightPlan weight_plan(const ConvShape& s, int64_t threads) {
  WeightPlan wp{forward_direct(s) ? (columns_weight(s) ? WeightPlan::Columns : WeightPlan::Lanes)
                                  : WeightPlan::Blas,
                {}, 1, 0};
  if (wp.kind == WeightPlan::Blas) {
    wp.tasks = blas_tasks(threads, s);
    wp.per_task = col_floats(s);
    return wp;
  }
  wp.d = forward_direct_of(s);
  if (wp.kind == WeightPlan::Lanes) {
    wp.tasks = batch_tasks(threads, s.n, static_cast<double>(s.o * s.k() * wp.d.qr));
    wp.per_task = direct_weight_floats(s, wp.d);
  } else {
    wp.tasks = batch_tasks(threads, s.n, static_cast<double>(s.o * s.k() * s.pixels()));
    const Columns c = columns_of(s, wp.d);
    wp.per_task = static_cast<size_t>(c.acc + c.xp + c.col + c.gt);
  }
  return wp;
}
// The GEMM each task of the Columns and Blas paths calls (64-byte aligned scratch each).
size_t weight_gemm_floats(const ConvShape& s, const WeightPlan& wp, int64_t threads) {
  if (wp.kind == WeightPlan::Lanes) return 0;
  if (wp.kind == WeightPlan::Blas) return gemm_floats(s, ConvGemm::BackwardWeight, threads);
  return static_cast<size_t>(gemm_workspace_floats(columns_of(s, wp.d).gemm(s), static_cast<int>(threads)));
}
// ... then each task's GEMM scratch.
size_t weight_floats(const ConvShape& s, int64_t threads) {
  const WeightPlan wp = weight_plan(s, threads);
  const size_t before = static_cast<size_t>(wp.partials() * s.o * s.k()) + static_cast<size_t>(wp.tasks) * wp.per_task;
  return static_cast<size_t>(round_to_line(static_cast<int64_t>(before))) +
         static_cast<size_t>(wp.tasks) * weight_gemm_floats(s, wp, threads);
}

// [SECTION] Kernels

void conv2d_kernel(const KernelCall& c) { conv2d_forward(c, nullptr, Activation::None); }

}  // namespace

void conv2d_forward(const KernelCall& c, const float* bias, Activation act) {
  const Tensor &tx = *c.inputs[0], &tw = *c.inputs[1];
  ConvShape s = conv_shape(tx.shape(), tw.shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  const float* w = in_ptr<float>(c, 1);
  float* y = out_ptr<float>(c, 0);
  const int64_t threads = pool_of(c).size();
  Workspace ws(c, forward_floats(s, threads));
  if (forward_direct(s)) return direct_conv(c, x, w, y, s.n, s.groups, forward_direct_of(s), ws.base, bias, act);
  const int64_t k = s.k(), px = s.pixels();
  for_sample_tasks(c, s.n, blas_tasks(threads, s), [&](int64_t lo, int64_t hi, int64_t task) {
    float* col = ws.base + static_cast<size_t>(task) * col_floats(s);
    const FloatSpan gs = blas_gemm_scratch(s, ConvGemm::Forward, threads, ws.base, task);
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t g = 0; g < s.groups; ++g) {
        const float* xg = x + (n * s.c + g * s.cg) * s.h * s.w;
        if (!s.pointwise()) im2col(xg, col, s);
        gemm(pool_of(c), false, false, s.og, px, k, w + g * s.og * k, k, s.pointwise() ? xg : col, px,
             0.f, y + (n * s.o + g * s.og) * px, px, gs);
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
  if (direct_input_ok(s) && !s.pointwise()) return direct_backward_input(c, s, g, w, dx, ws.base);
  const int64_t k = s.k(), px = s.pixels(), plane = s.cg * s.h * s.w;
  for_sample_tasks(c, s.n, blas_tasks(threads, s), [&](int64_t lo, int64_t hi, int64_t task) {
    float* col = ws.base + static_cast<size_t>(task) * col_floats(s);
    const FloatSpan gs = blas_gemm_scratch(s, ConvGemm::BackwardInput, threads, ws.base, task);
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        float* dxg = dx + (n * s.c + gi * s.cg) * s.h * s.w;
        float* out = s.pointwise() ? dxg : col;
        gemm(pool_of(c), true, false, k, px, s.og, w + gi * s.og * k, k, g + (n * s.o + gi * s.og) * px, px,
             0.f, out, px, gs);
        if (s.pointwise()) continue;
        std::fill(dxg, dxg + plane, 0.f);
        col2im(col, dxg, s);
      }
  });
}

// (x [n,c,h,w], g [n,o,oh,ow]) -> dw [o,cg,kh,kw]: each task sums its samples into its own
// buffer (task 0 into dw itself; on the Columns path every task into its scratch's acc,
// which holds dW transposed), then the buffers are added.
void conv2d_backward_weight_kernel(const KernelCall& c) {
  const Tensor &tx = *c.inputs[0], &tg = *c.inputs[1];
  Tensor& tdw = *c.outputs[0];
  ConvShape s = conv_shape(tx.shape(), tdw.shape(), tg.shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  const float* g = in_ptr<float>(c, 1);
  float* dw = out_ptr<float>(c, 0);
  const int64_t k = s.k(), px = s.pixels(), size = tdw.numel(), threads = pool_of(c).size();
  const WeightPlan wp = weight_plan(s, threads);
  const int64_t tasks = wp.tasks;
  Workspace ws(c, weight_floats(s, threads));
  float* partial = ws.base;  // [partials, size], then each task's scratch
  float* scratch = ws.base + wp.partials() * size;
  const size_t gemm_per = weight_gemm_floats(s, wp, threads);
  float* gemm_base = ws.base + round_to_line(wp.partials() * size + tasks * static_cast<int64_t>(wp.per_task));
  const Columns cols = wp.kind == WeightPlan::Columns ? columns_of(s, wp.d) : Columns{};
  std::fill(dw, dw + size, 0.f);
  std::fill(partial, partial + wp.partials() * size, 0.f);
  for_sample_tasks(c, s.n, tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* acc = task == 0 ? dw : partial + (task - 1) * size;
    float* mine = scratch + static_cast<size_t>(task) * wp.per_task;
    const FloatSpan gemm_ws{gemm_base + static_cast<size_t>(task) * gemm_per, static_cast<int64_t>(gemm_per)};
    if (wp.kind == WeightPlan::Lanes) return direct_weight_samples(s, wp.d, x, g, acc, lo, hi, mine);
    if (wp.kind == WeightPlan::Columns) {
      std::fill(mine, mine + cols.acc, 0.f);
      return columns_weight_samples(pool_of(c), s, cols, x, g, mine, lo, hi, mine + cols.acc, gemm_ws);
    }
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t gi = 0; gi < s.groups; ++gi) {
        const float* xg = x + (n * s.c + gi * s.cg) * s.h * s.w;
        if (!s.pointwise()) im2col(xg, mine, s);
        gemm(pool_of(c), false, true, s.og, k, px, g + (n * s.o + gi * s.og) * px, px,
             s.pointwise() ? xg : mine, px, 1.f, acc + gi * s.og * k, k, gemm_ws);
      }
  });
  if (wp.kind == WeightPlan::Columns) {
    // dw[(gi, o), kk] = sum over tasks of acc[gi][kk, o]
    for (int64_t t = 0; t < tasks; ++t) {
      const float* acc = scratch + static_cast<size_t>(t) * wp.per_task;
      for (int64_t gi = 0; gi < s.groups; ++gi)
        for (int64_t o = 0; o < s.og; ++o)
          for (int64_t kk = 0; kk < k; ++kk) dw[(gi * s.og + o) * k + kk] += acc[(gi * k + kk) * s.og + o];
    }
    return;
  }
  for (int64_t t = 1; t <= wp.partials(); ++t) {
    const float* p = partial + (t - 1) * size;
    for (int64_t i = 0; i < size; ++i) dw[i] += p[i];
  }
}

}  // namespace

size_t conv2d_forward_workspace(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& a,
                                const Backend& b) {
  return forward_floats(conv_shape(in[0].shape, in[1].shape, out[0].shape, a), b.num_threads()) * sizeof(float);
}

namespace {

size_t backward_input_workspace(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& a,
                                const Backend& b) {  // (g, w) -> dx
  return backward_input_floats(conv_shape(out[0].shape, in[1].shape, in[0].shape, a), b.num_threads()) *
         sizeof(float);
}

size_t backward_weight_workspace(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& a,
                                 const Backend& b) {  // (x, g) -> dw
  return weight_floats(conv_shape(in[0].shape, out[0].shape, in[1].shape, a), b.num_threads()) * sizeof(float);
}

}  // namespace

void register_conv_kernels(OpRegistry& reg) {
  reg.register_kernel("conv2d", DeviceKind::CPU, DType::F32, conv2d_kernel);
  reg.register_kernel("conv2d_backward_input", DeviceKind::CPU, DType::F32,
                      conv2d_backward_input_kernel);
  reg.register_kernel("conv2d_backward_weight", DeviceKind::CPU, DType::F32,
                      conv2d_backward_weight_kernel);
  reg.register_kernel("conv_transpose2d", DeviceKind::CPU, DType::F32,
                      conv2d_backward_input_kernel);
  reg.register_workspace("conv2d", DeviceKind::CPU, DType::F32, conv2d_forward_workspace);
  reg.register_workspace("conv2d_backward_input", DeviceKind::CPU, DType::F32, backward_input_workspace);
  reg.register_workspace("conv_transpose2d", DeviceKind::CPU, DType::F32, backward_input_workspace);
  reg.register_workspace("conv2d_backward_weight", DeviceKind::CPU, DType::F32, backward_weight_workspace);
  register_pool_kernels(reg);
}

}  // namespace mls::cpu
