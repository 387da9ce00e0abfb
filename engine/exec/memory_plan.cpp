#include "engine/exec/memory_plan.h"

#include <algorithm>
#include <limits>

#include "engine/core/check.h"

namespace mls {

namespace {

struct Block {
  size_t offset, size;
};

size_t rounded(size_t bytes, size_t alignment) {
  return (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
}

class FreeList {
 public:
  size_t allocate(size_t bytes, size_t& arena_end) {
    size_t best = blocks_.size();
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].size >= bytes && (best == blocks_.size() || blocks_[i].size < blocks_[best].size))
        best = i;
    if (best != blocks_.size()) {
      size_t off = blocks_[best].offset;
      blocks_[best].offset += bytes;
      blocks_[best].size -= bytes;
      if (blocks_[best].size == 0) blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(best));
      return off;
    }
    // A free block at the end of the arena can grow in place.
    if (!blocks_.empty() && blocks_.back().offset + blocks_.back().size == arena_end) {
      size_t off = blocks_.back().offset;
      arena_end = off + bytes;
      blocks_.pop_back();
      return off;
    }
    size_t off = arena_end;
    arena_end += bytes;
    return off;
  }

  void release(size_t offset, size_t bytes) {
    auto it = std::lower_bound(blocks_.begin(), blocks_.end(), offset,
                               [](const Block& b, size_t o) { return b.offset < o; });
    it = blocks_.insert(it, Block{offset, bytes});
    // Merge with the neighbours.
    if (it + 1 != blocks_.end() && it->offset + it->size == (it + 1)->offset) {
      it->size += (it + 1)->size;
      blocks_.erase(it + 1);
    }
    if (it != blocks_.begin() && (it - 1)->offset + (it - 1)->size == it->offset) {
      (it - 1)->size += it->size;
      blocks_.erase(it);
    }
  }

 private:
  std::vector<Block> blocks_;  // sorted by offset
};

// Walks the steps: each step's new buffers go to the best-fitting hole (larger first),
// then the buffers whose last use was this step are released.
MemoryPlan plan_in_step_order(std::span<const BufferRequest> reqs, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(reqs.size(), 0);
  int32_t last_step = 0;
  for (const BufferRequest& r : reqs) last_step = std::max(last_step, r.last);
  std::vector<std::vector<size_t>> starts(static_cast<size_t>(last_step) + 1);
  std::vector<std::vector<size_t>> ends(static_cast<size_t>(last_step) + 1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    starts[static_cast<size_t>(reqs[i].first)].push_back(i);
    ends[static_cast<size_t>(reqs[i].last)].push_back(i);
  }
  FreeList free;
  size_t end = 0;
  for (int32_t s = 0; s <= last_step; ++s) {
    // Larger buffers first: fewer holes.
    auto& st = starts[static_cast<size_t>(s)];
    std::stable_sort(st.begin(), st.end(), [&](size_t a, size_t b) { return reqs[a].bytes > reqs[b].bytes; });
    for (size_t i : st) plan.offsets[i] = free.allocate(rounded(reqs[i].bytes, alignment), end);
    plan.peak_bytes = std::max(plan.peak_bytes, end);
    for (size_t i : ends[static_cast<size_t>(s)]) free.release(plan.offsets[i], rounded(reqs[i].bytes, alignment));
  }
  return plan;
}

// Largest buffers first, each into the smallest hole left between the buffers placed so far
// that live at the same time (TFLite's "greedy by size"): blind to the order of steps, so
// it packs well where that order made holes (long-lived buffers placed late, in-place chains).
MemoryPlan plan_by_size(std::span<const BufferRequest> reqs, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(reqs.size(), 0);
  std::vector<size_t> order(reqs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reqs[a].bytes != reqs[b].bytes ? reqs[a].bytes > reqs[b].bytes : reqs[a].first < reqs[b].first;
  });
  std::vector<size_t> placed, live;
  for (size_t i : order) {
    const size_t size = rounded(reqs[i].bytes, alignment);
    live.clear();
    for (size_t j : placed)
      if (reqs[j].first <= reqs[i].last && reqs[i].first <= reqs[j].last) live.push_back(j);
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    size_t at = 0, best = std::numeric_limits<size_t>::max(), best_gap = best;
    for (size_t j : live) {
      if (plan.offsets[j] >= at + size && plan.offsets[j] - at < best_gap) {
        best = at;
        best_gap = plan.offsets[j] - at;
      }
      at = std::max(at, plan.offsets[j] + rounded(reqs[j].bytes, alignment));
    }
    plan.offsets[i] = best != std::numeric_limits<size_t>::max() ? best : at;
    plan.peak_bytes = std::max(plan.peak_bytes, plan.offsets[i] + size);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace

MemoryPlan plan_memory(std::span<const BufferRequest> reqs, size_t alignment) {
  if (reqs.empty()) return {};
  for (const BufferRequest& r : reqs) MLS_CHECK(r.last >= r.first, "a buffer is read before it is written");
  // Neither heuristic wins everywhere: keep the smaller arena.
  MemoryPlan a = plan_in_step_order(reqs, alignment);
  MemoryPlan b = plan_by_size(reqs, alignment);
  MemoryPlan& plan = b.peak_bytes < a.peak_bytes ? b : a;
  for (const BufferRequest& r : reqs) plan.sum_bytes += rounded(r.bytes, alignment);
  return plan;
}

}  // namespace mls
