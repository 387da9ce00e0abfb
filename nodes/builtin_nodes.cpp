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
                             "How the weight is initialised (the bias as PyTorch's: U(+-1/sqrt(fan_in))).");
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

ParamDef int_param(std::string name, int64_t def, int64_t min, std::string doc) {
  ParamDef p = make_param(std::move(name), ParamKind::Int, def, std::move(doc));
  p.min = static_cast<double>(min);
  p.max = 1 << 16;
  return p;
}

// [N,C,H,W] or an error that names the layer and what to do.
Result<void> expect_image(const Shape& s, const std::string& layer) {
  if (s.size() != 4)
    return make_error("input 'in' has shape " + format_shape(s) + "; " + layer +
                      " expects images [N,C,H,W] — feed it from the Input node or another image layer, "
                      "not after a Flatten");
  return {};
}

int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  int64_t room = in + 2 * p - d * (k - 1) - 1;
  return room < 0 ? 0 : room / s + 1;
}

NodeTypeDef conv2d_node() {
  NodeTypeDef d = make_type("mls.conv2d", "Conv2d", "Layers",
                            "2-D convolution (cross-correlation, as PyTorch): [N,C,H,W] -> "
                            "[N,out_channels,H',W'], with a learned bias per output channel.",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef out = make_param("out_channels", ParamKind::Int, nullptr, "Number of output channels.");
  out.min = 1;
  out.max = 1 << 16;
  ParamDef init = make_param("init", ParamKind::Enum, "kaiming_uniform", "How the kernel is initialised.");
  init.choices = {"kaiming_uniform", "xavier_uniform", "zeros"};
  d.params = {out,
              int_param("kernel_size", 3, 1, "Kernel height and width."),
              int_param("stride", 1, 1, "Step between windows."),
              int_param("padding", 0, 0, "Zeros added on each side."),
              int_param("dilation", 1, 1, "Spacing between kernel taps."),
              int_param("groups", 1, 1, "Channel groups (in and out channels must divide by it)."),
              make_param("bias", ParamKind::Bool, true, "Learn an additive bias per channel."),
              init};
  d.infer = [](const std::vector<Shape>& in, const json& p, const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_image(s, "Conv2d"); !r) return r.error();
    int64_t o = p.at("out_channels").get<int64_t>(), k = p.at("kernel_size").get<int64_t>();
    int64_t st = p.at("stride").get<int64_t>(), pad = p.at("padding").get<int64_t>();
    int64_t dil = p.at("dilation").get<int64_t>(), g = p.at("groups").get<int64_t>();
    if (s[1] % g != 0 || o % g != 0)
      return make_error("groups " + std::to_string(g) + " must divide the input channels (" + std::to_string(s[1]) +
                        ") and out_channels (" + std::to_string(o) + ")");
    int64_t h = window_out(s[2], k, st, pad, dil), w = window_out(s[3], k, st, pad, dil);
    if (h < 1 || w < 1)
      return make_error("a " + std::to_string(k) + "x" + std::to_string(k) + " kernel does not fit the " +
                        std::to_string(s[2]) + "x" + std::to_string(s[3]) + " input (padding " + std::to_string(pad) + ")");
    return one(Shape{s[0], o, h, w});
  };
  return d;
}

NodeTypeDef pool_node(std::string id, std::string name, std::string doc) {
  NodeTypeDef d = make_type(std::move(id), std::move(name), "Layers", std::move(doc), {{"in", PortKind::Tensor}},
                            {{"out", PortKind::Tensor}});
  d.params = {int_param("kernel_size", 2, 1, "Window height and width."),
              int_param("stride", 0, 0, "Step between windows (0: the kernel size)."),
              int_param("padding", 0, 0, "Padding on each side.")};
  d.infer = [](const std::vector<Shape>& in, const json& p, const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_image(s, "Pooling"); !r) return r.error();
    int64_t k = p.at("kernel_size").get<int64_t>(), st = p.at("stride").get<int64_t>();
    int64_t pad = p.at("padding").get<int64_t>();
    if (st == 0) st = k;
    if (2 * pad > k) return make_error("padding " + std::to_string(pad) + " is more than half the window");
    int64_t h = window_out(s[2], k, st, pad, 1), w = window_out(s[3], k, st, pad, 1);
    if (h < 1 || w < 1)
      return make_error("a " + std::to_string(k) + "x" + std::to_string(k) + " window does not fit the " +
                        std::to_string(s[2]) + "x" + std::to_string(s[3]) + " input");
    return one(Shape{s[0], s[1], h, w});
  };
  return d;
}

NodeTypeDef global_avg_pool_node() {
  NodeTypeDef d = make_type("mls.global_avg_pool", "Global average pool", "Layers",
                            "The mean of each channel over H and W: [N,C,H,W] -> [N,C].",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&, const InferContext&) -> Result<std::vector<Shape>> {
    if (auto r = expect_image(in[0], "GlobalAvgPool"); !r) return r.error();
    return one(Shape{in[0][0], in[0][1]});
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
  catalogue.add(conv2d_node());
  catalogue.add(pool_node("mls.max_pool2d", "MaxPool2d", "The maximum of each window: [N,C,H,W] -> [N,C,H',W']."));
  catalogue.add(pool_node("mls.avg_pool2d", "AvgPool2d",
                          "The mean of each window (padding counts as zeros): [N,C,H,W] -> [N,C,H',W']."));
  catalogue.add(global_avg_pool_node());
  catalogue.add(cross_entropy_node());
  // Early project files called the fully connected layer "dense" (the Keras name).
  catalogue.add_rename("mls.dense", "mls.linear");
}

}  // namespace mls::nodes
