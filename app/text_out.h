// Text the commands print: JSON that a terminal shows as text, and table cells padded by
// display columns. Every JSON object a command prints goes through terminal_json: it holds
// strangers' text (run notes, student names, a student's error messages, file names), and
// nlohmann's default dump throws on bytes that are not UTF-8 (`mlstudio --run $'\xff.mls'
// --json` aborted with exit 134 before this).
//
//   std::printf("%s\n", terminal_json(j).c_str());
//   pad_columns("naïve", 8);  // "naïve   ": five columns, three spaces
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "nodes/json_text.h"

namespace mls::app {

// Display columns of UTF-8 text: one per code point (a lead byte or an ASCII byte).
inline size_t text_columns(std::string_view s) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return cols;
}

// s padded with spaces to `width` columns, after it (or before it when `right`); s as it is
// when it is already as wide.
inline std::string pad_columns(const std::string& s, size_t width, bool right = false) {
  const size_t cols = text_columns(s);
  if (cols >= width) return s;
  return right ? std::string(width - cols, ' ') + s : s + std::string(width - cols, ' ');
}

// JSON with invalid UTF-8 replaced and the C1 controls (U+0080..U+009F, which some terminals
// read as CSI and the like) written as \u00XX: their two UTF-8 bytes only occur inside strings.
inline std::string terminal_json(const nlohmann::json& j) {
  const std::string s = nodes::json_text(j);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      static const char* digits = "0123456789abcdef";
      out += "\\u00";
      out += digits[next >> 4];
      out += digits[next & 15];
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace mls::app
