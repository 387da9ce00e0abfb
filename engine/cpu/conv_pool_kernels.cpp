// CPU kernels: max and average pooling and their gradients (registered by
// register_conv_kernels). Work splits by (sample, channel) plane: every write of a kernel
// stays inside its plane.
#include <algorithm>

#include "engine/cpu/avx512.h"
#include "engine/cpu/conv_kernels.h"
#if defined(__AVX2__) && !defined(__AVX512F__)
#include <immintrin.h>
#endif
#include "engine/cpu/kernels.h"
#include "engine/ops/conv.h"

namespace mls::cpu {

namespace {

struct PoolShape {
  int64_t planes, h, w, oh, ow;
  Pool2dParams p;
};

PoolShape pool_shape(const Shape& x, const Shape& y, const Attrs& a) {
  return {x[0] * x[1], x[2], x[3], y[2], y[3], pool2d_params(a).value()};
}

// A window clipped to the input: rows [h0, h1), columns [w0, w1) of its plane.
struct Window {
  int64_t h0, h1, w0, w1;
  int64_t cells() const { return (h1 - h0) * (w1 - w0); }
};

// fn(plane, out, window) for every pooled element `out` (flat within its plane).
template <typename Fn>
void for_windows(const KernelCall& c, const PoolShape& s, Fn fn) {
  int64_t per_plane = std::max<int64_t>(1, s.oh * s.ow * s.p.kernel[0] * s.p.kernel[1]);
  pool_of(c).parallel_for(
      0, s.planes, std::max<int64_t>(1, kParallelGrain / per_plane), [&](int64_t lo, int64_t hi) {
        for (int64_t plane = lo; plane < hi; ++plane)
          for (int64_t oh = 0; oh < s.oh; ++oh) {
            int64_t h0 = oh * s.p.stride[0] - s.p.padding[0];
            for (int64_t ow = 0; ow < s.ow; ++ow) {
              int64_t w0 = ow * s.p.stride[1] - s.p.padding[1];
              Window win{std::max<int64_t>(h0, 0), std::min(h0 + s.p.kernel[0], s.h),
                         std::max<int64_t>(w0, 0), std::min(w0 + s.p.kernel[1], s.w)};
              fn(plane, oh * s.ow + ow, win);
            }
          }
      });
}

// The offset in its plane of a window's largest element (the first one on ties).
int64_t argmax(const float* plane, int64_t width, const Window& win) {
  int64_t best = win.h0 * width + win.w0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw)
      if (plane[ih * width + iw] > plane[best]) best = ih * width + iw;
  return best;
}

// 2x2 windows with stride 2 and no padding that tile the plane exactly (LeNet's, VGG's):
// fixed loops the compiler unrolls, and the backward pass writes every cell once.
bool tiled_2x2(const PoolShape& s) {
  return s.p.kernel[0] == 2 && s.p.kernel[1] == 2 && s.p.stride[0] == 2 && s.p.stride[1] == 2 &&
         s.p.padding[0] == 0 && s.p.padding[1] == 0 && s.h == 2 * s.oh && s.w == 2 * s.ow;
}

// Index (0..3) of the largest of a 2x2 block, the first on ties (row-major, as argmax()).
// Selects, not branches: which cell wins is data, and a mispredicted branch per window
// cost more than the rest of the backward pass; selects also let the loop vectorise.
inline int which_max(float a, float b, float c, float d) {
  const bool gb = b > a;
  const float m1 = gb ? b : a;
  const int i1 = gb ? 1 : 0;
  const bool gc = c > m1;
  const float m2 = gc ? c : m1;
  const int i2 = gc ? 2 : i1;
  return d > m2 ? 3 : i2;
}

// One row of 2x2 windows: r1 = r0 + w, d1 = d0 + ld. With Relu, a window whose largest cell
// is not > 0 sends nothing (max_pool2d_relu_backward).
template <bool Relu>
void pool_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0, int64_t ld,
                           int64_t n) {
  const float* r1 = r0 + w;
  float* d1 = d0 + ld;
  int64_t ow = 0;
#ifdef __AVX512F__
  // 16 windows at a time: even and odd columns apart, the winner as masks, back together.
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  for (; ow < n; ow += 16) {
    const int64_t left = 2 * (n - ow);
    const __mmask16 m0 = first_lanes(left), m1 = first_lanes(left - 16), mg = first_lanes(n - ow);
    const int64_t j = 2 * ow;
    const __m512 t0 = _mm512_maskz_loadu_ps(m0, r0 + j),
                 t1 = _mm512_maskz_loadu_ps(m1, r0 + j + 16);
    const __m512 u0 = _mm512_maskz_loadu_ps(m0, r1 + j),
                 u1 = _mm512_maskz_loadu_ps(m1, r1 + j + 16);
    const __m512 a = _mm512_permutex2var_ps(t0, even, t1), b = _mm512_permutex2var_ps(t0, odd, t1);
    const __m512 cc = _mm512_permutex2var_ps(u0, even, u1), d = _mm512_permutex2var_ps(u0, odd, u1);
    // The same comparisons as which_max: a later cell wins only when strictly larger.
    const Winner2x2 win = winner_2x2(a, b, cc, d);
    __mmask16 live = mg;
    if constexpr (Relu) live &= win.positive;
    const __m512 gv = _mm512_maskz_loadu_ps(live, g + ow);
    const __m512 da = _mm512_maskz_mov_ps(win.cell[0], gv),
                 db = _mm512_maskz_mov_ps(win.cell[1], gv);
    const __m512 dc = _mm512_maskz_mov_ps(win.cell[2], gv),
                 dd = _mm512_maskz_mov_ps(win.cell[3], gv);
    _mm512_mask_storeu_ps(d0 + j, m0, _mm512_permutex2var_ps(da, lo, db));
    _mm512_mask_storeu_ps(d0 + j + 16, m1, _mm512_permutex2var_ps(da, hi, db));
    _mm512_mask_storeu_ps(d1 + j, m0, _mm512_permutex2var_ps(dc, lo, dd));
    _mm512_mask_storeu_ps(d1 + j + 16, m1, _mm512_permutex2var_ps(dc, hi, dd));
  }
#elif defined(__AVX2__)
  // 8 windows at a time. Shuffling two vectors of a row apart gives its even and odd columns
  // for windows (0 1 4 5 | 2 3 6 7); the gradients are permuted to match, and unpacking the
  // four results by 128-bit lane puts windows 0-3 then 4-7 back in row order.
  for (; ow + 8 <= n; ow += 8) {
    const int64_t j = 2 * ow;
    const __m256 t0 = _mm256_loadu_ps(r0 + j), t1 = _mm256_loadu_ps(r0 + j + 8);
    const __m256 u0 = _mm256_loadu_ps(r1 + j), u1 = _mm256_loadu_ps(r1 + j + 8);
    const __m256 a = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 b = _mm256_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m256 cc = _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 d = _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1));
    // The same comparisons as which_max: a later cell wins only when strictly larger.
    const __m256 gb = _mm256_cmp_ps(b, a, _CMP_GT_OQ);
    const __m256 best1 = _mm256_blendv_ps(a, b, gb);
    const __m256 gc = _mm256_cmp_ps(cc, best1, _CMP_GT_OQ);
    const __m256 best2 = _mm256_blendv_ps(best1, cc, gc);
    const __m256 gd = _mm256_cmp_ps(d, best2, _CMP_GT_OQ);
    __m256 gv = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_loadu_ps(g + ow)), _MM_SHUFFLE(3, 1, 2, 0)));
    if constexpr (Relu)
      gv = _mm256_and_ps(
          gv, _mm256_cmp_ps(_mm256_blendv_ps(best2, d, gd), _mm256_setzero_ps(), _CMP_GT_OQ));
    const __m256 dd = _mm256_and_ps(gd, gv);
    const __m256 dc = _mm256_andnot_ps(gd, _mm256_and_ps(gc, gv));
    const __m256 db = _mm256_andnot_ps(_mm256_or_ps(gc, gd), _mm256_and_ps(gb, gv));
    const __m256 da = _mm256_andnot_ps(_mm256_or_ps(gb, _mm256_or_ps(gc, gd)), gv);
    _mm256_storeu_ps(d0 + j, _mm256_unpacklo_ps(da, db));
    _mm256_storeu_ps(d0 + j + 8, _mm256_unpackhi_ps(da, db));
    _mm256_storeu_ps(d1 + j, _mm256_unpacklo_ps(dc, dd));
    _mm256_storeu_ps(d1 + j + 8, _mm256_unpackhi_ps(dc, dd));
  }
