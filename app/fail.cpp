// How every command reports a failure, and text from files made safe for the terminal.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"

namespace mls::app {

std::string terminal_safe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&out](unsigned char c) {
    static const char* digits = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      // U+0080..U+009F in UTF-8: C1 controls (0x9b is a one-byte CSI on some terminals).
      hex(c);
      hex(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "mlstudio: %s\n", terminal_safe(msg).c_str());
  return 1;
}

void print_json_failure(const std::string& msg) {
  std::printf("%s\n", terminal_json({{"status", "failed"}, {"error", msg}}).c_str());
}

}  // namespace mls::app
