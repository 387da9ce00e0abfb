// CPU kernels (f32) of batch norm in training: batch_norm_train, batch_norm_act (the same
// with relu applied as y is written) and batch_norm_backward (engine/ops/batch_norm_ops.cpp).
//
// A channel of x [N, C, S] is N rows of S contiguous floats. The forward takes one pass for the
// statistics (sums of x - k and (x - k)^2, k a value of the channel, so that E[(x-k)^2] - E[x-k]^2
// does not cancel) and one to normalise; the backward one pass for its two sums (of g and g (x -
// mean)) and one to write dx. Row sums run in the float lanes of one vector register, and each
// row's lanes add to double lanes (a channel of a large batch sums many floats, and float sums
// would drift from the reference), summed across lanes once at the end. With relu, the
// backward recomputes the mask from x with the forward's own float operations (scale_of,
// pre_activation; this file is compiled without FMA contraction, so both round alike)
// instead of reading y: one tensor fewer in each of its passes. batch_norm_pool_backward goes
// one step further for a 2x2 max pool of y: each pass rebuilds a plane of y, then of the
// pool's gradient, in a buffer of its own, from x and the pooled gradient.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/cpu/conv_kernels.h"
#include "engine/cpu/kernels.h"
#include "engine/cpu/vec.h"
#include "engine/ops/nn.h"

namespace mls::cpu {

namespace {

int64_t channel_grain(int64_t per_channel) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(per_channel, 1));
}

bool relu_of(const Attrs& a) {
  return a.has("act") && a.get_string("act") == "relu";
}

// gamma rstd as both directions compute it, from the f32 variance the forward outputs.
float scale_of(float gamma, float var, double eps) {
  return static_cast<float>(gamma / std::sqrt(static_cast<double>(var) + eps));
}
// The pre-activation (x - mean) a + b, in float, as y was written.
template <typename T>
T pre_activation(T x, float mean, float a, float b) {
  return (x - mean) * a + b;
}

constexpr int kVec = vec::kLanes;
using vec::load;
using vec::V;
typedef int32_t VI __attribute__((vector_size(4 * kVec)));
typedef double VD __attribute__((vector_size(8 * kVec), aligned(8), may_alias));

// The two sums of a channel in a chunk, kVec double lanes each: a row's float lanes are added
// with one conversion (no horizontal sum a row), the lanes only in chunk_totals.
struct LaneSums {
  double* p;  // [2][kVec]
  void add(const V& a, const V& b, double t1, double t2) const {
    *reinterpret_cast<VD*>(p) += __builtin_convertvector(a, VD);
    *reinterpret_cast<VD*>(p + kVec) += __builtin_convertvector(b, VD);
    p[0] += t1;
    p[kVec] += t2;
  }
};

// s1 += sum(x - k), s2 += sum((x - k)^2) over n floats.
void shifted_sums(const float* x, int64_t n, float k, LaneSums out) {
  const V kv = V{} + k;
  V a = V{}, b = V{};
  int64_t i = 0;
  for (; i + kVec <= n; i += kVec) {
    const V d = load(x + i) - kv;
    a += d;
    b += d * d;
  }
  double t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - k;
    t1 += d;
    t2 += d * d;
  }
  out.add(a, b, t1, t2);
}

// sg += sum(gy), sgx += sum(gy (x - mu)) over n floats, gy = g, or g where the pre-activation
// (x - mu) sa + sb > 0 (relu). Written with vector extensions (one register wide): GCC leaves
// the masked form of the plain loop scalar.
template <bool Relu>
void gradient_sums(const float* g, const float* x, int64_t n, float mu, float sa, float sb,
                   LaneSums out) {
  V a = V{}, b = V{};
  int64_t i = 0;
  for (; i + kVec <= n; i += kVec) {
    V gy = load(g + i);
    const V xv = load(x + i);
    if constexpr (Relu)
      gy = reinterpret_cast<V>(reinterpret_cast<VI>(gy) & (pre_activation(xv, mu, sa, sb) > V{}));
    a += gy;
    b += gy * (xv - mu);
  }
  double t1 = 0, t2 = 0;
  for (; i < n; ++i) {
    const double gy = Relu ? (pre_activation(x[i], mu, sa, sb) > 0.f ? g[i] : 0.f) : g[i];
    t1 += gy;
    t2 += gy * (x[i] - mu);
  }
  out.add(a, b, t1, t2);
}

