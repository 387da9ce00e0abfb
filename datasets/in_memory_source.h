// A BatchSource over a subset of an in-memory Dataset: shuffled per epoch from (seed, epoch),
// normalised per channel, optionally augmented and with one-hot targets.
//
//   auto data = std::make_shared<const Dataset>(std::move(loaded));
//   SourceOptions o;
//   o.shuffle = true;  o.seed = 42;  o.normalization = {{0.2860f}, {0.3530f}};
//   InMemorySource train(data, split.train, o);   // indices into `data`
//   InMemorySource test(data, split.test, {});    // shares the same samples
//   HostBatch b;
//   train.start_epoch(0);
//   while (train.next(128, b)) trainer.step(b);
//
// A warm loop allocates nothing: the order and the augmentation scratch are sized once, and
// HostBatch's vectors keep their capacity between calls.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/transforms.h"
#include "engine/train/data_source.h"

namespace mls::data {

struct SourceOptions {
  bool shuffle = false;
  uint64_t seed = 0;  // the epoch order and the augmentations draw from (seed, epoch)
  Normalization normalization;
  // Classes become Values of shape {num_classes} (for MSE / BCE losses). `y` still carries
  // the class labels, so accuracy can be measured against the argmax.
  bool one_hot = false;
  // Random geometric transforms: give them to the training split only. Needs image samples.
  std::vector<Augmentation> augmentations;
};

class InMemorySource : public mls::BatchSource {
 public:
  // `indices` picks the samples (a split); they are visited in this order when not shuffled.
  InMemorySource(std::shared_ptr<const Dataset> data, std::vector<int64_t> indices,
                 SourceOptions options);
  // Every sample of `data`, in file order.
  InMemorySource(std::shared_ptr<const Dataset> data, SourceOptions options);

  int64_t num_samples() const override { return static_cast<int64_t>(indices_.size()); }
  Shape sample_shape() const override { return data_->sample_shape; }
  int64_t num_classes() const override { return data_->num_classes; }
  TargetKind target_kind() const override;
  Shape target_shape() const override;
  std::vector<std::string> class_names() const override { return data_->class_names; }
  void start_epoch(int64_t epoch) override;
  bool next(int64_t batch_size, HostBatch& out) override;
  bool set_shard(int rank, int world) override;

  const std::shared_ptr<const Dataset>& dataset() const { return data_; }
  const std::vector<int64_t>& indices() const { return indices_; }
  const SourceOptions& options() const { return options_; }

 private:
  void write_features(int64_t sample, float* dst);
  void prefetch_features(int64_t sample) const;
  static constexpr int64_t kPrefetchAhead = 8;  // samples

  std::shared_ptr<const Dataset> data_;
  std::vector<int64_t> indices_;
  SourceOptions options_;
  ImageDims dims_;
  int64_t channel_size_ = 0;    // elements per channel
  std::vector<float> scratch_;  // one sample, for augmentations
  std::vector<int64_t> order_;  // positions into indices_, this epoch
  int64_t cursor_ = 0;
  int shard_rank_ = 0, shard_world_ = 1;  // set_shard
  int64_t epoch_ = 0;
};

}  // namespace mls::data
