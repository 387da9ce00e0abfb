// MNIST-layout datasets (MNIST, Fashion-MNIST): one IDX image file and one IDX label file
// per split, named `<split>-images-idx3-ubyte[.gz]` and `<split>-labels-idx1-ubyte[.gz]`.
//
//   Result<LabeledImages> r = load_mnist_split(kFashionMnistDir, "t10k");
//   if (!r) { std::cerr << r.error().message << "\n"; return 1; }
//   r->count == 10000;  r->rows == 28;  r->labels[0] == 9;
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace mls::data {

// Where Debian's dataset-fashion-mnist package installs the files.
constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct LabeledImages {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols, image-major, row-major
  std::vector<uint8_t> labels;  // count, each in 0..9
};

// `split` is "train" or "t10k". The gzip files are tried first, then the unpacked ones.
Result<LabeledImages> load_mnist_split(const std::string& dir, std::string_view split);

}  // namespace mls::data
