// A whole dataset in memory: features with a sample shape, and targets that are class
// indices or float values. Every source (IDX, CSV, NPY/NPZ, image folders, synthetic) loads
// into one of these; InMemorySource then batches any subset of it.
//
//   Dataset d;
//   d.count = 2;  d.sample_shape = {3};
//   d.floats = {1, 2, 3, 4, 5, 6};
//   d.target_kind = TargetKind::Classes;  d.num_classes = 2;  d.labels = {0, 1};
//   check_dataset(d);  // sizes agree (a programmer error otherwise)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/shape.h"
#include "engine/train/data_source.h"

namespace mls::data {

struct Dataset {
  int64_t count = 0;
  Shape sample_shape;  // e.g. {1, 28, 28} (images: channels, height, width) or {features}
  // Exactly one of these holds the features, count * numel(sample_shape) of them, sample-major.
  // Images stay as bytes (value = byte / 255): a quarter of the memory of floats, and the
  // byte-to-float step doubles as normalisation through a lookup table.
  std::vector<uint8_t> bytes;
  std::vector<float> floats;

  TargetKind target_kind = TargetKind::Classes;
  int64_t num_classes = 0;               // Classes: labels are in [0, num_classes)
  std::vector<std::string> class_names;  // empty or num_classes names
  std::vector<int64_t> labels;           // Classes: count labels
  Shape target_shape;                    // Values: e.g. {1}
  std::vector<float> targets;            // Values: count * numel(target_shape)

  bool has_bytes() const { return !bytes.empty(); }
  int64_t sample_numel() const { return numel(sample_shape); }
  int64_t target_numel() const {
    return target_kind == TargetKind::Values ? numel(target_shape) : 0;
  }
};

// Asserts (always on) that the sizes agree and labels are in range: a source that builds an
// inconsistent Dataset is a bug, not bad input. Bad input is reported by the loaders.
void check_dataset(const Dataset& d);

// The number of channels that per-channel statistics use: dim 0 of an image-like sample
// (rank >= 2), each feature of a flat one (rank 1), 1 for a scalar.
int64_t channel_count(const Shape& sample_shape);

}  // namespace mls::data
