// Convolutions of small planes with 16 samples across the vector lanes (conv_sample_lanes.h).
//
// [SECTION] The input gradient
// [SECTION] The forward pass
// [SECTION] The weight gradient, plain and through a 2x2 max pool of relu(y)
//
// Laid out as usual ([n, c, h, w]), a plane of 14 x 14 computed from one of 10 x 10 fills a
// 16-lane register at best 14/16 and wastes the lanes a kernel column shifts past the edge;
// the fold path (conv_kernels.cpp) avoids that with a product and a fold, which cost LeNet's
// conv2 0.47 ms a step where its multiply-adds take 0.26 at the FMA peak. Here 16 samples
// take one lane each, so every lane of every multiply-add is a real product:
//   gT [o, oy, ox][16]  <- g  [16 samples, o, oy, ox]          (16 x 16 transposes)
//   dxT[c, y, x][16]     = sum over o, i, j of w[o, c, i, j] gT[o, y + pad - i, x + pad - j]
//   dx [16 samples, c, y, x] <- dxT                              (16 x 16 transposes)
// A dx row of CB channels (CB x A registers, A = ow + kw - 1 columns before the padding is
// cut) stays in registers while every (o, i) adds its ow x kw products per channel: each g
// vector is loaded once and used kw x CB times. bench/conv_kernels on two AVX-512 cores:
// LeNet's conv2 input gradient 0.47-0.49 -> 0.31 ms (196 GFLOP/s, the transposes included).
#include "engine/cpu/conv_sample_lanes.h"

#include <array>
#include <utility>

#include "engine/cpu/conv_kernels.h"

namespace mls::cpu::conv {

#ifdef __AVX512F__
namespace {

// [SECTION] The input gradient

constexpr int kSampleLanes = 16;
constexpr int kMaxCols = 14;  // A: at 14 columns, 2 channels fill 28 of the 32 registers

// Channels of one dx row kept in registers: as many as 30 registers hold, at most 4.
constexpr int channels_for(int cols) {
  return std::min(4, 30 / cols);
}

float lane_sum(const float* p) {
  return _mm512_reduce_add_ps(_mm512_load_ps(p));
}

// The workspace given, moved up to a 64-byte boundary (each size below has a line to spare).
float* aligned(float* ws) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(ws) + 63) & ~uintptr_t{63});
}

struct LanesGeom {
  int64_t h, w, oh, og, kh, pad_h, pad_w, c;
};

// dxT rows of channels [cb * CB, cb * CB + CB) (those below c) for every dx row y, from gT
// and wb [og, kh, KW, CB] (this channel block's weights, zero past c).
template <int A, int KW, int CB>
void lanes_rows(const float* gt, const float* wb, float* dxt, const LanesGeom& L, int64_t cb) {
  constexpr int OW = A - KW + 1;
  const int64_t plane = L.h * L.w;
  for (int64_t y = 0; y < L.h; ++y) {
    __m512 acc[CB][A];
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c)
#pragma GCC unroll 16
      for (int a = 0; a < A; ++a) acc[c][a] = _mm512_setzero_ps();
    const int64_t i_lo = std::max<int64_t>(0, y + L.pad_h - L.oh + 1);
    const int64_t i_hi = std::min<int64_t>(L.kh - 1, y + L.pad_h);
    for (int64_t o = 0; o < L.og; ++o)
      for (int64_t i = i_lo; i <= i_hi; ++i) {
        const float* gr = gt + (o * L.oh + y + L.pad_h - i) * OW * kSampleLanes;
        const float* wr = wb + (o * L.kh + i) * KW * CB;
#pragma GCC unroll 16
        for (int ox = 0; ox < OW; ++ox) {
          const __m512 gv = _mm512_load_ps(gr + ox * kSampleLanes);
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j)
#pragma GCC unroll 4
            for (int c = 0; c < CB; ++c)
              acc[c][ox + j] = _mm512_fmadd_ps(gv, _mm512_set1_ps(wr[j * CB + c]), acc[c][ox + j]);
        }
      }
