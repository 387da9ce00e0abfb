#include "nodes/onnx_export.h"

#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>

#include "nodes/shape_check.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;
using onnx::Attribute;

// [SECTION] what one node's exporter sees

struct NodeExport {
  onnx::Model& m;
  const std::string& id;
  const json& params;
  std::vector<std::string> inputs;
  std::vector<Shape> in_shapes;  // the batch dim as -1
  Shape out_shape;               // output 0's, likewise
  const std::map<std::string, CheckpointTensor>& weights;

  int64_t i(const char* name) const { return params.at(name).get<int64_t>(); }
  double f(const char* name) const { return params.at(name).get<double>(); }
  // The node's parameter `name` as an initializer "<id>.<name>".
  Result<std::string> weight(const std::string& name) {
    auto it = weights.find(id + "." + name);
    if (it == weights.end()) return make_error("node '" + id + "': no value for parameter '" + id + "." + name + "'");
    return m.add_initializer(id + "." + name, it->second);
  }
  // The last op of a node writes the value named after the node.
  std::string add(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> a = {}) {
    return m.add(op, std::move(ins), std::move(a), m.fresh(id));
  }
  std::string step(const std::string& op, std::vector<std::string> ins, std::vector<Attribute> a = {}) {
    return m.add(op, std::move(ins), std::move(a), m.fresh(id + "/" + op));
  }
};

using ExportFn = std::function<Result<std::string>(NodeExport&)>;
// Params the exporter cannot express: the reason, or "".
using CheckFn = std::function<std::string(const json& params)>;

struct Exporter {
  ExportFn fn;
  CheckFn check;
};

ExportFn unary(std::string op) {
  return [op](NodeExport& c) -> Result<std::string> { return c.add(op, {c.inputs[0]}); };
}

std::vector<Attribute> window(int64_t k, int64_t s, int64_t p) {
  return {Attribute::list("kernel_shape", {k, k}), Attribute::list("strides", {s, s}),
          Attribute::list("pads", {p, p, p, p})};
}

Result<std::string> conv(NodeExport& c, bool transposed) {
  auto w = c.weight("weight");
  if (!w) return w.error();
  std::vector<std::string> ins{c.inputs[0], *w};
  if (c.params.value("bias", true)) {
    auto b = c.weight("bias");
    if (!b) return b.error();
    ins.push_back(*b);
  }
  const int64_t k = c.i("kernel_size"), s = c.i("stride"), d = c.i("dilation");
  auto attrs = window(k, s, c.i("padding"));
  attrs.push_back(Attribute::list("dilations", {d, d}));
  attrs.push_back(Attribute::i("group", c.i("groups")));
  if (transposed) {
    const int64_t op = c.i("output_padding");
    attrs.push_back(Attribute::list("output_padding", {op, op}));
  }
  return c.add(transposed ? "ConvTranspose" : "Conv", ins, attrs);
}

Result<std::string> pool(NodeExport& c, bool max) {
  const int64_t k = c.i("kernel_size"), s = c.i("stride");
  auto attrs = window(k, s == 0 ? k : s, c.i("padding"));
  if (!max) attrs.push_back(Attribute::i("count_include_pad", 1));  // as PyTorch and the engine
  return c.add(max ? "MaxPool" : "AveragePool", {c.inputs[0]}, attrs);
}

