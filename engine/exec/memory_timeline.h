// Where a static training step's memory goes, wave by wave: the memory profiler's data.
//
//   HeldBytes held{.parameter = 4'000'000, .optimizer_state = 4'000'000, .input = 400'000};
//   MemoryTimeline t = memory_timeline(plan, held);
//   t.samples[t.peak].bytes[mem_cat_index(MemCat::Activation)];   // live activations at the peak
//   for (size_t h : t.live_at(t.peak)) t.holders[h].node;          // who holds them
//   t.total_bytes;   // what the allocator holds during the step: the planned peak
//
// A compiled plan keeps every intermediate in one arena that the allocator sees as one
// Activation buffer, allocated once. Inside it, each value lives from the wave that writes it
// to the last wave that reads it (CompiledPlan::placements). This splits the arena, per wave,
// into the values live then, by what they are (a forward activation, a backward temporary,
// a parameter's gradient) and the part that is free at that wave; the bytes held outside the
// plan (parameters, optimizer state, inputs) come from the caller; the graph's constants from
// the plan's graph. So every sample adds up
// to the same total, which is what the allocator reports while the step runs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/exec/compiled_plan.h"

namespace mls {

enum class MemCat : uint8_t {
  Parameter,
  Gradient,  // parameters' gradients (the step's outputs)
  OptimizerState,
  Input,       // the batch and the step's other inputs
  Constant,    // the step graph's constants (folded values, scalars)
  Activation,  // forward values kept for the backward pass
  Backward,    // the backward pass's temporaries (gradients of activations)
  Workspace,   // kernels' declared scratch (packed or padded operands), for their wave
  ArenaFree,   // arena bytes no value holds at this wave
  Other,       // held by the backend outside this step (other plans, data)
};
inline constexpr int kNumMemCats = 10;
constexpr int mem_cat_index(MemCat c) {
  return static_cast<int>(c);
}
std::string_view mem_cat_name(MemCat c);

enum class StepPhase : uint8_t { Forward, Backward, Optimizer };
std::string_view step_phase_name(StepPhase p);

// Bytes held outside the plan's arena while the step runs.
struct HeldBytes {
  int64_t parameter = 0;
  int64_t optimizer_state = 0;
  int64_t input = 0;
  int64_t gradient = 0;  // gradients in buffers of their own (not in the arena)
  int64_t other = 0;
};

struct MemoryTimeline {
  // One arena value.
  struct Holder {
    std::string value;  // its name in the graph ("%12")
    std::string node;   // the label of the node that writes it ("fc1"), else the op
    std::string op;
    int32_t graph_node = -1;
    MemCat cat = MemCat::Activation;
    int64_t bytes = 0;
    int32_t first = 0, last = 0;  // waves; a value whose buffer passes on in place ends before
  };
  struct Sample {
    int32_t wave = 0;  // the optimizer sample has the wave after the last
    StepPhase phase = StepPhase::Forward;
    std::array<int64_t, kNumMemCats> bytes{};
    int64_t total() const;
    int64_t live() const;  // total less ArenaFree
  };
  std::vector<Holder> holders;
  std::vector<Sample> samples;  // one per wave, then one for the optimizer step
  size_t peak = 0;              // the sample with the most live bytes
  int64_t arena_bytes = 0;
  int64_t total_bytes = 0;  // every sample's total: the planned peak of the step
  // The holders live at a sample, largest first.
  std::vector<size_t> live_at(size_t sample) const;
};

MemoryTimeline memory_timeline(const CompiledPlan& plan, const HeldBytes& held);

// The bytes of the plan's graph's constants (each buffer once): they live as long as the plan.
int64_t plan_constant_bytes(const CompiledPlan& plan);

}  // namespace mls
