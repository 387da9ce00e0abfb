#include "engine/ir/graph.h"

#include <sstream>

namespace mls {

Ref Graph::new_value(Value v) {
  values_.push_back(std::move(v));
  return Ref{static_cast<int32_t>(values_.size() - 1)};
}

Ref Graph::add_input(const std::string& name, const ValueType& type) {
  Ref r = new_value(Value{.type = type, .kind = ValueKind::Input, .name = name});
  inputs_.push_back(r);
  return r;
}

Ref Graph::add_param(const std::string& name, const ValueType& type, ParamInit init, bool trainable) {
  Ref r = new_value(
      Value{.type = type, .kind = ValueKind::Param, .name = name, .init = std::move(init), .trainable = trainable});
  params_.push_back(r);
  return r;
}

Ref Graph::add_constant(const std::string& name, Tensor value) {
  ValueType t{value.dtype(), value.shape()};
  return new_value(Value{.type = t, .kind = ValueKind::Const, .name = name, .constant = std::move(value)});
}

ValueType Graph::type_of(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < values_.size(), "Graph: unknown value");
  return values_[static_cast<size_t>(r.id)].type;
}

Ref Graph::find_value(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return Ref{static_cast<int32_t>(i)};
  return Ref{};
}

Result<Refs> Graph::add_node(std::string_view op_name, std::span<const Ref> inputs,
                             const Attrs& attrs) {
  std::string where = label_.empty() ? "" : "node '" + label_ + "': ";
  const OpDef* op = op_registry().find(op_name);
  if (!op) return make_error(where + "unknown op '" + std::string(op_name) + "'");
  if (op->num_inputs >= 0 && static_cast<int>(inputs.size()) != op->num_inputs)
    return make_error(where + std::string(op_name) + " takes " + std::to_string(op->num_inputs) +
                      " inputs, got " + std::to_string(inputs.size()));
  for (const AttrSpec& a : op->attrs) {
    const AttrValue* v = attrs.find(a.name);
    if (!v) {
      if (a.required) return make_error(where + std::string(op_name) + ": missing attribute '" + a.name + "'");
      continue;
    }
    // A float attribute may be given as an integer; every other kind must match.
    bool ok = (a.kind == AttrKind::Int && std::holds_alternative<int64_t>(*v)) ||
              (a.kind == AttrKind::Float && (std::holds_alternative<double>(*v) || std::holds_alternative<int64_t>(*v))) ||
              (a.kind == AttrKind::Ints && std::holds_alternative<std::vector<int64_t>>(*v)) ||
              (a.kind == AttrKind::String && std::holds_alternative<std::string>(*v));
    if (!ok) return make_error(where + std::string(op_name) + ": attribute '" + a.name + "' has the wrong kind");
  }
  std::vector<ValueType> in_types;
  in_types.reserve(inputs.size());
  for (Ref r : inputs) {
    if (!r.valid() || static_cast<size_t>(r.id) >= values_.size())
      return make_error(where + std::string(op_name) + ": input is not a value of this graph");
    in_types.push_back(type_of(r));
  }
  auto out_types = op->infer(in_types, attrs);
  if (!out_types) return make_error(where + std::string(op_name) + ": " + out_types.error().message);
  Node n{.op = op, .attrs = attrs, .inputs = Refs(inputs.begin(), inputs.end()), .outputs = {},
         .label = label_, .backward = backward_mode_};
  auto node_index = static_cast<int32_t>(nodes_.size());
  for (size_t i = 0; i < out_types->size(); ++i)
    n.outputs.push_back(new_value(Value{.type = (*out_types)[i], .kind = ValueKind::Node,
                                       .node = node_index, .output_index = static_cast<int32_t>(i)}));
  nodes_.push_back(std::move(n));
  return nodes_.back().outputs;
}

Refs Graph::emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) {
  auto r = add_node(op, inputs, attrs);
  if (!r) {
    std::fprintf(stderr, "mlstudio: %s\n", r.error().message.c_str());
    MLS_CHECK(false, "an op emitted by the engine failed to type-check");
  }
  return *r;
}