#pragma GCC unroll 4
    for (int c = 0; c < CB; ++c) {
      const int64_t ch = cb * CB + c;
      if (ch >= L.c) break;
      float* out = dxt + (ch * plane + y * L.w) * kSampleLanes;
#pragma GCC unroll 16
      for (int a = 0; a < A; ++a)
        if (a >= L.pad_w && a < L.pad_w + L.w)
          _mm512_store_ps(out + (a - L.pad_w) * kSampleLanes, acc[c][a]);
    }
  }
}

using LanesFn = void (*)(const float*, const float*, float*, const LanesGeom&, int64_t);
template <int KW, int... I>
constexpr std::array<LanesFn, sizeof...(I)> lanes_table(std::integer_sequence<int, I...>) {
  return {&lanes_rows<KW + I, KW, channels_for(KW + I)>...};
}
// Indexed by A - KW: the kernel widths 3 and 5, every plane that fits kMaxCols.
constexpr auto kLanes3 = lanes_table<3>(std::make_integer_sequence<int, kMaxCols - 3 + 1>{});
constexpr auto kLanes5 = lanes_table<5>(std::make_integer_sequence<int, kMaxCols - 5 + 1>{});

int64_t cols_of(const ConvShape& s) {
  return s.ow + s.kw - 1;
}
int channels_of(const ConvShape& s) {
  return channels_for(static_cast<int>(cols_of(s)));
}
int64_t channel_blocks(const ConvShape& s) {
  return (s.cg + channels_of(s) - 1) / channels_of(s);
}
int64_t sample_blocks(const ConvShape& s) {
  return (s.n + kSampleLanes - 1) / kSampleLanes;
}
int64_t lanes_tasks(const ConvShape& s, int64_t threads) {
  return std::min(threads, sample_blocks(s));
}
// Floats: wb, then per task gT and dxT (each 64-byte aligned: the offsets are multiples of 16).
size_t weights_floats(const ConvShape& s) {
  const auto f = static_cast<size_t>(channel_blocks(s) * channels_of(s) * s.og * s.kh * s.kw);
  return (f + kSampleLanes - 1) / kSampleLanes * kSampleLanes;
}
size_t task_floats(const ConvShape& s) {
  return static_cast<size_t>((s.og * s.pixels() + s.cg * s.h * s.w) * kSampleLanes);
}

}  // namespace

bool lanes_input_pays(const ConvShape& s) {
  if (s.groups != 1 || !s.unit_stride() || s.p.dilation != Pair2{1, 1}) return false;
  if ((s.kw != 3 && s.kw != 5) || cols_of(s) > kMaxCols) return false;
  // Lanes of the last block of samples run empty: keep to batches that fill 3/4 of them.
  return s.n * 4 >= 3 * kSampleLanes * sample_blocks(s);
}

size_t lanes_input_floats(const ConvShape& s, int64_t threads) {
  // One spare line, so that the kernel can align the workspace it is given to 64 bytes.
  return weights_floats(s) + static_cast<size_t>(lanes_tasks(s, threads)) * task_floats(s) +
         kSampleLanes;
}

