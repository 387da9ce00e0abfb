// Internal to engine/cpu: what the convolution kernels share (conv_kernels.cpp: the forward and
// the input gradient; conv_weight_kernels.cpp: the weight gradient). A convolution's shape and
// how a batch splits into tasks, the vector helpers of the stride-1 kernels, the padded-width
// layout (Direct), and the any-stride path's im2col / col2im and its GEMM.
//
//   const conv::ConvShape s = conv::conv_shape(x.shape(), w.shape(), y.shape(), attrs);
//   if (conv::forward_direct(s)) { const conv::Direct d = conv::forward_direct_of(s); ... }
//
// [SECTION] Shapes and task splitting
// [SECTION] Vectors and the padded-width layout (stride 1)
// [SECTION] Any stride: im2col + SGEMM
#pragma once
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/cpu/avx512.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/vec.h"
#include "engine/ops/conv.h"

namespace mls::cpu::conv {

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

inline ConvShape conv_shape(const Shape& x, const Shape& w, const Shape& y, const Attrs& a) {
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
inline int64_t batch_tasks(int64_t threads, int64_t n, double macs) {
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

// [SECTION] Vectors and the padded-width layout (stride 1)

// One register of floats (engine/cpu/vec.h).
using vec::kLanes;
using vec::load;
using vec::store;
using vec::V;

// A stride-1 convolution of one sample and group: input [cin, h, w], output [cout, oh, ow],
// weights [cout, k]. The padded input has planes hp x wp; output row r lives at r*wp of a
// buffer row of qr >= oh*wp floats (qr a multiple of kLanes), and columns [ow, wp) of each
// output row are computed and dropped.
//
// A padded row is pad zeros, then the w inputs: the right border of a row is the left border
// of the next (or the zero rows below, or the slack after the plane). An output row reads at
// most to column w + 2 pad - 1, below wp + pad, so wp = w + pad is enough where a border
// each side took w + 2 pad: LeNet's input gradient (g padded by 4) computes 14 rows of 14
// columns rather than of 18, a 3x3 convolution with padding 1 at 14 x 14 15 of 16. Padding
// beyond the kernel's reach makes ow > w + pad; wp = ow then keeps a row's outputs apart.
struct Direct {
  int64_t cin, h, w, cout, kh, kw;
  Pair2 pad, dil;
  int64_t hp, wp, oh, ow, qr, k;
  std::vector<int64_t> off;  // row (c, i, j) of the column matrix starts at xp + off[row]
  size_t padded_size;        // floats of the padded input, with room for the last tile's reads
};

inline Direct make_direct(int64_t cin, int64_t h, int64_t w, int64_t cout, int64_t kh, int64_t kw,
                          Pair2 pad, Pair2 dil) {
  Direct d{.cin = cin, .h = h, .w = w, .cout = cout, .kh = kh, .kw = kw, .pad = pad, .dil = dil};
  d.hp = h + 2 * pad[0];
  d.oh = d.hp - dil[0] * (kh - 1);
  d.ow = w + 2 * pad[1] - dil[1] * (kw - 1);
  d.wp = std::max(w + pad[1], d.ow);
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

// out = in + b, then relu when `relu` (scalar::relu: x > 0 ? x : 0, which max(x, 0) with x
// first is too, NaN included).
inline void copy_bias_relu(float* out, const float* in, int64_t n, float b, bool relu) {
#ifdef __AVX512F__
  const __m512 bv = _mm512_set1_ps(b), zero = _mm512_setzero_ps();
  for (; n > 0; n -= 16, out += 16, in += 16) {
    const __mmask16 m = first_lanes(n);
    __m512 x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, in), bv);
    if (relu) x = _mm512_max_ps(x, zero);
    _mm512_mask_storeu_ps(out, m, x);
  }
#else
  for (int64_t i = 0; i < n; ++i) {
    const float x = in[i] + b;
    out[i] = relu ? (x > 0.f ? x : 0.f) : x;
  }
#endif
}

#ifdef __AVX512F__
// out [cols, rows] (rows ldo apart) <- in [rows, cols] (rows ldi apart), rows and cols <= 16:
// pairs of floats, then pairs of pairs, interleaved within 128-bit lanes, then the lanes
// moved across registers.
inline void transpose16(const float* in, int64_t ldi, int64_t rows, int64_t cols, float* out,
                        int64_t ldo) {
  const __mmask16 m = first_lanes(cols);
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(m, in + i * ldi) : _mm512_setzero_ps();
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4 g + j], 128-bit lane L: column 4 L + j of rows 4 g .. 4 g + 3.
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  const __mmask16 keep = first_lanes(rows);
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 v3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    const __m512 col[4] = {_mm512_shuffle_f32x4(v0, v2, 0x88), _mm512_shuffle_f32x4(v1, v3, 0x88),
                           _mm512_shuffle_f32x4(v0, v2, 0xDD), _mm512_shuffle_f32x4(v1, v3, 0xDD)};
    for (int l = 0; l < 4; ++l)
      if (4 * l + j < cols) _mm512_mask_storeu_ps(out + (4 * l + j) * ldo, keep, col[l]);
  }
}
#endif

