// The static executor: Graph -> schedule -> memory plan -> a plan that runs with no
// allocation.
//
//   PlanOptions opt;
//   opt.own_buffers = {{grad_w1, AllocTag::Gradient}};     // outputs that outlive the step
//   Result<CompiledPlan> plan = CompiledPlan::compile(g, backend, opt);
//   plan->bind(x, x_tensor);  plan->bind(w1, w1_tensor);   // inputs and parameters
//   plan->run();                                           // no allocation once bound
//   plan->tensor(loss).to_f64()[0];
//
// Only the nodes that the outputs need are scheduled (dead code never runs). Views
// (reshape) alias their input instead of copying. Every other intermediate lives in one
// arena (tagged Activation) at the offset the memory planner chose.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/exec/memory_plan.h"
#include "engine/ir/graph.h"

namespace mls {

struct PlanOptions {
  Refs outputs;  // default: the graph's outputs
  std::vector<std::pair<Ref, AllocTag>> own_buffers;
};

struct PlanStats {
  size_t scheduled_nodes = 0;
  size_t skipped_views = 0;     // reshape nodes that cost nothing
  size_t arena_bytes = 0;       // the planned peak of intermediates
  size_t unplanned_bytes = 0;   // one buffer per intermediate instead
  size_t own_buffer_bytes = 0;  // outputs kept in their own buffers
};

class CompiledPlan {
 public:
  static Result<CompiledPlan> compile(const Graph& g, Backend& backend, const PlanOptions& opt = {});

  // Binds a graph input or parameter to a tensor of its type (the tensor is shared, not copied).
  Result<void> bind(Ref value, const Tensor& t);
  // Runs the schedule. Asserts that every input and parameter it reads is bound.
  void run();
  const Tensor& tensor(Ref r) const;
  // With profiling on, run() times every kernel (synchronising after each, so devices with
  // queues report kernel time, not submission time) and adds it to step_seconds().
  void set_profiling(bool on);
  struct StepTime {
    std::string op, label;
    double seconds = 0;
    int64_t runs = 0;
  };
  const std::vector<StepTime>& step_times() const { return step_times_; }
  const PlanStats& stats() const { return stats_; }
  // The schedule with each value's placement, for `mlstudio graph --plan` and tests.
  std::string to_text() const;
  // For tests: (offset, bytes, first step, last step) of every arena value.
  struct Placement {
    Ref value;
    size_t offset, bytes;
    int32_t first, last;
  };
  const std::vector<Placement>& placements() const { return placements_; }

  CompiledPlan(CompiledPlan&&) = default;
  CompiledPlan& operator=(CompiledPlan&&) = default;

 private:
  CompiledPlan() = default;
  void materialise();  // builds tensors and steps once bindings are complete

  struct Step {
    KernelFn fn = nullptr;
    const Attrs* attrs = nullptr;
    std::vector<const Tensor*> ins;
    std::vector<Tensor*> outs;
  };

  std::shared_ptr<const Graph> graph_;  // a copy: the plan outlives the caller's graph
  Backend* backend_ = nullptr;
  std::vector<int32_t> schedule_;     // node indices
  std::vector<int32_t> alias_of_;     // value -> the value whose storage it views (-1: none)
  std::vector<int8_t> placement_;     // 0 external, 1 arena, 2 own buffer, 3 const, 4 alias
  std::vector<size_t> offset_;        // arena offsets
  std::vector<Tensor> slots_;         // one per graph value
  std::vector<bool> bound_;
  std::shared_ptr<Buffer> arena_;
  std::vector<Step> steps_;
  std::vector<Placement> placements_;
  PlanStats stats_;
  bool dirty_ = true;
  bool profiling_ = false;
  std::vector<StepTime> step_times_;  // one per entry of steps_
};

}  // namespace mls
