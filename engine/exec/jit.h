// Tracing JIT: a function written against Emitter& (the same code runs eagerly) is traced
// into a Graph once per input signature, optimised by the pass pipeline, compiled into a
// CompiledPlan and cached; later calls with that signature bind and run the plan.
//
//   auto layer = [](Emitter& e, std::span<const Ref> in) {
//     return Refs{relu(e, add(e, matmul(e, in[0], in[1]), in[2]))};
//   };
//   TracedFunction f(cpu, layer, {.name = "layer"});
//   Result<std::vector<Tensor>> y = f({x, w, b});   // traces, optimises, compiles, runs
//   y = f({x2, w, b});                               // same dtypes and shapes: the cached plan
//   f.stats();                                       // {traces 1, hits 1, entries 1}
//   std::cout << f.graph_text();                     // what the trace recorded
//
//   // With gradients: output 0 must be a scalar; the backward is traced into the same plan.
//   Result<TracedCall> r = f.call({x, w, b}, {false, true, true});
//   r->outputs[0];  r->grads[0];  r->grads[1];       // d out0/dw, d out0/db (inputs in order)
//
// The signature (the cache key) is every input's dtype and shape, and which inputs require
// grad. What a trace records, and what it cannot:
//  - One path. The function runs on a Graph, where values have types but no contents, so it
//    cannot read a tensor's data (Emitter offers no way to), and control flow that depends on
//    data must stay outside, in eager code. Branches on shapes and dtypes are fine: they are
//    part of the key. Anything else the function reads while tracing (a flag in its closure,
//    a host counter) is frozen: later calls with the same signature take the first path.
//    clear() forgets every trace.
//  - Constants. A tensor the function captures enters through Emitter::constant() and becomes
//    a graph constant holding a copy made at trace time: changing the captured tensor later
//    does not change the traced function (clear() to pick up new contents). Numbers passed as
//    attributes (scale(e, x, 0.5)) are frozen the same way.
//  - Type errors in the function assert while tracing, as on any Emitter.
// Lifetime: results are copies owned by the caller. The plan's own tensors live in its arena
// and are overwritten by the next call, so none of them is handed out. Inputs are bound, not
// copied: each plan keeps a reference to the last inputs it ran on until its next call.
// Not thread-safe: one TracedFunction per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/core/tensor.h"
#include "engine/exec/compiled_plan.h"
#include "engine/ir/emitter.h"

namespace mls {

struct TraceOptions {
  std::string name = "traced";  // the graph's name in graph_text()
  bool optimize = true;         // run default_passes() before compiling
};

struct TraceStats {
  int64_t traces = 0;  // calls that traced and compiled (cache misses)
  int64_t hits = 0;    // calls that ran a cached plan
  size_t entries = 0;  // cached plans, one per signature
};

// The result of one call: the function's outputs, then (with gradients) d outputs[0] / d
// input for each input that requires grad, in input order.
struct TracedCall {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;
};

class TracedFunction {
 public:
  using Fn = std::function<Refs(Emitter&, std::span<const Ref>)>;

  TracedFunction(Backend& backend, Fn fn, TraceOptions options = {});
  ~TracedFunction();
  TracedFunction(TracedFunction&&) noexcept;
  TracedFunction& operator=(TracedFunction&&) noexcept;

  // Outputs only (no input requires grad).
  Result<std::vector<Tensor>> operator()(std::span<const Tensor> inputs);
  Result<std::vector<Tensor>> operator()(std::initializer_list<Tensor> inputs) {
    return (*this)(std::span<const Tensor>(inputs.begin(), inputs.size()));
  }
  // requires_grad: empty (none) or one flag per input.
  Result<TracedCall> call(std::span<const Tensor> inputs, const std::vector<bool>& requires_grad = {});
  Result<TracedCall> call(std::initializer_list<Tensor> inputs, const std::vector<bool>& requires_grad = {}) {
    return call(std::span<const Tensor>(inputs.begin(), inputs.size()), requires_grad);
  }

  const TraceStats& stats() const { return stats_; }
  // The graph of the last call's signature as traced (optimized = false) or as compiled
  // after the passes; the plan with its memory placement. Empty before the first call.
  std::string graph_text(bool optimized = false) const;
  std::string plan_text() const;
  // Forgets every trace: the next call traces again (stats are kept).
  void clear();

 private:
  struct Entry;
  Result<Entry*> entry_for(std::span<const Tensor> inputs, const std::vector<bool>& requires_grad);
  Result<std::unique_ptr<Entry>> trace(std::span<const Tensor> inputs, const std::vector<bool>& requires_grad);

  Backend* backend_;
  Fn fn_;
  TraceOptions options_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;
  TraceStats stats_;
};

}  // namespace mls
