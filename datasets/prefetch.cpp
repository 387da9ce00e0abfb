#include "datasets/prefetch.h"

#include <utility>

#include "engine/core/check.h"

namespace mls::data {

PrefetchSource::PrefetchSource(std::unique_ptr<mls::BatchSource> inner, int depth)
    : inner_(std::move(inner)), depth_(static_cast<size_t>(depth)) {
  MLS_CHECK(inner_ != nullptr, "PrefetchSource needs a source");
  MLS_CHECK(depth >= 1, "PrefetchSource depth must be >= 1");
  ring_.resize(depth_);
  free_.resize(depth_);  // at most depth_ buffers circulate, so push_back never reallocates
  held_.reserve(depth_);
}

PrefetchSource::~PrefetchSource() {
  stop();
}

void PrefetchSource::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  std::lock_guard lock(mu_);
  release_held();
  for (; count_ > 0; --count_, head_ = (head_ + 1) % depth_)
    free_.push_back(std::move(ring_[head_]));
  head_ = 0;
  stop_ = done_ = false;
}

void PrefetchSource::start(int64_t batch_size) {
  batch_size_ = batch_size;
  worker_ = std::thread([this, batch_size] { produce(batch_size); });
}

void PrefetchSource::produce(int64_t batch_size) {
  for (;;) {
    HostBatch b;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !free_.empty(); });
      if (stop_) return;
      b = std::move(free_.back());
      free_.pop_back();
    }
    const bool more = inner_->next(batch_size, b);  // the work, outside the lock
    {
      std::lock_guard lock(mu_);
      if (stop_ || !more) {
        free_.push_back(std::move(b));
        done_ = !more;
      } else {
        ring_[(head_ + count_) % depth_] = std::move(b);
        ++count_;
      }
    }
    cv_.notify_all();
    if (!more) return;
  }
}

void PrefetchSource::start_epoch(int64_t epoch) {
  stop();
  inner_->start_epoch(epoch);
  epoch_ = epoch;
  delivered_ = 0;
  exhausted_ = false;
}

bool PrefetchSource::next(int64_t batch_size, HostBatch& out) {
  MLS_CHECK(batch_size > 0, "batch_size must be positive");
  if (exhausted_) {
    out.size = 0;
    return false;
  }
  if (!worker_.joinable()) {
    start(batch_size);
  } else if (batch_size != batch_size_) {
    // Replay the wrapped source to where the consumer is, then go on at the new size.
    stop();
    inner_->start_epoch(epoch_);
    HostBatch skipped;
    if (delivered_ > 0) inner_->next(delivered_, skipped);
    start(batch_size);
  }
  std::unique_lock lock(mu_);
  if (release_held()) cv_.notify_all();  // no pause was announced since the last batch
  cv_.wait(lock, [&] { return count_ > 0 || done_; });
  if (count_ == 0) {  // done_: the epoch is over
    lock.unlock();
    worker_.join();
    std::lock_guard relock(mu_);
    done_ = false;
    exhausted_ = true;
    out.size = 0;
    return false;
  }
  std::swap(out, ring_[head_]);
  // The caller's old buffers go back to work, now or at its pause.
  (paced_ ? held_ : free_).push_back(std::move(ring_[head_]));
  head_ = (head_ + 1) % depth_;
  --count_;
  lock.unlock();
  cv_.notify_all();
  delivered_ += out.global_size > 0 ? out.global_size : out.size;  // the epoch's samples passed
  return true;
}

bool PrefetchSource::release_held() {
  if (held_.empty()) return false;
  for (HostBatch& b : held_) free_.push_back(std::move(b));
  held_.clear();
  return true;
}

void PrefetchSource::between_steps() {
  {
    std::lock_guard lock(mu_);
    paced_ = true;
    if (!release_held()) return;
  }
  cv_.notify_all();
}

bool PrefetchSource::set_shard(int rank, int world) {
  stop();  // the producer owns the wrapped source while it runs
  inner_->start_epoch(epoch_);
  delivered_ = 0;
  exhausted_ = false;
  return inner_->set_shard(rank, world);
}

}  // namespace mls::data
