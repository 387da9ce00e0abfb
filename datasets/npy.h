// NumPy .npy arrays (format versions 1, 2 and 3), little-endian, C order, with dtypes
// <f4 <f8 |u1 <i4 <i8: what np.save writes for the arrays people train on.
//
//   Result<NpyArray> a = read_npy("x_train.npy");
//   if (!a) { std::cerr << a.error().message << "\n"; return 1; }
//   a->shape == Shape{60000, 28, 28};  a->dtype == NpyType::U8;
//   std::vector<float> v = a->to_floats();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/shape.h"

namespace mls::data {

enum class NpyType { F32, F64, U8, I32, I64 };

struct NpyArray {
  Shape shape;  // {} for a 0-d array
  NpyType dtype = NpyType::F32;
  std::vector<uint8_t> raw;  // numel * item size bytes, little-endian, C order

  int64_t numel() const { return mls::numel(shape); }
  bool is_integer() const {
    return dtype == NpyType::U8 || dtype == NpyType::I32 || dtype == NpyType::I64;
  }
  std::vector<float> to_floats() const;
  std::vector<int64_t> to_ints() const;  // integer dtypes only
};

const char* npy_descr(NpyType t);  // "<f4", ...
int64_t npy_item_size(NpyType t);

// Parses the bytes of a .npy file; `name` starts every message (a path, or
// "data.npz: array 'x'"). Takes the bytes by value so the header is stripped in place.
Result<NpyArray> parse_npy(std::vector<uint8_t> bytes, const std::string& name);
Result<NpyArray> read_npy(const std::string& path);

// Writes f32 values of `shape` as a version 1.0 .npy file, atomically; errors name the path.
Result<void> write_npy_f32(const std::string& path, const Shape& shape, const std::vector<float>& values);

// The largest data file (.npy, .npz, IDX, an input for predict) read into memory: 16 GiB.
// A file larger than this, or than memory allows, is refused with a message naming it.
inline constexpr uint64_t kMaxDataFileBytes = uint64_t{16} << 30;

// Reads a whole regular file of at most kMaxDataFileBytes (a FIFO, a device or a directory
// is refused at once, never read); errors start with `path`.
Result<std::vector<uint8_t>> read_binary_file(const std::string& path);

}  // namespace mls::data
