// Layout kernels: every one is a strided copy between views (shaders/copy.comp) or a fill.
// transpose copies a permuted view, expand a view with zero strides, slice a sliced view;
// concat and split copy each piece into (or out of) a slice of the whole.
#include <bit>

#include "engine/ops/layout.h"
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

// The 32-bit-word dtypes the copy and fill shaders move (64-bit elements as word pairs).
constexpr DType kWordTypes[] = {DType::F32, DType::I32, DType::I64};

// dst[i] = src[i] for views of one shape (any strides), both on this backend.
void copy_view(VulkanBackend& be, const Tensor& dst, const Tensor& src, const Shape& shape,
               const std::vector<int64_t>& src_strides) {
  const int64_t n = numel(shape);
  if (n == 0) return;
  const auto wpe = static_cast<int64_t>(dtype_size(dst.dtype()) / 4);
  MLS_CHECK(wpe >= 1, "vulkan: copy of a dtype narrower than 32 bits");
  // Words: an element of wpe words is one more (innermost) dim of wpe.
  std::vector<uint32_t> w;
  const size_t rank = shape.size() + (wpe > 1 ? 1 : 0);
  w.push_back(u32(static_cast<int64_t>(rank)));
  for (int64_t d : shape) w.push_back(u32(d));
  if (wpe > 1) w.push_back(u32(wpe));
  for (int64_t s : src_strides) w.push_back(u32(s * wpe));
  if (wpe > 1) w.push_back(1);
  for (int64_t s : dst.strides()) w.push_back(u32(s * wpe));
  if (wpe > 1) w.push_back(1);
  const Tensor& tab = table(be, w);
  struct {
    uint32_t n, wpe;
  } p{u32(n * wpe), u32(wpe)};
  be.dispatch(Shader::copy, {&dst, &tab, &src}, p, be.groups_for(p.n));
}

void copy_view(VulkanBackend& be, const Tensor& dst, const Tensor& src) {
  copy_view(be, dst, src, dst.shape(), std::vector<int64_t>(src.strides().begin(), src.strides().end()));
}

void fill_words(VulkanBackend& be, const Tensor& y, uint32_t w0, uint32_t w1) {
  const auto wpe = static_cast<uint32_t>(dtype_size(y.dtype()) / 4);
  struct {
    uint32_t n, w0, w1, wpe;
  } p{u32(y.numel()) * wpe, w0, w1, wpe};
  be.dispatch(Shader::fill, {&y}, p, be.groups_for(p.n));
}

// The pattern of `value` as an element of y's dtype, in two words.
std::pair<uint32_t, uint32_t> pattern(DType t, double value) {
  switch (t) {
    case DType::F32: {
      const uint32_t b = std::bit_cast<uint32_t>(static_cast<float>(value));
      return {b, b};
    }
    case DType::I32: {
      const auto b = static_cast<uint32_t>(static_cast<int32_t>(value));
      return {b, b};
    }
    default: {
      const auto v = static_cast<uint64_t>(static_cast<int64_t>(value));
      return {static_cast<uint32_t>(v), static_cast<uint32_t>(v >> 32)};
    }
  }
}

void reshape_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  if (x.buffer() == y.buffer() && x.byte_offset() == y.byte_offset()) return;  // aliased views need nothing
  c.backend.copy_device(*x.buffer(), x.byte_offset(), *y.buffer(), y.byte_offset(), x.nbytes());
}

void transpose_kernel(const KernelCall& c) {
  copy_view(vk(c), *c.outputs[0], c.inputs[0]->permute(c.attrs.get_ints("perm")));
}

void expand_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  copy_view(vk(c), y, *c.inputs[0], y.shape(), broadcast_strides(*c.inputs[0], y.shape()));
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
  const SliceRange r = slice_range(x.dim(ax), c.attrs.get_int("start"), c.attrs.get_int("end"), c.attrs.get_int("step"));
  if (r.len == 0) return;
  copy_view(vk(c), *c.outputs[0], sliced(x, ax, r));
}

void slice_backward_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& g = *c.inputs[0];
  const Tensor& y = *c.outputs[0];
  const int64_t ax = axis_of(c, g);
  const SliceRange r = slice_range(c.attrs.get_int("size"), c.attrs.get_int("start"), c.attrs.get_int("end"),
                                   c.attrs.get_int("step"));
  fill_words(be, y, 0, 0);
  if (r.len > 0) copy_view(be, sliced(y, ax, r), g);
}

void concat_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  const int64_t ax = axis_of(c, y);
  int64_t at = 0;
  for (const Tensor* x : c.inputs) {
    const int64_t len = x->dim(ax);
    if (len > 0) copy_view(vk(c), y.slice(ax, at, at + len), *x);
    at += len;
  }
}

void split_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  const int64_t ax = axis_of(c, x);
  int64_t at = 0;
  for (Tensor* y : c.outputs) {
    const int64_t len = y->dim(ax);
    if (len > 0) copy_view(vk(c), *y, x.slice(ax, at, at + len));
    at += len;
  }
}

void fill_kernel(const KernelCall& c) {
  const Tensor& y = *c.outputs[0];
  auto [w0, w1] = pattern(y.dtype(), c.attrs.get_float("value"));
  fill_words(vk(c), y, w0, w1);
}

void one_hot_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& labels = *c.inputs[0];
  MLS_CHECK(labels.is_contiguous(), "vulkan: one_hot labels must be contiguous");
  struct {
    uint32_t n, classes;
  } p{u32(labels.numel()), u32(c.attrs.get_int("num_classes"))};
  be.dispatch(Shader::one_hot, {c.outputs[0], &labels}, p, be.groups_for(int64_t{p.n} * p.classes));
}

}  // namespace

void register_layout_kernels(OpRegistry& reg) {
  for (DType t : kAllDTypes) add_kernel(reg, "reshape", t, reshape_kernel);
  // The dtypes the CPU has these ops at (so the conformance samples reach each kernel).
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

}  // namespace mls::vulkan
