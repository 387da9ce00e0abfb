#include "engine/exec/memory_plan.h"

#include <algorithm>
#include <limits>

#include "engine/core/check.h"

namespace mls {

namespace {

struct Block {
  size_t offset, size;
};

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

}  // namespace

MemoryPlan plan_memory(std::span<const BufferRequest> reqs, size_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(reqs.size(), 0);
  if (reqs.empty()) return plan;
  int32_t last_step = 0;
  for (const BufferRequest& r : reqs) {
    MLS_CHECK(r.last >= r.first, "a buffer is read before it is written");
    last_step = std::max(last_step, r.last);
  }
  std::vector<std::vector<size_t>> starts(static_cast<size_t>(last_step) + 1);
  std::vector<std::vector<size_t>> ends(static_cast<size_t>(last_step) + 1);
  for (size_t i = 0; i < reqs.size(); ++i) {
    starts[static_cast<size_t>(reqs[i].first)].push_back(i);
    ends[static_cast<size_t>(reqs[i].last)].push_back(i);
  }
  auto rounded = [&](size_t b) { return (std::max<size_t>(b, 1) + alignment - 1) / alignment * alignment; };
  FreeList free;
  size_t end = 0;
  for (int32_t s = 0; s <= last_step; ++s) {
    // Larger buffers first: fewer holes.
    auto& st = starts[static_cast<size_t>(s)];
    std::stable_sort(st.begin(), st.end(), [&](size_t a, size_t b) { return reqs[a].bytes > reqs[b].bytes; });
    for (size_t i : st) {
      plan.offsets[i] = free.allocate(rounded(reqs[i].bytes), end);
      plan.sum_bytes += rounded(reqs[i].bytes);
    }
    plan.peak_bytes = std::max(plan.peak_bytes, end);
    for (size_t i : ends[static_cast<size_t>(s)]) free.release(plan.offsets[i], rounded(reqs[i].bytes));
  }
  return plan;
}

}  // namespace mls
