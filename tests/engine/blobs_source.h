// A synthetic classification source for trainer tests: Gaussian-ish blobs, one per class,
// served in a fixed order.
//
//   Blobs data(3200, /*features=*/20, /*classes=*/4, /*seed=*/3);
//   trainer.fit(data, nullptr, nullptr);
#pragma once

#include <algorithm>

#include "engine/train/data_source.h"
#include "engine/train/rng.h"

namespace mls::test {

// Gaussian blobs: class k centred at a random point; samples [features].
class Blobs final : public BatchSource {
 public:
  Blobs(int64_t n, int64_t features, int64_t classes, uint64_t seed)
      : n_(n),
        f_(features),
        c_(classes),
        x_(static_cast<size_t>(n * features)),
        y_(static_cast<size_t>(n)) {
    Rng r(seed);
    std::vector<double> centres(static_cast<size_t>(classes * features));
    for (double& v : centres) v = r.uniform(-2, 2);
    for (int64_t i = 0; i < n; ++i) {
      int64_t k = static_cast<int64_t>(r.below(static_cast<uint64_t>(classes)));
      y_[static_cast<size_t>(i)] = k;
      for (int64_t j = 0; j < features; ++j)
        x_[static_cast<size_t>(i * features + j)] =
            static_cast<float>(centres[static_cast<size_t>(k * features + j)] + r.uniform(-1, 1));
    }
  }
  // Overwrites one feature of one sample (a test plants a NaN).
  void set(int64_t sample, int64_t feature, float v) {
    x_[static_cast<size_t>(sample * f_ + feature)] = v;
  }
  int64_t num_samples() const override { return n_; }
  Shape sample_shape() const override { return {f_}; }
  int64_t num_classes() const override { return c_; }
  void start_epoch(int64_t) override { pos_ = 0; }
  void between_steps() override { ++pauses; }
  int64_t pauses = 0;  // between_steps() calls: the trainer announces each CPU step's end
  bool next(int64_t bs, HostBatch& out) override {
    if (pos_ >= n_) return false;
    out.size = std::min(bs, n_ - pos_);
    out.x.assign(x_.begin() + pos_ * f_, x_.begin() + (pos_ + out.size) * f_);
    out.y.assign(y_.begin() + pos_, y_.begin() + pos_ + out.size);
    pos_ += out.size;
    return true;
  }

 private:
  int64_t n_, f_, c_, pos_ = 0;
  std::vector<float> x_;
  std::vector<int64_t> y_;
};

}  // namespace mls::test
