#include "engine/core/tensor.h"

#include <algorithm>
#include <cstring>

namespace mls {

namespace {

// Reads element i of a raw array of dtype t as double.
double load_as_f64(const char* p, DType t) {
  switch (t) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::U8: return static_cast<uint8_t>(*p);
    case DType::I8: return static_cast<int8_t>(*p);
    case DType::Bool: return *p ? 1.0 : 0.0;
  }
  return 0;
}

void store_from_f64(char* p, DType t, double x) {
  switch (t) {
    case DType::F32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); return; }
    case DType::F16: { uint16_t v = f32_to_f16(static_cast<float>(x)); std::memcpy(p, &v, 2); return; }
    case DType::BF16: { uint16_t v = f32_to_bf16(static_cast<float>(x)); std::memcpy(p, &v, 2); return; }
    case DType::I64: { auto v = static_cast<int64_t>(x); std::memcpy(p, &v, 8); return; }
    case DType::I32: { auto v = static_cast<int32_t>(x); std::memcpy(p, &v, 4); return; }
    case DType::U8: *p = static_cast<char>(static_cast<uint8_t>(x)); return;
    case DType::I8: *p = static_cast<char>(static_cast<int8_t>(x)); return;
    case DType::Bool: *p = x != 0.0 ? 1 : 0; return;
  }
}

// The byte range [lo, hi) of the buffer that a view touches.
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.shape().size(); ++d) {
    if (t.shape()[d] == 0) return {0, 0};
    int64_t ext = t.strides()[d] * (t.shape()[d] - 1);
    (ext < 0 ? lo : hi) += ext;
  }
  auto es = static_cast<int64_t>(dtype_size(t.dtype()));
  return {static_cast<int64_t>(t.byte_offset()) + lo * es,
          static_cast<int64_t>(t.byte_offset()) + (hi + 1) * es};
}

}  // namespace

Tensor::Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape,
               Strides strides)
    : buffer_(std::move(buffer)),
      byte_offset_(byte_offset),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)) {
  MLS_CHECK(shape_.size() == strides_.size(), "shape and strides differ in rank");
}

Tensor::Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape)
    : Tensor(std::move(buffer), byte_offset, dtype, shape, contiguous_strides(shape)) {}

Tensor Tensor::empty(Backend& backend, DType dtype, Shape shape, AllocTag tag) {
  size_t bytes = static_cast<size_t>(mls::numel(shape)) * dtype_size(dtype);
  return Tensor(backend.allocate(std::max<size_t>(bytes, 1), tag), 0, dtype, std::move(shape));
}

Tensor Tensor::zeros(Backend& backend, DType dtype, Shape shape, AllocTag tag) {
  Tensor t = empty(backend, dtype, std::move(shape), tag);
  std::vector<char> z(t.nbytes(), 0);
  t.fill_raw(z.data(), z.size());
  return t;
}

Tensor Tensor::from_f32(Backend& backend, Shape shape, const std::vector<float>& values,
                        AllocTag tag) {
  Tensor t = empty(backend, DType::F32, std::move(shape), tag);
  t.fill_from_host(values);
  return t;
}

Tensor Tensor::from_i64(Backend& backend, Shape shape, const std::vector<int64_t>& values,
                        AllocTag tag) {
  Tensor t = empty(backend, DType::I64, std::move(shape), tag);
  t.fill_from_host_i64(values);
  return t;
}

int64_t Tensor::numel() const { return mls::numel(shape_); }

// Compares in place: every kernel call asks, so it must not allocate.
bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

void Tensor::reset_contiguous(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype,
                              const Shape& shape) {
  buffer_ = std::move(buffer);
  byte_offset_ = byte_offset;
  dtype_ = dtype;
  if (&shape != &shape_) shape_.assign(shape.begin(), shape.end());
  strides_.resize(shape_.size());
  int64_t acc = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    strides_[d] = acc;
    acc *= shape_[d];
  }
}

