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
// arena (tagged Activation) at the offset the memory planner chose. An elementwise op
// (OpDef::inplace) writes over an input that nothing reads after it. The schedule is cut
// into waves of independent nodes (engine/exec/wave_schedule.h); a wave's small kernels
// run at once (Backend::launch_concurrent), so liveness is counted in waves: a buffer
// lives from the wave that writes it to the last wave that reads it. Only outputs keep
// their values after run(): an intermediate's bytes are reused, in place or not.
//
// A node the backend has no kernel for runs on the host (the registry's CPU backend) when
// the host has one: the plan copies its inputs to host buffers, runs the host kernel and
// copies its outputs back, each copy a step of its own ("to_host", "to_device") that the
// text form and the op profiler show. fallbacks() lists those nodes (the run warns).
// Constants that live on another backend are copied to the plan's once, at compile time.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/exec/memory_plan.h"
#include "engine/ir/graph.h"

namespace mls {

// A host function run between the plan's kernels: data-parallel training's all-reduce steps
// (engine/train/collective.h). It runs once every value in `after` is written, right after the
// wave that writes the last of them (before any kernel of a later wave), and gets those
// values' tensors in the order given. It is a step like a kernel: `name` is its op and
// `label` its label in the text form (`mlstudio graph --plan`), the op profiler and the trace.
// A plan with hooks never records the step for replay (the host must take part each run).
struct PlanHook {
  std::string name, label;
  Refs after;  // empty: before the first kernel
  std::function<void(std::span<const Tensor* const>)> run;
};

struct PlanOptions {
  Refs outputs;  // default: the graph's outputs
  std::vector<std::pair<Ref, AllocTag>> own_buffers;
  // In-place reuse: the output of an OpDef::inplace op takes the arena buffer of an input
  // of its type that no later wave reads. Results are bit-identical either way.
  bool inplace = true;
  // Waves of independent nodes, whose small kernels run at once (same results, bit for
  // bit). Off: one node per wave, in graph order (the sequential plan).
  bool concurrent = true;
  // How far (in runnable nodes) a node may move ahead of its place in graph order; further
  // would keep more values alive at once (assign_waves, engine/exec/wave_schedule.h).
  int32_t wave_window = 16;
  // Off: plan only (schedule, placements, stats), allocating nothing; such a plan cannot
  // run. The pre-flight estimate (engine/train/preflight.h) sizes steps this way.
  bool allocate = true;
  // Nodes whose label is listed run on the host although the device has their kernels (a
  // project's per-node "device": "cpu"), with the same copies as a fallback.
  std::vector<std::string> host_labels;
  // The kernels' declared workspace (OpRegistry::register_workspace) placed in the arena for
  // its wave. Off: the kernels find their own scratch (unplanned, unseen by the memory
  // view); for comparing how two graphs' activations are placed, which scratch that no pass
  // can shrink would blur.
  bool kernel_workspace = true;
  // Host steps between the kernels (PlanHook), in order.
  std::vector<PlanHook> hooks;
};

struct PlanStats {
  size_t scheduled_nodes = 0;
  size_t skipped_views = 0;     // reshape nodes that cost nothing
  size_t arena_bytes = 0;       // the planned peak of intermediates
  size_t unplanned_bytes = 0;   // one buffer per intermediate instead
  size_t own_buffer_bytes = 0;  // outputs kept in their own buffers
  size_t inplace_steps = 0;     // outputs written over one of their inputs
  size_t waves = 0;
  size_t concurrent_waves = 0;  // waves that run two or more kernels at once
  size_t concurrent_steps = 0;  // the kernels they run at once
  size_t fallback_nodes = 0;    // nodes run on the host: the device has no kernel for them
  size_t placed_nodes = 0;      // nodes run on the host because PlanOptions::host_labels asks
  size_t workspace_bytes = 0;   // the kernels' declared scratch, summed (each lives one wave)
  size_t transfers = 0;         // copies between the device and the host per run
  size_t transfer_bytes = 0;    // their bytes per run
  size_t hooks = 0;             // host steps between the kernels (PlanOptions::hooks)
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
    std::string op, label;  // the node's label ("fc1"), as in the graph
    bool backward = false;
    double seconds = 0;  // summed over the profiled runs
    int64_t runs = 0;
    int32_t node = -1;   // its graph node (-1: a PlanHook)
    int32_t wave = 0;
    double flops = 0;    // per run (op_flops)
    KernelTiming last;   // the last run's span (trace events)
  };
  const std::vector<StepTime>& step_times() const { return step_times_; }
  const PlanStats& stats() const { return stats_; }
  // The nodes run on the host for want of a device kernel, as "op at dtype (label)", in
  // schedule order; placed(): those run there because PlanOptions::host_labels asked.
  const std::vector<std::string>& fallbacks() const { return fallbacks_; }
  const std::vector<std::string>& placed() const { return placed_; }
  // Whether graph node `node` runs on the host (a fallback or placed there).
  bool on_host(size_t node) const { return node < on_host_.size() && on_host_[node]; }
  Backend& backend() const { return *backend_; }
  const Graph& graph() const { return *graph_; }
  // The schedule with each value's placement, for `mlstudio graph --plan` and tests.
  std::string to_text() const;
  // Whether run() replays a recorded step (a device that records command buffers).
  bool replaying() const { return capture_.id >= 0; }
  // Wall time of the profiled runs (kernels that ran at once overlap in step_seconds()).
  double run_seconds() const { return run_seconds_; }
  // For tests: (offset, bytes, first wave, last wave) of every arena value; a value that
  // took an input's buffer in place names it (that input's last wave is this one's first).
  struct Placement {
    Ref value;
    size_t offset, bytes;
    int32_t first, last;
    Ref inplace_of = {};
  };
  const std::vector<Placement>& placements() const { return placements_; }
  // The arena regions of the kernels' declared workspace (OpRegistry::register_workspace):
  // one per step that declares any, alive during its wave only.
  struct WorkspacePlacement {
    int32_t node;
    size_t offset, bytes;
    int32_t wave;
  };
  const std::vector<WorkspacePlacement>& workspaces() const { return workspaces_; }
  // The wave of every graph node (-1: not scheduled).
  const std::vector<int32_t>& node_waves() const { return node_wave_; }

