// Shape kernels: reshape (a copy only when the executor did not alias it), expand,
// transpose, fill.
#include <algorithm>
#include <cstring>

#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

void reshape_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  const char* src = x.data<char>();
  char* dst = y.data<char>();
  if (src != dst) std::memcpy(dst, src, x.nbytes());  // aliased views need nothing
}

void expand_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  const float* a = in_ptr<float>(c, 0);
  float* o = out_ptr<float>(c, 0);
  BroadcastPlan p = make_broadcast_plan(x.shape(), y.shape(), y.shape());
  // Split over rows: a global average pool's gradient, [128,32,1,1] -> [128,32,7,7], is
  // 28,672 rows of 7 floats, which took 0.22 ms of the residual CNN's step on one thread.
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(p.inner, 1));
  pool_of(c).parallel_for(0, p.rows, grain, [&](int64_t lo, int64_t hi) {
    for_broadcast_rows(p, lo, hi, [&](int64_t oa, int64_t sa, int64_t, int64_t, int64_t oo, int64_t n) {
      if (sa == 1) std::memcpy(o + oo, a + oa, static_cast<size_t>(n) * sizeof(float));
      else std::fill(o + oo, o + oo + n, a[oa]);
    });
  });
}

// The output's axes with their strides in the source, size-1 axes dropped and neighbours
// that stay neighbours in the source merged: [256,8,4,16] by (0,2,1,3) walks as
// [256][4][128] with source strides (512, 16, 1), rows of 128 contiguous floats.
struct Walk {
  Shape dims;
  Strides src;
};

Walk coalesce(const Shape& in, const std::vector<int64_t>& perm) {
  const Strides xs = contiguous_strides(in);
  Walk w;
  for (int64_t p : perm) {
    const auto a = static_cast<size_t>(p);
    if (in[a] == 1) continue;
    if (!w.dims.empty() && w.src.back() == xs[a] * in[a]) {
      w.dims.back() *= in[a];
      w.src.back() = xs[a];
    } else {
      w.dims.push_back(in[a]);
      w.src.push_back(xs[a]);
    }
  }
  if (w.dims.empty()) {
    w.dims = {1};
    w.src = {1};
  }
  return w;
}

// The source offset of row `r` of the walk's axes before `last` (row-major).
int64_t row_offset(const Walk& w, int64_t r, size_t last) {
  int64_t off = 0;
  for (size_t d = last; d-- > 0;) {
    off += (r % w.dims[d]) * w.src[d];
    r /= w.dims[d];
  }
  return off;
}

// Two walks, each parallel: the innermost axis contiguous in the source (rows copied whole:
// attention's head split, [N,T,H,D] -> [N,H,T,D]), or the source's innermost axis at an
// earlier output axis k (32 x 32 tiles between axes k and last, so reads and writes both
// stay in cache: a matrix transposed, batched or not).
template <typename T>
void transpose_kernel(const KernelCall& c) {
  const Walk w = coalesce(c.inputs[0]->shape(), c.attrs.get_ints("perm"));
  const T* src = in_ptr<T>(c, 0);
  T* dst = out_ptr<T>(c, 0);
  const size_t last = w.dims.size() - 1;
  const int64_t inner = w.dims[last], total = c.outputs[0]->numel();
  if (total == 0) return;
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / inner);
  ThreadPool& pool = pool_of(c);
  if (w.src[last] == 1) {
    pool.parallel_for(0, total / inner, grain, [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r)
        std::memcpy(dst + r * inner, src + row_offset(w, r, last), sizeof(T) * static_cast<size_t>(inner));
    });
    return;
  }
  // Otherwise the source's innermost axis (longer than 1, so kept, with stride 1) is an
  // earlier output axis k.
  size_t k = 0;
  while (w.src[k] != 1) ++k;
  constexpr int64_t B = 32;
  const int64_t rows = w.dims[k], step = w.src[last];
  int64_t dst_k = inner;  // the output's stride of axis k
  for (size_t d = k + 1; d < last; ++d) dst_k *= w.dims[d];
  const int64_t tiles = (rows + B - 1) / B, outer = total / (rows * inner);
  pool.parallel_for(0, outer * tiles, std::max<int64_t>(1, grain / B), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t o = t / tiles, i0 = (t % tiles) * B, i1 = std::min(rows, i0 + B);
      // Row o of the axes other than k and last: its source and output offsets.
      int64_t so = 0, dout = 0, r = o, stride = inner;
      for (size_t d = last; d-- > 0;) {
        if (d == k) {
          stride *= w.dims[d];
          continue;
        }
        const int64_t i = r % w.dims[d];
        r /= w.dims[d];
        so += i * w.src[d];
        dout += i * stride;
        stride *= w.dims[d];
      }
      for (int64_t j0 = 0; j0 < inner; j0 += B) {
        const int64_t j1 = std::min(inner, j0 + B);
        for (int64_t i = i0; i < i1; ++i) {
          const T* s = src + so + i;
          T* out = dst + dout + i * dst_k;
          for (int64_t j = j0; j < j1; ++j) out[j] = s[j * step];
        }
      }
    }
  });
}

template <typename T>
void fill_kernel(const KernelCall& c) {
  T* y = out_ptr<T>(c, 0);
  auto v = static_cast<T>(c.attrs.get_float("value"));
  std::fill(y, y + c.outputs[0]->numel(), v);
}

}  // namespace

void register_shape_kernels(OpRegistry& reg) {
  for (DType t : kAllDTypes) reg.register_kernel("reshape", DeviceKind::CPU, t, reshape_kernel);
  reg.register_kernel("expand", DeviceKind::CPU, DType::F32, expand_kernel);
  reg.register_kernel("transpose", DeviceKind::CPU, DType::F32, transpose_kernel<float>);
  reg.register_kernel("transpose", DeviceKind::CPU, DType::I64, transpose_kernel<int64_t>);
  reg.register_kernel("fill", DeviceKind::CPU, DType::F32, fill_kernel<float>);
  reg.register_kernel("fill", DeviceKind::CPU, DType::I64, fill_kernel<int64_t>);
}

}  // namespace mls::cpu
