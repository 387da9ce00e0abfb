// Registers the CPU backend (the fallback) and every GPU backend this build has, once,
// before any test runs.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "gpu/backends.h"

namespace {
struct GpuInit : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override {
    mls::gpu::init_backends();
  }
};
}  // namespace
CATCH_REGISTER_LISTENER(GpuInit)
