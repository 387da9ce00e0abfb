// Registers the ops and CPU kernels once, before any engine test runs (the engine has no
// static initialisers by design).
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include "engine/core/op.h"

namespace {
struct EngineInit : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunStarting(Catch::TestRunInfo const&) override { mls::engine_init(); }
};
}  // namespace
CATCH_REGISTER_LISTENER(EngineInit)
