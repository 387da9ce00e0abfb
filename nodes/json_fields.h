// Reading typed fields out of JSON with messages that name the file and the JSON path:
// "P.mls: /training/epochs: must be an integer >= 1". Shared by the sections of the .mls
// reader (document.cpp, training_spec.cpp).
//
//   FieldReader r("P.mls");
//   int64_t epochs = 5;
//   if (auto e = r.int_field(obj, "/training", "epochs", kAtLeastOne, epochs); !e) return e;
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/field_text.h"
#include "engine/core/result.h"

namespace mls::nodes {

class FieldReader {
 public:
  using json = nlohmann::json;
  explicit FieldReader(const std::string& source) : source_(source) {}

  Error fail(const std::string& path, const std::string& message) const {
    return make_error(source_ + ": " + (path.empty() ? "" : path + ": ") + message);
  }

  // The object at `key`, or null when absent; an error when present but not an object.
  Result<const json*> section(const json& parent, const std::string& parent_path,
                              std::string_view key) const {
    auto it = parent.find(key);
    if (it == parent.end()) return static_cast<const json*>(nullptr);
    if (!it->is_object()) return fail(ptr(parent_path, key), "must be an object");
    return &*it;
  }

  Result<void> known_keys(const json& obj, const std::string& path,
                          const std::vector<std::string>& allowed,
                          const std::string& context = "") const {
    for (const auto& [key, value] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        return fail(ptr(path, key), "unknown key '" + key + "'" + context + " (expected " +
                                        quoted_list(allowed) + ")");
    return {};
  }

  Result<void> string_field(const json& obj, const std::string& path, std::string_view key,
                            std::string& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_string()) return fail(ptr(path, key), "must be a string");
    out = it->get<std::string>();
    return {};
  }

  Result<void> bool_field(const json& obj, const std::string& path, std::string_view key,
                          bool& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_boolean()) return fail(ptr(path, key), "must be true or false");
    out = it->get<bool>();
    return {};
  }

  Result<void> number_field(const json& obj, const std::string& path, std::string_view key,
                            const Range& range, double& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_number() || !range.contains(it->get<double>()))
      return fail(ptr(path, key), "must be a number" + range.describe());
    out = it->get<double>();
    return {};
  }

  template <typename Int>
  Result<void> int_field(const json& obj, const std::string& path, std::string_view key,
                         const Range& range, Int& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    // Positive literals parse as unsigned; one past Int's range would wrap on get<Int>().
    bool fits = !it->is_number_unsigned() ||
                it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!it->is_number_integer() || !fits || !range.contains(it->get<double>()))
      return fail(ptr(path, key), "must be an integer" + range.describe());
    out = it->get<Int>();
    return {};
  }

  // A string field that must be one of `choices`; `what` names it in the message
  // ("unknown device 'tpu' (expected 'cpu', 'cuda' or 'vulkan')").
  Result<void> choice_field(const json& obj, const std::string& path, std::string_view key,
                            const char* what, const std::vector<std::string>& choices,
                            std::string& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    std::string value = it->is_string() ? it->get<std::string>() : it->dump();
    if (!it->is_string() || std::find(choices.begin(), choices.end(), value) == choices.end())
      return fail(ptr(path, key), std::string("unknown ") + what + " '" + value + "' (expected " +
                                      quoted_list(choices) + ")");
    out = value;
    return {};
  }

 protected:
  const std::string& source_;
};

}  // namespace mls::nodes
