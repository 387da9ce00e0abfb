#include "datasets/in_memory_source.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "datasets/shuffle.h"
#include "engine/core/check.h"

namespace mls::data {

InMemorySource::InMemorySource(std::shared_ptr<const Dataset> data, std::vector<int64_t> indices,
                               SourceOptions options)
    : data_(std::move(data)), indices_(std::move(indices)), options_(std::move(options)) {
  MLS_CHECK(data_ != nullptr, "InMemorySource needs a dataset");
  check_dataset(*data_);
  for (int64_t i : indices_) MLS_CHECK(i >= 0 && i < data_->count, "sample index out of range");
  const int64_t channels = channel_count(data_->sample_shape);
  channel_size_ = channels > 0 ? data_->sample_numel() / channels : 0;
  const Normalization& n = options_.normalization;
  if (!n.empty()) {
    MLS_CHECK(n.mean.size() == n.stddev.size() &&
                  (n.mean.size() == 1 || n.mean.size() == static_cast<size_t>(channels)),
              "Normalization needs one value or one per channel");
    for (float s : n.stddev) MLS_CHECK(s > 0.0f, "Normalization stddev must be positive");
  }
  MLS_CHECK(!options_.one_hot || data_->target_kind == TargetKind::Classes,
            "one-hot targets need class labels");
  if (!options_.augmentations.empty()) {
    MLS_CHECK(image_dims(data_->sample_shape, dims_), "augmentations need image samples");
    scratch_.resize(static_cast<size_t>(dims_.numel()));
  }
  start_epoch(0);  // so next() works even if the caller never starts an epoch
}

InMemorySource::InMemorySource(std::shared_ptr<const Dataset> data, SourceOptions options)
    : InMemorySource(
          data,
          [&] {
            std::vector<int64_t> all(static_cast<size_t>(data ? data->count : 0));
            std::iota(all.begin(), all.end(), int64_t{0});
            return all;
          }(),
          std::move(options)) {}

TargetKind InMemorySource::target_kind() const {
  return options_.one_hot ? TargetKind::Values : data_->target_kind;
}

Shape InMemorySource::target_shape() const {
  if (options_.one_hot) return {data_->num_classes};
  return data_->target_kind == TargetKind::Values ? data_->target_shape : Shape{};
}

void InMemorySource::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  cursor_ = 0;
  shuffled_order(num_samples(), options_.seed, epoch, order_, options_.shuffle);
}

// The samples of a shuffled batch lie anywhere in the dataset (Fashion-MNIST's training bytes
// are 47 MB, past the shared L3), so reading one waited on memory: 65 % of write_features' time
// sat on its first load. Each sample's lines are requested into L2 kPrefetchAhead samples
// ahead (4 or 16 ahead, or into L1, were slower). bench/pipeline_throughput, batch 128 on the
// 2-core AVX-512 VM: 48-58 -> 29 us a batch, 57-61 -> 39-41 us through the prefetch thread.
void InMemorySource::prefetch_features(int64_t sample) const {
  const Dataset& d = *data_;
  const size_t numel = static_cast<size_t>(d.sample_numel());
  const char* p =
      d.has_bytes()
          ? reinterpret_cast<const char*>(d.bytes.data() + static_cast<size_t>(sample) * numel)
          : reinterpret_cast<const char*>(d.floats.data() + static_cast<size_t>(sample) * numel);
  const size_t bytes = numel * (d.has_bytes() ? 1 : sizeof(float));
  if (bytes == 0) return;
  for (size_t at = 0; at < bytes; at += 64) __builtin_prefetch(p + at, 0, 2);
  __builtin_prefetch(p + bytes - 1, 0, 2);
}

