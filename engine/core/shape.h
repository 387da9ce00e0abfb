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
Strides contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[128,784]"
// numpy broadcasting; nullopt when the shapes are incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis against rank; nullopt when out of range.
std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank);

}  // namespace mls
