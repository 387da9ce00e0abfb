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

// One row of 2x2 windows: r1 = r0 + w, d1 = d0 + w. With Relu, a window whose largest cell is
// not > 0 sends nothing (max_pool2d_relu_backward).
template <bool Relu>
void pool_2x2_backward_row(const float* r0, int64_t w, const float* g, float* d0, int64_t n) {
  const float* r1 = r0 + w;
  float* d1 = d0 + w;
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
    const __mmask16 gb = _mm512_cmp_ps_mask(b, a, _CMP_GT_OQ);
    const __m512 best1 = _mm512_mask_blend_ps(gb, a, b);
    const __mmask16 gc = _mm512_cmp_ps_mask(cc, best1, _CMP_GT_OQ);
    const __m512 best2 = _mm512_mask_blend_ps(gc, best1, cc);
    const __mmask16 gd = _mm512_cmp_ps_mask(d, best2, _CMP_GT_OQ);
    const __mmask16 k3 = gd, k2 = static_cast<__mmask16>(gc & ~gd);
    const __mmask16 k1 = static_cast<__mmask16>(gb & ~gc & ~gd),
                    k0 = static_cast<__mmask16>(~gb & ~gc & ~gd);
    __mmask16 live = mg;
    if constexpr (Relu)
      live &= _mm512_cmp_ps_mask(_mm512_mask_blend_ps(gd, best2, d), _mm512_setzero_ps(),
                                 _CMP_GT_OQ);
    const __m512 gv = _mm512_maskz_loadu_ps(live, g + ow);
    const __m512 da = _mm512_maskz_mov_ps(k0, gv), db = _mm512_maskz_mov_ps(k1, gv);
    const __m512 dc = _mm512_maskz_mov_ps(k2, gv), dd = _mm512_maskz_mov_ps(k3, gv);
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
  pool_2x2_backward_row<false>(r0, w, g, d0, n);
}

namespace {

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
  if (tiled_2x2(s)) {
    for_planes_2x2(c, s, [&](int64_t plane) {
      const float* xp = x + plane * s.h * s.w;
      const float* gp = g + plane * s.oh * s.ow;
      float* dp = dx + plane * s.h * s.w;
      for (int64_t oh = 0; oh < s.oh; ++oh)
        pool_2x2_backward_row<Relu>(xp + 2 * oh * s.w, s.w, gp + oh * s.ow, dp + 2 * oh * s.w,
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