const std::unordered_map<std::string, Exporter>& exporters() {
  static const std::unordered_map<std::string, Exporter> t = {
      {"mls.relu", {unary("Relu"), {}}},
      {"mls.tanh", {unary("Tanh"), {}}},
      {"mls.sigmoid", {unary("Sigmoid"), {}}},
      {"mls.dropout", {unary("Identity"), {}}},  // evaluation: the identity
      {"mls.leaky_relu",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("LeakyRelu", {c.inputs[0]}, {Attribute::f("alpha", c.f("negative_slope"))});
        },
        {}}},
      {"mls.elu",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("Elu", {c.inputs[0]}, {Attribute::f("alpha", c.f("alpha"))});
        },
        {}}},
      {"mls.softplus",
       {unary("Softplus"),
        [](const json& p) -> std::string {
          // ONNX's Softplus is log(1 + exp(x)): beta 1, and no threshold (past 20 the two
          // agree in f32).
          if (p.at("beta").get<double>() != 1.0 || p.at("threshold").get<double>() < 20.0)
            return "Softplus with beta != 1 or threshold < 20 has no ONNX op";
          return "";
        }}},
      {"mls.silu",
       {[](NodeExport& c) -> Result<std::string> {
          std::string s = c.step("Sigmoid", {c.inputs[0]});
          return c.add("Mul", {c.inputs[0], s});
        },
        {}}},
      {"mls.gelu",
       {[](NodeExport& c) -> Result<std::string> {
          const std::string& x = c.inputs[0];
          if (c.params.value("approximate", "none") == "tanh") {
            // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
            std::string x3 = c.step("Mul", {c.step("Mul", {x, x}), x});
            std::string inner = c.step("Add", {x, c.step("Mul", {x3, c.m.add_scalar(c.id + ".c", 0.044715f)})});
            std::string t = c.step("Tanh", {c.step("Mul", {inner, c.m.add_scalar(c.id + ".k", 0.7978845608f)})});
            std::string one = c.m.add_scalar(c.id + ".one", 1.0f);
            return c.add("Mul", {c.step("Mul", {x, c.m.add_scalar(c.id + ".half", 0.5f)}), c.step("Add", {t, one})});
          }
          // x/2 (1 + erf(x / sqrt 2)); opset 17 has no Gelu op
          std::string e = c.step("Erf", {c.step("Mul", {x, c.m.add_scalar(c.id + ".rsqrt2", 0.70710678f)})});
          std::string one = c.m.add_scalar(c.id + ".one", 1.0f);
          return c.add("Mul", {c.step("Mul", {x, c.m.add_scalar(c.id + ".half", 0.5f)}), c.step("Add", {e, one})});
        },
        [](const json& p) -> std::string {
          // Opset 17 writes the exact form with Erf, which the engine (and so the check
          // every export runs) does not have yet.
          if (p.value("approximate", "none") != "tanh")
            return "exact GELU needs ONNX Erf, which the export check cannot run yet; use approximate 'tanh'";
          return "";
        }}},
      {"mls.softmax",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("Softmax", {c.inputs[0]}, {Attribute::i("axis", -1)});
        },
        {}}},
      {"mls.log_softmax",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("LogSoftmax", {c.inputs[0]}, {Attribute::i("axis", -1)});
        },
        {}}},
      {"mls.flatten",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("Flatten", {c.inputs[0]}, {Attribute::i("axis", 1)});
        },
        {}}},
      {"mls.reshape",
       {[](NodeExport& c) -> Result<std::string> {
          // 0 keeps the batch dim, whatever the batch size the file is run with; the rest
          // is the node's own inferred shape (its -1 resolved).
          std::vector<int64_t> dims{0};
          dims.insert(dims.end(), c.out_shape.begin() + 1, c.out_shape.end());
          return c.add("Reshape", {c.inputs[0], c.m.add_ints(c.id + ".shape", dims)});
        },
        {}}},
      {"mls.linear",
       {[](NodeExport& c) -> Result<std::string> {
          auto w = c.weight("weight");
          if (!w) return w.error();
          if (!c.params.value("bias", true)) return c.add("MatMul", {c.inputs[0], *w});
          auto b = c.weight("bias");
          if (!b) return b.error();
          return c.add("Gemm", {c.inputs[0], *w, *b});  // weight [in, out]: no transpose
        },
        {}}},
      {"mls.conv2d", {[](NodeExport& c) { return conv(c, false); }, {}}},
      {"mls.conv_transpose2d", {[](NodeExport& c) { return conv(c, true); }, {}}},
      {"mls.max_pool2d", {[](NodeExport& c) { return pool(c, true); }, {}}},
      {"mls.avg_pool2d", {[](NodeExport& c) { return pool(c, false); }, {}}},
      {"mls.global_avg_pool",
       {[](NodeExport& c) -> Result<std::string> {
          return c.add("Flatten", {c.step("GlobalAveragePool", {c.inputs[0]})}, {Attribute::i("axis", 1)});
        },
        {}}},
      {"mls.batch_norm",
       {[](NodeExport& c) -> Result<std::string> {
          std::vector<std::string> ins{c.inputs[0]};
          for (const char* p : {"weight", "bias", "running_mean", "running_var"}) {
            auto w = c.weight(p);
            if (!w) return w.error();
            ins.push_back(*w);
          }
          return c.add("BatchNormalization", ins, {Attribute::f("epsilon", c.f("eps"))});
        },
        {}}},
      {"mls.layer_norm",
       {[](NodeExport& c) -> Result<std::string> {
          auto g = c.weight("weight"), b = c.weight("bias");
          if (!g) return g.error();
          if (!b) return b.error();
          return c.add("LayerNormalization", {c.inputs[0], *g, *b},
                       {Attribute::i("axis", -1), Attribute::f("epsilon", c.f("eps"))});
        },
        {}}},
      {"mls.add",
       {[](NodeExport& c) -> Result<std::string> { return c.add("Add", {c.inputs[0], c.inputs[1]}); }, {}}},
      {"mls.concat",
       {[](NodeExport& c) -> Result<std::string> {
          int64_t axis = c.i("axis");
          if (axis < 0) axis += static_cast<int64_t>(c.in_shapes[0].size());
          return c.add("Concat", {c.inputs[0], c.inputs[1]}, {Attribute::i("axis", axis)});
        },
        {}}},
  };
  return t;
}