void lanes_backward_input(const KernelCall& call, const ConvShape& s, const float* g,
                          const float* w, float* dx, float* ws) {
  const int cb_n = channels_of(s);
  const int64_t blocks = channel_blocks(s), taps = s.kh * s.kw;
  float* base = aligned(ws);
  // wb [channel block][o][i][j][CB] from w [o][c][i][j], zero past the last channel.
  float* wb = base;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t o = 0; o < s.og; ++o)
      for (int64_t t = 0; t < taps; ++t)
        for (int c = 0; c < cb_n; ++c) {
          const int64_t ch = b * cb_n + c;
          wb[((b * s.og + o) * taps + t) * cb_n + c] =
              ch < s.cg ? w[(o * s.cg + ch) * taps + t] : 0.f;
        }
  const LanesGeom L{.h = s.h,
                    .w = s.w,
                    .oh = s.oh,
                    .og = s.og,
                    .kh = s.kh,
                    .pad_h = s.p.padding[0],
                    .pad_w = s.p.padding[1],
                    .c = s.cg};
  const auto index = static_cast<size_t>(cols_of(s) - s.kw);
  const LanesFn rows = s.kw == 3 ? kLanes3[index] : kLanes5[index];
  const int64_t px = s.pixels(), plane = s.h * s.w, threads = pool_of(call).size();
  const int64_t tasks = lanes_tasks(s, threads);
  float* scratch = base + weights_floats(s);
  for_sample_tasks(call, sample_blocks(s), tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* gt = scratch + static_cast<size_t>(task) * task_floats(s);
    float* dxt = gt + s.og * px * kSampleLanes;
    for (int64_t sb = lo; sb < hi; ++sb) {
      const int64_t n0 = sb * kSampleLanes, count = std::min<int64_t>(kSampleLanes, s.n - n0);
      // The lanes of missing samples are never stored; zeros keep them free of stale values.
      if (count < kSampleLanes) zero_floats(gt, s.og * px * kSampleLanes);
      for (int64_t o = 0; o < s.og; ++o)
        transpose(g + (n0 * s.og + o) * px, s.og * px, count, px, gt + o * px * kSampleLanes,
                  kSampleLanes);
      for (int64_t b = 0; b < blocks; ++b) rows(gt, wb + b * s.og * taps * cb_n, dxt, L, b);
      for (int64_t c = 0; c < s.cg; ++c)
        transpose(dxt + c * plane * kSampleLanes, kSampleLanes, plane, count,
                  dx + (n0 * s.cg + c) * plane, s.cg * plane);
    }
  });
}

namespace {

// [SECTION] The forward pass
//
// yT[o, oy, ox][16] = act(b[o] + sum over c, i, j of w[o, c, i, j] xT[c, oy + i, ox + j]) from
// xT, the 16 samples' input padded with zeros (its borders written once a task). An output row
// is cut into blocks of X columns; a block's CO x X sums stay in registers while each (c, i)
// loads its X + KW - 1 input vectors once, and each weight, broadcast once, serves the X
// columns. (As broadcast operands of each multiply-add instead, GCC kept all of a row's
// weights in registers and spilled the sums; so did a call to an activation among them.)
// LeNet-5's conv1 (1 -> 6 channels, 28 x 28, 5 x 5 with padding 2), bench/conv_kernels on two
// AVX-512 cores: 0.243 -> 0.210-0.213 ms.
constexpr int kFwdMaxChannels = 6;

// Columns of a block: the sums, the input vectors and one weight within 30 registers.
constexpr int forward_cols(int kw, int co) {
  return std::min(8, (29 - kw) / (co + 1));
}

struct FwdGeom {
  int64_t cin, hp, wp, oh, ow, kh;
};

template <int KW, int CO>
void forward_rows(const float* xt, const float* wb, const float* bias, Activation act, float* yt,
                  const FwdGeom& G) {
  constexpr int X = forward_cols(KW, CO);
  const int64_t blocks = (G.ow + X - 1) / X, px = G.oh * G.ow;
  for (int64_t oy = 0; oy < G.oh; ++oy)
    for (int64_t xb = 0; xb < blocks; ++xb) {
      __m512 acc[CO][X];
#pragma GCC unroll 8
      for (int o = 0; o < CO; ++o)
#pragma GCC unroll 8
        for (int x = 0; x < X; ++x) acc[o][x] = _mm512_setzero_ps();
      for (int64_t c = 0; c < G.cin; ++c)
        for (int64_t i = 0; i < G.kh; ++i) {
          const float* row = xt + ((c * G.hp + oy + i) * G.wp + xb * X) * kSampleLanes;
          const float* wr = wb + (c * G.kh + i) * KW * CO;
          __m512 xv[X + KW - 1];
#pragma GCC unroll 16
          for (int at = 0; at < X + KW - 1; ++at) xv[at] = _mm512_load_ps(row + at * kSampleLanes);
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j)
#pragma GCC unroll 8
            for (int o = 0; o < CO; ++o) {
              const __m512 wv = _mm512_set1_ps(wr[j * CO + o]);
#pragma GCC unroll 8
              for (int x = 0; x < X; ++x) acc[o][x] = _mm512_fmadd_ps(xv[x + j], wv, acc[o][x]);
            }
        }
      const int64_t cols = std::min<int64_t>(X, G.ow - xb * X);
#pragma GCC unroll 8
      for (int o = 0; o < CO; ++o) {
        float* out = yt + (o * px + oy * G.ow + xb * X) * kSampleLanes;
        const __m512 b = _mm512_set1_ps(bias ? bias[o] : 0.f);
#pragma GCC unroll 8
        for (int x = 0; x < X; ++x) {
          if (x >= cols) break;
          __m512 v = _mm512_add_ps(acc[o][x], b);
          if (act == Activation::Relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
          _mm512_store_ps(out + x * kSampleLanes, v);
        }
      }
    }
}

using ForwardFn = void (*)(const float*, const float*, const float*, Activation, float*,
                           const FwdGeom&);
template <int KW, int... I>
constexpr std::array<ForwardFn, sizeof...(I)> forward_table(std::integer_sequence<int, I...>) {
  return {&forward_rows<KW, I + 1>...};
}
constexpr auto kForward3 = forward_table<3>(std::make_integer_sequence<int, kFwdMaxChannels>{});
constexpr auto kForward5 = forward_table<5>(std::make_integer_sequence<int, kFwdMaxChannels>{});

// The padded input's width: every column block's reads, the last block's too.
int64_t forward_wp(const ConvShape& s) {
  const int64_t x = forward_cols(static_cast<int>(s.kw), static_cast<int>(s.o));
  return (s.ow + x - 1) / x * x + s.kw - 1;
}
int64_t forward_hp(const ConvShape& s) {
  return s.h + 2 * s.p.padding[0];
}
size_t forward_task_floats(const ConvShape& s) {
  return static_cast<size_t>((s.c * forward_hp(s) * forward_wp(s) + s.o * s.pixels()) *
                             kSampleLanes);
}
size_t forward_weights_floats(const ConvShape& s) {
  return static_cast<size_t>((s.o * s.c * s.kh * s.kw + kSampleLanes - 1) / kSampleLanes *
                             kSampleLanes);
}

}  // namespace

