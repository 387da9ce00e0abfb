// A BatchSource that fills the next batches on a background thread while the trainer
// computes: same batches, same order as the source it wraps, just ready sooner.
//
//   auto src = std::make_unique<PrefetchSource>(std::move(train), /*depth=*/3);
//   src->start_epoch(epoch);
//   while (src->next(128, b)) trainer.step(b);   // b was produced while the last step ran
//
// The producer starts at the first next() of an epoch (it needs the batch size) and stops
// at the end of the epoch, at start_epoch (even mid-epoch) and in the destructor. Batches
// travel by swapping HostBatch buffers, so a warm loop allocates nothing. If the batch size
// changes mid-epoch the wrapped source is replayed to the same point, which assumes its
// order depends on (seed, epoch) only, as every source in datasets/ does. A consumer that
// calls between_steps() after each step has the next batch made then (see there).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/train/data_source.h"

namespace mls::data {

class PrefetchSource : public mls::BatchSource {
 public:
  explicit PrefetchSource(std::unique_ptr<mls::BatchSource> inner, int depth = 3);
  ~PrefetchSource() override;
  PrefetchSource(const PrefetchSource&) = delete;
  PrefetchSource& operator=(const PrefetchSource&) = delete;

  int64_t num_samples() const override { return inner_->num_samples(); }
  Shape sample_shape() const override { return inner_->sample_shape(); }
  int64_t num_classes() const override { return inner_->num_classes(); }
  TargetKind target_kind() const override { return inner_->target_kind(); }
  Shape target_shape() const override { return inner_->target_shape(); }
  std::vector<std::string> class_names() const override { return inner_->class_names(); }
  void start_epoch(int64_t epoch) override;
  bool next(int64_t batch_size, HostBatch& out) override;
  // Once called, the buffers that next() takes back are held until the next call (or the
  // next next()), so the producer makes a batch in the consumer's pauses: on cores that a
  // CPU step fills, a batch made while the step ran took a core from its first kernel
  // (Trainer::step_done gives the figures).
  void between_steps() override;
  bool set_shard(int rank, int world) override;

  // The wrapped source. Touch it only between epochs: the producer owns it while running.
  mls::BatchSource& inner() { return *inner_; }

 private:
  void start(int64_t batch_size);
  void stop();  // joins the producer and returns queued batches to the free pool
  void produce(int64_t batch_size);
  bool release_held();  // held_ -> free_, under mu_; true when there were any

  std::unique_ptr<mls::BatchSource> inner_;
  const size_t depth_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HostBatch> ring_;  // depth_ slots; [head_, head_ + count_) are ready
  size_t head_ = 0, count_ = 0;
  std::vector<HostBatch> free_;  // empty buffers for the producer
  std::vector<HostBatch> held_;  // given back by the consumer, for the producer at its pause
  bool paced_ = false;           // between_steps() was called: hold buffers until then
  bool stop_ = false, done_ = false;
  std::thread worker_;

  // Consumer side only.
  int64_t epoch_ = 0, delivered_ = 0, batch_size_ = 0;
  bool exhausted_ = false;
};

}  // namespace mls::data
