// One training step of a project on several devices, each compared node by node with a float64
// reference computed on the host: which kernel makes a GPU run drift from the CPU run.
//
//   Result<Project> p = open_project({.path = "resources/examples/fashion-mnist-mlp.mls"});
//   CompareOptions o;  o.devices = {"cpu", "vulkan"};          // o.start: a checkpoint's weights
//   Result<CompareReport> r = compare_devices(*p, o);
//   for (const DeviceCompare& d : r->devices) {
//     if (!d.ran) say(d.device + ": " + d.status);              // "not in this build (available:
//     cpu)" for (const NodeDiff& n : d.nodes)                          // execution order
//       say(n.label, step_phase_name(n.phase), n.chained.max_ulps, n.alone.max_ulps);
//   }
//   std::string table = format_compare_table(*r, {.threshold = 1e-4});
//
// How: the model is lowered for training and its backward appended with append_backward (no
// passes, as the trainer's eager path and runner/step_through.cpp do). The reference runs that
// graph node by node with each op's float64 reference (OpDef::reference), each node fed the
// float64 values of its inputs: the exact computation, not a device's rounding. Each device
// then runs the same graph on an EagerSession from the same weights (f32) and the same batch,
// every value kept, and each IR node's outputs are compared with the reference's:
//  - `chained`: the device fed its own upstream values, the difference a run sees (its own
//    kernel's error plus everything that reached it from upstream);
//  - `alone`: the same IR node fed the reference's inputs rounded to their dtype (f32), on the
//    device: its kernel's own error only.
// A kernel that is wrong shows a large `alone`; ordinary rounding growth shows `alone` near an
// ulp or two everywhere and `chained` growing along the graph.
// Nodes are document nodes (IR labels are document node ids), forward and backward apart; a
// node's figures are the largest over the IR nodes it ran and their outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/exec/memory_timeline.h"  // StepPhase
#include "engine/train/checkpoint.h"
#include "runner/project.h"

namespace mls::runner {

// Differences of a device's values from the float64 reference, the largest over elements.
struct DiffStats {
  double max_abs = 0;    // |device - reference|
  double max_rel = 0;    // max_abs / max |reference| of the same tensor (the tensor's scale, so a
                         // value near 0 does not blow it up); max_abs when the reference is all 0
  double max_ulps = 0;   // f32 ulps between the device's value and the reference rounded to f32
                         // (floating values only); a non-finite device value: infinity. An
                         // element that cancels to near 0 can be millions of ulps off (a sign
                         // flip at 1e-12 is ~1e9 ulps): rank by max_rel, read ulps beside it
  int64_t elements = 0;  // compared
  bool finite = true;    // every device value finite
  std::string worst;     // the IR value with the largest max_rel: "op#node out k [index]"
  void merge(const DiffStats& o);  // the largest of both (worst follows max_rel)
};

// One document node in one phase on one device.
struct NodeDiff {
  int order = 0;      // position in execution order (the device's rows share it)
  std::string label;  // the document node ("fc1"); "(seed)" for the backward's seed
  std::string type;   // its node type ("mls.linear"), "" when none
  StepPhase phase = StepPhase::Forward;  // Forward or Backward
  std::vector<std::string> ops;          // the IR ops it ran, in order ("matmul", "add")
  DiffStats chained;                     // fed the device's own upstream values
  DiffStats alone;                       // fed the reference's inputs (the kernel's own error)
  std::vector<std::string> host_ops;     // ops that ran on the host (the device has no kernel)
};

// A trainable parameter's gradient (also inside its node's backward row).
struct ParamGradDiff {
  std::string param;  // "fc1.weight"
  std::string node;   // the document node whose backward computes it
  DiffStats chained, alone;
};

struct DeviceCompare {
  std::string device;                 // as asked: "cpu", "vulkan", "cuda", "vulkan:1"
  bool ran = false;                   // false: the build or the machine lacks it; `status` says why
  std::string status;                 // the backend's name when it ran, else the reason it did not
  double loss = 0;                    // the step's loss on this device
  std::vector<NodeDiff> nodes;        // execution order: forward, then backward
  std::vector<ParamGradDiff> params;  // the graph's trainable parameters, in order
};

struct CompareReport {
  std::string project;  // the project's path
  std::string start;    // "the project's initialisation (seed 42)", "checkpoint F (step 180)"
  int64_t step = 0;     // optimizer steps taken before this one
  int64_t batch = 0;    // the batch of the run's order that was fed
  int64_t batch_size = 0;
  double reference_loss = 0;           // float64
  std::vector<DeviceCompare> devices;  // in the order asked
};

struct CompareOptions {
  std::vector<std::string> devices{"cpu", "vulkan", "cuda"};
  int64_t batch_size = 0;  // 0: the project's
  int64_t batch = -1;      // -1: the batch the run takes next (0, or the checkpoint's step)
  // Weights to start from (a run's checkpoint, as Trainer::restore takes it); null: the
  // project's initialisation (its seed).
  const Checkpoint* start = nullptr;
  std::string start_name;  // how the report names `start` (the file)
  // > 0: first train this many steps on the CPU as a run of the project does (its compiled
  // step, schedule and data order), then compare the next step: a run's state mid-epoch
  // without a checkpoint. From the initialisation only.
  int64_t advance = 0;
  bool kernel_alone = true;  // false: skip the `alone` run (half the time)
};

// Errors: a device name that is not one (an unknown name; a known device this build or machine
// lacks is a DeviceCompare with ran = false), a checkpoint that does not fit the model, a
// project without training data, a failing kernel (naming node and op).
Result<CompareReport> compare_devices(Project& project, const CompareOptions& o);

// The row of `label` in `phase` on `d`, or nullptr.
const NodeDiff* find_node(const DeviceCompare& d, const std::string& label, StepPhase phase);

// What the editor paints by, and the table's threshold compares.
enum class DiffMetric { Abs, Rel, Ulps };
double diff_value(const DiffStats& s, DiffMetric m);

struct TableOptions {
  double threshold = 0;  // > 0: rows whose chained or alone difference (metric) exceeds it get '!'
  DiffMetric metric = DiffMetric::Rel;
  int summary = 5;  // the largest rows listed after each device's table
};
// A table per device in execution order, then the largest differences (chained and alone).
std::string format_compare_table(const CompareReport& r, const TableOptions& t = {});
std::string compare_json(const CompareReport& r);  // one line

}  // namespace mls::runner