bool lanes_forward_pays(const ConvShape& s) {
  if (s.groups != 1 || !s.unit_stride() || s.p.dilation != Pair2{1, 1}) return false;
  if ((s.kw != 3 && s.kw != 5) || s.o > kFwdMaxChannels) return false;
  // The padded input of 16 samples stays within 256 KiB (L2 beside the output rows).
  if (s.c * forward_hp(s) * forward_wp(s) > 4096) return false;
  return s.n * 4 >= 3 * kSampleLanes * sample_blocks(s);
}

size_t lanes_forward_floats(const ConvShape& s, int64_t threads) {
  return forward_weights_floats(s) +
         static_cast<size_t>(lanes_tasks(s, threads)) * forward_task_floats(s) + kSampleLanes;
}

void lanes_forward(const KernelCall& call, const ConvShape& s, const float* x, const float* w,
                   float* y, float* ws, const float* bias, Activation act) {
  const int64_t taps = s.kh * s.kw, co = s.o;
  float* wb = aligned(ws);  // [c][i][j][o] from w [o][c][i][j]
  for (int64_t o = 0; o < co; ++o)
    for (int64_t ct = 0; ct < s.c * taps; ++ct) wb[ct * co + o] = w[o * s.c * taps + ct];
  const FwdGeom G{
      .cin = s.c, .hp = forward_hp(s), .wp = forward_wp(s), .oh = s.oh, .ow = s.ow, .kh = s.kh};
  const ForwardFn rows = (s.kw == 3 ? kForward3 : kForward5)[static_cast<size_t>(co - 1)];
  const int64_t plane = s.h * s.w, px = s.pixels();
  const int64_t tasks = lanes_tasks(s, pool_of(call).size());
  float* scratch = wb + forward_weights_floats(s);
  for_sample_tasks(call, sample_blocks(s), tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* xt = scratch + static_cast<size_t>(task) * forward_task_floats(s);
    float* yt = xt + s.c * G.hp * G.wp * kSampleLanes;
    zero_floats(xt, s.c * G.hp * G.wp * kSampleLanes);  // the borders, and lanes of no sample
    for (int64_t sb = lo; sb < hi; ++sb) {
      const int64_t n0 = sb * kSampleLanes, count = std::min<int64_t>(kSampleLanes, s.n - n0);
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t r = 0; r < s.h; ++r)
          transpose(x + (n0 * s.c + c) * plane + r * s.w, s.c * plane, count, s.w,
                    xt + ((c * G.hp + r + s.p.padding[0]) * G.wp + s.p.padding[1]) * kSampleLanes,
                    kSampleLanes);
      rows(xt, wb, bias, act, yt, G);
      // Other activations after the rows: a call among the sums would send them to memory.
      if (act != Activation::None && act != Activation::Relu)
        apply_activation(act, yt, co * px * kSampleLanes);
      for (int64_t o = 0; o < co; ++o)
        transpose(yt + o * px * kSampleLanes, kSampleLanes, px, count, y + (n0 * co + o) * px,
                  co * px);
    }
  });
}