// The batch splits into a fixed number of chunks of samples (not one per thread, so the sums,
// added chunk by chunk in order, do not depend on the thread count). A chunk walks its samples
// in memory order, every channel of a sample in turn: one stream through each tensor, where
// a channel at a time would jump between N short rows.
constexpr int64_t kChunks = 16;

// fn(chunk, sample_lo, sample_hi) for each chunk, in parallel; -> the chunk count.
template <typename Fn>
int64_t for_chunks(const KernelCall& c, int64_t n, Fn fn) {
  const int64_t chunks = std::min(n, kChunks);
  pool_of(c).parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) fn(t, n * t / chunks, n * (t + 1) / chunks);
  });
  return chunks;
}

// fn(sample) for every sample, in parallel.
template <typename Fn>
void for_samples(const KernelCall& c, int64_t n, int64_t per_sample, Fn fn) {
  pool_of(c).parallel_for(0, n, channel_grain(per_sample), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) fn(i);
  });
}

// Per chunk and channel, two sums of kVec double lanes: part [chunks][ch][2][kVec].
std::vector<double> chunk_parts(int64_t n, int64_t ch) {
  return std::vector<double>(static_cast<size_t>(std::min(n, kChunks) * ch * 2 * kVec), 0.0);
}
LaneSums lane_sums(std::vector<double>& part, int64_t chunk, int64_t ch, int64_t k) {
  return {part.data() + ((chunk * ch + k) * 2) * kVec};
}
// The lanes of every chunk, summed in order into sums[2 k], [2 k + 1].
std::vector<double> chunk_totals(const std::vector<double>& part, int64_t chunks, int64_t ch) {
  std::vector<double> sums(static_cast<size_t>(2 * ch), 0.0);
  for (int64_t t = 0; t < chunks; ++t)
    for (int64_t j = 0; j < 2 * ch; ++j)
      for (int l = 0; l < kVec; ++l)
        sums[static_cast<size_t>(j)] += part[static_cast<size_t>((t * 2 * ch + j) * kVec + l)];
  return sums;
}

// x [N, C, S] -> y = act(gamma (x - mean) rstd + beta), mean [C], var [C] (biased).
void batch_norm_forward(const KernelCall& c, bool relu) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  const float* gamma = in_ptr<float>(c, 1);
  const float* beta = in_ptr<float>(c, 2);
  float* y = out_ptr<float>(c, 0);
  float* mean = out_ptr<float>(c, 1);
  float* var = out_ptr<float>(c, 2);
  const int64_t n = tx.dim(0), ch = tx.dim(1), s = tx.numel() / (n * ch);
  const auto m = static_cast<double>(n * s);
  const double eps = c.attrs.get_float_or("eps", kNormEps);
  std::vector<float> shift(static_cast<size_t>(ch)), mu(shift.size()), a(shift.size()),
      b(shift.size());
  for (int64_t k = 0; k < ch; ++k) shift[static_cast<size_t>(k)] = x[k * s];
  std::vector<double> part = chunk_parts(n, ch);
  const int64_t chunks = for_chunks(c, n, [&](int64_t t, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t k = 0; k < ch; ++k)
        shifted_sums(x + (i * ch + k) * s, s, shift[static_cast<size_t>(k)],
                     lane_sums(part, t, ch, k));
  });
  const std::vector<double> sums = chunk_totals(part, chunks, ch);
  for (int64_t k = 0; k < ch; ++k) {
    const auto ku = static_cast<size_t>(k);
    const double d = sums[2 * ku] / m;
    const double v = std::max(0.0, sums[2 * ku + 1] / m - d * d);
    mu[ku] = static_cast<float>(shift[ku] + d);
    mean[k] = mu[ku];
    var[k] = static_cast<float>(v);
    a[ku] = scale_of(gamma[k], var[k], eps);
    b[ku] = beta[k];
  }
  for_samples(c, n, ch * s, [&](int64_t i) {
    for (int64_t k = 0; k < ch; ++k) {
      const float* xs = x + (i * ch + k) * s;
      float* ys = y + (i * ch + k) * s;
      const auto ku = static_cast<size_t>(k);
      const float mk = mu[ku], ak = a[ku], bk = b[ku];
      if (relu)
        for (int64_t j = 0; j < s; ++j) ys[j] = std::max(pre_activation(xs[j], mk, ak, bk), 0.f);
      else
        for (int64_t j = 0; j < s; ++j) ys[j] = pre_activation(xs[j], mk, ak, bk);
    }
  });
}