#endif
  for (; ow < n; ++ow) {
    const int64_t j = 2 * ow;
    const int k = which_max(r0[j], r0[j + 1], r1[j], r1[j + 1]);
    const float best = k < 2 ? r0[j + k] : r1[j + k - 2];
    const float gv = !Relu || best > 0.f ? g[ow] : 0.f;
    d0[j] = k == 0 ? gv : 0.f;
    d0[j + 1] = k == 1 ? gv : 0.f;
    d1[j] = k == 2 ? gv : 0.f;
    d1[j + 1] = k == 3 ? gv : 0.f;
  }
}

}  // namespace

// One row of 2x2 windows (conv_kernels.h).
void max_pool_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0, int64_t n) {
  pool_2x2_backward_row<false>(r0, w, g, d0, w, n);
}
void max_pool_relu_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0,
                                    int64_t ld, int64_t n) {
  pool_2x2_backward_row<true>(r0, w, g, d0, ld, n);
}

namespace {

#ifdef __AVX512F__
// [SECTION] 2x2 pools of narrow planes: row pairs in groups
//
// With stride-2 windows that tile their planes, the planes' row pairs follow each other in
// memory: pair k is the 2w cells at x + 2wk and its windows are y[k ow, (k + 1) ow). A
// group of G = 16 / ow pairs (at most 16 windows, 4 ow G <= 64 cells) is four loads; the
// windows' four cells come out of them by permutes. LeNet's second pool (10 x 10 planes)
// runs three pairs a group, where the row function above ran one row of 5 windows a call.
struct PairGroups {
  int64_t ow = 0, pairs = 0;  // windows a pair, pairs a group
  __m512i cell[4]{};          // lane l: where window l's cell a, b, c or d lies in the group
  __mmask16 high[4]{};        // ... when that is in the group's upper 32 cells
  __m512i back[4]{};          // float e of cell vector v: its window's lane (+ 16 if odd column)
  __mmask16 lower[4]{};       // ... where e lies in the pair's lower row
};

// The forward takes groups up to 32 cells a row (one pair a group: still vector code, where
// the plane loop is scalar); the backward only where a group holds two pairs or more: at one
// pair, twice the permutes of the row function (LeNet's first pool, 28 wide: 0.067 -> 0.10 ms).
bool pair_groups_fit(const PoolShape& s, bool backward) {
  return tiled_2x2(s) && s.w <= (backward ? 16 : 32);
}

PairGroups pair_groups(const PoolShape& s) {
  PairGroups p;
  p.ow = s.ow;
  p.pairs = 16 / s.ow;
  alignas(64) int32_t cell[4][16]{}, back[4][16]{};
  for (int64_t l = 0; l < p.pairs * p.ow; ++l) {
    const int64_t a = l / p.ow * 2 * s.w + 2 * (l % p.ow);
    const int64_t at[4] = {a, a + 1, a + s.w, a + s.w + 1};
    for (int k = 0; k < 4; ++k) {
      cell[k][l] = static_cast<int32_t>(at[k] & 31);
      if (at[k] >= 32) p.high[k] |= static_cast<__mmask16>(1u << l);
    }
  }
  for (int64_t e = 0; e < 4 * p.pairs * p.ow; ++e) {
    const int64_t within = e % (2 * s.w), col = within % s.w;
    back[e / 16][e % 16] = static_cast<int32_t>(e / (2 * s.w) * p.ow + col / 2 + 16 * (col & 1));
    if (within >= s.w) p.lower[e / 16] |= static_cast<__mmask16>(1u << (e % 16));
  }
  for (int k = 0; k < 4; ++k) {
    p.cell[k] = _mm512_load_si512(cell[k]);
    p.back[k] = _mm512_load_si512(back[k]);
  }
  return p;
}

// The four cells of each window of a group whose `cells` floats start at x.
struct GroupCells {
  __m512 v[4];
};
inline GroupCells group_cells(const PairGroups& p, const float* x, int64_t cells) {
  __m512 q[4];
  for (int i = 0; i < 4; ++i) q[i] = _mm512_maskz_loadu_ps(first_lanes(cells - 16 * i), x + 16 * i);
  GroupCells g;
  for (int k = 0; k < 4; ++k)
    g.v[k] = _mm512_mask_blend_ps(p.high[k], _mm512_permutex2var_ps(q[0], p.cell[k], q[1]),
                                  _mm512_permutex2var_ps(q[2], p.cell[k], q[3]));
  return g;
}

// fn(group index, first pair, pairs) for the groups of row pairs [0, total) split over the pool.
template <typename Fn>
void for_pair_groups(const KernelCall& c, const PoolShape& s, const PairGroups& p, Fn fn) {
  const int64_t total = s.planes * s.oh, groups = (total + p.pairs - 1) / p.pairs;
  pool_of(c).parallel_for(0, groups, std::max<int64_t>(1, kParallelGrain / (4 * p.pairs * p.ow)),
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t gi = lo; gi < hi; ++gi) {
                              const int64_t first = gi * p.pairs;
                              fn(first, std::min(p.pairs, total - first));
                            }
                          });
}