std::vector<int64_t> sample_dims(const Shape& s) { return {s.begin() + 1, s.end()}; }

// (x [* 1/255] - mean) / stddev, shaped to broadcast over a sample of `sample` dims.
std::string preprocess(onnx::Model& m, const std::string& input, const std::string& id,
                       const InputPreprocessing& p, const Shape& sample) {
  std::string x = input;
  if (p.bytes) {
    x = m.add("Cast", {x}, {Attribute::i("to", 1)}, m.fresh(id + "/float"));
    x = m.add("Mul", {x, m.add_scalar(id + ".byte_scale", 1.0f / 255.0f)}, {}, m.fresh(id + "/scaled"));
  }
  if (p.mean.empty()) return x;
  // Per channel (axis 1 of the batch): [C, 1, ..] for images, [F] for feature vectors.
  Shape shape;
  if (p.mean.size() > 1) {
    shape.assign(sample.size(), 1);
    shape[0] = static_cast<int64_t>(p.mean.size());
  }
  std::string mean = m.add_initializer(id + ".mean", onnx::make_f32("", shape, p.mean));
  std::string sd = m.add_initializer(id + ".std", onnx::make_f32("", shape, p.stddev));
  x = m.add("Sub", {x, mean}, {}, m.fresh(id + "/centred"));
  return m.add("Div", {x, sd}, {}, m.fresh(id + "/normalized"));
}

const NodeTypeDef* type_of(const NodeDoc& n) { return builtin_catalogue().find(n.type); }

}  // namespace

std::string onnx_export_problem(const NodeDoc& node) {
  const NodeTypeDef* type = type_of(node);
  if (!type) return "unknown node type '" + node.type + "'";
  if (type->role != NodeRole::Layer) return "";  // input, labels and loss are handled around the graph
  auto it = exporters().find(node.type);
  if (it == exporters().end()) return type->display_name + " has no ONNX export yet";
  if (!it->second.check) return "";
  auto params = complete_params(*type, node.params);
  if (!params) return params.error().message;
  return it->second.check(*params);
}