// out [cols, rows] (rows ldo apart) <- in [rows, cols] (rows ldi apart): the convolutions'
// moves between channel-major planes and pixel-major rows of channel vectors.
inline void transpose(const float* in, int64_t ldi, int64_t rows, int64_t cols, float* out,
                      int64_t ldo) {
  for (int64_t i = 0; i < rows; i += 16)
    for (int64_t j = 0; j < cols; j += 16) {
      const int64_t ri = std::min<int64_t>(16, rows - i), cj = std::min<int64_t>(16, cols - j);
#ifdef __AVX512F__
      transpose16(in + i * ldi + j, ldi, ri, cj, out + j * ldo + i, ldo);
#else
      for (int64_t b = 0; b < cj; ++b)
        for (int64_t a = 0; a < ri; ++a) out[(j + b) * ldo + i + a] = in[(i + a) * ldi + j + b];
#endif
    }
}

// xp <- x [cin, h, w] inside its zero borders. Only the interior is written, the same cells
// for every sample: the borders are zeroed once, where the scratch is laid out (Scratch).
// (A fill a sample was 1.6 % of LeNet's training run.)
inline void zero_padded(float* xp, const Direct& d) { std::fill(xp, xp + d.padded_size, 0.f); }
inline void pad_input(const float* x, float* xp, const Direct& d) {
  for (int64_t c = 0; c < d.cin; ++c)
    for (int64_t r = 0; r < d.h; ++r)
      copy_floats(xp + (c * d.hp + r + d.pad[0]) * d.wp + d.pad[1], x + (c * d.h + r) * d.w, d.w);
}

// Per-task scratch: the padded input and an output (or gradient) buffer [cout, qr], at `at`
// in the kernel's workspace.
inline size_t scratch_floats(const Direct& d) {
  return d.padded_size + static_cast<size_t>(d.cout * d.qr);
}
struct Scratch {
  float* xp;
  float* yp;
  Scratch(const Direct& d, float* at) : xp(at), yp(at + d.padded_size) { zero_padded(xp, d); }
};

// Stride 1 and not 1x1: the padded-width kernels (forward and weight gradient).
inline bool forward_direct(const ConvShape& s) {
  return s.unit_stride() && !s.pointwise();
}
inline Direct forward_direct_of(const ConvShape& s) {
  return make_direct(s.cg, s.h, s.w, s.og, s.kh, s.kw, s.p.padding, s.p.dilation);
}

// [SECTION] Any stride: im2col + SGEMM

inline int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

// The outputs [lo, hi) of a row whose tap ow * stride + offset lies inside [0, extent).
struct Span {
  int64_t lo, hi;
};
inline Span inside(int64_t offset, int64_t stride, int64_t extent, int64_t out) {
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
inline void im2col(const float* x, float* col, const ConvShape& s) {
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
inline void col2im(const float* col, float* x, const ConvShape& s) {
  for_col_rows(s, [&](int64_t ci, int64_t xi, Span sp, int64_t sw, int64_t dx) {
    if (xi < 0) return;
    const float* in = col + ci;
    float* out = x + xi;
    for (int64_t ow = sp.lo; ow < sp.hi; ++ow) out[ow * sw + dx] += in[ow];
  });
}

inline void gemm(ThreadPool& pool, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc, FloatSpan ws) {
  cpu::gemm(pool, GemmArgs{.trans_a = ta,
                           .trans_b = tb,
                           .m = m,
                           .n = n,
                           .k = k,
                           .a = a,
                           .lda = lda,
                           .b = b,
                           .ldb = ldb,
                           .c = c,
                           .ldc = ldc,
                           .beta = beta,
                           .workspace = ws.p,
                           .workspace_floats = ws.n});
}

// The GEMM scratch of one task of each BLAS path (cpu::gemm_workspace_floats: a multiple of
// 16 floats, so each task's starts 64-byte aligned).
enum class ConvGemm { Forward, BackwardInput, BackwardWeight };
inline size_t gemm_floats(const ConvShape& s, ConvGemm which, int64_t threads) {
  GemmArgs g;
  switch (which) {
    case ConvGemm::Forward:
      g = GemmArgs{.m = s.og,
                   .n = s.pixels(),
                   .k = s.k(),
                   .lda = s.k(),
                   .ldb = s.pixels(),
                   .ldc = s.pixels()};
      break;
    case ConvGemm::BackwardInput:
      g = GemmArgs{.trans_a = true,
                   .m = s.k(),
                   .n = s.pixels(),
                   .k = s.og,
                   .lda = s.k(),
                   .ldb = s.pixels(),
                   .ldc = s.pixels()};
      break;
    case ConvGemm::BackwardWeight:  // accumulates (beta 1) over the task's samples
      g = GemmArgs{.trans_b = true,
                   .m = s.og,
                   .n = s.k(),
                   .k = s.pixels(),
                   .lda = s.pixels(),
                   .ldb = s.pixels(),
                   .ldc = s.k(),
                   .beta = 1.f};
      break;
  }
  return static_cast<size_t>(gemm_workspace_floats(g, static_cast<int>(threads)));
}

// cpu::gemm keeps a GEMM on the calling thread below M*N*K = kGemmParallelMacs.
// Convolutions made of such GEMMs split their samples over our pool; larger ones run the
// samples in turn and let gemm's threads share each GEMM.
inline int64_t blas_tasks(int64_t threads, const ConvShape& s) {
  double mnk = static_cast<double>(s.og) * static_cast<double>(s.k() * s.pixels());
  if (mnk >= static_cast<double>(kGemmParallelMacs)) return 1;
  return batch_tasks(threads, s.n, mnk * static_cast<double>(s.groups));
}

// An im2col path's per-task column matrix [k, oh*ow] (none for a pointwise convolution).
inline size_t col_floats(const ConvShape& s) {
  return s.pointwise() ? 0 : static_cast<size_t>(s.k() * s.pixels());
}

}  // namespace mls::cpu::conv