// y = max(a, b, c, d) as std::max(std::max(a, b), std::max(c, d)): _mm512_max_ps(b, a) is
// std::max(a, b), NaN and signed zero alike.
void max_pool_pair_groups(const KernelCall& c, const PoolShape& s, const float* x, float* y) {
  const PairGroups p = pair_groups(s);
  for_pair_groups(c, s, p, [&](int64_t first, int64_t pairs) {
    const GroupCells g = group_cells(p, x + first * 2 * s.w, pairs * 2 * s.w);
    const __m512 m = _mm512_max_ps(_mm512_max_ps(g.v[3], g.v[2]), _mm512_max_ps(g.v[1], g.v[0]));
    _mm512_mask_storeu_ps(y + first * p.ow, first_lanes(pairs * p.ow), m);
  });
}

// (g, x) -> dx, the comparisons of which_max: a later cell wins only when strictly larger.
template <bool Relu>
void max_pool_backward_pair_groups(const KernelCall& c, const PoolShape& s, const float* g,
                                   const float* x, float* dx) {
  const PairGroups p = pair_groups(s);
  for_pair_groups(c, s, p, [&](int64_t first, int64_t pairs) {
    const int64_t cells = pairs * 2 * s.w;
    const GroupCells q = group_cells(p, x + first * 2 * s.w, cells);
    const Winner2x2 win = winner_2x2(q.v[0], q.v[1], q.v[2], q.v[3]);
    __mmask16 live = first_lanes(pairs * p.ow);
    if constexpr (Relu) live &= win.positive;
    const __m512 gv = _mm512_maskz_loadu_ps(live, g + first * p.ow);
    const __m512 da = _mm512_maskz_mov_ps(win.cell[0], gv);
    const __m512 db = _mm512_maskz_mov_ps(win.cell[1], gv);
    const __m512 dc = _mm512_maskz_mov_ps(win.cell[2], gv);
    const __m512 dd = _mm512_maskz_mov_ps(win.cell[3], gv);
    float* out = dx + first * 2 * s.w;
    for (int v = 0; v < 4 && 16 * v < cells; ++v)
      _mm512_mask_storeu_ps(
          out + 16 * v, first_lanes(cells - 16 * v),
          _mm512_mask_blend_ps(p.lower[v], _mm512_permutex2var_ps(da, p.back[v], db),
                               _mm512_permutex2var_ps(dc, p.back[v], dd)));
  });
}
#endif

