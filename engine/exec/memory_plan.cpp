#include "engine/exec/memory_plan.h"

#include <algorithm>
#include <limits>

#include "engine/core/check.h"

namespace mls {

namespace {

struct Block {
  size_t offset, size;
};

size_t align_up(size_t offset, size_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

// A buffer's footprint: at least one byte, rounded up to its alignment.
size_t rounded(size_t bytes, size_t alignment) {
  return align_up(std::max<size_t>(bytes, 1), alignment);
}

// A request's alignment and its size rounded to it.
struct Fit {
  size_t align, size;
};
Fit fit_of(const BufferRequest& r, size_t alignment) {
  const size_t a = r.align ? r.align : alignment;
  return {a, rounded(r.bytes, a)};
}

class FreeList {
 public:
  // The best-fitting free block that holds `bytes` at an `align`ed offset (the padding in
  // front stays free), else the end of the arena.
  size_t allocate(size_t bytes, size_t align, size_t& arena_end) {
    size_t best = blocks_.size(), best_size = 0;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      const size_t at = align_up(blocks_[i].offset, align);
      if (at + bytes <= blocks_[i].offset + blocks_[i].size && (best == blocks_.size() || blocks_[i].size < best_size)) {
        best = i;
        best_size = blocks_[i].size;
      }
    }
    if (best != blocks_.size()) return take(best, align_up(blocks_[best].offset, align), bytes);
    // A free block at the end of the arena can grow in place.
    if (!blocks_.empty() && blocks_.back().offset + blocks_.back().size == arena_end) {
      const size_t at = align_up(blocks_.back().offset, align);
      arena_end = at + bytes;
      if (at == blocks_.back().offset)
        blocks_.pop_back();
      else
        blocks_.back().size = at - blocks_.back().offset;
      return at;
    }
    const size_t at = align_up(arena_end, align);
    if (at > arena_end) release(arena_end, at - arena_end);
    arena_end = at + bytes;
    return at;
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
  // [at, at + bytes) out of block i, which holds it: what is left on either side stays free.
  size_t take(size_t i, size_t at, size_t bytes) {
    const Block b = blocks_[i];
    blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(i));
    if (at + bytes < b.offset + b.size) insert(Block{at + bytes, b.offset + b.size - at - bytes});
    if (at > b.offset) insert(Block{b.offset, at - b.offset});
    return at;
  }

  void insert(Block b) {
    auto it = std::lower_bound(blocks_.begin(), blocks_.end(), b.offset,
                               [](const Block& x, size_t o) { return x.offset < o; });
    blocks_.insert(it, b);
  }

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
    for (size_t i : st) {
      const Fit f = fit_of(reqs[i], alignment);
      plan.offsets[i] = free.allocate(f.size, f.align, end);
    }
    plan.peak_bytes = std::max(plan.peak_bytes, end);
    for (size_t i : ends[static_cast<size_t>(s)]) free.release(plan.offsets[i], fit_of(reqs[i], alignment).size);
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
    const Fit f = fit_of(reqs[i], alignment);
    const size_t size = f.size;
    live.clear();
    for (size_t j : placed)
      if (reqs[j].first <= reqs[i].last && reqs[i].first <= reqs[j].last) live.push_back(j);
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    size_t at = 0, best = std::numeric_limits<size_t>::max(), best_gap = best;
    for (size_t j : live) {
      const size_t here = align_up(at, f.align);
      if (plan.offsets[j] >= here + size && plan.offsets[j] - at < best_gap) {
        best = here;
        best_gap = plan.offsets[j] - at;
      }
      at = std::max(at, plan.offsets[j] + fit_of(reqs[j], alignment).size);
    }
    plan.offsets[i] = best != std::numeric_limits<size_t>::max() ? best : align_up(at, f.align);
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
  for (const BufferRequest& r : reqs) plan.sum_bytes += fit_of(r, alignment).size;
  return plan;
}

}  // namespace mls
