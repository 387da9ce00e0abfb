// Breakpoints in training: the run pauses when a step goes wrong, before its update, and says
// where. Armed per run (`--break nan,spike:3,dead-relu:0.9,grad-norm:1e3`, the editor's Debug
// menu, Lua's `mls.train{breaks = "nan"}`).
//
//   Result<Breakpoints> b = parse_breakpoints("nan,spike:3");
//   TrainConfig c;  c.breaks = *b;               // the trainer checks every step
//   Result<TrainResult> r = trainer.fit(in);
//   if (r->breakpoint) std::cerr << r->breakpoint->message << "\n";   // names node, op, step
//
// How it stays cheap: the training step's graph gets one extra output, the sum of squares of
// each gradient ([G], one per trainable parameter), reduced where each gradient is written;
// its values are finite exactly when every gradient is (bar an overflow of a square, itself
// a reason to stop) and give each layer's gradient norm. The loss is read every step anyway.
// A spike is the loss against the running median of the last `window` losses. Dead ReLUs need
// each ReLU's per-unit maximum over the batch, read only when that breakpoint is armed. When
// one fires, the trainer stops before the update (the parameters are those the step started
// from) and re-runs the step with every wire kept (engine/train/fault_finder.h) to name the
// first node at fault, in execution order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/train/tensor_stats.h"

namespace mls {

struct Breakpoints {
  bool nan = false;          // a NaN or Inf in the loss, a gradient or a parameter
  double spike = 0;          // > 0: the loss exceeds spike × the running median
  double dead_relu = 0;      // > 0: this share of a ReLU layer's units never active over a window
  double grad_norm_max = 0;  // > 0: a parameter's gradient norm above it (exploding)
  double grad_norm_min = 0;  // > 0: below it for `window` steps in a row (vanishing)
  int64_t window = 50;       // steps: the spike's median, dead units, vanishing gradients
  bool any() const {
    return nan || spike > 0 || dead_relu > 0 || grad_norm_max > 0 || grad_norm_min > 0;
  }
};

// "nan,spike:3,dead-relu:0.9,grad-norm:1e3[:1e-7],window:100" or "none" (nothing armed).
// Defaults: spike 10, dead-relu 0.9, grad-norm 1e3. The message names the bad part.
Result<Breakpoints> parse_breakpoints(const std::string& text);
// The armed breakpoints in the same form ("" when none).
std::string breakpoints_text(const Breakpoints& b);

// The first value at fault in a re-run of the failing step (engine/train/fault_finder.h).
struct FaultSite {
  enum class Phase { Input, Parameter, Forward, Backward };
  Phase phase = Phase::Forward;
  std::string label;   // the document node ("fc1"); a parameter's name for Parameter; "" none
  std::string op;      // the IR op that made it ("matmul"); "" for inputs and parameters
  int32_t node = -1;   // its IR node in the re-run graph (-1: an input or parameter)
  int32_t value = -1;  // the IR value
  // Its statistics: non-finite counts by kind, the first one's index, and the finite
  // elements' range (a value that overflowed next).
  TensorStats stats;
  std::vector<std::string> inputs;  // "fc1.weight: max |x| 3.1e+37", "x: 2 nan"
};
const char* phase_name(FaultSite::Phase p);  // "input", "parameter", "forward", "backward"

// What stopped a run.
struct BreakHit {
  enum class Kind { NonFinite, Spike, DeadRelu, GradNormHigh, GradNormLow };
  Kind kind = Kind::NonFinite;
  int64_t step = 0;   // the step that failed, numbered from 1 as the loss curve is (its state: step - 1 steps done)
  int64_t epoch = 0;  // counts from 1
  int64_t batch = 0;  // within the epoch, from 0
  double loss = 0;
  double threshold = 0;  // what it crossed (spike: k × median; dead share; norm bound)
  double observed = 0;   // the loss, the dead share, the gradient norm
  std::string label;     // the layer (document node) or parameter named by a layer breakpoint
  std::optional<FaultSite> fault;  // NonFinite (and a spike when the re-run found one)
  std::string message;   // one paragraph for a person: names the node, op, step and values
};
const char* break_kind_name(BreakHit::Kind k);  // "nan", "spike", "dead-relu", "grad-norm"

}  // namespace mls