  CompiledPlan(CompiledPlan&&) = default;
  CompiledPlan& operator=(CompiledPlan&&) = default;

 private:
  CompiledPlan() = default;
  // Which in-place op outputs take an input's buffer: group[v] becomes the first value of
  // the chain whose buffer v shares (inplace_of_ and stats_ too).
  void choose_inplace(const std::function<size_t(int32_t)>& root, const std::vector<int32_t>& last,
                      const std::vector<bool>& is_output, std::vector<size_t>& group);
  void plan_batches(bool concurrent);  // run_order_ and batches_ from the waves
  void materialise();  // builds tensors and steps once bindings are complete

  struct Step {
    KernelFn fn = nullptr;
    const Attrs* attrs = nullptr;
    std::vector<const Tensor*> ins;
    std::vector<Tensor*> outs;
    Backend* backend = nullptr;  // where it runs (the host for a fallback and its copies)
    int32_t entry = -1;          // its schedule entry
    const char* transfer = nullptr;  // "to_host" / "to_device" for a copy, else null
    Buffer* workspace = nullptr;     // the kernel's declared scratch (arena or host buffer)
    size_t workspace_offset = 0, workspace_bytes = 0;
    int32_t hook = -1;               // a PlanHook's index: run on the host, not launched
  };

  // Steps in run order: batches_ cut them into runs of one kernel or of kernels run at once.
  struct Batch {
    uint32_t begin, end;
    bool concurrent;
  };

  std::shared_ptr<const Graph> graph_;  // a copy: the plan outlives the caller's graph
  Backend* backend_ = nullptr;
  std::vector<int32_t> schedule_;     // node indices, by wave
  std::vector<int32_t> wave_;         // per schedule entry
  std::vector<int32_t> node_wave_;    // per graph node
  // Schedule entries that run a kernel, in run order; -1 - h for hook h.
  std::vector<int32_t> run_order_;
  std::vector<Batch> batches_;        // over run_order_ (and steps_)
  std::vector<int32_t> inplace_of_;   // value -> the input whose buffer it took (-1: none)
  std::vector<int32_t> alias_of_;     // value -> the value whose storage it views (-1: none)
  std::vector<int8_t> placement_;     // 0 external, 1 arena, 2 own buffer, 3 const, 4 alias
  std::vector<size_t> offset_;        // arena offsets
  std::vector<Tensor> slots_;         // one per graph value
  std::vector<bool> bound_;
  std::shared_ptr<Buffer> arena_;
  bool allocated_ = true;
  Backend* host_ = nullptr;             // where fallback nodes run
  std::vector<bool> on_host_;           // per graph node: runs on the host
  std::vector<std::string> fallbacks_, placed_;
  // Per schedule entry of a node on the host: its inputs' and outputs' host copies.
  std::vector<std::vector<Tensor>> host_ins_, host_outs_;
  std::vector<Batch> step_batches_;     // batches_ over steps_ (a fallback adds copies)
  std::vector<Step> steps_;             // in run order
  std::vector<KernelCall> calls_;       // one per step
  std::vector<KernelLaunch> launches_;  // one per step
  std::vector<Placement> placements_;
  std::vector<WorkspacePlacement> workspaces_;
  std::vector<int32_t> workspace_of_;  // schedule entry -> its entry in workspaces_ (-1: none)
  std::vector<std::shared_ptr<Buffer>> host_workspace_;  // per schedule entry run on the host
  PlanStats stats_;
  bool dirty_ = true;
  bool profiling_ = false;
  // The step recorded once on a device that can replay it (Backend::begin_capture): run()
  // replays it while nothing is re-bound and profiling is off.
  struct Capture {
    Backend* backend = nullptr;
    int id = -1;
    Capture() = default;
    Capture(Capture&& o) noexcept : backend(o.backend), id(o.id) { o.id = -1; }
    Capture& operator=(Capture&& o) noexcept {
      if (this != &o) {
        reset();
        backend = o.backend;
        id = o.id;
        o.id = -1;
      }
      return *this;
    }
    ~Capture() { reset(); }
    void reset() {
      if (id >= 0) backend->release_capture(id);
      id = -1;
    }
  };
  Capture capture_;
  bool capture_tried_ = false;
  void launch_steps();
  void run_hook(size_t step);
  std::vector<PlanHook> hooks_;
  std::vector<int32_t> hook_wave_;                    // per hook: runs after this wave (-1: first)
  std::vector<std::vector<const Tensor*>> hook_args_;  // per hook: its `after` tensors
  std::vector<StepTime> step_times_;  // one per entry of steps_
  std::vector<KernelTiming> timings_;  // where the launches write, one per entry of steps_
  double run_seconds_ = 0;
};

}  // namespace mls
