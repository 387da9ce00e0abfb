// Neural-network kernels: matmul (through cpu::gemm), log_softmax, one_hot, argmax.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/cpu/gemm.h"
#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

// How matmul runs a shape on `threads`: one GEMM (2-D, or a batch folded into M), or a batch
// of GEMMs, split over `slots` parts of the pool when each is too small to thread (slot i
// runs its entries in turn, each on one thread) or else run one after another. The
// workspace is one GEMM's scratch per slot.
struct MatmulPlan {
  GemmArgs g;  // shape only, and one batch entry's where batched
  int64_t batch = 1, slots = 1;
  bool folded = true;
  int64_t slot_floats = 0;
};

MatmulPlan matmul_plan(const Shape& as, const Shape& bs, const Shape& ys, const Attrs& attrs, int threads) {
  MatmulPlan p;
  const bool ta = attrs.get_int("transpose_a") != 0, tb = attrs.get_int("transpose_b") != 0;
  const int64_t m = ys[ys.size() - 2], n = ys.back(), k = ta ? as[as.size() - 2] : as.back();
  p.g = GemmArgs{.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .lda = as.back(), .ldb = bs.back(), .ldc = n};
  const int64_t batch = numel(ys) / std::max<int64_t>(m * n, 1);
  // One B for the whole batch and A's rows in order: a single GEMM with the batch in M.
  if (ys.size() > 2 && numel(bs) == k * n && !ta && numel(as) == batch * m * k) p.g.m = batch * m;
  p.folded = ys.size() == 2 || p.g.m != m || batch <= 1;
  if (!p.folded) {
    p.batch = batch;
    const int64_t macs = std::max<int64_t>(m * n * k, 1);
    if (macs < kGemmParallelMacs)
      p.slots = std::min<int64_t>({threads, batch, std::max<int64_t>(1, batch * macs * 4 / kGemmParallelMacs)});
  }
  p.slot_floats = gemm_workspace_floats(p.g, threads);  // a multiple of 64 bytes
  return p;
}

size_t matmul_workspace(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& a, const Backend& be) {
  const MatmulPlan p = matmul_plan(in[0].shape, in[1].shape, out[0].shape, a, be.num_threads());
  return static_cast<size_t>(p.slots * p.slot_floats) * sizeof(float);
}

void matmul_kernel(const KernelCall& c) {
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  ThreadPool& pool = pool_of(c);
  const MatmulPlan plan = matmul_plan(a.shape(), b.shape(), y.shape(), c.attrs, pool.size());
  GemmArgs g = plan.g;
  g.a = in_ptr<float>(c, 0);
  g.b = in_ptr<float>(c, 1);
  g.c = out_ptr<float>(c, 0);
  const FloatSpan ws = workspace_of(c);
  const bool have_ws = ws.p && ws.n >= plan.slots * plan.slot_floats;
  auto slot = [&](GemmArgs& gi, int64_t i) {
    gi.workspace = have_ws ? ws.p + i * plan.slot_floats : nullptr;
    gi.workspace_floats = have_ws ? plan.slot_floats : 0;
  };
  if (plan.folded) {
    slot(g, 0);
    return gemm(pool, g);
  }
  const int64_t m = g.m, n = g.n, batch = plan.batch;
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
  auto gemms = [&](int64_t lo, int64_t hi, int64_t s) {
    for (int64_t i = lo; i < hi; ++i) {
      GemmArgs gi = g;
      gi.a += off_a[static_cast<size_t>(i)];
      gi.b += off_b[static_cast<size_t>(i)];
      gi.c += i * m * n;
      slot(gi, s);
      gemm(pool, gi);  // inline when this runs as a pool job
    }
  };
  // Products too small to thread on their own split the batch over the pool's slots; larger
  // ones run one after another, each threaded inside gemm.
  if (plan.slots > 1)
    pool.parallel_for(0, plan.slots, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) gemms(batch * s / plan.slots, batch * (s + 1) / plan.slots, s);
    });
  else
    gemms(0, batch, 0);
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
  reg.register_workspace("matmul", DeviceKind::CPU, DType::F32, matmul_workspace);
  reg.register_kernel("log_softmax", DeviceKind::CPU, DType::F32, log_softmax_kernel);
  reg.register_kernel("one_hot", DeviceKind::CPU, DType::I64, one_hot_kernel);
  reg.register_kernel("argmax", DeviceKind::CPU, DType::F32, argmax_kernel);
}

}  // namespace mls::cpu
