#include "engine/train/step_graph.h"

#include <algorithm>

#include "engine/autodiff/autodiff.h"
#include "engine/core/check.h"
#include "engine/exec/checkpointing.h"
#include "engine/exec/default_passes.h"
#include "engine/ops/layout.h"
#include "engine/ops/math.h"

namespace mls {

namespace {

// Attention and batch-norm fusion run before autodiff (the backward is then the fused ops'
// own). The rewrite keeps inputs (in order) and outputs, so loss and logits ride along as
// outputs. `keep_relus`: the unit-activity probes below look for the model's relu nodes.
void fuse_model_forward(ModelGraph& mg, const Backend& backend, bool keep_relus) {
  const FusionSupport support = FusionSupport::of(backend);
  if (!support.attention && !support.batch_norm) return;
  Graph& g = mg.graph;
  const Refs saved = g.outputs();
  Refs outs{mg.loss, mg.logits.valid() ? mg.logits : mg.loss};
  outs.insert(outs.end(), saved.begin(), saved.end());
  g.set_outputs(outs);
  Graph fused = fuse_batch_norm(fuse_attention(g, support), support, !keep_relus);
  auto input = [&](Ref r) {
    if (!r.valid()) return Ref{};
    const auto i = static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), r) -
                                       g.inputs().begin());
    MLS_CHECK(i < g.inputs().size(), "fuse_model_forward: a model handle is not a graph input");
    return fused.inputs()[i];
  };
  mg.input = input(mg.input);
  mg.labels = input(mg.labels);
  mg.step_seed = input(mg.step_seed);
  mg.loss = fused.outputs()[0];
  if (mg.logits.valid()) mg.logits = fused.outputs()[1];
  fused.set_outputs(Refs(fused.outputs().begin() + 2, fused.outputs().end()));
  mg.graph = std::move(fused);
}

}  // namespace

Result<StepGraph> build_step(ModelGraph mg, Backend& backend, const StepOptions& o) {
  autocast_model(mg, o.precision);    // mixed precision: products in bf16/f16 (F32: no change)
  // where the backend has the fused attention and batch-norm kernels
  fuse_model_forward(mg, backend, o.training && o.unit_activity);
  Graph& g = mg.graph;
  StepGraph s;
  Refs outs;
  Ref scale_input, check_sum, grad_check;
  std::vector<UnitOutput> activity;
  if (o.training && o.unit_activity) {
    // Before the backward is appended: the model's own ReLUs only.
    const size_t forward_nodes = g.nodes().size();
    for (size_t i = 0; i < forward_nodes; ++i) {
      const Node& n = g.nodes()[i];
      if (n.op->name != "relu") continue;
      const Ref y = n.outputs[0];
      const Shape shape = g.type_of(y).shape;
      if (shape.size() < 2) continue;
      // Units are the last axis of a dense layer's [batch, ..., features] output and the
      // channels of a convolution's [batch, channels, h, w].
      // A convolution's spatial axes first (contiguous, one cheap pass), then the batch.
      Ref yf = g.type_of(y).dtype == DType::F32 ? y : cast(g, y, DType::F32);
      const bool conv = shape.size() == 4;
      if (conv) yf = max(g, yf, {2, 3}, false);  // [batch, channels]
      std::vector<int64_t> axes;
      const size_t rank = conv ? 2 : shape.size();
      for (size_t a = 0; a + 1 < rank; ++a) axes.push_back(static_cast<int64_t>(a));
      activity.push_back({n.label, max(g, yf, axes, false), conv ? shape[1] : shape.back()});
    }
  }
  if (o.training) {
    const LossScaler scaler(o.precision, o.loss_scale);
    Refs wrt;  // frozen parameters and running statistics get no gradient
    for (Ref r : g.params())
      if (g.value(r).trainable) wrt.push_back(r);
    // Mixed precision: the backward of loss * S (an input filled each step), the gradients
    // divided by S, and a last output that is finite when all of them are.
    scale_input = scaler.dynamic() ? g.add_input("loss_scale", {DType::F32, {}}) : Ref{};
    auto grads =
        append_backward(g, scale_input.valid() ? mul(g, mg.loss, scale_input) : mg.loss, wrt);
    if (!grads) return grads.error();
    if (scaler.active()) *grads = unscale_gradients(g, *grads, scale_input, &check_sum);
    outs.push_back(mg.loss);
    outs.insert(outs.end(), grads->begin(), grads->end());
    if (check_sum.valid()) outs.push_back(check_sum);
    s.gradients = grads->size();
    if (o.grad_check != StepOptions::GradCheck::None && !grads->empty()) {
      std::vector<Ref> parts;
      for (Ref gr : *grads) {
        if (!gr.valid()) {
          parts.push_back(fill(g, {DType::F32, {1}}, 0.0));
        } else if (o.grad_check == StepOptions::GradCheck::Finite) {
          // In two stages, rows then their sums: a device that reduces a whole tensor to one
          // value in one workgroup (CUDA, Vulkan) would otherwise spend most of a small step
          // on it (the MLP on an H100: 0.21 -> 0.58 ms a step).
          const Shape shape = g.type_of(gr).shape;
          const Ref rows = shape.size() >= 2
                               ? sum(g, reshape(g, gr, {shape[0], numel(shape) / shape[0]}), {1}, false)
                               : gr;
          parts.push_back(unsqueeze(g, sum(g, rows, {}, false), 0));
        } else {
          const Ref row = reshape(g, gr, {1, numel(g.type_of(gr).shape)});
          parts.push_back(reshape(g, matmul(g, row, row, false, true), {1}));
        }
      }
      grad_check = parts.size() == 1 ? parts[0] : concat(g, parts, 0);
      outs.push_back(grad_check);
    }
    for (const UnitOutput& u : activity) outs.push_back(u.value);
  } else {
    outs = {mg.logits, mg.loss};
  }
  g.set_outputs(outs);
  std::vector<NamedPass> passes = default_passes();
  // After the default passes: the checkpointing pass measures their result.
  if (o.training && o.checkpoint_budget_bytes >= 0)
    passes.push_back(checkpoint_pass(o.checkpoint_budget_bytes));
  auto stages = run_passes(g, backend, passes);
  if (!stages) return stages.error();
  if (!o.keep_stages) stages->erase(stages->begin(), stages->end() - 1);
  s.stages = std::move(*stages);
  // Passes keep the order of inputs, parameters and outputs: map the model's handles.
  const Graph& opt = s.graph();
  auto same_input = [&](Ref r) {
    if (!r.valid()) return Ref{};
    return opt.inputs()[static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), r) -
                                            g.inputs().begin())];
  };
  s.model.input = same_input(mg.input);
  s.model.labels = same_input(mg.labels);
  s.model.step_seed = same_input(mg.step_seed);
  s.loss_scale = same_input(scale_input);
  size_t next = 1 + s.gradients;
  if (check_sum.valid()) s.check = opt.outputs()[next++];
  if (grad_check.valid()) s.grad_check = opt.outputs()[next++];
  for (UnitOutput u : activity) {
    u.value = opt.outputs()[next++];
    s.activity.push_back(std::move(u));
  }
  s.model.loss = opt.outputs()[o.training ? 0 : 1];
  if (!o.training) s.model.logits = opt.outputs()[0];
  return s;
}

}  // namespace mls
