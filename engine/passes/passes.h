// Graph -> Graph passes. Each returns a new graph with the same inputs, parameters
// (same order) and outputs, computing the same values; the verifier runs after each.
// The passes that run kernels or measure plans (constant folding, gradient checkpointing)
// and the default pipeline, which folds constants, sit a layer up in engine/exec
// (default_passes.h, checkpointing.h): passes come before the executors, never after.
//
//   auto dce = [](const Graph& g, Backend&) -> Result<Graph> { return eliminate_dead_code(g); };
//   Result<std::vector<PassRecord>> stages = run_passes(g, cpu, {{"dce", dce}});
//   const Graph& optimised = stages->back().graph;
//   for (auto& s : *stages) std::cout << s.name << ": " << s.graph.nodes().size() << "\n";
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/ir/graph.h"

namespace mls {

// Drops nodes that no output needs.
Graph eliminate_dead_code(const Graph& g);
// Merges nodes that apply the same op with the same attributes to the same inputs.
Graph eliminate_common_subexpressions(const Graph& g);
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
  bool attention = true;         // attention and attention_backward kernels
  bool batch_norm = true;        // batch_norm_act and batch_norm_backward kernels
  bool batch_norm_pool = true;   // a batch_norm_pool_backward kernel
  bool pool_relu = true;         // a max_pool2d_relu_backward kernel
  bool conv_pool = true;         // a conv2d_pool_backward_weight kernel
  static FusionSupport of(const Backend& b);
};
Graph fuse_linear_activation(const Graph& g, const FusionSupport& s = {});
Graph fuse_elementwise(const Graph& g, const FusionSupport& s = {});
// Attention fusion (attention_fusion.cpp), for forward graphs before autodiff (build_step
// runs it there): scaled_dot_product_attention's composite over [B, T, d] operands becomes
// one attention node (engine/ops/attention.h), whose gradient is one attention_backward node
// that recomputes the probabilities instead of keeping them. Backends without both kernels
// (the GPU backends today) keep the composite.
Graph fuse_attention(const Graph& g, const FusionSupport& s = {});
// Batch-norm fusion (norm_fusion.cpp), for forward graphs before autodiff (build_step runs it
// there): batch_norm_train becomes batch_norm_act, with the relu that alone reads its output
// when `with_relu`, so that its gradient is one batch_norm_backward node. Backends without
// both kernels (the GPU backends today) keep batch_norm_train.
Graph fuse_batch_norm(const Graph& g, const FusionSupport& s = {}, bool with_relu = true);
// Pool-gradient fusion (pool_fusion.cpp), for step graphs after autodiff (a default pass): a
// max pool's gradient joins the relu_backward (max_pool2d_relu_backward) or the
// batch_norm_backward of batch_norm_act's y (batch_norm_pool_backward, 2x2 pools with stride
// 2) that alone reads it, where the backend has the kernels (the CPU today). Then a
// convolution's weight gradient of such a relu pool's gradient that only it and the bias sum
// read becomes one conv2d_pool_backward_weight (LeNet's conv1).
Graph fuse_pool_gradients(const Graph& g, const FusionSupport& s = {});

struct PassRecord {
  std::string name;
  Graph graph;
};
using Pass = std::function<Result<Graph>(const Graph&, Backend&)>;
struct NamedPass {
  std::string name;
  Pass run;
};
// The input graph first (as "input"), then the graph after each pass.
Result<std::vector<PassRecord>> run_passes(const Graph& g, Backend& backend, const std::vector<NamedPass>& passes);

}  // namespace mls
