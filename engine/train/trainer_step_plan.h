// The trainer's compiled step for one batch size and mode: internal to engine/train
// (trainer.cpp runs it, trainer_debug.cpp reads the debugger's outputs from it).
#pragma once

#include <optional>
#include <vector>

#include "engine/train/step_graph.h"
#include "engine/train/trainer.h"

namespace mls {

struct Trainer::StepPlan {
  ModelGraph mg;
  std::optional<CompiledPlan> plan;
  Tensor x, y, seed;
  std::vector<Tensor> grads;  // of the trainable parameters, in order
  Tensor scale;               // mixed precision: the loss scale the step multiplies the loss by
  Ref check;                  // and its last output, finite when every gradient is
  Ref grad_check;             // the debugger: each gradient's sum, or sum of squares ([G])
  std::vector<UnitOutput> activity;  // the debugger: each ReLU's per-unit maximum
  std::optional<MemoryTimeline> timeline;  // traces: the memory counters
  // Data-parallel (Trainer::set_collective): the gradient buckets' host copies, summed over the
  // ranks by the plan's all-reduce steps, and the step's few extra sums (loss, check, stop).
  struct Bucket {
    std::vector<size_t> grads;  // indices into grads, in the order the backward pass writes them
    std::vector<float> host;
  };
  std::vector<Bucket> buckets;
  std::vector<float> extras;
  int64_t input_bytes() const {
    int64_t b = 0;
    for (const Tensor* t : {&x, &y, &seed, &scale}) b += t->defined() ? static_cast<int64_t>(t->nbytes()) : 0;
    return b;
  }
};

}  // namespace mls
