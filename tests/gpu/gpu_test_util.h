// Helpers for the GPU backends' tests: which backends this build has, and opening one or
// skipping visibly where the machine has no such device.
//
//   Backend* vk = open_or_skip("vulkan");   // WARN + nullptr without a Vulkan device
//   if (!vk) return;
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "engine/core/backend_registry.h"
#include "gpu/backends.h"

namespace mls::test {

// The device, or nullptr after a visible warning when this build or machine has none. Where
// MLS_REQUIRE_DEVICES names it (make test: "vulkan", which lavapipe always provides), a
// device that does not open fails the test instead.
inline Backend* open_or_skip(const std::string& device) {
  auto b = backend_registry().open(device);
  if (!b) {
    const char* required = std::getenv("MLS_REQUIRE_DEVICES");
    if (required && std::string(required).find(device) != std::string::npos)
      FAIL("device " << device << " is required here (MLS_REQUIRE_DEVICES) but: " << b.error().message);
    WARN("SKIPPED: " << b.error().message);
    return nullptr;
  }
  return *b;
}

}  // namespace mls::test
