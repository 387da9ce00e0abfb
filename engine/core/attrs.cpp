#include "engine/core/attrs.h"

#include <sstream>

#include "engine/core/check.h"

namespace mls {

void Attrs::set(const std::string& name, AttrValue v) {
  for (auto& [k, val] : items_) {
    if (k == name) {
      val = std::move(v);
      return;
    }
  }
  items_.emplace_back(name, std::move(v));
}

const AttrValue* Attrs::find(const std::string& name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

int64_t Attrs::get_int(const std::string& name) const {
  const AttrValue* v = find(name);
  MLS_CHECK(v && std::holds_alternative<int64_t>(*v), "missing int attribute");
  return std::get<int64_t>(*v);
}

double Attrs::get_float(const std::string& name) const {
  const AttrValue* v = find(name);
  MLS_CHECK(v != nullptr, "missing float attribute");
  if (std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  MLS_CHECK(std::holds_alternative<double>(*v), "attribute is not a float");
  return std::get<double>(*v);
}

const std::vector<int64_t>& Attrs::get_ints(const std::string& name) const {
  const AttrValue* v = find(name);
  MLS_CHECK(v && std::holds_alternative<std::vector<int64_t>>(*v), "missing ints attribute");
  return std::get<std::vector<int64_t>>(*v);
}

const std::string& Attrs::get_string(const std::string& name) const {
  const AttrValue* v = find(name);
  MLS_CHECK(v && std::holds_alternative<std::string>(*v), "missing string attribute");
  return std::get<std::string>(*v);
}

int64_t Attrs::get_int_or(const std::string& name, int64_t def) const {
  return has(name) ? get_int(name) : def;
}

double Attrs::get_float_or(const std::string& name, double def) const {
  return has(name) ? get_float(name) : def;
}

std::string Attrs::to_string() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : items_) {
    if (!first) os << ", ";
    first = false;
    os << k << "=";
    if (auto* i = std::get_if<int64_t>(&v)) {
      os << *i;
    } else if (auto* d = std::get_if<double>(&v)) {
      os << *d;
    } else if (auto* s = std::get_if<std::string>(&v)) {
      os << '"' << *s << '"';
    } else {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      os << "[";
      for (size_t j = 0; j < xs.size(); ++j) os << (j ? "," : "") << xs[j];
      os << "]";
    }
  }
  return os.str();
}

}  // namespace mls
