// Layout kernels: every one is a strided copy between views (device/copy.cu) or a fill.
// transpose copies a permuted view, expand a view with zero strides, slice a sliced view;
// concat and split copy each piece into (or out of) a slice of the whole. The (op, dtype)
// pairs are the Vulkan backend's, so both pass the same conformance samples.
#include <bit>

#include "engine/ops/layout.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

// The dtypes the CPU has slice, concat and split at (so the conformance samples reach each kernel).
constexpr DType kWordTypes[] = {DType::F32, DType::I32, DType::I64};

// dst[i] = src[i] for views of one shape (any strides), both on this backend.
void copy_view(CudaBackend& be, const Tensor& dst, const Tensor& src, const Shape& shape,
               std::vector<int64_t> src_strides) {
  dev::CopyArgs a;
  a.n = numel(shape);
  if (a.n == 0) return;
  a.y = dptr<char>(dst);
  a.x = dptr<char>(src);
  a.elem_size = static_cast<int32_t>(dtype_size(dst.dtype()));
  std::vector<std::vector<int64_t>> strides{
      std::move(src_strides), std::vector<int64_t>(dst.strides().begin(), dst.strides().end())};
  const Collapsed l = collapse(shape, strides);
  a.rank = l.rank;
  std::copy(l.dims, l.dims + l.rank, a.dims);
  std::copy(strides[0].begin(), strides[0].end(), a.x_strides);
  std::copy(strides[1].begin(), strides[1].end(), a.y_strides);
  dev::copy(a, be.stream());
}

void copy_view(CudaBackend& be, const Tensor& dst, const Tensor& src) {
  copy_view(be, dst, src, dst.shape(),
            std::vector<int64_t>(src.strides().begin(), src.strides().end()));
}

// The bits of `value` as an element of dtype t (4 or 8 bytes).
uint64_t pattern(DType t, double value) {
  switch (t) {
    case DType::F32:
      return std::bit_cast<uint32_t>(static_cast<float>(value));
    case DType::I32:
      return static_cast<uint32_t>(static_cast<int32_t>(value));
    default:
      return static_cast<uint64_t>(static_cast<int64_t>(value));
  }
}

void reshape_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  if (x.buffer() == y.buffer() && x.byte_offset() == y.byte_offset())
    return;  // aliased views need nothing
  c.backend.copy_device(*x.buffer(), x.byte_offset(), *y.buffer(), y.byte_offset(), x.nbytes());
}

void transpose_kernel(const KernelCall& c) {
  copy_view(cu(c), *c.outputs[0], c.inputs[0]->permute(c.attrs.get_ints("perm")));
}

void expand_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  copy_view(cu(c), y, *c.inputs[0], y.shape(), broadcast_strides(*c.inputs[0], y.shape()));
}

int64_t axis_of(const KernelCall& c, const Tensor& t) {
  const int64_t a = c.attrs.get_int("axis");
  return a < 0 ? a + t.rank() : a;
}

Tensor sliced(const Tensor& t, int64_t axis, const SliceRange& r) {
  return t.slice(axis, r.start, r.start + (r.len - 1) * r.step + 1, r.step);
}

void slice_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  const int64_t ax = axis_of(c, x);
  const SliceRange r = slice_range(x.dim(ax), c.attrs.get_int("start"), c.attrs.get_int("end"),
                                   c.attrs.get_int("step"));
  if (r.len == 0) return;
  copy_view(cu(c), *c.outputs[0], sliced(x, ax, r));
}

void slice_backward_kernel(const KernelCall& c) {
  CudaBackend& be = cu(c);
  const Tensor& g = *c.inputs[0];
  const Tensor& y = *c.outputs[0];
  MLS_CHECK(y.is_contiguous(), "cuda: slice_backward output must be contiguous");
  const int64_t ax = axis_of(c, g);
  const SliceRange r = slice_range(c.attrs.get_int("size"), c.attrs.get_int("start"),
                                   c.attrs.get_int("end"), c.attrs.get_int("step"));
  check(cudaMemsetAsync(dptr<char>(y), 0, y.nbytes(), be.stream()),
        "cudaMemsetAsync (slice_backward)");
  if (r.len > 0) copy_view(be, sliced(y, ax, r), g);
}

void concat_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  const int64_t ax = axis_of(c, y);
  int64_t at = 0;
  for (const Tensor* x : c.inputs) {
    const int64_t len = x->dim(ax);
    if (len > 0) copy_view(cu(c), y.slice(ax, at, at + len), *x);
    at += len;
  }
}

void split_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  const int64_t ax = axis_of(c, x);
  int64_t at = 0;
  for (Tensor* y : c.outputs) {
    const int64_t len = y->dim(ax);
    if (len > 0) copy_view(cu(c), *y, x.slice(ax, at, at + len));
    at += len;
  }
}

void fill_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  MLS_CHECK(y.is_contiguous(), "cuda: fill output must be contiguous");
  dev::fill(dptr<char>(y), y.numel(), static_cast<int32_t>(dtype_size(y.dtype())),
            pattern(y.dtype(), c.attrs.get_float("value")), cu(c).stream());
}

void one_hot_kernel(const KernelCall& c) {
  const Tensor& labels = *c.inputs[0];
  const Tensor& y = *c.outputs[0];
  MLS_CHECK(labels.is_contiguous() && y.is_contiguous(),
            "cuda: one_hot operands must be contiguous");
  dev::one_hot(dptr<float>(y), dptr<int64_t>(labels), labels.numel(),
               c.attrs.get_int("num_classes"), cu(c).stream());
}

}  // namespace

void register_layout_kernels(OpRegistry& reg) {
  for (DType t : kAllDTypes) add_kernel(reg, "reshape", t, reshape_kernel);
  for (DType t : kWordTypes) {
    add_kernel(reg, "slice", t, slice_kernel);
    add_kernel(reg, "slice_backward", t, slice_backward_kernel);
    add_kernel(reg, "concat", t, concat_kernel);
    add_kernel(reg, "split", t, split_kernel);
  }
  for (DType t : {DType::F32, DType::I64}) {
    add_kernel(reg, "transpose", t, transpose_kernel);
    add_kernel(reg, "fill", t, fill_kernel);
  }
  add_kernel(reg, "expand", DType::F32, expand_kernel);
  add_kernel(reg, "one_hot", DType::I64, one_hot_kernel);
}

}  // namespace mls::cuda
