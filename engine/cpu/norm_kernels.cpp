// CPU kernels (f32): softmax, layer_norm, dropout, embedding,
// embedding_backward, sigmoid_cross_entropy. Statistics accumulate in double: a channel
// of a large batch sums many floats, and float sums would drift from the reference.
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/cpu/kernels.h"
#include "engine/ops/nn.h"

namespace mls::cpu {

void register_batch_norm_kernels(OpRegistry& reg);  // batch_norm_kernels.cpp

namespace {

int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(work_per_item, 1));
}

void softmax_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  const auto axis = static_cast<size_t>(*normalize_axis(c.attrs.get_int("axis"), tx.rank()));
  int64_t outer = 1, len = tx.shape()[axis], inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= tx.shape()[d];
  for (size_t d = axis + 1; d < tx.shape().size(); ++d) inner *= tx.shape()[d];
  pool_of(c).parallel_for(0, outer, grain_for(len * inner), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        const float* xs = x + o * len * inner + j;
        float* ys = y + o * len * inner + j;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < len; ++i) mx = std::max(mx, xs[i * inner]);
        float s = 0;
        for (int64_t i = 0; i < len; ++i) s += (ys[i * inner] = std::exp(xs[i * inner] - mx));
        const float r = 1.0f / s;
        for (int64_t i = 0; i < len; ++i) ys[i * inner] *= r;
      }
  });
}

// Rows of `inner` = numel(gamma) elements, one row per task.
void layer_norm_kernel(const KernelCall& c) {
  const float* x = in_ptr<float>(c, 0);
  const float* gamma = in_ptr<float>(c, 1);
  const float* beta = in_ptr<float>(c, 2);
  float* y = out_ptr<float>(c, 0);
  const int64_t inner = c.inputs[1]->numel(), rows = c.inputs[0]->numel() / inner;
  const double eps = c.attrs.get_float_or("eps", kNormEps);
  pool_of(c).parallel_for(0, rows, grain_for(inner), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const float* xr = x + r * inner;
      float* yr = y + r * inner;
      double sum = 0, sq = 0;
      for (int64_t j = 0; j < inner; ++j) sum += xr[j];
      const double mu = sum / static_cast<double>(inner);
      for (int64_t j = 0; j < inner; ++j) sq += (xr[j] - mu) * (xr[j] - mu);
      const auto rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(inner) + eps));
      const auto muf = static_cast<float>(mu);
      for (int64_t j = 0; j < inner; ++j) yr[j] = (xr[j] - muf) * rstd * gamma[j] + beta[j];
    }
  });
}

void dropout_kernel(const KernelCall& c) {
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  const int64_t n = c.inputs[0]->numel();
  const double p = c.attrs.get_float("p");
  if (c.attrs.get_int("training") == 0) {
    std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const uint64_t seed = dropout_seed(c.attrs.get_int("seed"), *in_ptr<int64_t>(c, 1));
  const auto keep_scale = static_cast<float>(1.0 / (1.0 - p));
  pool_of(c).parallel_for(0, n, kParallelGrain / 4, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      y[i] = dropout_keep(seed, static_cast<uint64_t>(i), p) ? x[i] * keep_scale : 0.0f;
  });
}

void embedding_kernel(const KernelCall& c) {
  const Tensor& tw = *c.inputs[0];
  const float* w = in_ptr<float>(c, 0);
  const int64_t* idx = in_ptr<int64_t>(c, 1);
  float* y = out_ptr<float>(c, 0);
  const int64_t v = tw.dim(0), d = tw.dim(1), n = c.inputs[1]->numel();
  pool_of(c).parallel_for(0, n, grain_for(d), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t k = idx[i];
      if (k >= 0 && k < v)
        std::memcpy(y + i * d, w + k * d, static_cast<size_t>(d) * sizeof(float));
      else
        std::fill(y + i * d, y + (i + 1) * d, 0.0f);
    }
  });
}

// Scatter-add; threads split the D columns, so no two threads touch one element.
void embedding_backward_kernel(const KernelCall& c) {
  const float* g = in_ptr<float>(c, 0);
  const int64_t* idx = in_ptr<int64_t>(c, 1);
  float* w = out_ptr<float>(c, 0);
  const int64_t v = c.outputs[0]->dim(0), d = c.outputs[0]->dim(1), n = c.inputs[1]->numel();
  std::fill(w, w + v * d, 0.0f);
  pool_of(c).parallel_for(0, d, std::max<int64_t>(16, grain_for(n)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t k = idx[i];
      if (k < 0 || k >= v) continue;
      const float* gi = g + i * d;
      float* wk = w + k * d;
      for (int64_t j = lo; j < hi; ++j) wk[j] += gi[j];
    }
  });
}

void sigmoid_cross_entropy_kernel(const KernelCall& c) {
  const float* x = in_ptr<float>(c, 0);
  const float* t = in_ptr<float>(c, 1);
  float* y = out_ptr<float>(c, 0);
  const int64_t n = c.inputs[0]->numel();
  pool_of(c).parallel_for(0, n, kParallelGrain / 4, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      y[i] = std::max(x[i], 0.0f) - x[i] * t[i] + std::log1p(std::exp(-std::abs(x[i])));
  });
}

}  // namespace

void register_norm_kernels(OpRegistry& reg) {
  reg.register_kernel("softmax", DeviceKind::CPU, DType::F32, softmax_kernel);
  register_batch_norm_kernels(reg);
  reg.register_kernel("layer_norm", DeviceKind::CPU, DType::F32, layer_norm_kernel);
  reg.register_kernel("dropout", DeviceKind::CPU, DType::F32, dropout_kernel);
  reg.register_kernel("embedding", DeviceKind::CPU, DType::F32, embedding_kernel);
  reg.register_kernel("embedding_backward", DeviceKind::CPU, DType::F32, embedding_backward_kernel);
  reg.register_kernel("sigmoid_cross_entropy", DeviceKind::CPU, DType::F32,
                      sigmoid_cross_entropy_kernel);
}

}  // namespace mls::cpu
