#include "datasets/image_classification.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "datasets/shuffle.h"
#include "engine/core/check.h"

namespace mls::data {

ImageClassificationSource::ImageClassificationSource(std::shared_ptr<const LabeledImages> images,
                                                     const ImageSourceOptions& options)
    : images_(std::move(images)), options_(options) {
  MLS_CHECK(images_ != nullptr, "ImageClassificationSource needs images");
  MLS_CHECK(options_.stddev > 0.0f, "ImageSourceOptions::stddev must be positive");
  MLS_CHECK(options_.limit >= 0, "ImageSourceOptions::limit must be >= 0");
  MLS_CHECK(images_->pixels.size() ==
                    static_cast<size_t>(images_->count * images_->rows * images_->cols) &&
                images_->labels.size() == static_cast<size_t>(images_->count),
            "LabeledImages sizes disagree with count/rows/cols");
  num_samples_ = options_.limit > 0 ? std::min(options_.limit, images_->count) : images_->count;
  for (int p = 0; p < 256; ++p)
    lut_[p] = (static_cast<float>(p) / 255.0f - options_.mean) / options_.stddev;
  start_epoch(0);  // so next() works even if the caller never starts an epoch
}

void ImageClassificationSource::start_epoch(int64_t epoch) {
  shuffled_order(num_samples_, options_.seed, epoch, order_, options_.shuffle);
  cursor_ = 0;
}

bool ImageClassificationSource::next(int64_t batch_size, HostBatch& out) {
  MLS_CHECK(batch_size > 0, "batch_size must be positive");
  if (cursor_ >= num_samples_) {
    out.size = 0;
    return false;
  }
  const int64_t n = std::min(batch_size, num_samples_ - cursor_);
  const size_t pixels = static_cast<size_t>(images_->rows * images_->cols);
  // resize() keeps capacity, so after the first full batch this never allocates.
  out.size = n;
  out.x.resize(static_cast<size_t>(n) * pixels);
  out.y.resize(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    const size_t s = static_cast<size_t>(order_[static_cast<size_t>(cursor_ + b)]);
    const uint8_t* src = images_->pixels.data() + s * pixels;
    float* dst = out.x.data() + static_cast<size_t>(b) * pixels;
    for (size_t k = 0; k < pixels; ++k) dst[k] = lut_[src[k]];
    out.y[static_cast<size_t>(b)] = images_->labels[s];
  }
  cursor_ += n;
  return true;
}

Result<std::unique_ptr<ImageClassificationSource>> open_fashion_mnist(
    const std::string& dir, std::string_view split, const ImageSourceOptions& options) {
  Result<LabeledImages> images = load_mnist_split(dir, split);
  if (!images) return images.error();
  auto shared = std::make_shared<const LabeledImages>(std::move(*images));
  return std::make_unique<ImageClassificationSource>(std::move(shared), options);
}

}  // namespace mls::data
