// A Dataset from a features array and a labels array (NPY files or NPZ members).
//
//   auto x = read_npy("x.npy");  auto y = read_npy("y.npy");
//   Result<Dataset> d = arrays_to_dataset(std::move(*x), std::move(*y), {}, "x.npy", "y.npy");
//
// Shapes: x is [N, ...sample]; a [N, H, W] array becomes samples [1, H, W] (one channel, so
// image transforms and convolutions apply) and [N] becomes [1]. |u1 features are pixels:
// they are kept as bytes and read as byte / 255, like the image sources. y is [N] or [N, 1]
// class labels, or [N, ...] values for regression.
#pragma once

#include <cstdint>
#include <string>

#include "datasets/dataset.h"
#include "datasets/npy.h"
#include "engine/core/result.h"

namespace mls::data {

struct ArrayOptions {
  std::string task;         // "classification", "regression", or "": integer labels classify
  int64_t num_classes = 0;  // 0: the largest label + 1
};

// The sample shape that a features array of `shape` gives (see above).
Shape array_sample_shape(const Shape& shape);

// `x_name` / `y_name` start the messages ("y.npy: label 12 at index 3 is out of range 0..9").
Result<Dataset> arrays_to_dataset(NpyArray x, NpyArray y, const ArrayOptions& options,
                                  const std::string& x_name, const std::string& y_name);

}  // namespace mls::data
