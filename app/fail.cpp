// How every command reports a failure.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/commands.h"

namespace mls::app {

int fail(const std::string& msg) {
  std::fprintf(stderr, "mlstudio: %s\n", msg.c_str());
  return 1;
}

void print_json_failure(const std::string& msg) {
  std::printf("%s\n", nlohmann::json{{"status", "failed"}, {"error", msg}}.dump().c_str());
}

}  // namespace mls::app
