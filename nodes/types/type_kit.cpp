#include "nodes/types/type_kit.h"

#include "engine/core/check.h"
#include "engine/core/op.h"

namespace mls::nodes {

NodeTypeDef make_type(std::string id, std::string display_name, std::string category,
                      std::string doc, std::vector<PortDef> inputs, std::vector<PortDef> outputs,
                      NodeRole role) {
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

ParamDef int_param(std::string name, int64_t def, int64_t min, std::string doc) {
  ParamDef p = make_param(std::move(name), ParamKind::Int, def, std::move(doc));
  p.min = static_cast<double>(min);
  p.max = 1 << 16;
  return p;
}

ParamDef float_param(std::string name, double def, double min, double max, std::string doc,
                     bool max_exclusive) {
  ParamDef p = make_param(std::move(name), ParamKind::Float, def, std::move(doc));
  p.min = min;
  p.max = max;
  p.max_exclusive = max_exclusive;
  return p;
}

ParamDef init_param(std::string doc) {
  ParamDef p = make_param("init", ParamKind::Enum, "kaiming_uniform", std::move(doc));
  p.choices = {"kaiming_uniform", "xavier_uniform", "uniform_fan_in", "normal", "zeros"};
  return p;
}

ParamDef frozen_param() {
  ParamDef p = make_param("frozen", ParamKind::Bool, false,
                          "Keep this node's parameters fixed: no gradient, no optimizer step.");
  p.saved_when_default = false;
  return p;
}

Result<std::vector<Shape>> one(Shape s) {
  return std::vector<Shape>{std::move(s)};
}

Result<std::vector<Shape>> same_shape(const std::vector<Shape>& in, const json&,
                                      const InferContext&) {
  return one(in[0]);
}

Result<void> expect_image(const Shape& s, const std::string& layer) {
  if (s.size() != 4)
    return make_error(
        "input 'in' has shape " + format_shape(s) + "; " + layer +
        " expects images [N,C,H,W] — feed it from the Input node or another image layer, "
        "not after a Flatten");
  return {};
}

Result<std::vector<Shape>> op_shapes(std::string_view op, std::vector<ValueType> inputs,
                                     const Attrs& attrs, const std::string& misfit) {
  const OpDef* def = op_registry().find(op);
  MLS_CHECK(def != nullptr, "a node type names an op the engine does not register");
  bool batched = false;
  for (ValueType& t : inputs)
    if (!t.shape.empty() && t.shape[0] < 0) {
      t.shape[0] = 1;
      batched = true;
    }
  auto types = def->infer(inputs, attrs);
  if (!types) return make_error(misfit + " (" + types.error().message + ")");
  std::vector<Shape> out;
  for (const ValueType& t : *types) {
    Shape s = t.shape;
    if (batched && !s.empty() && s[0] == 1) s[0] = -1;
    out.push_back(std::move(s));
  }
  return out;
}

bool frozen(const json& params) {
  return params.value("frozen", false);
}

LayerConfig layer_config(const json& params, int64_t in, int64_t out) {
  LayerConfig c;
  c.in = in;
  c.out = out;
  c.init = params.value("init", std::string("kaiming_uniform"));
  c.bias = params.value("bias", true);
  return c;
}

Result<std::vector<Ref>> layer_param_refs(LowerContext& c, std::string_view layer,
                                          const LayerConfig& cfg, bool train) {
  auto ps = layer_params(layer, cfg);
  if (!ps) return ps.error();
  std::vector<Ref> refs;
  for (const LayerParam& p : *ps)
    refs.push_back(c.param(p.name, p.shape, p.init, train && p.trainable));
  return refs;
}

}  // namespace mls::nodes
