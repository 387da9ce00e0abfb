// The first node at fault: one training step re-run op by op with every value kept, checked
// for NaN and infinities in execution order. The trainer calls it when a breakpoint fires
// (engine/train/breakpoints.h), from the parameters the failing step started from; tests call
// it directly.
//
//   FaultQuery q{.backend = &cpu, .build = &builder, .params = trainer.params(),
//                .batch = &batch, .step_seed = seed};
//   Result<std::optional<FaultSite>> f = find_first_fault(q);
//   if (*f) std::cout << (*f)->label << " " << (*f)->op << "\n";   // "fc2", "matmul"
//
// What "first" means: the batch's inputs, then the parameters (a previous update may have
// made one non-finite), then the forward nodes in graph order, then the backward nodes that
// append_backward wrote (the same autodiff the compiled step uses), in their order. The step
// is the model as built for training with its backward appended, before any pass (no fusion),
// so every document node's ops exist as values. A node whose inputs are all finite and whose
// output is not is the one at fault; the report carries its operands' ranges so a person sees
// whether it overflowed (huge finite inputs) or made a NaN from finite ones (0 * inf, log 0).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/core/tensor.h"
#include "engine/train/breakpoints.h"
#include "engine/train/data_source.h"
#include "engine/train/mixed_precision.h"
#include "engine/train/model_graph.h"

namespace mls {

struct FaultQuery {
  Backend* backend = nullptr;         // where the step runs (the run's device)
  const ModelBuilder* build = nullptr;
  std::span<const Tensor> params;     // in the graph's order, as the step started
  const HostBatch* batch = nullptr;
  int64_t step_seed = 0;              // the failing step's (dropout masks)
  Precision precision = Precision::F32;
};

// nullopt: every value of the step is finite (a spike, or a gradient whose square overflowed).
Result<std::optional<FaultSite>> find_first_fault(const FaultQuery& q);

// One paragraph for a person: "the first non-finite value of step 12 is the output of fc2
// (matmul, forward): 3 inf, 0 nan of [128,10] ...; its inputs were finite: relu1 max |x| ...".
std::string describe_fault(const FaultSite& f, int64_t step);

}  // namespace mls
