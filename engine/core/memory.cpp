#include "engine/core/memory.h"

#include <algorithm>

namespace mls {

namespace {
constexpr size_t kMaxEvents = 1 << 16;
}

std::string_view alloc_tag_name(AllocTag t) {
  switch (t) {
    case AllocTag::Parameter: return "parameter";
    case AllocTag::Gradient: return "gradient";
    case AllocTag::Activation: return "activation";
    case AllocTag::OptimizerState: return "optimizer_state";
    case AllocTag::Workspace: return "workspace";
    case AllocTag::Input: return "input";
    case AllocTag::Other: return "other";
  }
  return "?";
}

MemoryTracker::MemoryTracker() : t0_(std::chrono::steady_clock::now()) {}

void MemoryTracker::record(AllocTag tag, int64_t delta) {
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  MemoryEvent ev{s, tag, delta};
  if (events_.size() < kMaxEvents) {
    events_.push_back(ev);
  } else {  // ring buffer: the profiler wants the recent history
    events_[next_event_] = ev;
    next_event_ = (next_event_ + 1) % kMaxEvents;
  }
}

void MemoryTracker::on_alloc(AllocTag tag, size_t bytes) {
  std::lock_guard lock(mu_);
  int i = tag_index(tag);
  auto b = static_cast<int64_t>(bytes);
  stats_.current[i] += b;
  stats_.peak[i] = std::max(stats_.peak[i], stats_.current[i]);
  stats_.total_current += b;
  stats_.total_peak = std::max(stats_.total_peak, stats_.total_current);
  ++stats_.alloc_count;
  record(tag, b);
}

void MemoryTracker::on_free(AllocTag tag, size_t bytes) {
  std::lock_guard lock(mu_);
  auto b = static_cast<int64_t>(bytes);
  stats_.current[tag_index(tag)] -= b;
  stats_.total_current -= b;
  ++stats_.free_count;
  record(tag, -b);
}

MemoryStats MemoryTracker::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::vector<MemoryEvent> MemoryTracker::events() const {
  std::lock_guard lock(mu_);
  std::vector<MemoryEvent> out;
  out.reserve(events_.size());
  for (size_t i = 0; i < events_.size(); ++i) out.push_back(events_[(next_event_ + i) % events_.size()]);
  return out;
}

void MemoryTracker::reset_peaks() {
  std::lock_guard lock(mu_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
}

}  // namespace mls
