// Shape kernels: reshape (a copy only when the executor did not alias it), expand,
// transpose, fill.
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
  for_broadcast_rows(p, 0, p.rows, [&](int64_t oa, int64_t sa, int64_t, int64_t, int64_t oo, int64_t n) {
    if (sa == 1) std::memcpy(o + oo, a + oa, static_cast<size_t>(n) * sizeof(float));
    else std::fill(o + oo, o + oo + n, a[oa]);
  });
}

template <typename T>
void transpose_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  const auto& perm = c.attrs.get_ints("perm");
  const T* src = in_ptr<T>(c, 0);
  T* dst = out_ptr<T>(c, 0);
  if (perm.size() == 2 && perm[0] == 1) {  // 2-D: blocked, so both sides stay in cache
    int64_t r = x.dim(0), k = x.dim(1);
    constexpr int64_t B = 32;
    for (int64_t i0 = 0; i0 < r; i0 += B)
      for (int64_t j0 = 0; j0 < k; j0 += B)
        for (int64_t i = i0; i < std::min(r, i0 + B); ++i)
          for (int64_t j = j0; j < std::min(k, j0 + B); ++j) dst[j * r + i] = src[i * k + j];
    return;
  }
  Strides xs = contiguous_strides(x.shape());
  const Shape& os = y.shape();
  Strides src_strides(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) src_strides[d] = xs[static_cast<size_t>(perm[d])];
  int64_t i = 0;
  for_each_offset(os, src_strides, [&](int64_t off) { dst[i++] = src[off]; });
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