template <typename Fn>
void for_planes_2x2(const KernelCall& c, const PoolShape& s, Fn fn) {
  pool_of(c).parallel_for(0, s.planes,
                          std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(s.h * s.w, 1)),
                          [&](int64_t lo, int64_t hi) {
                            for (int64_t plane = lo; plane < hi; ++plane) fn(plane);
                          });
}

void max_pool2d_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[0]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
#ifdef __AVX512F__
  if (pair_groups_fit(s, false)) return max_pool_pair_groups(c, s, x, y);
#endif
  if (tiled_2x2(s)) {
    for_planes_2x2(c, s, [&](int64_t plane) {
      const float* xp = x + plane * s.h * s.w;
      float* yp = y + plane * s.oh * s.ow;
      for (int64_t oh = 0; oh < s.oh; ++oh) {
        const float* r0 = xp + 2 * oh * s.w;
        const float* r1 = r0 + s.w;
        for (int64_t ow = 0; ow < s.ow; ++ow)
          yp[oh * s.ow + ow] =
              std::max(std::max(r0[2 * ow], r0[2 * ow + 1]), std::max(r1[2 * ow], r1[2 * ow + 1]));
      }
    });
    return;
  }
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    const float* xp = x + plane * s.h * s.w;
    y[plane * s.oh * s.ow + out] = xp[argmax(xp, s.w, win)];
  });
}

