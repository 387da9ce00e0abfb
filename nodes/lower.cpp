#include "nodes/lower.h"

#include <functional>
#include <map>

#include "engine/ops/conv.h"
#include "nodes/shape_check.h"

namespace mls::nodes {

namespace {

struct LowerContext {
  ModelGraph& model;
  const NodeDoc& node;
  const Refs& inputs;  // in the order of the type's input ports
  int64_t batch;
  const Shape& sample_shape;
};

// One lowering rule per node type: adding a node type adds one entry here.
using LowerFn = std::function<Result<Refs>(LowerContext&)>;

Pool2dParams pool_params(const nlohmann::json& p) {
  int64_t k = p.at("kernel_size").get<int64_t>(), s = p.at("stride").get<int64_t>();
  int64_t pad = p.at("padding").get<int64_t>();
  Pool2dParams q;
  q.kernel = {k, k};
  q.stride = {s == 0 ? k : s, s == 0 ? k : s};
  q.padding = {pad, pad};
  return q;
}

ParamInit weight_init(const nlohmann::json& params, int64_t fan_in, int64_t fan_out) {
  return {params.value("init", std::string("kaiming_uniform")), fan_in, fan_out};
}

const std::map<std::string, LowerFn>& rules() {
  static const std::map<std::string, LowerFn> table = {
      {"mls.input",
       [](LowerContext& c) -> Result<Refs> {
         if (c.model.input.valid()) return make_error("a second Input node: a model has exactly one");
         Shape s{c.batch};
         s.insert(s.end(), c.sample_shape.begin(), c.sample_shape.end());
         c.model.input = c.model.graph.add_input(c.node.id, {DType::F32, s});
         return Refs{c.model.input};
       }},
      {"mls.labels",
       [](LowerContext& c) -> Result<Refs> {
         if (c.model.labels.valid()) return make_error("a second Labels node: a model has exactly one");
         c.model.labels = c.model.graph.add_input(c.node.id, {DType::I64, {c.batch}});
         return Refs{c.model.labels};
       }},
      {"mls.flatten",
       [](LowerContext& c) -> Result<Refs> {
         Shape s = c.model.graph.shape_of(c.inputs[0]);
         return Refs{reshape(c.model.graph, c.inputs[0], {s[0], numel(s) / std::max<int64_t>(s[0], 1)})};
       }},
      {"mls.linear",
       [](LowerContext& c) -> Result<Refs> {
         Graph& g = c.model.graph;
         int64_t in = g.shape_of(c.inputs[0]).back();
         int64_t out = c.node.params.at("out_features").get<int64_t>();
         Ref w = g.add_param(c.node.id + ".weight", {DType::F32, {in, out}}, weight_init(c.node.params, in, out));
         Ref b;
         if (c.node.params.value("bias", true)) {
           // Biases start as PyTorch's do, U(+-1/sqrt(fan_in)); zeros when the weights are zeros.
           std::string scheme = c.node.params.value("init", std::string()) == "zeros" ? "zeros" : "uniform_fan_in";
           b = g.add_param(c.node.id + ".bias", {DType::F32, {out}}, {scheme, in, out});
         }
         return Refs{linear(g, c.inputs[0], w, b)};
       }},
      {"mls.conv2d",
       [](LowerContext& c) -> Result<Refs> {
         Graph& g = c.model.graph;
         const nlohmann::json& p = c.node.params;
         int64_t cin = g.shape_of(c.inputs[0])[1], o = p.at("out_channels").get<int64_t>();
         int64_t k = p.at("kernel_size").get<int64_t>(), groups = p.at("groups").get<int64_t>();
         Conv2dParams q;
         q.stride = {p.at("stride").get<int64_t>(), p.at("stride").get<int64_t>()};
         q.padding = {p.at("padding").get<int64_t>(), p.at("padding").get<int64_t>()};
         q.dilation = {p.at("dilation").get<int64_t>(), p.at("dilation").get<int64_t>()};
         q.groups = groups;
         int64_t fan_in = cin / groups * k * k, fan_out = o / groups * k * k;
         Ref w = g.add_param(c.node.id + ".weight", {DType::F32, {o, cin / groups, k, k}}, weight_init(p, fan_in, fan_out));
         Ref y = conv2d(g, c.inputs[0], w, q);
         if (p.value("bias", true)) {
           std::string scheme = p.value("init", std::string()) == "zeros" ? "zeros" : "uniform_fan_in";
           Ref b = g.add_param(c.node.id + ".bias", {DType::F32, {o}}, {scheme, fan_in, fan_out});
           y = add(g, y, reshape(g, b, {o, 1, 1}));
         }
         return Refs{y};
       }},
      {"mls.max_pool2d",
       [](LowerContext& c) -> Result<Refs> { return Refs{max_pool2d(c.model.graph, c.inputs[0], pool_params(c.node.params))}; }},
      {"mls.avg_pool2d",
       [](LowerContext& c) -> Result<Refs> { return Refs{avg_pool2d(c.model.graph, c.inputs[0], pool_params(c.node.params))}; }},
      {"mls.global_avg_pool",
       [](LowerContext& c) -> Result<Refs> { return Refs{global_avg_pool(c.model.graph, c.inputs[0])}; }},
      {"mls.relu", [](LowerContext& c) -> Result<Refs> { return Refs{relu(c.model.graph, c.inputs[0])}; }},
      {"mls.tanh",
       [](LowerContext& c) -> Result<Refs> { return Refs{c.model.graph.emit1("tanh", {c.inputs[0]})}; }},
      {"mls.sigmoid",
       [](LowerContext& c) -> Result<Refs> { return Refs{c.model.graph.emit1("sigmoid", {c.inputs[0]})}; }},
      {"mls.cross_entropy",
       [](LowerContext& c) -> Result<Refs> {
         c.model.logits = c.inputs[0];
         c.model.loss = cross_entropy(c.model.graph, c.inputs[0], c.inputs[1],
                                      c.node.params.value("label_smoothing", 0.0));
         return Refs{c.model.loss};
       }},
  };
  return table;
}

}  // namespace

Result<ModelGraph> lower(const Document& doc, const Shape& sample_shape, int64_t num_classes,
                         int64_t batch, const std::string& source_name) {
  if (auto c = check_graph(doc, source_name); !c) return c.error();
  // Shape inference first: its messages name the document node, which the IR cannot.
  if (auto s = infer_shapes(doc, sample_shape, num_classes); !s)
    return make_error(source_name + ": " + s.error().message);
  const NodeCatalogue& cat = builtin_catalogue();
  ModelGraph model{Graph(doc.name.empty() ? "model" : doc.name), {}, {}, {}, {}};
  std::map<std::pair<std::string, std::string>, Ref> port_value;  // (node, output port) -> value
  for (size_t i : topological_order(doc)) {
    const NodeDoc& n = doc.nodes[i];
    const NodeTypeDef* type = cat.find(n.type);
    auto rule = rules().find(n.type);
    if (!type || rule == rules().end())
      return make_error(source_name + ": node '" + n.id + "': type '" + n.type + "' cannot be trained yet");
    Refs inputs;
    for (const PortDef& p : type->inputs) {
      const LinkDoc* l = find_input_link(doc, n.id, p.name);
      if (!l) return make_error(source_name + ": node '" + n.id + "': input '" + p.name + "' is not linked");
      inputs.push_back(port_value.at({l->from_node, l->from_port}));
    }
    model.graph.set_label(n.id);
    LowerContext ctx{model, n, inputs, batch, sample_shape};
    auto outs = rule->second(ctx);
    if (!outs) return make_error(source_name + ": node '" + n.id + "': " + outs.error().message);
    for (size_t k = 0; k < type->outputs.size() && k < outs->size(); ++k)
      port_value[{n.id, type->outputs[k].name}] = (*outs)[k];
  }
  model.graph.set_label("");
  if (!model.input.valid() || !model.labels.valid() || !model.loss.valid())
    return make_error(source_name + ": the model needs an input node, a labels node and a loss node");
  model.graph.set_outputs({model.loss});
  if (auto v = model.graph.verify(); !v) return make_error(source_name + ": " + v.error().message);
  return model;
}

}  // namespace mls::nodes
