// Memory planning: liveness intervals -> offsets in one arena.
//
//   std::vector<BufferRequest> reqs{{.bytes = 400, .first = 0, .last = 1},
//                                   {.bytes = 400, .first = 1, .last = 2}};
//   MemoryPlan p = plan_memory(reqs, 64);   // p.offsets, p.peak_bytes
//
// Two greedy heuristics, and the smaller arena wins. Like ggml's graph allocator: walk the
// schedule; at each step place the step's new buffers (best fit in the free list, else grow
// the arena), then release the buffers whose last use was this step. Like TFLite's greedy
// by size: largest buffer first, each into the smallest hole between the placed buffers
// that live at the same time. Either way two buffers whose steps [first, last] meet never
// overlap, so a step's outputs never overlap its inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mls {

struct BufferRequest {
  size_t bytes = 0;
  int32_t first = 0;  // the step that writes it
  int32_t last = 0;   // the last step that reads it (>= first)
  size_t align = 0;   // its offset's alignment (and size granule); 0: plan_memory's alignment
};

struct MemoryPlan {
  std::vector<size_t> offsets;
  size_t peak_bytes = 0;  // arena size
  size_t sum_bytes = 0;   // what one buffer per value would need
};

// `alignment` (a power of two, as every request's own) applies where a request names none.
MemoryPlan plan_memory(std::span<const BufferRequest> reqs, size_t alignment);

}  // namespace mls
