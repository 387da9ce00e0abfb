// CPU kernels: reductions (max, min, var, and the masks behind max/min gradients) and
// layout ops (slice, concat, split, index_select, pad and their gradient ops).
//
// Reductions over a contiguous run of axes see the input as [outer, mid, inner] and reduce
// mid; any other set of axes walks the input once, folding each element into its slot.
// The layout ops move bytes, so most of them serve every dtype.
#include <cstring>
#include <limits>

#include "engine/cpu/kernels.h"
#include "engine/ops/layout.h"
#include "engine/ops/op_helpers.h"

namespace mls::cpu {

namespace {

// [SECTION] Reductions

struct ReducePlan {
  bool run = false;                       // the reduced axes are one contiguous run
  int64_t outer = 1, mid = 1, inner = 1;  // when run: element (o, m, i) at (o*mid + m)*inner + i
  Strides slot;                           // otherwise: the output slot's stride for each input axis
};

ReducePlan plan_reduce(const Shape& s, const std::vector<int64_t>& axes_attr) {
  auto rank = static_cast<int64_t>(s.size());
  std::vector<int64_t> axes = ops::norm_axes(axes_attr, rank);
  ReducePlan p;
  p.run = axes.empty() || axes.back() - axes.front() + 1 == static_cast<int64_t>(axes.size());
  if (axes.empty()) return p;  // a scalar input: nothing is reduced
  if (p.run) {
    for (int64_t d = 0; d < rank; ++d)
      (d < axes.front()   ? p.outer
       : d <= axes.back() ? p.mid
                          : p.inner) *= s[static_cast<size_t>(d)];
    return p;
  }
  Shape keep = s;
  for (int64_t a : axes) keep[static_cast<size_t>(a)] = 1;
  p.slot = contiguous_strides(keep);
  for (int64_t a : axes) p.slot[static_cast<size_t>(a)] = 0;
  return p;
}

template <bool IsMax>
inline bool better(float a, float b) {
  return IsMax ? a > b : a < b;
}

template <bool IsMax>
void extreme_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  ReducePlan p = plan_reduce(tx.shape(), c.attrs.get_ints("axes"));
  constexpr float init =
      IsMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  if (!p.run) {
    std::fill(y, y + c.outputs[0]->numel(), init);
    int64_t i = 0;
    for_each_offset(tx.shape(), p.slot, [&](int64_t off) {
      float v = x[i++];
      if (better<IsMax>(v, y[off])) y[off] = v;
    });
    return;
  }
  if (p.inner == 1) {  // row extremes, with 16 running values so the loop vectorises
    pool_of(c).parallel_for(0, p.outer,
                            std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.mid, 1)),
                            [&](int64_t lo, int64_t hi) {
                              for (int64_t o = lo; o < hi; ++o) {
                                const float* r = x + o * p.mid;
                                float acc[16];
                                std::fill(acc, acc + 16, init);
                                int64_t m = 0;
                                for (; m + 16 <= p.mid; m += 16)
                                  for (int k = 0; k < 16; ++k)
                                    acc[k] = better<IsMax>(r[m + k], acc[k]) ? r[m + k] : acc[k];
                                float best = init;
                                for (; m < p.mid; ++m)
                                  best = better<IsMax>(r[m], best) ? r[m] : best;
                                for (float a : acc) best = better<IsMax>(a, best) ? a : best;
                                y[o] = best;
                              }
                            });
    return;
  }
  pool_of(c).parallel_for(
      0, p.inner, std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(p.outer * p.mid, 1)),
      [&](int64_t lo, int64_t hi) {
        for (int64_t o = 0; o < p.outer; ++o) {
          float* yo = y + o * p.inner;
          for (int64_t i = lo; i < hi; ++i) yo[i] = init;
          for (int64_t m = 0; m < p.mid; ++m) {
            const float* r = x + (o * p.mid + m) * p.inner;
            for (int64_t i = lo; i < hi; ++i) yo[i] = better<IsMax>(r[i], yo[i]) ? r[i] : yo[i];
          }
        }
      });
}