namespace {

// [SECTION] The weight gradient, plain and through a 2x2 max pool of relu(y)
//
// conv2d_backward_weight: (x, g) -> dw; conv2d_pool_backward_weight: (x, gp, y) -> (dw, db),
// where the output gradient g is gp routed through the 2x2 pool of y. For 16 samples at a time,
// x goes to xT, padded with zeros, and g to gT[o, oy, ox][16]: transposed, or routed (plane by
// plane, y and gp go to yT and gpT, and route_lanes sends each window's gradient with the
// pool's own comparisons). Then for each (c, kernel row i) and block of CO <= 3 output
// channels, the CO x KW sums
//   dwL[o, c, i, j][16] += gT[o, oy, ox] xT[c, oy + i, ox + j]
// stay in registers over all pixels, two pixels at a time (KW + 1 input vectors and 2 CO
// gradient vectors for 2 CO KW multiply-adds). Each task keeps its sums by lane; dw and db are
// their totals. bench/conv_kernels on two AVX-512 cores, LeNet-5's conv1 through its pool:
// 0.31-0.33 -> 0.23 ms (0.29 when routed by the pool's row function and then transposed).
constexpr int kWgtMaxChannels = 3;

struct WgtGeom {
  int64_t hp, wp, oh, ow;
  int64_t ostride;  // vectors between one output channel's sums and the next one's
};

// dwL[o][j] (CO x KW vectors, the channels ostride apart) += over every pixel of gT's CO planes
// times xT row i's shifted columns; xr: xT at (c, i, 0), gr: gT at the block's first plane.
template <int KW, int CO>
void weight_rows(const float* xr, const float* gr, float* dwl, const WgtGeom& G) {
  const int64_t px = G.oh * G.ow;
  __m512 acc[CO][KW];
#pragma GCC unroll 4
  for (int o = 0; o < CO; ++o)
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j)
      acc[o][j] = _mm512_load_ps(dwl + (o * G.ostride + j) * kSampleLanes);
  for (int64_t oy = 0; oy < G.oh; ++oy) {
    const float* xrow = xr + oy * G.wp * kSampleLanes;
    const float* grow = gr + oy * G.ow * kSampleLanes;
    for (int64_t ox = 0; ox < G.ow; ox += 2) {
      __m512 xv[KW + 1];
#pragma GCC unroll 8
      for (int t = 0; t <= KW; ++t) xv[t] = _mm512_load_ps(xrow + (ox + t) * kSampleLanes);
#pragma GCC unroll 2
      for (int p = 0; p < 2; ++p)
#pragma GCC unroll 4
        for (int o = 0; o < CO; ++o) {
          const __m512 gv = _mm512_load_ps(grow + (o * px + ox + p) * kSampleLanes);
#pragma GCC unroll 8
          for (int j = 0; j < KW; ++j) acc[o][j] = _mm512_fmadd_ps(gv, xv[p + j], acc[o][j]);
        }
    }
  }
#pragma GCC unroll 4
  for (int o = 0; o < CO; ++o)
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j)
      _mm512_store_ps(dwl + (o * G.ostride + j) * kSampleLanes, acc[o][j]);
}

