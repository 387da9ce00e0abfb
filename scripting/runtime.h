// The state behind one Lua interpreter's `mls` module: the eager session that runs tensor
// ops, the graphs being traced, the generator behind randn and parameter initialisation, and
// the run that mls.log writes to. Lua code never sees this; the bindings reach it through an
// upvalue.
//
//   Runtime rt(cpu::backend());
//   LuaTensor a, b;  a.value = Tensor::from_f32(...);  b.value = ...;
//   Ref ra = rt.eager_ref(a), rb = rt.eager_ref(b);
//   Ref c = add(rt.session, ra, rb);                 // runs now
//   if (rt.session.failed()) report(rt.session.error());
//
// Generations. The eager session keeps every value (and the tape) until it is reset. A
// tensor userdata keeps its own value, plus the Ref it has in the session of its
// generation; once the session is reset (a new generation), the tensor enters the new one
// as a leaf the next time an op reads it. The session is reset after backward (which, as in
// PyTorch, frees the graph), and whenever it has grown past a threshold while no tape entry
// can still be needed: either nothing was recorded, or no tensor that a backward could start
// from (an op output that requires grad) is alive. So a loop that builds and drops tensors
// runs in bounded memory.
#pragma once

#include "nodes/edit.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/train/rng.h"
#include "engine/train/telemetry.h"

#include "engine/core/result.h"
#include "scripting/notebook/cell_output.h"
#include "store/run_store.h"

namespace mls::lua {

// The payload of a tensor userdata.
struct LuaTensor {
  Tensor value;           // the data (eager); undefined for a traced value or once closed
  Ref ref;                // in the session of generation `gen`, or in trace `trace_id`
  uint32_t gen = 0;       // 0: not in any session yet
  uint32_t trace_id = 0;  // > 0: a symbolic value of that trace (no data)
  bool requires_grad = false;
  bool is_leaf = true;  // made by a constructor, not by an op
  bool closed = false;
  bool counted = false;    // counted in Runtime::live_outputs (an op output that requires grad)
  int32_t leaf_slot = -1;  // index in Runtime::grad_leaves (this generation)
  Tensor grad;             // accumulated by backward (leaves)
  ParamInit init;          // parameters: how a traced graph re-initialises them
  int64_t charged = 0;     // bytes counted in Runtime::tensor_bytes for `value`
};

// A graph being recorded from Lua (mls.graph, mls.jit, mls.grad, mls.train). An Emitter,
// so every engine builder records into it; an op that does not type-check records the
// first error and yields placeholders, and the binding that emitted it raises the error.
class Trace final : public Emitter {
 public:
  // Records into its own graph (mls.graph, mls.train) ...
  Trace(uint32_t id, std::string name, Backend& backend);
  // ... or into another emitter (a TracedFunction's graph: mls.jit, mls.grad), type-checking
  // each op before it goes there.
  Trace(uint32_t id, Emitter& external, Backend& backend);

  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override;
  ValueType type_of(Ref r) const override { return target_->type_of(r); }
  Ref constant(const Tensor& value) override;
  void set_scope(const std::string& label) override { target_->set_scope(label); }

  bool owns_graph() const { return target_ == &graph_; }
  Graph& graph() { return graph_; }  // its own graph (empty for an external target)
  std::string value_name(Ref r) const;

  // The Ref of an eager tensor read by a traced op: a parameter when it is a trainable
  // leaf and capture_params is on, a constant otherwise; the same tensor gives the same
  // Ref every time.
  Ref capture(LuaTensor& t);
  // Declares the tensor as a parameter of the graph before anything reads it (mls.train
  // does so for a model's parameters and buffers, in order).
  Ref register_param(LuaTensor& t, const std::string& name, bool trainable);

  uint32_t id;
  std::string error;
  bool training = true;            // what dropout and batch norm do while this trace records
  bool capture_params = true;      // trainable leaves become graph params (else constants)
  Ref step_seed;                   // i64 [1] input for dropout masks, made on first use
  std::vector<LuaTensor*> params;  // the tensors behind graph().params(), in order

 private:
  struct Captured {
    Tensor value;  // keeps the buffer alive, so its address identifies the tensor
    Ref ref;
  };
  Refs placeholders(std::string_view op);
  Captured* find_captured(const Tensor& v);
  Graph graph_;
  Emitter* target_;
  Backend& backend_;
  std::map<std::pair<const Buffer*, size_t>, std::vector<Captured>> captured_;
  Ref placeholder_;
};

class Runtime {
 public:
  explicit Runtime(Backend& backend);
  ~Runtime();

  // The tensor's value in the current session generation (entering it as a leaf if needed).
  Ref eager_ref(LuaTensor& t);
  // Takes the output `r` of the op just run into a fresh userdata payload.
  void adopt_output(LuaTensor& t, Ref r);
  // A userdata is being collected or closed.
  void forget(LuaTensor& t);
  // Called before an op runs: starts a new generation when the session is large and no
  // recorded op can still be needed.
  void before_op();
  // True every reset_retry values while the session is over its threshold with a tape that
  // live tensors may still need: the caller runs a full garbage collection (which finalizes
  // the tensors a loop dropped) and calls before_op() again.
  bool want_collect();
  // Drops the session's values and tape (tensors keep their own values).
  void new_generation();

