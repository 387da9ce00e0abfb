// Graph -> Graph passes. Each returns a new graph with the same inputs, parameters
// (same order) and outputs, computing the same values; the verifier runs after each.
//
//   Result<std::vector<PassRecord>> stages = run_passes(g, cpu, default_passes());
//   const Graph& optimised = stages->back().graph;
//   for (auto& s : *stages) std::cout << s.name << ": " << s.graph.nodes().size() << "\n";
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/exec/compiled_plan.h"
#include "engine/ir/graph.h"

namespace mls {

// Drops nodes that no output needs.
Graph eliminate_dead_code(const Graph& g);
// Merges nodes that apply the same op with the same attributes to the same inputs.
Graph eliminate_common_subexpressions(const Graph& g);
// Evaluates nodes whose inputs are all constants (a fill counts) and whose result is small,
// replacing them by constants.
Result<Graph> fold_constants(const Graph& g, Backend& backend);
// Rewrites identities: x*1, x+0, scale(x,1), scale(scale(x,a),b), neg(neg(x)),
// reshape(reshape(x)), same-shape reshape/expand, identity transposes.
Graph simplify_algebra(const Graph& g);
// Mixed precision (autocast.cpp): every f32 matmul becomes matmul_lowp of its operands
// cast to `low` (bf16 or f16), with the same f32 result; all else stays f32 (softmax,
// losses, norms, reductions, convolutions, updates). On a forward graph before autodiff,
// the rules of cast and matmul_lowp then give the backward in the same precision.
Graph autocast(const Graph& g, DType low);
// Fusion (fusion.cpp), for differentiated graphs. matmul/conv2d -> add(bias) -> relu,
// sigmoid, tanh, gelu or silu becomes one linear_act / conv2d_act where nothing else reads
// the intermediates (relu's and leaky_relu's gradients read their output, so training
// graphs qualify). Then each maximal DAG of elementwise nodes of one shape whose intermediates
// nobody else reads becomes one fused_elementwise node (engine/ops/fused.h).
// The passes fuse only into kernels the backend has (FusionSupport::of): a device without a
// linear_act kernel keeps matmul, add and relu apart, each of which it may run.
struct FusionSupport {
  bool linear_act = true, conv2d_act = true, elementwise = true;
  size_t max_inputs = SIZE_MAX;  // of a fused_elementwise node
  static FusionSupport of(const Backend& b);
};
Graph fuse_linear_activation(const Graph& g, const FusionSupport& s = {});
Graph fuse_elementwise(const Graph& g, const FusionSupport& s = {});

struct PassRecord {
  std::string name;
  Graph graph;
};
using Pass = std::function<Result<Graph>(const Graph&, Backend&)>;
struct NamedPass {
  std::string name;
  Pass run;
};
// verify -> dce -> simplify -> fold -> cse -> bias/activation fusion -> elementwise fusion -> dce
std::vector<NamedPass> default_passes();

// Gradient checkpointing (checkpointing.cpp): not a default pass, it trades time for memory.
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
struct CheckpointReport {
  std::string scheme;             // "none (why)", "sqrt(n): shrinking segments", "every 3 layers", ...
  size_t layers = 0;              // label runs in the forward
  std::vector<size_t> segments;   // layers per segment, in order
  size_t recomputed_nodes = 0;    // clones added (the graph grows by exactly this many)
  size_t checkpoints = 0;         // forward values that cross a cut and are kept
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
Result<CheckpointResult> checkpoint_activations(const Graph& g, Backend& backend, int64_t budget_bytes = 0,
                                                const CheckpointPlanOptions& plan_options = {});
// As a NamedPass, for run_passes and `mlstudio graph --passes`.
NamedPass checkpoint_pass(int64_t budget_bytes = 0, CheckpointPlanOptions plan_options = {});

// The input graph first (as "input"), then the graph after each pass.
Result<std::vector<PassRecord>> run_passes(const Graph& g, Backend& backend, const std::vector<NamedPass>& passes);

}  // namespace mls
