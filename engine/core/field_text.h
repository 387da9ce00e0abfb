// How a setting and its valid values are named in a message: JSON pointers, quoted
// choices, numeric ranges. Shared by the readers of the .mls sections (nodes/json_fields.h,
// datasets/dataset_spec.cpp), so every message reads the same way.
//
//   Range r = kUnitOpen;
//   if (!r.contains(v)) return make_error(ptr("/dataset", "validation") + ": must be a number" + r.describe());
//   // "/dataset/validation: must be a number in [0, 1)"
//   quoted_list({"cpu", "cuda", "vulkan"});  // "'cpu', 'cuda' or 'vulkan'"
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace mls {

// JSON pointer escaping (RFC 6901), so that a key holding '/' still names one place.
inline std::string ptr(const std::string& base, std::string_view key) {
  std::string out = base + "/";
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}
inline std::string ptr(const std::string& base, size_t index) {
  return base + "/" + std::to_string(index);
}

inline std::string quoted_list(const std::vector<std::string>& items, const char* last_sep = " or ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += i + 1 == items.size() ? last_sep : ", ";
    out += "'" + items[i] + "'";
  }
  return out;
}

inline std::string format_number(double v) {
  // Whole numbers in full ("[1, 16777216]", not "[1, 1.67772e+07]").
  if (v == static_cast<double>(static_cast<int64_t>(v)) && v > -1e15 && v < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  std::ostringstream os;
  os << v;
  return os.str();
}

// A numeric range for a field, with how to say it in a message ("in [0, 1)", "> 0").
struct Range {
  std::optional<double> lo, hi;
  bool lo_open = false, hi_open = false;

  bool contains(double v) const {
    if (lo && (lo_open ? v <= *lo : v < *lo)) return false;
    if (hi && (hi_open ? v >= *hi : v > *hi)) return false;
    return true;
  }
  std::string describe() const {
    if (lo && hi)
      return " in " + std::string(lo_open ? "(" : "[") + format_number(*lo) + ", " +
             format_number(*hi) + (hi_open ? ")" : "]");
    if (lo) return std::string(lo_open ? " > " : " >= ") + format_number(*lo);
    if (hi) return std::string(hi_open ? " < " : " <= ") + format_number(*hi);
    return "";
  }
};

//                      lo    hi            lo_open hi_open
inline const Range kPositive{0.0, std::nullopt, true, false};      // > 0
inline const Range kNonNegative{0.0, std::nullopt, false, false};  // >= 0
inline const Range kAtLeastOne{1.0, std::nullopt, false, false};   // >= 1
inline const Range kUnitOpen{0.0, 1.0, false, true};               // [0, 1)

}  // namespace mls
