// IDX files, the format of MNIST and Fashion-MNIST, plain or gzip-compressed.
//
//   Result<IdxArray> r = read_idx("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz");
//   if (!r) { std::cerr << r.error().message << "\n"; return 1; }
//   r->dims == {10000};  r->data.size() == 10000;
//
// Only unsigned-byte elements (type code 0x08) are supported: that is all the image
// datasets we read use, and it keeps the data a flat byte vector.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::data {

struct IdxArray {
  std::vector<int64_t> dims;  // outermost first, as stored
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// The largest IDX file read, compressed or decompressed: 4 GiB (Fashion-MNIST's training
// images are 47 MB). Decompression also stops at the size the header declares.
inline constexpr uint64_t kMaxIdxBytes = uint64_t{4} << 30;

// Reads the whole file; gzip is detected by its magic bytes, not the file name. Every
// error message starts with `path`; a FIFO, a device or a directory is refused unread.
Result<IdxArray> read_idx(const std::string& path);

}  // namespace mls::data