Result<ExportedModel> export_onnx(const Document& doc, const InferContext& data,
                                  const std::map<std::string, CheckpointTensor>& weights,
                                  const ExportSpec& spec, const std::string& source_name) {
  if (auto c = check_graph(doc, source_name); !c) return c.error();
  auto shapes = infer_shapes(doc, data);
  if (!shapes) return make_error(source_name + ": " + shapes.error().message);
  const NodeCatalogue& cat = builtin_catalogue();

  // The model is what the loss's logits input needs; everything else stays behind.
  const NodeDoc* loss = nullptr;
  for (const NodeDoc& n : doc.nodes)
    if (const NodeTypeDef* t = cat.find(n.type); t && t->role == NodeRole::Loss) loss = &n;
  if (!loss) return make_error(source_name + ": the model has no loss node, so no output to export");
  const NodeTypeDef* loss_type = cat.find(loss->type);
  const LinkDoc* out_link = find_input_link(doc, loss->id, loss_type->inputs.at(0).name);
  if (!out_link) return make_error(source_name + ": the loss node '" + loss->id + "' has no input");
  std::set<std::string> needed;
  std::vector<std::string> todo{out_link->from_node};
  while (!todo.empty()) {
    std::string id = todo.back();
    todo.pop_back();
    if (!needed.insert(id).second) continue;
    for (const LinkDoc& l : doc.links)
      if (l.to_node == id) todo.push_back(l.from_node);
  }
  std::string problems;
  for (const NodeDoc& n : doc.nodes)
    if (needed.count(n.id))
      if (std::string p = onnx_export_problem(n); !p.empty())
        problems += "\n  node '" + n.id + "' (" + n.type + "): " + p;
  if (!problems.empty()) return make_error(source_name + ": cannot export to ONNX:" + problems);

  ExportedModel out;
  onnx::Model& m = out.model;
  m.opset = spec.opset;
  m.graph_name = doc.name.empty() ? "model" : doc.name;
  m.doc = doc.description;
  m.metadata = spec.metadata;
  std::map<std::pair<std::string, std::string>, std::string> port_value;
  for (size_t k : topological_order(doc)) {
    const NodeDoc& n = doc.nodes[k];
    if (!needed.count(n.id)) continue;
    const NodeTypeDef* type = cat.find(n.type);
    const std::vector<Shape>& outs = shapes->at(n.id);
    std::string value;
    if (type->role == NodeRole::DataInput) {
      Shape s = outs.at(0);
      onnx::ValueInfo in{n.id, spec.input.bytes ? DType::U8 : DType::F32, {onnx::Dim::named("N")}};
      for (size_t d = 1; d < s.size(); ++d) in.dims.emplace_back(s[d]);
      m.inputs.push_back(in);
      value = preprocess(m, n.id, n.id, spec.input, sample_dims(s));
    } else if (type->role != NodeRole::Layer) {
      return make_error(source_name + ": node '" + n.id + "' (" + n.type + ") feeds the model output; only layers can");
    } else {
      auto params = complete_params(*type, n.params);
      if (!params) return make_error(source_name + ": node '" + n.id + "': " + params.error().message);
      NodeExport c{m, n.id, *params, {}, {}, outs.at(0), weights};
      for (const PortDef& p : type->inputs) {
        const LinkDoc* l = find_input_link(doc, n.id, p.name);
        if (!l) return make_error(source_name + ": node '" + n.id + "': input '" + p.name + "' is not linked");
        c.inputs.push_back(port_value.at({l->from_node, l->from_port}));
        c.in_shapes.push_back(link_shape(doc, *shapes, *l));
      }
      auto r = exporters().at(n.type).fn(c);
      if (!r) return make_error(source_name + ": " + r.error().message);
      value = *r;
    }
    port_value[{n.id, type->outputs.at(0).name}] = value;
    out.node_values[n.id] = value;
    out.order.push_back(n.id);
  }
  const std::string result = port_value.at({out_link->from_node, out_link->from_port});
  std::string out_name = data.regression() ? "prediction" : "logits";
  if (result != out_name) out_name = m.add("Identity", {result}, {}, m.fresh(out_name));
  onnx::ValueInfo o{out_name, DType::F32, {onnx::Dim::named("N")}};
  const Shape& os = link_shape(doc, *shapes, *out_link);
  for (size_t d = 1; d < os.size(); ++d) o.dims.emplace_back(os[d]);
  m.outputs.push_back(o);
  return out;
}

}  // namespace mls::nodes
