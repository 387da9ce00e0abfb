// The interfaces between the trainer and the layers that feed it and listen to it.
// datasets/ implements BatchSource; store/ implements MetricSink. The engine includes
// neither of those layers.
//
//   HostBatch b;
//   src.start_epoch(epoch);
//   while (src.next(128, b)) trainer.step(b);
//   sink.log_metric("train/loss", step, loss);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/shape.h"

namespace mls {

// What a source's targets are: class indices (classification) or real values (regression).
enum class TargetKind { Classes, Values };

// One batch in host memory. Buffers are reused between calls, so a warm loop allocates nothing.
struct HostBatch {
  int64_t size = 0;        // samples in this batch (the last one may be short)
  std::vector<float> x;    // size * numel(sample_shape) features, row-major
  std::vector<int64_t> y;  // size class labels (TargetKind::Classes; empty otherwise)
  std::vector<float> t;    // size * numel(target_shape) values (TargetKind::Values)
  // From a sharded source (BatchSource::set_shard): the samples of the whole batch, of which
  // this is one rank's part (0: not sharded, the batch is whole).
  int64_t global_size = 0;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t num_samples() const = 0;
  virtual Shape sample_shape() const = 0;   // e.g. {1, 28, 28}
  virtual int64_t num_classes() const = 0;  // 0 when the targets are values
  virtual TargetKind target_kind() const { return TargetKind::Classes; }
  // The shape of one sample's target values (TargetKind::Values), e.g. {1}; {} for classes.
  virtual Shape target_shape() const { return {}; }
  // Names of the classes, index by index, when the data has them (CSV categories, image
  // folder names); empty otherwise.
  virtual std::vector<std::string> class_names() const { return {}; }
  // Starts an epoch; a shuffling source permutes with a generator seeded by (seed, epoch),
  // so the order is reproducible.
  virtual void start_epoch(int64_t epoch) = 0;
  // Fills `out` with up to batch_size samples; returns false when the epoch is exhausted.
  virtual bool next(int64_t batch_size, HostBatch& out) = 0;
  // The consumer's step is computed and a pause follows (the trainer calls this after each
  // training step and its update on the CPU, before the metrics and the next batch's copy):
  // a source that makes batches on a thread of its own makes the next one now, not beside
  // the next step's kernels. Default: nothing.
  virtual void between_steps() {}
  // Data-parallel training: from now on each next(batch_size) takes the next batch_size samples
  // of the epoch as before but fills `out` with rank `rank`'s part of them only (samples
  // [begin, begin + count) of the batch, count = batch_size / world, one more for the first
  // batch_size % world ranks; HostBatch::global_size says how many the whole batch has), so a
  // rank reads and transforms only its own samples. set_shard(0, 1) ends it. Returns false where
  // the source cannot; the trainer then reads whole batches and keeps its part.
  virtual bool set_shard(int rank, int world) {
    (void)rank;
    (void)world;
    return false;
  }
};

class MetricSink {
 public:
  virtual ~MetricSink() = default;
  virtual void log_metric(std::string_view key, int64_t step, double value) = 0;
};

// The trainer logs metrics under "epoch/" and "val/" once per epoch with the epoch number
// as their step; every other metric's step is the global training step.
inline bool metric_per_epoch(std::string_view key) {
  return key.starts_with("epoch/") || key.starts_with("val/");
}

// Which way a metric improves, for its "best" (the run store's summaries, sorting, early
// stopping's defaults): higher for accuracy, f1, r2, auc, precision, recall and throughput
// (samples_per_s), judged on the key's last '/' part split at '_' ("val/macro_f1",
// "epoch/top5_accuracy"); lower for everything else (losses, errors, times).
inline bool metric_higher_is_better(std::string_view key) {
  std::string_view name = key.substr(key.rfind('/') + 1);  // npos + 1 == 0: the whole key
  if (name.ends_with("samples_per_s")) return true;
  while (!name.empty()) {
    size_t cut = name.find('_');
    std::string_view word = name.substr(0, cut);
    for (std::string_view up : {"accuracy", "acc", "f1", "r2", "auc", "precision", "recall"})
      if (word == up) return true;
    if (cut == std::string_view::npos) break;
    name.remove_prefix(cut + 1);
  }
  return false;
}

}  // namespace mls
