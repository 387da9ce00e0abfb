#include "nodes/lower.h"

#include <map>

#include "engine/train/rng.h"
#include "nodes/shape_check.h"

namespace mls::nodes {

Ref LowerContext::step_seed() {
  if (!model.step_seed.valid())
    model.step_seed = model.graph.add_input("step_seed", {DType::I64, {1}});
  return model.step_seed;
}

int64_t LowerContext::node_seed() const {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the node id
  for (unsigned char ch : node_id) h = (h ^ ch) * 0x100000001b3ull;
  return static_cast<int64_t>(h >> 1);
}

Ref LowerContext::param(const std::string& name, const Shape& shape, ParamInit init,
                        bool trainable) {
  return model.graph.add_param(node_id + "." + name, {DType::F32, shape}, std::move(init),
                               trainable);
}

Result<ModelGraph> lower(const Document& doc, const InferContext& data, int64_t batch,
                         bool training, const std::string& source_name,
                         std::map<std::string, Refs>* node_outputs) {
  if (auto c = check_graph(doc, source_name); !c) return c.error();
  // Shape inference first: its messages name the document node, which the IR cannot.
  if (auto s = infer_shapes(doc, data); !s)
    return make_error(source_name + ": " + s.error().message);
  const NodeCatalogue& cat = builtin_catalogue();
  ModelGraph model{Graph(doc.name.empty() ? "model" : doc.name), {}, {}, {}, {}, {}};
  std::map<std::pair<std::string, std::string>, Ref> port_value;  // (node, output port) -> value
  for (size_t i : topological_order(doc)) {
    const NodeDoc& n = doc.nodes[i];
    const NodeTypeDef* type = cat.find(n.type);
    if (!type || !type->lower)
      return make_error(source_name + ": node '" + n.id + "': type '" + n.type +
                        "' cannot be trained yet");
    Refs inputs;
    for (const PortDef& p : type->inputs) {
      const LinkDoc* l = find_input_link(doc, n.id, p.name);
      if (!l)
        return make_error(source_name + ": node '" + n.id + "': input '" + p.name +
                          "' is not linked");
      inputs.push_back(port_value.at({l->from_node, l->from_port}));
    }
    model.graph.set_label(n.id);
    auto params = complete_params(*type, n.params);
    if (!params)
      return make_error(source_name + ": node '" + n.id + "': " + params.error().message);
    LowerContext ctx{model, n.id, *params, inputs, batch, data, training};
    auto outs = type->lower(ctx);
    if (!outs) return make_error(source_name + ": node '" + n.id + "': " + outs.error().message);
    for (size_t k = 0; k < type->outputs.size() && k < outs->size(); ++k)
      port_value[{n.id, type->outputs[k].name}] = (*outs)[k];
    if (node_outputs) (*node_outputs)[n.id] = *outs;
  }
  model.graph.set_label("");
  if (!model.input.valid() || !model.labels.valid() || !model.loss.valid())
    return make_error(source_name +
                      ": the model needs an input node, a labels node and a loss node");
  model.graph.set_outputs({model.loss});
  if (auto v = model.graph.verify(); !v) return make_error(source_name + ": " + v.error().message);
  return model;
}

Result<LoweredNode> lower_alone(const NodeTypeDef& def, const std::string& node_id,
                                const nlohmann::json& params, const std::vector<Shape>& inputs,
                                const InferContext& data) {
  if (!def.lower) return make_error("type '" + def.id + "' cannot be lowered");
  ModelGraph model{Graph("node"), {}, {}, {}, {}, {}};
  Refs refs;
  bool batched = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Shape s = inputs[i];
    if (!s.empty() && s[0] < 0) batched = true;
    for (auto& d : s)
      if (d < 0) d = 1;
    const bool labels = i < def.inputs.size() && def.inputs[i].kind == PortKind::Labels;
    const DType dt = labels && !data.regression() ? DType::I64 : DType::F32;
    refs.push_back(model.graph.add_input("in" + std::to_string(i), {dt, s}));
  }
  model.graph.set_label(node_id);
  LowerContext ctx{model, node_id, params, refs, 1, data, false};
  auto outs = def.lower(ctx);
  if (!outs) return outs.error();
  LoweredNode r;
  for (Ref o : *outs) {
    Shape s = model.graph.shape_of(o);
    if (batched && !s.empty() && s[0] == 1) s[0] = -1;
    r.outputs.push_back(std::move(s));
  }
  for (Ref p : model.graph.params()) r.params += numel(model.graph.shape_of(p));
  return r;
}

}  // namespace mls::nodes
