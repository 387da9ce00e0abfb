// Neural-network kernels: matmul through CBLAS (OpenBLAS), log_softmax, one_hot, argmax.
#include <cblas.h>

#include <cmath>
#include <limits>

#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

void matmul_kernel(const KernelCall& c) {
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  bool ta = c.attrs.get_int("transpose_a") != 0, tb = c.attrs.get_int("transpose_b") != 0;
  auto m = static_cast<blasint>(y.dim(0)), n = static_cast<blasint>(y.dim(1));
  auto k = static_cast<blasint>(ta ? a.dim(0) : a.dim(1));
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, in_ptr<float>(c, 0), static_cast<blasint>(a.dim(1)), in_ptr<float>(c, 1),
              static_cast<blasint>(b.dim(1)), 0.0f, out_ptr<float>(c, 0), n);
}

// Lines along `axis` as (outer, len, inner) with element (o, i, j) at (o*len + i)*inner + j.
struct Lines {
  int64_t outer = 1, len = 1, inner = 1;
};
Lines lines_of(const Shape& s, int64_t axis) {
  Lines l;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (d < axis ? l.outer : d == axis ? l.len : l.inner) *= s[static_cast<size_t>(d)];
  return l;
}

void log_softmax_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t axis = *normalize_axis(c.attrs.get_int("axis"), tx.rank());
  Lines l = lines_of(tx.shape(), axis);
  pool_of(c).parallel_for(0, l.outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(l.len * l.inner, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t o = lo; o < hi; ++o)
      for (int64_t j = 0; j < l.inner; ++j) {
        const float* xs = x + o * l.len * l.inner + j;
        float* ys = y + o * l.len * l.inner + j;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < l.len; ++i) mx = std::max(mx, xs[i * l.inner]);
        float s = 0;
        for (int64_t i = 0; i < l.len; ++i) s += std::exp(xs[i * l.inner] - mx);
        float lse = mx + std::log(s);
        for (int64_t i = 0; i < l.len; ++i) ys[i * l.inner] = xs[i * l.inner] - lse;
      }
  });
}

void one_hot_kernel(const KernelCall& c) {
  const int64_t* labels = in_ptr<int64_t>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t n = c.outputs[0]->dim(0), k = c.outputs[0]->dim(1);
  std::fill(y, y + n * k, 0.f);
  for (int64_t i = 0; i < n; ++i)
    if (labels[i] >= 0 && labels[i] < k) y[i * k + labels[i]] = 1.f;
}

void argmax_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  int64_t* y = out_ptr<int64_t>(c, 0);
  int64_t axis = *normalize_axis(c.attrs.get_int("axis"), tx.rank());
  Lines l = lines_of(tx.shape(), axis);
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t j = 0; j < l.inner; ++j) {
      const float* xs = x + o * l.len * l.inner + j;
      int64_t best = 0;
      for (int64_t i = 1; i < l.len; ++i)
        if (xs[i * l.inner] > xs[best * l.inner]) best = i;
      y[o * l.inner + j] = best;
    }
}

}  // namespace

void register_nn_kernels(OpRegistry& reg) {
  reg.register_kernel("matmul", DeviceKind::CPU, DType::F32, matmul_kernel);
  reg.register_kernel("log_softmax", DeviceKind::CPU, DType::F32, log_softmax_kernel);
  reg.register_kernel("one_hot", DeviceKind::CPU, DType::I64, one_hot_kernel);
  reg.register_kernel("argmax", DeviceKind::CPU, DType::F32, argmax_kernel);
}

}  // namespace mls::cpu