// (g, x) -> dx: g added at each window's argmax (with Relu, only where that is > 0).
template <bool Relu>
void max_pool2d_backward_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[1]->shape(), c.inputs[0]->shape(), c.attrs);
  const float* g = in_ptr<float>(c, 0);
  const float* x = in_ptr<float>(c, 1);
  float* dx = out_ptr<float>(c, 0);
#ifdef __AVX512F__
  if (pair_groups_fit(s, true)) return max_pool_backward_pair_groups<Relu>(c, s, g, x, dx);
#endif
  if (tiled_2x2(s)) {
    for_planes_2x2(c, s, [&](int64_t plane) {
      const float* xp = x + plane * s.h * s.w;
      const float* gp = g + plane * s.oh * s.ow;
      float* dp = dx + plane * s.h * s.w;
      for (int64_t oh = 0; oh < s.oh; ++oh)
        pool_2x2_backward_row<Relu>(xp + 2 * oh * s.w, s.w, gp + oh * s.ow, dp + 2 * oh * s.w, s.w,
                                    s.ow);
    });
    return;
  }
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    int64_t base = plane * s.h * s.w;
    if (out == 0) std::fill(dx + base, dx + base + s.h * s.w, 0.f);
    const int64_t at = argmax(x + base, s.w, win);
    if (!Relu || x[base + at] > 0.f) dx[base + at] += g[plane * s.oh * s.ow + out];
  });
}

// (t, x) -> y: t at each window's argmax.
void max_pool2d_gather_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[1]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* t = in_ptr<float>(c, 0);
  const float* x = in_ptr<float>(c, 1);
  float* y = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    int64_t base = plane * s.h * s.w;
    y[plane * s.oh * s.ow + out] = t[base + argmax(x + base, s.w, win)];
  });
}

float divisor(const PoolShape& s, const Window& win) {
  return static_cast<float>(s.p.count_include_pad ? s.p.kernel[0] * s.p.kernel[1] : win.cells());
}

void avg_pool2d_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.inputs[0]->shape(), c.outputs[0]->shape(), c.attrs);
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    const float* xp = x + plane * s.h * s.w;
    float sum = 0.f;
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += xp[ih * s.w + iw];
    y[plane * s.oh * s.ow + out] = sum / divisor(s, win);
  });
}

// (g) -> dx: each window's g spread evenly over it.
void avg_pool2d_backward_kernel(const KernelCall& c) {
  PoolShape s = pool_shape(c.outputs[0]->shape(), c.inputs[0]->shape(), c.attrs);
  const float* g = in_ptr<float>(c, 0);
  float* dx = out_ptr<float>(c, 0);
  for_windows(c, s, [&](int64_t plane, int64_t out, const Window& win) {
    float* dp = dx + plane * s.h * s.w;
    if (out == 0) std::fill(dp, dp + s.h * s.w, 0.f);
    float v = g[plane * s.oh * s.ow + out] / divisor(s, win);
    for (int64_t ih = win.h0; ih < win.h1; ++ih)
      for (int64_t iw = win.w0; iw < win.w1; ++iw) dp[ih * s.w + iw] += v;
  });
}

}  // namespace

void register_pool_kernels(OpRegistry& reg) {
  reg.register_kernel("max_pool2d", DeviceKind::CPU, DType::F32, max_pool2d_kernel);
  reg.register_kernel("max_pool2d_backward", DeviceKind::CPU, DType::F32,
                      max_pool2d_backward_kernel<false>);
  reg.register_kernel("max_pool2d_relu_backward", DeviceKind::CPU, DType::F32,
                      max_pool2d_backward_kernel<true>);
  reg.register_kernel("max_pool2d_gather", DeviceKind::CPU, DType::F32, max_pool2d_gather_kernel);
  reg.register_kernel("avg_pool2d", DeviceKind::CPU, DType::F32, avg_pool2d_kernel);
  reg.register_kernel("avg_pool2d_backward", DeviceKind::CPU, DType::F32,
                      avg_pool2d_backward_kernel);
}

}  // namespace mls::cpu