// gT's plane (oh x ow vectors) from yT's and gpT's: each 2x2 window's gradient goes to its
// first largest cell when that is > 0 (winner_2x2, the pool's own rule), the other cells get
// 0. Returns the sum of what was sent.
__m512 route_lanes(const float* yt, const float* gpt, float* gt, int64_t oh, int64_t ow) {
  __m512 sent = _mm512_setzero_ps();
  const int64_t pw = ow / 2;
  for (int64_t r = 0; r < oh / 2; ++r)
    for (int64_t c = 0; c < pw; ++c) {
      const int64_t at = (2 * r * ow + 2 * c) * kSampleLanes, below = ow * kSampleLanes;
      const __m512 a = _mm512_load_ps(yt + at), b = _mm512_load_ps(yt + at + kSampleLanes);
      const __m512 cc = _mm512_load_ps(yt + at + below),
                   d = _mm512_load_ps(yt + at + below + kSampleLanes);
      const Winner2x2 win = winner_2x2(a, b, cc, d);
      const __m512 gv = _mm512_maskz_load_ps(win.positive, gpt + (r * pw + c) * kSampleLanes);
      _mm512_store_ps(gt + at, _mm512_maskz_mov_ps(win.cell[0], gv));
      _mm512_store_ps(gt + at + kSampleLanes, _mm512_maskz_mov_ps(win.cell[1], gv));
      _mm512_store_ps(gt + at + below, _mm512_maskz_mov_ps(win.cell[2], gv));
      _mm512_store_ps(gt + at + below + kSampleLanes, _mm512_maskz_mov_ps(win.cell[3], gv));
      sent = _mm512_add_ps(sent, gv);
    }
  return sent;
}

using WeightFn = void (*)(const float*, const float*, float*, const WgtGeom&);
template <int KW, int... I>
constexpr std::array<WeightFn, sizeof...(I)> weight_table(std::integer_sequence<int, I...>) {
  return {&weight_rows<KW, I + 1>...};
}
constexpr auto kWeight3 = weight_table<3>(std::make_integer_sequence<int, kWgtMaxChannels>{});
constexpr auto kWeight5 = weight_table<5>(std::make_integer_sequence<int, kWgtMaxChannels>{});

// Per task: xT [c, hp, wp][16], the fill's scratch (the pooled path: one plane of yT [px][16]
// and of gpT [px / 4][16]), gT [o, px][16], and the sums dwL [o, c, kh, kw][16], dbL [o][16].
WgtGeom weight_geom(const ConvShape& s) {
  return {.hp = s.oh + s.kh - 1,
          .wp = s.ow + s.kw,
          .oh = s.oh,
          .ow = s.ow,
          .ostride = s.c * s.kh * s.kw};
}
int64_t pool_scratch_floats(const ConvShape& s, bool pooled) {
  return pooled ? (s.pixels() + s.pixels() / 4) * kSampleLanes : 0;
}
size_t weight_task_floats(const ConvShape& s, bool pooled) {
  const WgtGeom G = weight_geom(s);
  return static_cast<size_t>(
      (s.c * G.hp * G.wp + s.o * s.pixels() + s.o * s.c * s.kh * s.kw + s.o) * kSampleLanes +
      pool_scratch_floats(s, pooled));
}

bool weight_lanes_fit(const ConvShape& s, bool pooled) {
  if (s.groups != 1 || !s.unit_stride() || s.p.dilation != Pair2{1, 1}) return false;
  if ((s.kw != 3 && s.kw != 5) || s.ow % 2 != 0) return false;  // pixels in pairs
  // Each task's buffers for 16 samples within 768 KiB (the 1 MiB L2 of the AVX-512 VMs).
  if (weight_task_floats(s, pooled) * sizeof(float) > (768u << 10)) return false;
  return s.n * 4 >= 3 * kSampleLanes * sample_blocks(s);
}

size_t weight_lanes_floats(const ConvShape& s, int64_t threads, bool pooled) {
  return static_cast<size_t>(lanes_tasks(s, threads)) * weight_task_floats(s, pooled) +
         kSampleLanes;
}

