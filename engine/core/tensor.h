// Tensor: a typed, strided view on a device Buffer.
//
//   Tensor t = Tensor::empty(cpu, DType::F32, {2, 3}, AllocTag::Activation);
//   t.fill_from_host(std::vector<float>{1, 2, 3, 4, 5, 6});
//   Tensor tt = t.transpose(0, 1);              // a view: no copy, strides {1, 3}
//   Tensor row = t.slice(0, 1, 2);             // a view of the second row
//   std::vector<double> v = tt.to_f64();       // copied out, in logical order
//
// Views share the buffer. Host pointers exist only where the buffer is host-accessible:
// data<T>() asserts it, so code above the backends uses to_f64()/fill_from_host().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/check.h"
#include "engine/core/dtype.h"
#include "engine/core/result.h"
#include "engine/core/shape.h"

namespace mls {

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape,
         Strides strides);
  Tensor(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, Shape shape);

  static Tensor empty(Backend& backend, DType dtype, Shape shape, AllocTag tag);
  static Tensor zeros(Backend& backend, DType dtype, Shape shape, AllocTag tag);
  static Tensor from_f32(Backend& backend, Shape shape, const std::vector<float>& values,
                         AllocTag tag = AllocTag::Other);
  static Tensor from_i64(Backend& backend, Shape shape, const std::vector<int64_t>& values,
                         AllocTag tag = AllocTag::Other);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Strides& strides() const { return strides_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  Buffer* buffer() const { return buffer_.get(); }
  const std::shared_ptr<Buffer>& buffer_ptr() const { return buffer_; }
  size_t byte_offset() const { return byte_offset_; }
  Backend& backend() const { return buffer_->backend(); }

  // Views: no copy.
  Result<Tensor> reshape(Shape shape) const;  // needs a contiguous tensor
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor slice(int64_t axis, int64_t start, int64_t end, int64_t step = 1) const;

  // The host address of element 0 (asserts a host-accessible buffer).
  template <typename T>
  T* data() const {
    void* base = buffer_->host_ptr();
    MLS_CHECK(base != nullptr, "Tensor::data() on a buffer the host cannot address");
    return reinterpret_cast<T*>(static_cast<char*>(base) + byte_offset_);
  }

  // Copies in/out through the backend, in logical (row-major) order, converting types.
  void fill_from_host(const std::vector<float>& values);
  void fill_from_host_i64(const std::vector<int64_t>& values);
  void fill_raw(const void* data, size_t bytes);  // contiguous tensors only
  std::vector<double> to_f64() const;
  std::vector<float> to_f32() const;
  // A contiguous copy on the same backend.
  Tensor contiguous(AllocTag tag = AllocTag::Other) const;

  // For executors that recycle Tensor objects (the eager session keeps one per value slot):
  // points this tensor at a contiguous `shape` in `buffer`, reusing the storage of its shape
  // and strides, so a warm slot costs no allocation. release_buffer() lets go of the buffer
  // (the tensor becomes undefined) and keeps that storage.
  void reset_contiguous(std::shared_ptr<Buffer> buffer, size_t byte_offset, DType dtype, const Shape& shape);
  std::shared_ptr<Buffer> release_buffer() { return std::move(buffer_); }

 private:
  std::shared_ptr<Buffer> buffer_;
  size_t byte_offset_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
  Strides strides_;
};

}  // namespace mls