// 1 at the first position of each group's extreme: the same walk, remembering positions.
template <bool IsMax>
void extreme_mask_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t n = tx.numel();
  std::fill(y, y + n, 0.f);
  if (n == 0) return;
  ReducePlan p = plan_reduce(tx.shape(), c.attrs.get_ints("axes"));
  if (!p.run) {
    int64_t groups = n;
    for (size_t d = 0; d < tx.shape().size(); ++d)
      if (p.slot[d] == 0) groups /= tx.shape()[d];
    std::vector<int64_t> best(static_cast<size_t>(groups), -1);
    int64_t i = 0;
    for_each_offset(tx.shape(), p.slot, [&](int64_t off) {
      int64_t& b = best[static_cast<size_t>(off)];
      if (b < 0 || better<IsMax>(x[i], x[b])) b = i;
      ++i;
    });
    for (int64_t b : best) y[b] = 1.f;
    return;
  }
  pool_of(c).parallel_for(
      0, p.outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.mid * p.inner, 1)),
      [&](int64_t lo, int64_t hi) {
        std::vector<int64_t> best(static_cast<size_t>(p.inner));
        for (int64_t o = lo; o < hi; ++o) {
          const float* xo = x + o * p.mid * p.inner;
          std::fill(best.begin(), best.end(), 0);
          for (int64_t m = 1; m < p.mid; ++m)
            for (int64_t i = 0; i < p.inner; ++i) {
              int64_t& b = best[static_cast<size_t>(i)];
              if (better<IsMax>(xo[m * p.inner + i], xo[b * p.inner + i])) b = m;
            }
          for (int64_t i = 0; i < p.inner; ++i)
            y[(o * p.mid + best[static_cast<size_t>(i)]) * p.inner + i] = 1.f;
        }
      });
}

// Two passes (mean, then squared deviations), accumulated in double.
void var_kernel(const KernelCall& c) {
  const Tensor& tx = *c.inputs[0];
  const float* x = in_ptr<float>(c, 0);
  float* y = out_ptr<float>(c, 0);
  int64_t out_n = c.outputs[0]->numel();
  int64_t count = tx.numel() / std::max<int64_t>(out_n, 1);
  double denom = static_cast<double>(count - c.attrs.get_int("correction"));
  ReducePlan p = plan_reduce(tx.shape(), c.attrs.get_ints("axes"));
  if (!p.run) {
    std::vector<double> mean(static_cast<size_t>(out_n), 0.0), ss(static_cast<size_t>(out_n), 0.0);
    int64_t i = 0;
    for_each_offset(tx.shape(), p.slot,
                    [&](int64_t off) { mean[static_cast<size_t>(off)] += x[i++]; });
    for (double& m : mean) m /= static_cast<double>(count);
    i = 0;
    for_each_offset(tx.shape(), p.slot, [&](int64_t off) {
      double d = x[i++] - mean[static_cast<size_t>(off)];
      ss[static_cast<size_t>(off)] += d * d;
    });
    for (int64_t k = 0; k < out_n; ++k)
      y[k] = static_cast<float>(ss[static_cast<size_t>(k)] / denom);
    return;
  }
  pool_of(c).parallel_for(
      0, p.outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.mid * p.inner, 1)),
      [&](int64_t lo, int64_t hi) {
        std::vector<double> mean(static_cast<size_t>(p.inner)), ss(static_cast<size_t>(p.inner));
        for (int64_t o = lo; o < hi; ++o) {
          const float* xo = x + o * p.mid * p.inner;
          std::fill(mean.begin(), mean.end(), 0.0);
          std::fill(ss.begin(), ss.end(), 0.0);
          for (int64_t m = 0; m < p.mid; ++m)
            for (int64_t i = 0; i < p.inner; ++i)
              mean[static_cast<size_t>(i)] += xo[m * p.inner + i];
          for (double& v : mean) v /= static_cast<double>(p.mid);
          for (int64_t m = 0; m < p.mid; ++m)
            for (int64_t i = 0; i < p.inner; ++i) {
              double d = xo[m * p.inner + i] - mean[static_cast<size_t>(i)];
              ss[static_cast<size_t>(i)] += d * d;
            }
          for (int64_t i = 0; i < p.inner; ++i)
            y[o * p.inner + i] = static_cast<float>(ss[static_cast<size_t>(i)] / denom);
        }
      });
}

