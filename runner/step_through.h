// One training step of a project, evaluated value by value for the step-through view: the
// forward pass node by node, then the backward pass, then the optimizer update, every value
// kept, so a student can walk forward and back through it and look at any wire's tensor.
//
//   Result<Project> p = open_project({.path = "resources/examples/fashion-mnist-mlp.mls"});
//   auto st = StepThrough::open(std::move(*p), cpu);     // parameters initialised as a run's
//   (*st)->evaluate(0);                                 // batch 0 of the run's first epoch
//   while ((*st)->step()) {                             // one document node at a time
//     const StepPoint& at = (*st)->current();           // phase, node, the values it made
//     TensorStats s = tensor_stats((*st)->tensor(at.values[0]));
//   }
//   (*st)->step_back();                                 // values are kept: nothing reruns
//   (*st)->next_batch();                                // batch 1, from the updated weights
//
// How it runs: the model is lowered as the trainer lowers it, the backward appended with
// append_backward (the same autodiff the compiled step uses), and the graph is replayed op by
// op on an EagerSession (the engine's kernels, one node at a time, no fusion), so every IR
// value exists; IR node labels are document node ids, which groups the values into points.
// The update is the trainer's: the project's optimizer and schedule, on the gradients shown.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/exec/eager.h"
#include "engine/exec/memory_timeline.h"
#include "engine/ir/graph.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "engine/train/tensor_stats.h"
#include "runner/project.h"

namespace mls::runner {

// Points are in the phases of engine/exec/memory_timeline.h's StepPhase: Forward, Backward,
// Optimizer (the update).

// A wire's statistics: engine/train/tensor_stats.h.
using mls::TensorStats;
using mls::tensor_stats;

// One value shown at a point.
struct StepValue {
  enum class Role {
    Input,          // a batch input (the image, the labels)
    Activation,     // a forward wire's value
    Gradient,       // backward: the gradient flowing into a wire (d loss / d that value)
    ParamGradient,  // backward: d loss / d a parameter
    Parameter,      // update: a parameter after the update
  };
  Role role = Role::Activation;
  std::string caption;  // "fc1 → relu1", "∂loss/∂fc1.weight", "fc1.weight after the update"
  int32_t value = -1;   // the IR value (graph()), -1 for Parameter
  int32_t param = -1;   // ParamGradient and Parameter: index into params()
};

struct StepPoint {
  StepPhase phase = StepPhase::Forward;
  std::string node;               // the document node ("" when none: the backward's seed)
  std::string type;               // its node type ("mls.linear"), "" when none
  std::vector<int32_t> ir_nodes;  // the IR nodes it ran, in order (graph())
  std::vector<StepValue> values;  // what it produced that is used beyond it
  // Placement: where its kernels run. On a GPU, IR nodes whose op has no kernel there run on
  // the host (as the compiled plan and the eager session fall back); `host_ops` names them.
  std::string device;                 // the project's device, "cpu", or "vulkan + cpu"
  std::vector<std::string> host_ops;  // "op at dtype" of the nodes that fall back
};

// A parameter before and after the update.
struct ParamChange {
  std::string name;  // "fc1.weight"
  std::string node;  // the document node that uses it
  Tensor before, after;
  double delta_norm = 0;     // ||after - before||_2
  double weight_norm = 0;    // ||before||_2
  double relative = 0;       // delta_norm / weight_norm (0 when the weight is 0)
  double max_abs_delta = 0;  // max |after - before|
};

class StepThrough {
 public:
  // Initialises the parameters as a run of the project does (its seed); the project's data
  // and device stay with the object.
  static Result<std::unique_ptr<StepThrough>> open(Project project, Backend& backend);

  // Runs the step on batch `batch` (the run's order: epoch batch / batches_per_epoch, with
  // the project's shuffling seed) from the parameters at the start of this step: forward,
  // backward and update, every value kept. The cursor goes before the first point.
  // Evaluating again (another batch) starts from the same parameters and optimizer state.
  Result<void> evaluate(int64_t batch);
  // The next step: from the updated parameters, on batch + 1.
  Result<void> next_batch();

  bool evaluated() const { return !points_.empty(); }
  int64_t batch() const { return batch_; }
  int64_t step_index() const { return step_; }  // optimizer steps taken before this one
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t batch_size() const { return batch_size_; }  // of the evaluated batch
  double loss() const { return loss_; }
  double lr() const { return lr_; }  // the learning rate of this step's update

  // The cursor: -1 before the first point, points().size() - 1 at the last.
  const std::vector<StepPoint>& points() const { return points_; }
  int cursor() const { return cursor_; }
  const StepPoint& current() const { return points_.at(static_cast<size_t>(cursor_)); }
  bool step();       // one point on; false at the end
  bool step_back();  // one point back; false before the first
  // To the last point of the current phase (to the end of the forward from before the start);
  // false when already there at the end.
  bool to_end_of_phase();
  void seek(int cursor);  // -1 .. points().size() - 1
  // Counts for a label: the position of the cursor within its phase (1-based) and the
  // phase's points.
  int position_in_phase() const;
  int phase_size(StepPhase p) const;

  // The graph that ran: the model at this batch size with its backward appended.
  const Graph& graph() const { return graph_; }
  // The tensor of a StepValue (a Parameter: its value after the update).
  const Tensor& tensor(const StepValue& v) const;
  const Tensor& value_tensor(int32_t value) const { return values_.at(static_cast<size_t>(value)); }
  // The IR value of a parameter's gradient (graph outputs 1..), -1 for frozen ones.
  int32_t gradient_value(size_t param) const;
  // Parameters (all, in the graph's order: frozen ones and running statistics included).
  const std::vector<std::string>& param_names() const { return param_names_; }
  const std::vector<Tensor>& params() const { return params_; }  // after this step's update
  // Trainable parameters only: before and after this step's update.
  const std::vector<ParamChange>& changes() const { return changes_; }
  const Project& project() const { return project_; }
  Backend& backend() const { return backend_; }
  // The batch as fed (host copies).
  const HostBatch& host_batch() const { return host_batch_; }

 private:
  StepThrough(Project project, Backend& backend)
      : project_(std::move(project)), backend_(backend) {}
  Result<void> load_batch(int64_t batch);
  void build_points(size_t forward_nodes, const ModelGraph& mg);
  Result<void> update();

  Project project_;
  Backend& backend_;
  TrainConfig config_;
  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<Schedule> schedule_;
  std::vector<std::string> param_names_;
  std::vector<size_t> trainable_;                    // indices into params_
  std::vector<Tensor> params_;                       // current (after the update once evaluated)
  std::vector<Tensor> start_params_;                 // at the start of this step
  std::vector<std::vector<float>> start_opt_state_;  // optimizer state at the start, flat
  int64_t step_ = 0, batch_ = -1, batch_size_ = 0, batches_per_epoch_ = 1;
  int64_t loaded_epoch_ = -1, loaded_next_ = 0;  // where the data source stands
  HostBatch host_batch_;
  double loss_ = 0, lr_ = 0;
  Graph graph_;
  std::vector<int32_t> grad_values_;  // per param: its gradient's IR value or -1
  std::vector<Tensor> values_;        // per IR value
  std::vector<StepPoint> points_;
  std::vector<ParamChange> changes_;
  int cursor_ = -1;
};

}  // namespace mls::runner
