// Normalisation and regularisation: BatchNorm (with running statistics), Dropout and
// LayerNorm. The first two lower differently for training and for evaluation.
#include "engine/ops/nn.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

NodeTypeDef batch_norm_node() {
  NodeTypeDef d = make_type(
      "mls.batch_norm", "BatchNorm", "Layers",
      "Batch normalisation over every axis but the channels (axis 1): [N,C] or [N,C,H,W]. "
      "Training normalises with the batch's statistics and keeps running ones "
      "(running = (1 - momentum) running + momentum batch, the variance unbiased), which "
      "evaluation uses instead, as PyTorch's BatchNorm1d/2d.",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = {
      float_param("momentum", 0.1, 0.0, 1.0, "Weight of each batch in the running statistics."),
      float_param("eps", 1e-5, 0.0, 1.0, "Added to the variance before the square root.", true),
      make_param("affine", ParamKind::Bool, true,
                 "Learn a scale (gamma) and shift (beta) per channel."),
      frozen_param()};
  d.params[1].min = 1e-12;
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (in[0].size() != 2 && in[0].size() != 4)
      return make_error("input 'in' has shape " + format_shape(in[0]) +
                        "; BatchNorm expects [N,C] or [N,C,H,W]");
    return one(in[0]);
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const Shape x = c.shape(0);
    const int64_t ch = x[1];
    const double eps = c.params.at("eps").get<double>(), m = c.params.at("momentum").get<double>();
    const bool train = !frozen(c.params) && c.params.at("affine").get<bool>();
    auto ps = layer_param_refs(c, "batch_norm", layer_config(c.params, ch, ch), train);
    if (!ps) return ps.error();
    const Ref gamma = ps->at(0), beta = ps->at(1), rm = ps->at(2), rv = ps->at(3);
    if (!c.training) return Refs{batch_norm_eval(c.g(), c.inputs[0], gamma, beta, rm, rv, eps)};
    BatchNormOut bn = batch_norm_train(c.g(), c.inputs[0], gamma, beta, eps);
    if (!frozen(c.params)) {  // a frozen BatchNorm keeps its statistics too
      ema_update(c.g(), rm, bn.mean, m);
      ema_update(c.g(), rv, scale(c.g(), bn.var, batch_norm_unbiased_factor(x)), m);
    }
    return Refs{bn.y};
  };
  return d;
}

NodeTypeDef layer_norm_node() {
  NodeTypeDef d = make_type(
      "mls.layer_norm", "LayerNorm", "Layers",
      "Layer normalisation over the last axis (the features of each sample, or of each step "
      "of a sequence): y = gamma (x - mean) / sqrt(var + eps) + beta with a learned gamma and "
      "beta per feature, as PyTorch's LayerNorm(normalized_shape = last dim). The same in "
      "training and evaluation.",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = {
      float_param("eps", 1e-5, 1e-12, 1.0, "Added to the variance before the square root.", true),
      frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (in[0].size() < 2)
      return make_error("input 'in' has shape " + format_shape(in[0]) +
                        "; LayerNorm normalises the last axis, so it needs at least [N,features]");
    return one(in[0]);
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const int64_t f = c.shape(0).back();
    auto ps = layer_param_refs(c, "layer_norm", layer_config(c.params, f, f), !frozen(c.params));
    if (!ps) return ps.error();
    return Refs{
        layer_norm(c.g(), c.inputs[0], ps->at(0), ps->at(1), c.params.at("eps").get<double>())};
  };
  return d;
}

NodeTypeDef dropout_node() {
  NodeTypeDef d =
      make_type("mls.dropout", "Dropout", "Layers",
                "While training, zeroes each element with probability p and scales the "
                "rest by 1/(1-p), with a new mask every step; the identity in evaluation.",
                {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = {float_param("p", 0.5, 0.0, 1.0, "Probability of zeroing an element.", true)};
  d.infer = same_shape;
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const double p = c.params.at("p").get<double>();
    if (!c.training || p == 0.0) return Refs{c.inputs[0]};
    return Refs{
        dropout(c.g(), c.inputs[0], p, static_cast<uint64_t>(c.node_seed()), c.step_seed(), true)};
  };
  return d;
}

}  // namespace

void register_norm_nodes(NodeCatalogue& catalogue) {
  catalogue.add(batch_norm_node());
  catalogue.add(dropout_node());
  catalogue.add(layer_norm_node());
}

}  // namespace mls::nodes
