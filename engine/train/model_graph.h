// What a model builder hands the trainer: the graph for one batch size and mode, and the
// handles the trainer feeds and reads.
//
//   ModelBuilder build = [&](int64_t batch, bool training) { return lower(doc, data, batch, training, path); };
//   Result<ModelGraph> m = build(128, true);
//   m->graph.type_of(m->labels).dtype == DType::I64;   // class labels (F32: regression targets)
#pragma once

#include <cstdint>
#include <functional>

#include "engine/core/result.h"
#include "engine/ir/graph.h"

namespace mls {

// Parameters are the graph's params, in order; the non-trainable ones (frozen weights,
// running statistics) get no gradient and no optimizer step.
struct ModelGraph {
  Graph graph;
  Ref input;   // f32 [batch, ...sample]
  Ref labels;  // the targets: i64 [batch] class indices, or f32 [batch, ...] values
  Ref logits;  // the model's output: [batch, classes] logits, or the predicted values
  Ref loss;    // a scalar
  // Optional: an i64 [1] input that the trainer fills with a fresh value every training
  // step (dropout masks), so that one compiled plan serves every step.
  Ref step_seed;
};

// Builds the model for a batch size; `training` false gives the evaluation form (dropout
// off, BatchNorm on its running statistics). Every form has the same parameters.
using ModelBuilder = std::function<Result<ModelGraph>(int64_t batch, bool training)>;

}  // namespace mls
