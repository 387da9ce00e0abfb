// A BatchSource over in-memory labelled images (MNIST layout), normalised to float.
//
//   ImageSourceOptions o;
//   o.seed = 42;  o.mean = kFashionMnistMean;  o.stddev = kFashionMnistStd;
//   auto src = open_fashion_mnist(kFashionMnistDir, "train", o);
//   if (!src) { std::cerr << src.error().message << "\n"; return 1; }
//   HostBatch b;
//   (*src)->start_epoch(0);
//   while ((*src)->next(128, b)) trainer.step(b);  // b.x: b.size * 1*28*28 floats
//
// The images sit behind a shared_ptr so a full split and a limited view of it (e.g. a quick
// validation subset) share one copy of the pixels.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/mnist.h"
#include "engine/core/result.h"
#include "engine/train/data_source.h"

namespace mls::data {

// Per-pixel mean and standard deviation of the Fashion-MNIST training images, in [0, 1] units.
constexpr float kFashionMnistMean = 0.2860f;
constexpr float kFashionMnistStd = 0.3530f;

struct ImageSourceOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  float mean = 0.0f;    // x = (pixel / 255 - mean) / stddev
  float stddev = 1.0f;  // must be > 0
  int64_t limit = 0;    // 0: every sample; else the first `limit` (capped at the count)
};

class ImageClassificationSource : public mls::BatchSource {
 public:
  ImageClassificationSource(std::shared_ptr<const LabeledImages> images,
                            const ImageSourceOptions& options);

  int64_t num_samples() const override { return num_samples_; }
  Shape sample_shape() const override { return {1, images_->rows, images_->cols}; }
  int64_t num_classes() const override { return 10; }
  // Shuffling uses its own generator (splitmix64 + Fisher-Yates), not <random>'s
  // distributions, whose output differs between standard libraries: the same (seed, epoch)
  // gives the same order on every platform.
  void start_epoch(int64_t epoch) override;
  bool next(int64_t batch_size, HostBatch& out) override;

  const std::shared_ptr<const LabeledImages>& images() const { return images_; }

 private:
  std::shared_ptr<const LabeledImages> images_;
  ImageSourceOptions options_;
  int64_t num_samples_ = 0;
  std::vector<int64_t> order_;  // sample indices in this epoch's order
  int64_t cursor_ = 0;          // next position in order_
  std::array<float, 256> lut_;  // normalised value of each pixel byte
};

// Loads a split of an MNIST-layout directory (kFashionMnistDir for Fashion-MNIST).
Result<std::unique_ptr<ImageClassificationSource>> open_fashion_mnist(
    const std::string& dir, std::string_view split, const ImageSourceOptions& options);

}  // namespace mls::data
