// Live training data for the instruments: the training thread publishes, the GUI reads at
// its own frame rate, and neither waits for the other.
//
//   Telemetry tm;
//   // training thread, after each step (a few stores, no lock, no allocation but one
//   // chunk per 4096 points):
//   tm.steps.push({.step = 12, .epoch = 1, .loss = 0.43f, ...});
//   tm.publish_ops(std::make_shared<OpProfile>(...));        // now and then
//   // GUI thread, every frame:
//   size_t n = tm.steps.size();                               // then read [0, n)
//   for (size_t i = seen; i < n; ++i) draw(tm.steps[i]);
//   std::shared_ptr<const OpProfile> ops = tm.ops();
//
// AppendLog is single-producer: points are written once, then published by a release store
// of the count; a reader's acquire load of the count makes every point below it complete.
// Storage is chunked so that readers never see a reallocation: a chunk, once published,
// stays until the log is destroyed.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/check.h"
#include "engine/core/memory.h"
#include "engine/exec/memory_timeline.h"
#include "engine/train/breakpoints.h"
#include "engine/train/health.h"

namespace mls {

template <class T>
class AppendLog {
 public:
  static constexpr size_t kChunk = 4096;
  static constexpr size_t kMaxChunks = 4096;  // 16.7 M points; more are dropped

  AppendLog() = default;
  AppendLog(const AppendLog&) = delete;
  AppendLog& operator=(const AppendLog&) = delete;
  ~AppendLog() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }

  // Producer only. False when the log is full.
  bool push(const T& v) {
    const size_t n = size_.load(std::memory_order_relaxed);
    const size_t c = n / kChunk;
    if (c >= kMaxChunks) return false;
    T* chunk = chunks_[c].load(std::memory_order_relaxed);
    if (!chunk) {
      chunk = new T[kChunk];
      chunks_[c].store(chunk, std::memory_order_release);
    }
    chunk[n % kChunk] = v;
    size_.store(n + 1, std::memory_order_release);
    return true;
  }
  size_t size() const { return size_.load(std::memory_order_acquire); }
  // i < a size() this thread has read.
  const T& operator[](size_t i) const {
    const T* chunk = chunks_[i / kChunk].load(std::memory_order_acquire);
    MLS_CHECK(chunk != nullptr, "AppendLog: index past the published points");
    return chunk[i % kChunk];
  }
  const T* last() const {
    const size_t n = size();
    return n ? &(*this)[n - 1] : nullptr;
  }

 private:
  std::array<std::atomic<T*>, kMaxChunks> chunks_{};
  std::atomic<size_t> size_{0};
};

// One training step, as the dashboard plots it.
struct StepPoint {
  int64_t step = 0;
  int64_t epoch = 0;
  double seconds = 0;  // since the run started
  float loss = 0;      // this step's
  float lr = 0;
  float samples_per_s = 0;
  float eta_s = 0;
  int64_t memory_bytes = 0;  // the allocator's total after the step
};

// One finished epoch.
struct EpochPoint {
  int64_t epoch = 0;
  double seconds = 0;  // the epoch's training pass
  double train_loss = 0;
  bool has_validation = false;
  double val_loss = 0;
  double val_accuracy = 0;  // classification
};

// Time per kernel of the training plan, summed over the profiled steps.
struct OpProfile {
  struct Kernel {
    std::string op, label;
    bool backward = false;
    double seconds = 0;  // per step
    double flops = 0;    // per step
    int32_t node = -1;
    double last_start_s = 0, last_end_s = 0;  // the last step's span, from its first kernel
    int32_t thread = 0;
  };
  std::vector<Kernel> kernels;  // in run order
  int64_t steps = 0;
  double step_seconds = 0;  // wall time of one plan run
};

class Telemetry {
 public:
  AppendLog<StepPoint> steps;
  AppendLog<EpochPoint> epochs;
  // The health instruments' samples (TrainConfig::health), each whole.
  AppendLog<HealthSample> health;

  // Snapshots, replaced whole (the training thread publishes a new one now and then).
  void publish_ops(std::shared_ptr<const OpProfile> p) {
    ops_.store(std::move(p), std::memory_order_release);
  }
  std::shared_ptr<const OpProfile> ops() const { return ops_.load(std::memory_order_acquire); }
  void publish_memory(std::shared_ptr<const MemoryTimeline> m) {
    memory_.store(std::move(m), std::memory_order_release);
  }
  std::shared_ptr<const MemoryTimeline> memory() const {
    return memory_.load(std::memory_order_acquire);
  }

  // The allocator's figures after the last step, per tag, and its peak.
  void publish_allocator(const MemoryStats& s) {
    for (int i = 0; i < kNumAllocTags; ++i)
      allocator_[static_cast<size_t>(i)].store(s.current[static_cast<size_t>(i)],
                                               std::memory_order_relaxed);
    allocator_peak_.store(s.total_peak, std::memory_order_release);
  }
  int64_t allocator_bytes(AllocTag t) const {
    return allocator_[static_cast<size_t>(tag_index(t))].load(std::memory_order_relaxed);
  }
  int64_t allocator_peak() const { return allocator_peak_.load(std::memory_order_acquire); }

  // The breakpoint that paused the run (null: none fired).
  void publish_break(std::shared_ptr<const BreakHit> b) {
    break_.store(std::move(b), std::memory_order_release);
  }
  std::shared_ptr<const BreakHit> break_hit() const {
    return break_.load(std::memory_order_acquire);
  }
  std::atomic<int64_t> planned_epochs{0};
  std::atomic<int64_t> batches_per_epoch{0};
  std::atomic<bool> running{false};

 private:
  std::atomic<std::shared_ptr<const OpProfile>> ops_;
  std::atomic<std::shared_ptr<const MemoryTimeline>> memory_;
  std::atomic<std::shared_ptr<const BreakHit>> break_;
  std::array<std::atomic<int64_t>, kNumAllocTags> allocator_{};
  std::atomic<int64_t> allocator_peak_{0};
};

// The training plan's kernels from its profiled runs (CompiledPlan::set_profiling).
OpProfile op_profile(const CompiledPlan& plan);

}  // namespace mls