  // Traces: begin returns the new trace, which is active (ops on its values record into it)
  // until end.
  Trace& begin_trace(const std::string& name);
  Trace& begin_trace(Emitter& external);
  void end_trace(Trace& t);
  Trace* find_trace(uint32_t id);

  Backend& backend;
  EagerSession session;
  uint32_t gen = 1;
  bool grad_enabled = true;
  std::vector<LuaTensor*> grad_leaves;  // leaves that require grad, in this generation
  int64_t live_outputs = 0;             // op outputs that require grad, alive, this generation
  bool gc_hint = false;                 // a counted tensor died: a reset may now be possible
  Rng rng{0};                           // randn, rand, dropout
  // Parameters: the i-th made since mls.manual_seed(s) is initialised from mix_seed(s, i),
  // as the trainer initialises a graph's i-th parameter, so a Lua model and the same model
  // drawn as nodes start from the same weights under the same seed.
  uint64_t seed = 0;
  uint64_t params_made = 0;

  // The experiment store (opened on first use) and the current run that mls.log writes to.
  std::string db_path = "mlstudio-runs.db";
  std::string script_path;  // recorded with the runs a script starts
  std::unique_ptr<store::RunStore> store;
  int64_t run_id = 0;  // 0: none
  int64_t log_step = 0;
  Result<store::RunStore*> open_store();
  // Ends the current run (if any) with `status`.
  void end_run(const std::string& status);

  // Where a script may read or write files; set by the host in a sandbox. Returns the
  // path to use, or an error naming the path and the folder it must be under.
  std::function<Result<std::string>(const std::string& path, bool write)> check_path;
  // The path a binding opens: check_path's answer in a sandbox (links resolved; the error
  // names the path), the path itself otherwise.
  Result<std::string> allowed_path(const std::string& path, bool write) const {
    if (!check_path) return path;
    return check_path(path, write);
  }
  std::string error;  // the message a binding raises after its C++ locals are gone

  // The project a host has open (the editor's document and undo stack), which
  // mls.project.current() edits; null when there is none. `project_path` is its file ("" if
  // never saved); `on_project_edit` lets the host redraw after a script's edit.
  nodes::DocumentHistory* project = nullptr;
  std::string project_path;

  // Set by a host that can stop a running entry (the editor's Stop, Ctrl-C): the hook
  // raises "interrupted" at the next instruction and mls.train stops after its current step.
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled() const { return cancel && cancel->load(std::memory_order_relaxed); }
  // Set while mls.train traces an evaluation plan between epochs: the hook then leaves the Stop
  // to the trainer, which ends the run after its step (recorded as interrupted), instead of
  // raising inside the trace, which failed the run. The limits below still apply.
  bool hold_cancel = false;
  // The limits of the running entry (set by the host). A limit that is hit sets `stop`, its
  // message: the host's hook raises it again at every instruction until the entry ends, so
  // neither pcall nor coroutine.resume can swallow it.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  double time_limit_s = 0;
  bool past_deadline() const { return std::chrono::steady_clock::now() > deadline; }
  std::string stop;
  // The memory cap (0: none) on the Lua heap (counted by the host's allocator) plus the data
  // of the tensors the script holds. charge() counts a tensor's value; false (with `stop`
  // and `error` set to "memory limit of N MiB reached") when it does not fit.
  int64_t memory_limit = 0;
  int64_t lua_bytes = 0;
  int64_t tensor_bytes = 0;
  bool fits(int64_t bytes) const {
    return memory_limit <= 0 || (bytes >= 0 && bytes <= memory_limit - lua_bytes - tensor_bytes);
  }
  void memory_exceeded();
  bool charge(LuaTensor& t);
  void uncharge(LuaTensor& t) {
    tensor_bytes -= t.charged;
    t.charged = 0;
  }

  // `mlstudio lua FILE --resume ID`: the script's first mls.train continues run ID (from its
  // last checkpoint) instead of starting a new one; 0: none.
  int64_t resume_run = 0;
  // The host's live instruments (the editor's Instruments tab): a fresh feed for each
  // mls.train, which the host shows while the run goes on. Unset: none.
  std::function<std::shared_ptr<Telemetry>()> new_telemetry;

  // Where mls.train's start, epoch and end lines go; unset: stderr (with a progress bar on a
  // terminal). The editor's console shows them in its output.
  std::function<void(const std::string&)> report;

  // While a notebook cell runs (scripting/notebook/session.h): where its print, figures
  // (mls.plot) and widgets (mls.ui) go. Null outside a cell: mls.plot writes nothing visible.
  CellOutput* cell_output = nullptr;
  // Widget values the user has set (mls.ui.*: the global name -> its value), which the
  // widget's constructor returns instead of its default when its cell re-runs.
  std::map<std::string, nlohmann::json> widget_values;

  // Tensor objects of collected userdata, kept with the storage of their shapes, so that
  // the next op's result takes one instead of allocating (a tiny op costs tens of ns; a
  // malloc is a good share of that).
  std::vector<Tensor> spare;
  void keep_spare(Tensor&& t) {
    if (spare.size() < 4096) spare.push_back(std::move(t));
  }

  // Thresholds of before_op() (tests lower them).
  size_t reset_values = 2048;
  size_t reset_retry = 2048;

 private:
  std::vector<std::unique_ptr<Trace>> traces_;  // active, innermost last
  uint32_t next_trace_id_ = 1;
  size_t next_reset_try_ = 0;
};

}  // namespace mls::lua
