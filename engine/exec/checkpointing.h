// Gradient checkpointing: not a default pass, it trades time for memory. It sits in exec,
// not passes, because a budget is met by measuring candidate plans (CompiledPlan::compile,
// nothing allocated).
//
// The forward (the nodes before the first backward node) is cut into segments of whole
// "layers" (runs of nodes with one label); values that cross a cut are kept, and the other
// forward values that the backward reads are recomputed from them: clones labelled
// "fc3 (recompute)" are emitted once per segment, right before the first backward node that
// needs it, and the backward reads the clones. The last segment is never recomputed, nor are
// Update ops (running statistics) or nodes that read what an Update op mutates. Graphs
// without backward nodes come back unchanged.
//
//   auto r = checkpoint_activations(g, backend, 4 << 20);  // planned arena <= 4 MiB
//   if (!r) return r.error();      // below the floor: the message names the smallest arena
//   std::cout << r->report.summary() << "\n";  // "gradient checkpointing: budget ...: ..."
//   g = std::move(r->graph);
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/exec/compiled_plan.h"
#include "engine/passes/passes.h"

namespace mls {

struct CheckpointReport {
  std::string scheme;  // "none (why)", "sqrt(n): shrinking segments", "every 3 layers", ...
  size_t layers = 0;   // label runs in the forward
  std::vector<size_t> segments;            // layers per segment, in order
  size_t recomputed_nodes = 0;             // clones added (the graph grows by exactly this many)
  size_t checkpoints = 0;                  // forward values that cross a cut and are kept
  size_t peak_before = 0, peak_after = 0;  // planned arena bytes (0: not measured)
  std::string summary() const;
};
struct CheckpointResult {
  Graph graph;
  CheckpointReport report;
};
// Which outputs keep their own buffers when a candidate plan is measured (as the trainer
// compiles its step). Default: every output computed by a node, tagged Gradient.
using CheckpointPlanOptions = std::function<PlanOptions(const Graph&)>;
// Segments of `layers` layers each (the last one shorter); no measuring.
Result<CheckpointResult> checkpoint_every(const Graph& g, size_t layers);
// budget_bytes 0: the sqrt(n) scheme, about sqrt(2n) segments shrinking toward the loss
// (k, k - 1, ..., 1 layers: the checkpoints alive while a segment is recomputed plus the
// segment stay alike), kept only if it lowers the planned arena. budget_bytes
// > 0: the segmentation with the fewest recomputed nodes whose planned arena (measured with
// CompiledPlan::compile, nothing allocated) fits; the graph unchanged when it fits already;
// an error naming the smallest achievable arena when no segmentation fits.
Result<CheckpointResult> checkpoint_activations(const Graph& g, Backend& backend,
                                                int64_t budget_bytes = 0,
                                                const CheckpointPlanOptions& plan_options = {});
// As a NamedPass, for run_passes and `mlstudio graph --passes`.
NamedPass checkpoint_pass(int64_t budget_bytes = 0, CheckpointPlanOptions plan_options = {});

}  // namespace mls