// [SECTION] Layout: byte moves for every dtype

int64_t axis_of(const KernelCall& c, const Tensor& t) {
  return *normalize_axis(c.attrs.get_int("axis"), t.rank());
}

// Copies `rows` runs of `bytes` bytes each, splitting across threads when it is worth it.
template <typename Fn>
void parallel_rows(const KernelCall& c, int64_t rows, int64_t bytes_per_row, Fn fn) {
  int64_t grain = std::max<int64_t>(1, kParallelGrain * 4 / std::max<int64_t>(bytes_per_row, 1));
  pool_of(c).parallel_for(0, rows, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) fn(r);
  });
}

void slice_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  int64_t ax = axis_of(c, x);
  SliceRange r = slice_range(x.dim(ax), c.attrs.get_int("start"), c.attrs.get_int("end"),
                             c.attrs.get_int("step"));
  AxisLines l = axis_lines(x.shape(), ax);
  auto es = static_cast<int64_t>(dtype_size(x.dtype()));
  const char* src = in_ptr<char>(c, 0);
  char* dst = out_ptr<char>(c, 0);
  int64_t row = l.inner * es;
  parallel_rows(c, l.outer, r.len * row, [&](int64_t o) {
    const char* s = src + (o * l.len + r.start) * row;
    char* d = dst + o * r.len * row;
    if (r.step == 1) {
      std::memcpy(d, s, static_cast<size_t>(r.len * row));
      return;
    }
    for (int64_t i = 0; i < r.len; ++i)
      std::memcpy(d + i * row, s + i * r.step * row, static_cast<size_t>(row));
  });
}

void slice_backward_kernel(const KernelCall& c) {
  const Tensor& g = *c.inputs[0];
  int64_t ax = axis_of(c, g);
  int64_t size = c.attrs.get_int("size");
  SliceRange r =
      slice_range(size, c.attrs.get_int("start"), c.attrs.get_int("end"), c.attrs.get_int("step"));
  AxisLines l = axis_lines(g.shape(), ax);
  auto es = static_cast<int64_t>(dtype_size(g.dtype()));
  const char* src = in_ptr<char>(c, 0);
  char* dst = out_ptr<char>(c, 0);
  int64_t row = l.inner * es;
  parallel_rows(c, l.outer, size * row, [&](int64_t o) {
    char* d = dst + o * size * row;
    std::memset(d, 0, static_cast<size_t>(size * row));  // all-zero bytes: 0 in every dtype
    const char* s = src + o * r.len * row;
    for (int64_t i = 0; i < r.len; ++i)
      std::memcpy(d + (r.start + i * r.step) * row, s + i * row, static_cast<size_t>(row));
  });
}

void concat_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  int64_t ax = axis_of(c, y);
  AxisLines l = axis_lines(y.shape(), ax);
  int64_t row = l.inner * static_cast<int64_t>(dtype_size(y.dtype()));
  char* dst = out_ptr<char>(c, 0);
  parallel_rows(c, l.outer, l.len * row, [&](int64_t o) {
    char* d = dst + o * l.len * row;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      int64_t n = c.inputs[k]->dim(ax) * row;
      std::memcpy(d, in_ptr<char>(c, k) + o * n, static_cast<size_t>(n));
      d += n;
    }
  });
}

void split_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  int64_t ax = axis_of(c, x);
  AxisLines l = axis_lines(x.shape(), ax);
  int64_t row = l.inner * static_cast<int64_t>(dtype_size(x.dtype()));
  const char* src = in_ptr<char>(c, 0);
  parallel_rows(c, l.outer, l.len * row, [&](int64_t o) {
    const char* s = src + o * l.len * row;
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      int64_t n = c.outputs[k]->dim(ax) * row;
      std::memcpy(out_ptr<char>(c, k) + o * n, s, static_cast<size_t>(n));
      s += n;
    }
  });
}

