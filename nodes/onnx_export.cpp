#include "nodes/onnx_export.h"

#include <optional>
#include <set>

#include "engine/onnx/graph_export.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"

namespace mls::nodes {

namespace {

using json = nlohmann::json;
using onnx::Attribute;

// The batch the document is lowered for; dim 0 of that size is written as the symbolic "N".
constexpr int64_t kExportBatch = 2;

std::vector<int64_t> sample_dims(const Shape& s) {
  return {s.begin() + 1, s.end()};
}

// (x [* 1/255] - mean) / stddev, shaped to broadcast over a sample of `sample` dims.
std::string preprocess(onnx::Model& m, const std::string& input, const std::string& id,
                       const InputPreprocessing& p, const Shape& sample) {
  std::string x = input;
  if (p.bytes) {
    x = m.add("Cast", {x}, {Attribute::i("to", 1)}, m.fresh(id + "/float"));
    x = m.add("Mul", {x, m.add_scalar(id + ".byte_scale", 1.0f / 255.0f)}, {},
              m.fresh(id + "/scaled"));
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

const NodeTypeDef* type_of(const NodeDoc& n) {
  return builtin_catalogue().find(n.type);
}

// The node lowered alone for inference, on the first trial input its shape rule accepts
// (images, feature vectors, sequences): the graph its ops form, which the exporter's own
// check reads. Empty when no trial input fits.
std::optional<Graph> lowered_alone(const NodeTypeDef& type, const std::string& id,
                                   const json& params) {
  for (const Shape& sample : {Shape{3, 8, 8}, Shape{8}, Shape{4, 8}}) {
    InferContext data{sample, 8, {}};
    Shape any{-1};
    any.insert(any.end(), sample.begin(), sample.end());
    if (!type.infer || !type.infer(std::vector<Shape>(type.inputs.size(), any), params, data))
      continue;
    ModelGraph model{Graph(id), {}, {}, {}, {}, {}};
    Shape batch{kExportBatch};
    batch.insert(batch.end(), sample.begin(), sample.end());
    Refs in;
    for (size_t i = 0; i < type.inputs.size(); ++i)
      in.push_back(model.graph.add_input("in" + std::to_string(i), {DType::F32, batch}));
    model.graph.set_label(id);
    LowerContext ctx{model, id, params, in, kExportBatch, data, false};
    auto outs = type.lower(ctx);
    if (!outs) continue;
    model.graph.set_outputs(*outs);
    return std::move(model.graph);
  }
  return std::nullopt;
}

}  // namespace

// Whether a layer exports is whether the ops it lowers to have an ONNX mapping
// (engine/onnx/onnx_ops.h): the same check the export itself runs on the whole graph.
std::string onnx_export_problem(const NodeDoc& node) {
  const NodeTypeDef* type = type_of(node);
  if (!type) return "unknown node type '" + node.type + "'";
  if (type->role != NodeRole::Layer)
    return "";  // input, labels and loss are handled around the graph
  if (!type->lower) return type->display_name + " has no ONNX export yet (it cannot be lowered)";
  // Which ops a layer lowers to does not hang on its sizes: a required size not given yet
  // (a node just dropped on the canvas) is tried at 4.
  json given = node.params.is_object() ? node.params : json::object();
  for (const ParamDef& p : type->params)
    if (p.required && p.kind == ParamKind::Int && !given.contains(p.name)) given[p.name] = 4;
  auto params = complete_params(*type, given);
  if (!params) return params.error().message;
  auto g = lowered_alone(*type, node.id, *params);
  if (!g) return "";  // no trial input fits: the export of the real graph will tell
  std::string p = onnx::export_problems(*g);
  return p.empty() ? "" : type->display_name + " has no ONNX export yet: " + p;
}

Result<ExportedModel> export_onnx(const Document& doc, const InferContext& data,
                                  const std::map<std::string, CheckpointTensor>& weights,
                                  const ExportSpec& spec, const std::string& source_name) {
  if (auto c = check_graph(doc, source_name); !c) return c.error();
  const NodeCatalogue& cat = builtin_catalogue();

  // The model is what the loss's logits input needs; everything else stays behind.
  const NodeDoc* loss = nullptr;
  for (const NodeDoc& n : doc.nodes)
    if (const NodeTypeDef* t = cat.find(n.type); t && t->role == NodeRole::Loss) loss = &n;
  if (!loss)
    return make_error(source_name + ": the model has no loss node, so no output to export");
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
  const NodeDoc* input = nullptr;
  for (const NodeDoc& n : doc.nodes) {
    if (!needed.count(n.id)) continue;
    const NodeTypeDef* t = cat.find(n.type);
    if (t && t->role == NodeRole::DataInput) {
      input = &n;
    } else if (t && t->role != NodeRole::Layer) {
      return make_error(source_name + ": node '" + n.id + "' (" + n.type +
                        ") feeds the model output; only layers can");
    } else if (std::string p = onnx_export_problem(n); !p.empty()) {
      problems += "\n  node '" + n.id + "' (" + n.type + "): " + p;
    }
  }
  if (!problems.empty()) return make_error(source_name + ": cannot export to ONNX:" + problems);
  if (!input)
    return make_error(source_name + ": the model output does not depend on an input node");

  // The document lowered for inference; its output is the loss's logits input.
  std::map<std::string, Refs> outs;
  auto mg = lower(doc, data, kExportBatch, false, source_name, &outs);
  if (!mg) return mg.error();
  Graph& g = mg->graph;
  // Lowered at a second batch size too: the dims that differ carry the batch.
  auto twin = lower(doc, data, kExportBatch + 1, false, source_name);
  if (!twin) return twin.error();
  const NodeTypeDef* from_type = cat.find(doc.nodes[*find_node(doc, out_link->from_node)].type);
  size_t port = 0;
  while (port < from_type->outputs.size() && from_type->outputs[port].name != out_link->from_port)
    ++port;
  g.set_outputs({outs.at(out_link->from_node).at(port)});
  twin->graph.set_outputs(g.outputs());

  ExportedModel out;
  onnx::Model& m = out.model;
  m.opset = spec.opset;
  m.graph_name = doc.name.empty() ? "model" : doc.name;
  m.doc = doc.description;
  m.metadata = spec.metadata;
  // The file takes raw samples: the preprocessing goes in front of the graph's input.
  const Ref x = outs.at(input->id).at(0);
  const Shape xs = g.type_of(x).shape;
  onnx::ValueInfo in{input->id, spec.input.bytes ? DType::U8 : DType::F32, {onnx::Dim::named("N")}};
  for (size_t d = 1; d < xs.size(); ++d) in.dims.emplace_back(xs[d]);
  m.inputs.push_back(in);
  const std::string model_input = preprocess(m, input->id, input->id, spec.input, sample_dims(xs));

  onnx::GraphExportOptions o;
  o.opset = spec.opset;
  o.batch = kExportBatch;
  o.twin = &twin->graph;
  o.output_names = {data.regression() ? "prediction" : "logits"};
  o.bound_inputs = {{g.value(x).name, model_input}};
  std::vector<std::string> order;
  for (size_t k : topological_order(doc))
    if (needed.count(doc.nodes[k].id)) order.push_back(doc.nodes[k].id);
  for (const std::string& id : order)
    if (id != input->id) o.keep.insert(outs.at(id).at(0).id);
  auto names = onnx::append_graph(m, g, weights, o);
  if (!names) return make_error(source_name + ": " + names.error().message);
  for (const std::string& id : order) {
    out.node_values[id] = id == input->id ? model_input : names->at(outs.at(id).at(0).id);
    out.order.push_back(id);
  }
  return out;
}

}  // namespace mls::nodes
