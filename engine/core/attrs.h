// Typed op attributes.
//
//   Attrs a;  a.set("axis", int64_t{-1});  a.set("alpha", 0.5);  a.get_int("axis")
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mls {

using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

enum class AttrKind : uint8_t { Int, Float, Ints, String };

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init) : items_(init) {}
  void set(const std::string& name, AttrValue v);
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const AttrValue* find(const std::string& name) const;
  // These assert that the attribute exists with that kind (the op schema guarantees it).
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  const std::vector<int64_t>& get_ints(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  int64_t get_int_or(const std::string& name, int64_t def) const;
  double get_float_or(const std::string& name, double def) const;
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }
  std::string to_string() const;  // "axis=-1, alpha=0.5"

 private:
  std::vector<std::pair<std::string, AttrValue>> items_;  // few items: a vector beats a map
};

}  // namespace mls