void index_select_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  int64_t ax = axis_of(c, x);
  AxisLines l = axis_lines(x.shape(), ax);
  int64_t row = l.inner * static_cast<int64_t>(dtype_size(x.dtype()));
  const char* src = in_ptr<char>(c, 0);
  const int64_t* idx = in_ptr<int64_t>(c, 1);
  int64_t k = c.inputs[1]->numel();
  char* dst = out_ptr<char>(c, 0);
  parallel_rows(c, l.outer, k * row, [&](int64_t o) {
    for (int64_t i = 0; i < k; ++i) {
      char* d = dst + (o * k + i) * row;
      if (idx[i] < 0 || idx[i] >= l.len)
        std::memset(d, 0, static_cast<size_t>(row));
      else
        std::memcpy(d, src + (o * l.len + idx[i]) * row, static_cast<size_t>(row));
    }
  });
}

void index_add_kernel(const KernelCall& c) {
  const Tensor& g = *c.inputs[0];
  int64_t ax = axis_of(c, g);
  AxisLines l = axis_lines(g.shape(), ax);
  int64_t size = c.attrs.get_int("size");
  const float* src = in_ptr<float>(c, 0);
  const int64_t* idx = in_ptr<int64_t>(c, 1);
  float* dst = out_ptr<float>(c, 0);
  parallel_rows(c, l.outer, size * l.inner * 4, [&](int64_t o) {  // each o owns its rows of y
    float* d = dst + o * size * l.inner;
    std::fill(d, d + size * l.inner, 0.f);
    for (int64_t i = 0; i < l.len; ++i) {
      if (idx[i] < 0 || idx[i] >= size) continue;
      float* dr = d + idx[i] * l.inner;
      const float* sr = src + (o * l.len + i) * l.inner;
      for (int64_t j = 0; j < l.inner; ++j) dr[j] += sr[j];
    }
  });
}

template <typename T>
void pad_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  const Tensor& y = *c.outputs[0];
  const auto& pads = c.attrs.get_ints("pads");
  const T* src = in_ptr<T>(c, 0);
  T* dst = out_ptr<T>(c, 0);
  std::fill(dst, dst + y.numel(), static_cast<T>(c.attrs.get_float("value")));
  if (x.numel() == 0) return;
  if (x.rank() == 0) {
    dst[0] = src[0];
    return;
  }
  // Copy x's last-axis rows to their place in y: walk x's leading axes with y's strides.
  Strides ys = contiguous_strides(y.shape());
  int64_t base = 0;
  for (size_t d = 0; d < ys.size(); ++d) base += pads[2 * d] * ys[d];
  Shape lead(x.shape().begin(), x.shape().end() - 1);
  Strides lead_strides(ys.begin(), ys.end() - 1);
  int64_t last = x.dim(-1), r = 0;
  for_each_offset(lead, lead_strides, [&](int64_t off) {
    std::memcpy(dst + base + off, src + (r++) * last, static_cast<size_t>(last) * sizeof(T));
  });
}

}  // namespace

void register_layout_kernels(OpRegistry& reg) {
  constexpr auto cpu = DeviceKind::CPU;
  reg.register_kernel("max", cpu, DType::F32, extreme_kernel<true>);
  reg.register_kernel("min", cpu, DType::F32, extreme_kernel<false>);
  reg.register_kernel("max_mask", cpu, DType::F32, extreme_mask_kernel<true>);
  reg.register_kernel("min_mask", cpu, DType::F32, extreme_mask_kernel<false>);
  reg.register_kernel("var", cpu, DType::F32, var_kernel);
  for (DType t : kAllDTypes) {
    reg.register_kernel("slice", cpu, t, slice_kernel);
    reg.register_kernel("slice_backward", cpu, t, slice_backward_kernel);
    reg.register_kernel("concat", cpu, t, concat_kernel);
    reg.register_kernel("split", cpu, t, split_kernel);
    reg.register_kernel("index_select", cpu, t, index_select_kernel);
  }
  reg.register_kernel("index_add", cpu, DType::F32, index_add_kernel);
  reg.register_kernel("pad", cpu, DType::F32, pad_kernel<float>);
  reg.register_kernel("pad", cpu, DType::I64, pad_kernel<int64_t>);
}

}  // namespace mls::cpu
