#include "engine/train/step_graph.h"

#include <algorithm>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/checkpointing.h"
#include "engine/exec/default_passes.h"

namespace mls {

Result<StepGraph> build_step(ModelGraph mg, Backend& backend, const StepOptions& o) {
  autocast_model(mg, o.precision);  // mixed precision: products in bf16/f16 (F32: no change)
  Graph& g = mg.graph;
  StepGraph s;
  Refs outs;
  Ref scale_input, check_sum;
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
  if (check_sum.valid()) s.check = opt.outputs().back();
  s.model.loss = opt.outputs()[o.training ? 0 : 1];
  if (!o.training) s.model.logits = opt.outputs()[0];
  return s;
}

}  // namespace mls
