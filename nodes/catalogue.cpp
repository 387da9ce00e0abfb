#include "nodes/catalogue.h"

#include <cmath>
#include <sstream>

#include "engine/core/check.h"
#include "engine/core/field_text.h"

namespace mls::nodes {

namespace {

template <typename Ports>
int port_index(const Ports& ports, std::string_view name) {
  for (size_t i = 0; i < ports.size(); ++i)
    if (ports[i].name == name) return static_cast<int>(i);
  return -1;
}

// Whole numbers print without a fraction so that messages read "an integer >= 1".
std::string format_number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

std::string range_text(const ParamDef& def) {
  if (def.min && def.max)
    return " in [" + format_number(*def.min) + ", " + format_number(*def.max) +
           (def.max_exclusive ? ")" : "]");
  if (def.min) return " >= " + format_number(*def.min);
  if (def.max) return (def.max_exclusive ? " < " : " <= ") + format_number(*def.max);
  return "";
}

bool in_range(const ParamDef& def, double v) {
  if (def.min && v < *def.min) return false;
  if (def.max && (def.max_exclusive ? v >= *def.max : v > *def.max)) return false;
  return true;
}

}  // namespace

const PortDef* NodeTypeDef::find_input(std::string_view name) const {
  int i = input_index(name);
  return i < 0 ? nullptr : &inputs[static_cast<size_t>(i)];
}

const PortDef* NodeTypeDef::find_output(std::string_view name) const {
  int i = output_index(name);
  return i < 0 ? nullptr : &outputs[static_cast<size_t>(i)];
}

int NodeTypeDef::input_index(std::string_view name) const {
  return port_index(inputs, name);
}
int NodeTypeDef::output_index(std::string_view name) const {
  return port_index(outputs, name);
}

const ParamDef* NodeTypeDef::find_param(std::string_view name) const {
  for (const ParamDef& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

nlohmann::json NodeTypeDef::default_params() const {
  nlohmann::json out = nlohmann::json::object();
  for (const ParamDef& p : params)
    if (!p.default_value.is_null()) out[p.name] = p.default_value;
  return out;
}

Result<void> check_param_value(const ParamDef& def, const nlohmann::json& value) {
  switch (def.kind) {
    case ParamKind::Int: {
      bool ok = value.is_number_integer() && in_range(def, value.get<double>());
      if (!ok) return make_error("must be an integer" + range_text(def));
      return {};
    }
    case ParamKind::Float: {
      bool ok = value.is_number() && std::isfinite(value.get<double>()) &&
                in_range(def, value.get<double>());
      if (!ok) return make_error("must be a number" + range_text(def));
      return {};
    }
    case ParamKind::Bool:
      if (!value.is_boolean()) return make_error("must be true or false");
      return {};
    case ParamKind::String:
      if (!value.is_string()) return make_error("must be a string");
      return {};
    case ParamKind::Enum: {
      if (value.is_string())
        for (const std::string& c : def.choices)
          if (value.get<std::string>() == c) return {};
      return make_error("must be one of " + quoted_list(def.choices, ", "));
    }
  }
  return make_error("has an unknown parameter kind");
}

Result<nlohmann::json> complete_params(const NodeTypeDef& def, const nlohmann::json& params,
                                       std::string* bad_param) {
  auto fail = [&](std::string param, std::string message) -> Result<nlohmann::json> {
    if (bad_param) *bad_param = std::move(param);
    return make_error(std::move(message));
  };
  if (!params.is_null() && !params.is_object()) return fail("", "params must be an object");
  nlohmann::json out = def.default_params();
  if (params.is_object()) {
    for (const auto& [name, value] : params.items()) {
      const ParamDef* p = def.find_param(name);
      if (!p) {
        std::vector<std::string> names;
        for (const ParamDef& known : def.params) names.push_back(known.name);
        std::string takes = names.empty() ? def.id + " takes no parameters"
                                          : def.id + " takes " + quoted_list(names, ", ");
        return fail(name, "unknown parameter '" + name + "' (" + takes + ")");
      }
      if (Result<void> ok = check_param_value(*p, value); !ok)
        return fail(name, ok.error().message);
      // Floats are stored as doubles so that `0` and `0.0` compare and save alike.
      out[name] = p->kind == ParamKind::Float ? nlohmann::json(value.get<double>()) : value;
    }
  }
  for (const ParamDef& p : def.params)
    if (p.required && !out.contains(p.name))
      return fail("", "missing required parameter '" + p.name + "'");
  return out;
}

std::string format_shape(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i] < 0 ? "N" : std::to_string(s[i]);
  }
  return out + "]";
}

void NodeCatalogue::add(NodeTypeDef def) {
  MLS_CHECK(find(def.id) == nullptr, "node type registered twice");
  MLS_CHECK(static_cast<bool>(def.infer), "node type without a shape rule");
  types_.push_back(std::move(def));
}

void NodeCatalogue::add_rename(std::string old_id, std::string new_id) {
  MLS_CHECK(find(old_id) == nullptr, "a renamed id is still a current type");
  renames_[std::move(old_id)] = std::move(new_id);
}

const NodeTypeDef* NodeCatalogue::find(std::string_view id) const {
  for (const NodeTypeDef& t : types_)
    if (t.id == id) return &t;
  return nullptr;
}

std::optional<std::string> NodeCatalogue::renamed_to(std::string_view old_id) const {
  auto it = renames_.find(old_id);
  if (it == renames_.end()) return std::nullopt;
  std::string id = it->second;
  // Follow a -> b -> c; the bound guards against a rename loop registered by mistake.
  for (size_t hops = 0; hops < renames_.size(); ++hops) {
    auto next = renames_.find(id);
    if (next == renames_.end()) return id;
    id = next->second;
  }
  MLS_CHECK(false, "rename loop in the node catalogue");
  return std::nullopt;
}

const NodeCatalogue& builtin_catalogue() {
  static const NodeCatalogue catalogue = [] {
    NodeCatalogue c;
    register_builtin_nodes(c);
    return c;
  }();
  return catalogue;
}

}  // namespace mls::nodes