// dw (and db, when given) for x and the output gradient that fill(n0, count, scratch, gt, dbl)
// writes to gT for a block's samples (adding its sums by lane to dbL).
template <typename Fill>
void weight_lanes(const KernelCall& call, const ConvShape& s, const float* x, bool pooled,
                  Fill fill, float* dw, float* db, float* ws) {
  const WgtGeom G = weight_geom(s);
  const int64_t px = s.pixels(), plane = s.h * s.w, taps = s.kh * s.kw;
  const int64_t tasks = lanes_tasks(s, pool_of(call).size());
  const WeightFn* table = s.kw == 3 ? kWeight3.data() : kWeight5.data();
  const int64_t xt_f = s.c * G.hp * G.wp * kSampleLanes, dwl_f = s.o * s.c * taps * kSampleLanes;
  const int64_t scratch_f = pool_scratch_floats(s, pooled);
  float* base = aligned(ws);
  auto sums = [&](int64_t task) {
    return base + static_cast<size_t>(task) * weight_task_floats(s, pooled) + xt_f + scratch_f +
           s.o * px * kSampleLanes;
  };
  for_sample_tasks(call, sample_blocks(s), tasks, [&](int64_t lo, int64_t hi, int64_t task) {
    float* xt = base + static_cast<size_t>(task) * weight_task_floats(s, pooled);
    float* scratch = xt + xt_f;
    float* gt = scratch + scratch_f;  // [o][px][16]
    float* dwl = sums(task);          // [o][c][kh][kw][16], then dbL [o][16]
    zero_floats(xt, xt_f);            // the borders
    zero_floats(dwl, dwl_f + s.o * kSampleLanes);
    for (int64_t sb = lo; sb < hi; ++sb) {
      const int64_t n0 = sb * kSampleLanes, count = std::min<int64_t>(kSampleLanes, s.n - n0);
      // Lanes of no sample: zeros, not an earlier block's values, which might not be finite.
      if (count < kSampleLanes) zero_floats(xt, xt_f + scratch_f + s.o * px * kSampleLanes);
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t r = 0; r < s.h; ++r)
          transpose(x + (n0 * s.c + c) * plane + r * s.w, s.c * plane, count, s.w,
                    xt + ((c * G.hp + r + s.p.padding[0]) * G.wp + s.p.padding[1]) * kSampleLanes,
                    kSampleLanes);
      fill(n0, count, scratch, gt, dwl + dwl_f);
      for (int64_t o0 = 0; o0 < s.o; o0 += kWgtMaxChannels) {
        const int64_t co = std::min<int64_t>(kWgtMaxChannels, s.o - o0);
        for (int64_t c = 0; c < s.c; ++c)
          for (int64_t i = 0; i < s.kh; ++i)
            table[co - 1](xt + (c * G.hp + i) * G.wp * kSampleLanes, gt + o0 * px * kSampleLanes,
                          dwl + ((o0 * s.c + c) * taps + i * s.kw) * kSampleLanes, G);
      }
    }
  });
  for (int64_t o = 0; o < s.o && db; ++o) {
    db[o] = 0;
    for (int64_t t = 0; t < tasks; ++t) db[o] += lane_sum(sums(t) + dwl_f + o * kSampleLanes);
  }
  for (int64_t e = 0; e < s.o * s.c * taps; ++e) {
    dw[e] = 0;
    for (int64_t t = 0; t < tasks; ++t) dw[e] += lane_sum(sums(t) + e * kSampleLanes);
  }
}

}  // namespace