void InMemorySource::write_features(int64_t sample, float* dst) {
  const Dataset& d = *data_;
  const size_t numel = static_cast<size_t>(d.sample_numel());
  const size_t base = static_cast<size_t>(sample) * numel;
  const Normalization& n = options_.normalization;
  const bool augment = !options_.augmentations.empty();
  const size_t cs = static_cast<size_t>(channel_size_);

  if (d.has_bytes() && !augment) {
    // Exactly (p / 255 - mean) / stddev in float, as the original Fashion-MNIST source's
    // lookup table held it, so its runs keep their numbers bit for bit; computed rather than
    // looked up because this loop vectorises (2x the samples/s of the table).
    const uint8_t* src = d.bytes.data() + base;
    for (size_t c = 0, k = 0; k < numel; ++c, k += cs) {
      const float m = n.empty() ? 0.0f : n.mean_of(static_cast<int64_t>(c));
      const float s = n.empty() ? 1.0f : n.std_of(static_cast<int64_t>(c));
      for (size_t j = 0; j < cs; ++j)
        dst[k + j] = (static_cast<float>(src[k + j]) / 255.0f - m) / s;
    }
    return;
  }
  if (d.has_bytes()) {
    const uint8_t* src = d.bytes.data() + base;
    for (size_t k = 0; k < numel; ++k) dst[k] = static_cast<float>(src[k]) / 255.0f;
  } else {
    std::memcpy(dst, d.floats.data() + base, numel * sizeof(float));
  }
  if (augment) {
    Rng rng = sample_rng(options_.seed, epoch_, sample);
    augment_sample(options_.augmentations, rng, dims_, dst, scratch_.data());
  }
  if (n.empty()) return;
  for (size_t c = 0, k = 0; k < numel; ++c, k += cs) {
    const float m = n.mean_of(static_cast<int64_t>(c)), s = n.std_of(static_cast<int64_t>(c));
    for (size_t j = 0; j < cs; ++j) dst[k + j] = (dst[k + j] - m) / s;
  }
}

bool InMemorySource::next(int64_t batch_size, HostBatch& out) {
  MLS_CHECK(batch_size > 0, "batch_size must be positive");
  const int64_t total = num_samples();
  if (cursor_ >= total) {
    out.size = 0;
    return false;
  }
  const Dataset& d = *data_;
  // The whole batch's samples are order_[cursor_, cursor_ + g); this rank's part of them.
  const int64_t g = std::min(batch_size, total - cursor_);
  const int64_t part = g / shard_world_, rest = g % shard_world_;
  const int64_t n = shard_world_ == 1 ? g : part + (shard_rank_ < rest ? 1 : 0);
  const int64_t first =
      cursor_ + (shard_world_ == 1 ? 0 : shard_rank_ * part + std::min<int64_t>(shard_rank_, rest));
  out.global_size = shard_world_ == 1 ? 0 : g;
  const size_t numel = static_cast<size_t>(d.sample_numel());
  const bool classes = d.target_kind == TargetKind::Classes;
  const size_t tsize = static_cast<size_t>(options_.one_hot ? d.num_classes : d.target_numel());
  // resize() keeps capacity, so after the first full batch this never allocates.
  out.size = n;
  out.x.resize(static_cast<size_t>(n) * numel);
  out.y.resize(classes ? static_cast<size_t>(n) : 0);
  out.t.resize(static_cast<size_t>(n) * tsize);
  if (options_.one_hot) std::fill(out.t.begin(), out.t.end(), 0.0f);
  const auto sample_at = [&](int64_t b) {
    return indices_[static_cast<size_t>(order_[static_cast<size_t>(first + b)])];
  };
  for (int64_t b = 0; b < std::min(n, kPrefetchAhead); ++b) prefetch_features(sample_at(b));
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = sample_at(b);
    if (b + kPrefetchAhead < n) prefetch_features(sample_at(b + kPrefetchAhead));
    const size_t bi = static_cast<size_t>(b);
    write_features(s, out.x.data() + bi * numel);
    if (classes) {
      const int64_t label = d.labels[static_cast<size_t>(s)];
      out.y[bi] = label;
      if (options_.one_hot) out.t[bi * tsize + static_cast<size_t>(label)] = 1.0f;
    } else {
      std::memcpy(out.t.data() + bi * tsize, d.targets.data() + static_cast<size_t>(s) * tsize,
                  tsize * sizeof(float));
    }
  }
  cursor_ += g;
  return true;
}

bool InMemorySource::set_shard(int rank, int world) {
  MLS_CHECK(world >= 1 && rank >= 0 && rank < world, "set_shard: rank outside the world");
  shard_rank_ = rank;
  shard_world_ = world;
  return true;
}

}  // namespace mls::data
