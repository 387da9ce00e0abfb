// Shapes and strides (in elements, row-major).
//
//   Shape s{128, 784};  numel(s) == 100352;  contiguous_strides(s) == {784, 1}
//   broadcast_shapes({128, 10}, {10}) -> {128, 10}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mls {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& s);
// The element count, or nullopt when a size is negative or the count (or a partial product
// of the sizes, which strides are) passes 2^62: numel would wrap (2^32 * 2^32 == 0).
std::optional<int64_t> checked_numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[128,784]"
// numpy broadcasting; nullopt when the shapes are incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis against rank; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

// Calls fn(offset) for every index of `shape` in row-major order, where offset is
// sum(index[d] * strides[d]): the walk behind strided copies, gathers and reductions.
template <typename Fn>
void for_each_offset(const Shape& shape, const Strides& strides, Fn&& fn) {
  int64_t n = numel(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

}  // namespace mls
