// JSON as text that never throws. nlohmann's default dump throws on a string whose bytes are
// not UTF-8, and strings of a stranger's reach JSON unchecked: a cell's printed output, a
// path, an error message, a --set value. Here such bytes become U+FFFD.
//
//   write_text_atomically(path, json_text(j, 1) + "\n");
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace mls::nodes {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mls::nodes
