// Registers the ops, the CPU kernels and the "cpu" backend once, before any test runs (the
// engine has no static initialisers by design).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"

namespace {
struct EngineInit : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override { mls::cpu::init(); }
};
}  // namespace
CATCH_REGISTER_LISTENER(EngineInit)