Result<Tensor> Tensor::reshape(Shape shape) const {
  if (mls::numel(shape) != numel())
    return make_error("reshape: cannot view " + shape_str(shape_) + " as " + shape_str(shape));
  if (!is_contiguous())
    return make_error("reshape: the tensor " + shape_str(shape_) +
                      " is not contiguous; make a contiguous copy first");
  return Tensor(buffer_, byte_offset_, dtype_, std::move(shape));
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> perm(shape_.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  auto na = normalize_axis(a, rank()), nb = normalize_axis(b, rank());
  MLS_CHECK(na && nb, "transpose axis out of range");
  std::swap(perm[*na], perm[*nb]);
  return permute(perm);
}

Tensor Tensor::permute(const std::vector<int64_t>& perm) const {
  MLS_CHECK(perm.size() == shape_.size(), "permute needs one axis per dimension");
  Shape s(perm.size());
  Strides st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    s[i] = shape_[perm[i]];
    st[i] = strides_[perm[i]];
  }
  return Tensor(buffer_, byte_offset_, dtype_, std::move(s), std::move(st));
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  auto ax = normalize_axis(axis, rank());
  MLS_CHECK(ax.has_value() && step > 0, "slice axis out of range or step <= 0");
  int64_t n = shape_[*ax];
  start = std::clamp(start < 0 ? start + n : start, int64_t{0}, n);
  end = std::clamp(end < 0 ? end + n : end, start, n);
  Shape s = shape_;
  Strides st = strides_;
  s[*ax] = (end - start + step - 1) / step;
  st[*ax] = strides_[*ax] * step;
  size_t off = byte_offset_ + static_cast<size_t>(start * strides_[*ax]) * dtype_size(dtype_);
  return Tensor(buffer_, off, dtype_, std::move(s), std::move(st));
}

void Tensor::fill_raw(const void* data, size_t bytes) {
  MLS_CHECK(is_contiguous() && bytes == nbytes(), "fill_raw needs a contiguous tensor and its size");
  backend().copy_to_device(*buffer_, byte_offset_, data, bytes);
}

void Tensor::fill_from_host(const std::vector<float>& values) {
  MLS_CHECK(static_cast<int64_t>(values.size()) == numel(), "fill_from_host: wrong element count");
  if (dtype_ == DType::F32 && is_contiguous()) {
    fill_raw(values.data(), nbytes());
    return;
  }
  MLS_CHECK(is_contiguous(), "fill_from_host on a strided view");
  std::vector<char> raw(nbytes());
  size_t es = dtype_size(dtype_);
  for (size_t i = 0; i < values.size(); ++i) store_from_f64(raw.data() + i * es, dtype_, values[i]);
  fill_raw(raw.data(), raw.size());
}

void Tensor::fill_from_host_i64(const std::vector<int64_t>& values) {
  MLS_CHECK(static_cast<int64_t>(values.size()) == numel(), "fill_from_host_i64: wrong count");
  MLS_CHECK(is_contiguous(), "fill_from_host_i64 on a strided view");
  if (dtype_ == DType::I64) {
    fill_raw(values.data(), nbytes());
    return;
  }
  std::vector<char> raw(nbytes());
  size_t es = dtype_size(dtype_);
  for (size_t i = 0; i < values.size(); ++i)
    store_from_f64(raw.data() + i * es, dtype_, static_cast<double>(values[i]));
  fill_raw(raw.data(), raw.size());
}

std::vector<double> Tensor::to_f64() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(numel()));
  auto [lo, hi] = byte_span(*this);
  std::vector<char> host(static_cast<size_t>(std::max<int64_t>(hi - lo, 0)));
  if (!host.empty()) backend().copy_to_host(*buffer_, static_cast<size_t>(lo), host.data(), host.size());
  size_t es = dtype_size(dtype_);
  int64_t base = static_cast<int64_t>(byte_offset_) - lo;
  for_each_offset(shape_, strides_, [&](int64_t off) {
    out.push_back(load_as_f64(host.data() + base + off * static_cast<int64_t>(es), dtype_));
  });
  return out;
}

std::vector<float> Tensor::to_f32() const {
  std::vector<double> d = to_f64();
  return std::vector<float>(d.begin(), d.end());
}

Tensor Tensor::contiguous(AllocTag tag) const {
  Tensor out = empty(backend(), dtype_, shape_, tag);
  auto [lo, hi] = byte_span(*this);
  std::vector<char> host(static_cast<size_t>(std::max<int64_t>(hi - lo, 0)));
  if (!host.empty()) backend().copy_to_host(*buffer_, static_cast<size_t>(lo), host.data(), host.size());
  std::vector<char> packed(out.nbytes());
  size_t es = dtype_size(dtype_);
  int64_t base = static_cast<int64_t>(byte_offset_) - lo;
  size_t i = 0;
  for_each_offset(shape_, strides_, [&](int64_t off) {
    std::memcpy(packed.data() + i * es, host.data() + base + off * static_cast<int64_t>(es), es);
    ++i;
  });
  if (!packed.empty()) out.fill_raw(packed.data(), packed.size());
  return out;
}

std::string_view device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::CPU: return "cpu";
    case DeviceKind::Vulkan: return "vulkan";
    case DeviceKind::CUDA: return "cuda";
  }
  return "?";
}

}  // namespace mls