Result<void> Graph::verify() const {
  std::vector<bool> defined(values_.size(), false);
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind != ValueKind::Node) defined[i] = true;
  for (size_t ni = 0; ni < nodes_.size(); ++ni) {
    const Node& n = nodes_[ni];
    std::string where = "graph '" + name_ + "', node " + std::to_string(ni) + " (" + n.op->name +
                        (n.label.empty() ? "" : ", '" + n.label + "'") + "): ";
    std::vector<ValueType> in_types;
    for (Ref r : n.inputs) {
      if (!r.valid() || static_cast<size_t>(r.id) >= values_.size())
        return make_error(where + "input refers to no value");
      if (!defined[static_cast<size_t>(r.id)])
        return make_error(where + "uses " + value_name(r) + " before it is defined");
      in_types.push_back(type_of(r));
    }
    auto out = n.op->infer(in_types, n.attrs);
    if (!out) return make_error(where + out.error().message);
    if (out->size() != n.outputs.size()) return make_error(where + "wrong number of outputs");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value& v = value(n.outputs[k]);
      if (defined[static_cast<size_t>(n.outputs[k].id)])
        return make_error(where + value_name(n.outputs[k]) + " is defined twice (not SSA)");
      if (v.node != static_cast<int32_t>(ni) || v.output_index != static_cast<int32_t>(k))
        return make_error(where + "output " + value_name(n.outputs[k]) + " names another producer");
      if (!(v.type == (*out)[k]))
        return make_error(where + value_name(n.outputs[k]) + " has type " + type_str(v.type) +
                          " but the op infers " + type_str((*out)[k]));
      defined[static_cast<size_t>(n.outputs[k].id)] = true;
    }
  }
  for (Ref r : outputs_)
    if (!r.valid() || static_cast<size_t>(r.id) >= values_.size() || !defined[static_cast<size_t>(r.id)])
      return make_error("graph '" + name_ + "': an output is not defined");
  return {};
}

std::string Graph::value_name(Ref r) const {
  const Value& v = value(r);
  if (v.kind == ValueKind::Node || v.name.empty()) return "%" + std::to_string(r.id);
  return "%" + v.name;
}

std::string Graph::to_text() const {
  std::ostringstream os;
  auto list = [&](const Refs& refs) {
    for (size_t i = 0; i < refs.size(); ++i)
      os << (i ? ", " : "") << value_name(refs[i]) << ": " << type_str(type_of(refs[i]));
  };
  os << "graph " << name_ << "(";
  list(inputs_);
  os << ")";
  if (!params_.empty()) {
    os << " params(";
    list(params_);
    os << ")";
  }
  os << " {\n";
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].kind == ValueKind::Const)
      os << "  " << value_name(Ref{static_cast<int32_t>(i)}) << ": " << type_str(values_[i].type)
         << " = constant\n";
  bool in_backward = false;
  for (const Node& n : nodes_) {
    if (n.backward && !in_backward) {
      os << "  // backward\n";
      in_backward = true;
    }
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "") << value_name(n.outputs[k]) << ": " << type_str(type_of(n.outputs[k]));
    if (!n.outputs.empty()) os << " = ";
    os << n.op->name << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) os << (k ? ", " : "") << value_name(n.inputs[k]);
    os << ")";
    if (!n.attrs.items().empty()) os << " {" << n.attrs.to_string() << "}";
    if (!n.label.empty()) os << "  # " << n.label;
    os << "\n";
  }
  os << "  return ";
  for (size_t i = 0; i < outputs_.size(); ++i) os << (i ? ", " : "") << value_name(outputs_[i]);
  os << "\n}\n";
  return os.str();
}

Ref Graph::viewed_value(Ref r) const {
  for (;;) {
    const Value& v = value(r);
    if (v.kind != ValueKind::Node) return r;
    const Node& n = nodes_[static_cast<size_t>(v.node)];
    if (!n.op->view || v.output_index != 0) return r;
    r = n.inputs[0];
  }
}

}  // namespace mls
