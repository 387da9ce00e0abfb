// What each labelled part of a model (in mlstudio: a document node) does in a trained step:
// its share of the step's kernel time, and statistics of its output on a batch. The editor
// draws them on the canvas after a run; a student sees where the time goes and which ReLUs
// are dead.
//
//   trainer.set_profiling(true);  trainer.fit(...);
//   auto times = time_by_label(**trainer.training_plan(batch));   // per step, forward/backward
//   auto stats = output_stats(cpu, *build(256, false), trainer.params(), batch);
//   stats->at(0).label == "fc1";  stats->at(0).zero_fraction;      // of its last op's output
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/exec/compiled_plan.h"
#include "engine/train/data_source.h"
#include "engine/train/model_graph.h"

namespace mls {

struct LabelTime {
  std::string label;                                 // "" for nodes no layer owns
  double forward_seconds = 0, backward_seconds = 0;  // per step
};
// From a profiled plan's step times; a recomputed forward ("fc1 (recompute)") counts as fc1's
// backward work. In order of the labels' first appearance.
std::vector<LabelTime> time_by_label(const CompiledPlan& plan);

struct OutputStats {
  std::string label;
  Shape shape;
  double mean = 0, std = 0, min = 0, max = 0;
  double zero_fraction = 0;  // exact zeros (a dead ReLU unit gives them for every sample)
};
// Runs the evaluation form of the model on `batch` with `params` (in the graph's order) and
// describes the output of each label's last f32 node: the value a layer hands on.
Result<std::vector<OutputStats>> output_stats(Backend& backend, ModelGraph model,
                                              std::span<const Tensor> params,
                                              const HostBatch& batch);

}  // namespace mls
