// The graph of one step, built the one way the trainer compiles it. `mlstudio graph`
// prints it and the editor's teaching views draw it, so what a student sees is the step
// that runs.
//
//   StepOptions o{.training = true, .precision = Precision::F32};
//   Result<StepGraph> s = build_step(std::move(*model), cpu, o);
//   s->stages.front().graph;   // forward + the backward autodiff appended ("input")
//   s->graph();                // after every pass: what CompiledPlan::compile gets
//   s->model.loss;             // handles into s->graph()
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/result.h"
#include "engine/passes/passes.h"
#include "engine/train/mixed_precision.h"
#include "engine/train/model_graph.h"

namespace mls {

struct StepOptions {
  bool training = true;  // false: the evaluation step (logits and loss, no backward)
  Precision precision = Precision::F32;
  LossScaleConfig loss_scale;            // mixed precision: how the loss is scaled
  int64_t checkpoint_budget_bytes = -1;  // >= 0: activation checkpointing after the passes
  bool keep_stages = false;              // keep the graph after every pass, not only the last
  // The debugger's cheap checks (engine/train/breakpoints.h): one more output, [G], a
  // reduction of each gradient, scheduled beside the node that writes it. Finite: its sum,
  // finite exactly when the gradient is (bar an overflow of the sum itself); Norms: its sum of
  // squares as a dot product (one pass, no temporary), also finite exactly when the gradient
  // is, whose square root is the gradient's norm. On the MLP's six gradients the sums cost
  // 7.5 us a step, the dot products 14.5 us, a square-then-sum 25 us (a 0.6 ms step).
  // activity: per ReLU node, the maximum of its output over the batch (and spatial) axes, one
  // value per unit, for the dead-unit check.
  enum class GradCheck : uint8_t { None, Finite, Norms };
  GradCheck grad_check = GradCheck::None;
  bool unit_activity = false;
};

// A ReLU's per-unit maximum over a batch (StepOptions::unit_activity).
struct UnitOutput {
  std::string label;  // the ReLU node's label (its document node)
  Ref value;          // f32 [units] in the step's graph
  int64_t units = 0;
};

struct StepGraph {
  // "input" (the model, autocast, with its backward), then one record per pass. Without
  // keep_stages only the last is kept.
  std::vector<PassRecord> stages;
  // The handles (input, labels, step seed, loss, logits) in the last stage's graph; its
  // `graph` member is left empty (the graph lives in `stages`).
  ModelGraph model;
  Ref loss_scale;  // an f32 [] input the trainer fills with the loss scale (invalid: unscaled)
  Ref check;       // an output that is finite when every gradient is (invalid: no check)
  // Training: outputs are the loss, then the gradients of the trainable params in order
  // (then `check`, then `grad_check`, then the activity values). Evaluation: logits, loss.
  size_t gradients = 0;
  Ref grad_check;                    // StepOptions::grad_check (invalid: not asked)
  std::vector<UnitOutput> activity;  // StepOptions::unit_activity, in graph order

  const Graph& graph() const { return stages.back().graph; }
  Graph& graph() { return stages.back().graph; }
};

// The model as built for `o.training`, the precision's autocast, for training the backward
// of loss * scale for every trainable parameter with the gradients unscaled and checked,
// then the default passes and, when asked, activation checkpointing.
Result<StepGraph> build_step(ModelGraph model, Backend& backend, const StepOptions& o);

}  // namespace mls
