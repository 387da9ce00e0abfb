// The built-in node types. Each is one function: ports, parameters and its shape rule,
// so adding a type touches this file and the lowering table only.
#include "nodes/catalogue.h"

namespace mls::nodes {

namespace {

using nlohmann::json;

NodeTypeDef make_type(std::string id, std::string display_name, std::string category,
                      std::string doc, std::vector<PortDef> inputs, std::vector<PortDef> outputs,
                      NodeRole role = NodeRole::Layer) {
  NodeTypeDef d;
  d.id = std::move(id);
  d.display_name = std::move(display_name);
  d.category = std::move(category);
  d.doc = std::move(doc);
  d.inputs = std::move(inputs);
  d.outputs = std::move(outputs);
  d.role = role;
  return d;
}

ParamDef make_param(std::string name, ParamKind kind, json default_value, std::string doc) {
  ParamDef p;
  p.name = std::move(name);
  p.kind = kind;
  p.default_value = std::move(default_value);
  p.required = p.default_value.is_null();
  p.doc = std::move(doc);
  return p;
}

Result<std::vector<Shape>> one(Shape s) {
  return std::vector<Shape>{std::move(s)};
}

NodeTypeDef input_node() {
  NodeTypeDef d = make_type("mls.input", "Input", "Data",
                            "A batch of dataset samples: [N, *sample shape], e.g. [N,1,28,28].", {},
                            {{"out", PortKind::Tensor}}, NodeRole::DataInput);
  d.infer = [](const std::vector<Shape>&, const json&, const InferContext& ctx) {
    Shape s{-1};
    s.insert(s.end(), ctx.sample_shape.begin(), ctx.sample_shape.end());
    return one(std::move(s));
  };
  return d;
}

NodeTypeDef labels_node() {
  NodeTypeDef d =
      make_type("mls.labels", "Labels", "Data", "The class index of each sample in the batch: [N].",
                {}, {{"out", PortKind::Labels}}, NodeRole::DataLabels);
  d.infer = [](const std::vector<Shape>&, const json&, const InferContext&) {
    return one(Shape{-1});
  };
  return d;
}

NodeTypeDef flatten_node() {
  NodeTypeDef d = make_type("mls.flatten", "Flatten", "Layers",
                            "Keeps the batch dim and flattens the rest: [N,1,28,28] -> [N,784].",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() < 2)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; Flatten expects at least [N,d]");
    int64_t features = 1;
    for (size_t i = 1; i < s.size(); ++i) features *= s[i];
    return one(Shape{s[0], features});
  };
  return d;
}

NodeTypeDef linear_node() {
  NodeTypeDef d =
      make_type("mls.linear", "Linear", "Layers",
                "A fully connected layer: y = x W + b, [N,in_features] -> [N,out_features].",
                {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef out_features =
      make_param("out_features", ParamKind::Int, nullptr, "Number of output features.");
  out_features.min = 1;
  out_features.max = 1 << 24;  // keeps weight sizes far from int64 overflow
  ParamDef init = make_param("init", ParamKind::Enum, "kaiming_uniform",
                             "How the weight is initialised (the bias starts at zero).");
  init.choices = {"kaiming_uniform", "xavier_uniform", "zeros"};
  d.params = {out_features, make_param("bias", ParamKind::Bool, true, "Learn an additive bias."),
              init};
  d.infer = [](const std::vector<Shape>& in, const json& params,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() != 2)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; Linear expects [N,features] — add a Flatten node before it");
    return one(Shape{s[0], params.at("out_features").get<int64_t>()});
  };
  return d;
}

NodeTypeDef elementwise_node(std::string id, std::string name, std::string doc) {
  NodeTypeDef d = make_type(std::move(id), std::move(name), "Activations", std::move(doc),
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&, const InferContext&) {
    return one(in[0]);
  };
  return d;
}

NodeTypeDef cross_entropy_node() {
  NodeTypeDef d = make_type("mls.cross_entropy", "Cross-entropy loss", "Losses",
                            "Mean softmax cross-entropy of logits [N,C] against class labels "
                            "[N]. Whatever feeds 'logits' is the model's output.",
                            {{"logits", PortKind::Tensor}, {"labels", PortKind::Labels}},
                            {{"loss", PortKind::Tensor}}, NodeRole::Loss);
  ParamDef smoothing = make_param("label_smoothing", ParamKind::Float, 0.0,
                                  "Mixes the one-hot target with a uniform one (0 = off).");
  smoothing.min = 0.0;
  smoothing.max = 1.0;
  smoothing.max_exclusive = true;
  d.params = {smoothing};
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext& ctx) -> Result<std::vector<Shape>> {
    const Shape& logits = in[0];
    const Shape& labels = in[1];
    if (logits.size() != 2)
      return make_error("input 'logits' has shape " + format_shape(logits) +
                        "; CrossEntropy expects [N,classes]");
    if (labels.size() != 1)
      return make_error("input 'labels' has shape " + format_shape(labels) +
                        "; CrossEntropy expects [N]");
    if (logits[0] >= 0 && labels[0] >= 0 && logits[0] != labels[0])
      return make_error("logits have batch size " + std::to_string(logits[0]) +
                        " but labels have " + std::to_string(labels[0]));
    if (ctx.num_classes > 0 && logits[1] != ctx.num_classes)
      return make_error("logits have " + std::to_string(logits[1]) +
                        " classes but the dataset has " + std::to_string(ctx.num_classes));
    return one(Shape{});
  };
  return d;
}

}  // namespace

void register_builtin_nodes(NodeCatalogue& catalogue) {
  catalogue.add(input_node());
  catalogue.add(labels_node());
  catalogue.add(flatten_node());
  catalogue.add(linear_node());
  catalogue.add(elementwise_node("mls.relu", "ReLU", "max(x, 0), elementwise."));
  catalogue.add(elementwise_node("mls.tanh", "Tanh", "tanh(x), elementwise."));
  catalogue.add(elementwise_node("mls.sigmoid", "Sigmoid", "1 / (1 + exp(-x)), elementwise."));
  catalogue.add(cross_entropy_node());
  // Early project files called the fully connected layer "dense" (the Keras name).
  catalogue.add_rename("mls.dense", "mls.linear");
}

}  // namespace mls::nodes
