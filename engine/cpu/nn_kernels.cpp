// Neural-network kernels: matmul (through cpu::gemm), log_softmax, one_hot, argmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/gemm.h"
#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

void matmul_kernel(const KernelCall& c) {
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  const bool ta = c.attrs.get_int("transpose_a") != 0, tb = c.attrs.get_int("transpose_b") != 0;
  const int64_t m = y.dim(-2), n = y.dim(-1), k = ta ? a.dim(-2) : a.dim(-1);
  GemmArgs g{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .a = in_ptr<float>(c, 0), .lda = a.dim(-1),
             .b = in_ptr<float>(c, 1), .ldb = b.dim(-1), .c = out_ptr<float>(c, 0), .ldc = n};
  ThreadPool& pool = pool_of(c);
  if (y.rank() == 2) return gemm(pool, g);
  const int64_t batch = y.numel() / std::max<int64_t>(m * n, 1);
  // One B for the whole batch and A's rows in order: a single GEMM with the batch in M.
  if (b.numel() == k * n && !ta && a.numel() == batch * m * k) {
    g.m = batch * m;
    return gemm(pool, g);
  }
  // Each operand's matrix offset per batch entry (0 strides where it broadcasts).
  Shape bshape(y.shape().begin(), y.shape().end() - 2);
  auto batch_strides = [&](const Tensor& t) {
    auto lead = static_cast<int64_t>(bshape.size()) - (t.rank() - 2);
    Shape tb_shape(t.shape().begin(), t.shape().end() - 2);
    Strides ts = contiguous_strides(tb_shape), s(bshape.size(), 0);
    int64_t mat = t.dim(-2) * t.dim(-1);
    for (int64_t d = std::max<int64_t>(lead, 0); d < static_cast<int64_t>(bshape.size()); ++d)
      if (tb_shape[static_cast<size_t>(d - lead)] != 1)
        s[static_cast<size_t>(d)] = ts[static_cast<size_t>(d - lead)] * mat;
    return s;
  };
  std::vector<int64_t> off_a, off_b;
  off_a.reserve(static_cast<size_t>(batch));
  off_b.reserve(static_cast<size_t>(batch));
  for_each_offset(bshape, batch_strides(a), [&](int64_t o) { off_a.push_back(o); });
  for_each_offset(bshape, batch_strides(b), [&](int64_t o) { off_b.push_back(o); });
  auto gemms = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      GemmArgs gi = g;
      gi.a += off_a[static_cast<size_t>(i)];
      gi.b += off_b[static_cast<size_t>(i)];
      gi.c += i * m * n;
      gemm(pool, gi);  // inline when this runs as a pool job
    }
  };
  // Products too small to thread on their own split the batch over the pool; larger ones
  // run one after another, each threaded inside gemm.
  const int64_t macs = std::max<int64_t>(m * n * k, 1);
  if (macs < kGemmParallelMacs)
    pool.parallel_for(0, batch, std::max<int64_t>(1, kGemmParallelMacs / macs / 4), gemms);
  else
    gemms(0, batch);
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
