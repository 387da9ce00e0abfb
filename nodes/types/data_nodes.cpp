// Data nodes: where a batch enters the graph (samples, class labels, target values).
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

NodeTypeDef input_node() {
  NodeTypeDef d = make_type("mls.input", "Input", "Data",
                            "A batch of dataset samples: [N, *sample shape], e.g. [N,1,28,28].", {},
                            {{"out", PortKind::Tensor}}, NodeRole::DataInput);
  d.infer = [](const std::vector<Shape>&, const json&, const InferContext& ctx) {
    Shape s{-1};
    s.insert(s.end(), ctx.sample_shape.begin(), ctx.sample_shape.end());
    return one(std::move(s));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    if (c.model.input.valid()) return make_error("a second Input node: a model has exactly one");
    Shape s{c.batch};
    s.insert(s.end(), c.data.sample_shape.begin(), c.data.sample_shape.end());
    c.model.input = c.g().add_input(c.node_id, {DType::F32, s});
    return Refs{c.model.input};
  };
  return d;
}

// One node for both kinds of target, so that a project switches between a classification
// and a regression data set without editing the graph: class indices [N] or values [N, ...].
NodeTypeDef labels_node() {
  NodeTypeDef d = make_type("mls.labels", "Labels", "Data",
                            "The targets of the batch: class indices [N] for classification, "
                            "or values [N, *target shape] for regression.",
                            {}, {{"out", PortKind::Labels}}, NodeRole::DataLabels);
  d.infer = [](const std::vector<Shape>&, const json&, const InferContext& ctx) {
    Shape s{-1};
    s.insert(s.end(), ctx.target_shape.begin(), ctx.target_shape.end());
    return one(std::move(s));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    if (c.model.labels.valid()) return make_error("a second Labels node: a model has exactly one");
    Shape s{c.batch};
    s.insert(s.end(), c.data.target_shape.begin(), c.data.target_shape.end());
    c.model.labels = c.g().add_input(c.node_id, {c.data.regression() ? DType::F32 : DType::I64, s});
    return Refs{c.model.labels};
  };
  return d;
}

}  // namespace

void register_data_nodes(NodeCatalogue& catalogue) {
  catalogue.add(input_node());
  catalogue.add(labels_node());
}

}  // namespace mls::nodes
