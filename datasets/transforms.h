// Sample transforms: per-channel normalisation and the random augmentations of the
// training split (random crop with padding, horizontal flip, small rotation).
//
//   Normalization n{{0.2860f}, {0.3530f}};           // one value: every channel
//   std::vector<Augmentation> aug{{AugmentKind::RandomCrop, 4}, {AugmentKind::HorizontalFlip}};
//   Rng r = sample_rng(seed, epoch, sample_index);     // datasets/shuffle.h
//   augment_sample(aug, r, ImageDims{1, 28, 28}, pixels, scratch);
//
// Augmentations work on raw values (bytes / 255, or the stored floats) before normalising,
// as torchvision does with PIL images: padding and the corners a rotation uncovers are 0,
// i.e. black, not "the mean".
#pragma once

#include <cstdint>
#include <vector>

#include "datasets/dataset.h"
#include "engine/train/rng.h"

namespace mls::data {

// x = (raw - mean[c]) / stddev[c]. One value applies to every channel; empty: identity.
struct Normalization {
  std::vector<float> mean, stddev;
  bool empty() const { return mean.empty(); }
  float mean_of(int64_t c) const {
    return mean.size() == 1 ? mean[0] : mean[static_cast<size_t>(c)];
  }
  float std_of(int64_t c) const {
    return stddev.size() == 1 ? stddev[0] : stddev[static_cast<size_t>(c)];
  }
  bool operator==(const Normalization&) const = default;
};

// Per-channel mean and standard deviation of the raw values of the samples at `indices`,
// accumulated in double. A constant channel gets stddev 1 so it maps to 0, not to inf.
Normalization fit_normalization(const Dataset& d, const std::vector<int64_t>& indices);

enum class AugmentKind { RandomCrop, HorizontalFlip, Rotation };

struct Augmentation {
  AugmentKind kind = AugmentKind::HorizontalFlip;
  int64_t padding = 4;  // RandomCrop: pad each side, then crop back to the original size
  double p = 0.5;       // HorizontalFlip: probability
  double degrees = 10;  // Rotation: uniform in [-degrees, degrees]
};

struct ImageDims {
  int64_t c = 1, h = 1, w = 1;
  int64_t numel() const { return c * h * w; }
};

// The image geometry of a sample shape: [C, H, W] or [H, W] (one channel); nothing else.
bool image_dims(const Shape& sample_shape, ImageDims& out);

// dst(y, x) = src(y + dy - padding, x + dx - padding), 0 outside; dy, dx in [0, 2 * padding].
void crop_with_padding(const float* src, float* dst, ImageDims d, int64_t padding, int64_t dy,
                       int64_t dx);
void flip_horizontal(const float* src, float* dst, ImageDims d);
// Counter-clockwise as displayed (rows go down), about the image centre, bilinear, 0 fill;
// rotate_bilinear(.., 90) equals numpy's rot90 on a square image.
void rotate_bilinear(const float* src, float* dst, ImageDims d, double degrees);

// Applies `augs` in order to one sample in place, drawing from `rng`; `scratch` holds
// d.numel() floats. Each augmentation draws the same count of numbers whatever it decides,
// so one sample's choices do not shift another transform's stream.
void augment_sample(const std::vector<Augmentation>& augs, Rng& rng, ImageDims d, float* sample,
                    float* scratch);

}  // namespace mls::data