// One plane's gy = max_pool2d_backward(gp, y) for the 2x2, stride-2 pool of y = act((x - mean)
// a + b) [h, w]: y rebuilt into ys [h w] with the forward's own float operations (so each
// window's first largest cell is the forward's), then routed into gy [h w].
void pooled_gradient(const float* xs, const float* gp, int64_t h, int64_t w, float mean, float a,
                     float b, bool relu, float* ys, float* gy) {
  const int64_t s = h * w;
  if (relu)
    for (int64_t j = 0; j < s; ++j) ys[j] = std::max(pre_activation(xs[j], mean, a, b), 0.f);
  else
    for (int64_t j = 0; j < s; ++j) ys[j] = pre_activation(xs[j], mean, a, b);
  for (int64_t r = 0; r < h / 2; ++r)
    max_pool_2x2_backward_row(ys + 2 * r * w, w, gp + r * (w / 2), gy + 2 * r * w, w / 2);
}

// (g, x, mean, var, gamma[, beta]) -> dx, dgamma, dbeta. With gy = g (for relu, masked where
// the pre-activation (x - mean) a + beta <= 0, as the forward wrote y), sg = sum(gy),
// sgx = sum(gy (x - mean)) and a = gamma rstd:
//   dx = a gy - a rstd^2 sgx / m (x - mean) - a sg / m,  dgamma = rstd sgx,  dbeta = sg.
// With Pool (batch_norm_pool_backward), g is the 2x2 max pool's gradient gp [N, C, H/2, W/2]
// of y = act(pre-activation) and beta is input 5 either way: each plane's gy is rebuilt
// (pooled_gradient) where it is read.
template <bool Relu, bool Pool = false>
void batch_norm_backward(const KernelCall& c) {
  const Tensor& tx = *c.inputs[1];
  const float* g = in_ptr<float>(c, 0);
  const float* x = in_ptr<float>(c, 1);
  const float* mean = in_ptr<float>(c, 2);
  const float* var = in_ptr<float>(c, 3);
  const float* gamma = in_ptr<float>(c, 4);
  const float* beta = Relu || Pool ? in_ptr<float>(c, 5) : nullptr;
  float* dx = out_ptr<float>(c, 0);
  float* dgamma = out_ptr<float>(c, 1);
  float* dbeta = out_ptr<float>(c, 2);
  const int64_t n = tx.dim(0), ch = tx.dim(1), s = tx.numel() / (n * ch);
  const auto m = static_cast<double>(n * s);
  const double eps = c.attrs.get_float_or("eps", kNormEps);
  // relu's mask (and the pool's y): the forward's scale and shift of each channel.
  std::vector<float> sa(static_cast<size_t>(ch)), sb(sa.size());
  if constexpr (Relu || Pool)
    for (int64_t k = 0; k < ch; ++k) {
      sa[static_cast<size_t>(k)] = scale_of(gamma[k], var[k], eps);
      sb[static_cast<size_t>(k)] = beta[k];
    }
  std::vector<double> part = chunk_parts(n, ch);
  // The gradient plane of (sample i, channel k): g's own, or rebuilt in `buf` [2 s].
  const int64_t h = Pool ? tx.dim(2) : 0, w = Pool ? tx.dim(3) : 0;
  auto plane = [&](int64_t i, int64_t k, std::vector<float>& buf) -> const float* {
    if constexpr (!Pool) return g + (i * ch + k) * s;
    buf.resize(static_cast<size_t>(2 * s));
    const auto ku = static_cast<size_t>(k);
    pooled_gradient(x + (i * ch + k) * s, g + (i * ch + k) * (s / 4), h, w, mean[k], sa[ku],
                    sb[ku], Relu, buf.data(), buf.data() + s);
    return buf.data() + s;
  };
  const int64_t chunks = for_chunks(c, n, [&](int64_t t, int64_t lo, int64_t hi) {
    std::vector<float> buf;
    for (int64_t i = lo; i < hi; ++i)
      for (int64_t k = 0; k < ch; ++k) {
        const int64_t o = (i * ch + k) * s;
        const auto ku = static_cast<size_t>(k);
        gradient_sums<Relu>(plane(i, k, buf), x + o, s, mean[k], sa[ku], sb[ku],
                            lane_sums(part, t, ch, k));
      }
  });
  const std::vector<double> sums = chunk_totals(part, chunks, ch);
  std::vector<float> fa(static_cast<size_t>(ch)), fb(fa.size()), fc(fa.size());
  for (int64_t k = 0; k < ch; ++k) {
    const auto ku = static_cast<size_t>(k);
    const double sg = sums[2 * ku], sgx = sums[2 * ku + 1];
    const double rstd = 1.0 / std::sqrt(static_cast<double>(var[k]) + eps);
    const double a = gamma[k] * rstd;
    dgamma[k] = static_cast<float>(sgx * rstd);
    dbeta[k] = static_cast<float>(sg);
    fa[ku] = static_cast<float>(a);
    fb[ku] = static_cast<float>(-a * rstd * rstd * sgx / m);
    fc[ku] = static_cast<float>(-a * sg / m);
  }
  for_samples(c, n, 2 * ch * s, [&](int64_t i) {
    std::vector<float> buf;
    for (int64_t k = 0; k < ch; ++k) {
      const int64_t o = (i * ch + k) * s;
      const float *gs = plane(i, k, buf), *xs = x + o;
      float* out = dx + o;
      const auto ku = static_cast<size_t>(k);
      const float a = fa[ku], b = fb[ku], cc = fc[ku], mk = mean[k];
      if constexpr (Relu) {
        const float ma = sa[ku], mb = sb[ku];
        for (int64_t j = 0; j < s; ++j) {
          const float gv = gs[j];
          out[j] = a * (pre_activation(xs[j], mk, ma, mb) > 0.f ? gv : 0.f) + b * (xs[j] - mk) + cc;
        }
      } else {
        for (int64_t j = 0; j < s; ++j) out[j] = a * gs[j] + b * (xs[j] - mk) + cc;
      }
    }
  });
}

}  // namespace

void register_batch_norm_kernels(OpRegistry& reg) {
  reg.register_kernel("batch_norm_train", DeviceKind::CPU, DType::F32,
                      [](const KernelCall& c) { batch_norm_forward(c, false); });
  reg.register_kernel("batch_norm_act", DeviceKind::CPU, DType::F32,
                      [](const KernelCall& c) { batch_norm_forward(c, relu_of(c.attrs)); });
  reg.register_kernel("batch_norm_backward", DeviceKind::CPU, DType::F32, [](const KernelCall& c) {
    if (relu_of(c.attrs))
      batch_norm_backward<true>(c);
    else
      batch_norm_backward<false>(c);
  });
  reg.register_kernel("batch_norm_pool_backward", DeviceKind::CPU, DType::F32,
                      [](const KernelCall& c) {
                        if (relu_of(c.attrs))
                          batch_norm_backward<true, true>(c);
                        else
                          batch_norm_backward<false, true>(c);
                      });
}

}  // namespace mls::cpu
