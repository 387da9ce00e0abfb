// Tagged, timed accounting of every device allocation.
//
//   MemoryTracker& m = backend.memory();
//   auto before = m.stats().alloc_count;
//   executor.run_step();                         // a warm static plan allocates nothing
//   assert(m.stats().alloc_count == before);
//   m.stats().peak[tag_index(AllocTag::Activation)]
//
// Backends report to their tracker from BufferType::allocate and the buffer's destructor;
// the memory profiler draws the event log.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace mls {

enum class AllocTag : uint8_t { Parameter, Gradient, Activation, OptimizerState, Workspace, Input, Other };
inline constexpr int kNumAllocTags = 7;
constexpr int tag_index(AllocTag t) { return static_cast<int>(t); }
std::string_view alloc_tag_name(AllocTag t);

struct MemoryStats {
  std::array<int64_t, kNumAllocTags> current{};
  std::array<int64_t, kNumAllocTags> peak{};
  int64_t total_current = 0;
  int64_t total_peak = 0;
  uint64_t alloc_count = 0;
  uint64_t free_count = 0;
};

struct MemoryEvent {
  double seconds;  // since the tracker was created
  AllocTag tag;
  int64_t delta_bytes;  // + allocation, - release
};

class MemoryTracker {
 public:
  MemoryTracker();
  void on_alloc(AllocTag tag, size_t bytes);
  void on_free(AllocTag tag, size_t bytes);
  MemoryStats stats() const;
  // The most recent events (bounded, oldest dropped first).
  std::vector<MemoryEvent> events() const;
  void reset_peaks();

 private:
  void record(AllocTag tag, int64_t delta);
  mutable std::mutex mu_;
  MemoryStats stats_;
  std::vector<MemoryEvent> events_;
  size_t next_event_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace mls
