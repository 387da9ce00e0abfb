// CLI11 validators shared by the commands.
//
//   app.add_option("--epochs", n)->check(whole<int64_t>(1, kMaxEpochs));
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <string>

namespace mls::app {

// A whole number in [lo, hi], read exactly from the text: CLI11's own conversion clamps a
// number past its type (a --seed of 99999999999999999999999 became 2^64 - 1, a run id of 2^63
// became 2^63 - 1) and takes "+1"; this refuses those, and CLI11 names the flag.
template <typename Int>
CLI::Validator whole(Int lo, Int hi) {
  const std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        Int v{};
        const char* end = text.data() + text.size();
        auto [at, ec] = std::from_chars(text.data(), end, v);
        if (ec == std::errc() && at == end && v >= lo && v <= hi) return {};
        return "must be a whole number in " + range + ", got '" + text + "'";
      },
      range);
}

}  // namespace mls::app