// Without a pool to route through, only 5-wide kernels: two pixels' 6 input and 2 CO gradient
// vectors then serve 10 CO multiply-adds; at 3 wide, 4 + 2 CO serve 6 CO, and bench/conv_kernels
// read the residual CNN's 16 -> 16 3x3 at 14 x 14 at 0.80-0.88 ms here against 0.64-0.67 on
// the tap rows. LeNet's conv2 (6 -> 16, 5x5 at 14 x 14): 0.39-0.42 -> 0.33-0.34 ms.
bool lanes_weight_pays(const ConvShape& s) {
  return s.kw == 5 && weight_lanes_fit(s, false);
}
size_t lanes_weight_floats(const ConvShape& s, int64_t threads) {
  return weight_lanes_floats(s, threads, false);
}
void lanes_backward_weight(const KernelCall& call, const ConvShape& s, const float* x,
                           const float* g, float* dw, float* ws) {
  const int64_t px = s.pixels();
  auto fill = [&](int64_t n0, int64_t count, float*, float* gt, float*) {
    for (int64_t o = 0; o < s.o; ++o)
      transpose(g + (n0 * s.o + o) * px, s.o * px, count, px, gt + o * px * kSampleLanes,
                kSampleLanes);
  };
  weight_lanes(call, s, x, false, fill, dw, nullptr, ws);
}

// Routed by lane, 3-wide kernels pay too (bench/conv_kernels with the cases added for the
// check, minima of 3 alternated runs: 1 -> 8 3x3 at 28 x 28 0.170 against 0.215 ms, 4 -> 8 at
// 14 x 14 0.125 against 0.171).
bool lanes_pool_weight_pays(const ConvShape& s) {
  return s.oh % 2 == 0 && weight_lanes_fit(s, true);
}
size_t lanes_pool_weight_floats(const ConvShape& s, int64_t threads) {
  return weight_lanes_floats(s, threads, true);
}
void lanes_pool_backward_weight(const KernelCall& call, const ConvShape& s, const float* x,
                                const float* gp, const float* y, float* dw, float* db, float* ws) {
  const int64_t px = s.pixels(), pooled = px / 4;
  auto fill = [&](int64_t n0, int64_t count, float* scratch, float* gt, float* dbl) {
    float* yt = scratch;                  // [px][16]
    float* gpt = yt + px * kSampleLanes;  // [px / 4][16]
    for (int64_t o = 0; o < s.o; ++o) {
      transpose(y + (n0 * s.o + o) * px, s.o * px, count, px, yt, kSampleLanes);
      transpose(gp + (n0 * s.o + o) * pooled, s.o * pooled, count, pooled, gpt, kSampleLanes);
      const __m512 sent = route_lanes(yt, gpt, gt + o * px * kSampleLanes, s.oh, s.ow);
      _mm512_store_ps(dbl + o * kSampleLanes,
                      _mm512_add_ps(_mm512_load_ps(dbl + o * kSampleLanes), sent));
    }
  };
  weight_lanes(call, s, x, true, fill, dw, db, ws);
}

#else

bool lanes_input_pays(const ConvShape&) {
  return false;
}
bool lanes_forward_pays(const ConvShape&) {
  return false;
}
size_t lanes_forward_floats(const ConvShape&, int64_t) {
  return 0;
}
void lanes_forward(const KernelCall&, const ConvShape&, const float*, const float*, float*, float*,
                   const float*, Activation) {
  MLS_CHECK(false, "lanes_forward: an AVX-512 path, chosen only by lanes_forward_pays");
}
bool lanes_weight_pays(const ConvShape&) {
  return false;
}
size_t lanes_weight_floats(const ConvShape&, int64_t) {
  return 0;
}
void lanes_backward_weight(const KernelCall&, const ConvShape&, const float*, const float*, float*,
                           float*) {
  MLS_CHECK(false, "lanes_backward_weight: an AVX-512 path, chosen only by its *_pays");
}
bool lanes_pool_weight_pays(const ConvShape&) {
  return false;
}
size_t lanes_pool_weight_floats(const ConvShape&, int64_t) {
  return 0;
}
void lanes_pool_backward_weight(const KernelCall&, const ConvShape&, const float*, const float*,
                                const float*, float*, float*, float*) {
  MLS_CHECK(false, "lanes_pool_backward_weight: an AVX-512 path, chosen only by its *_pays");
}
size_t lanes_input_floats(const ConvShape&, int64_t) {
  return 0;
}
void lanes_backward_input(const KernelCall&, const ConvShape&, const float*, const float*, float*,
                          float*) {
  MLS_CHECK(false, "lanes_backward_input: an AVX-512 path, chosen only by lanes_input_pays");
}

#endif

}  // namespace mls::cpu::conv
