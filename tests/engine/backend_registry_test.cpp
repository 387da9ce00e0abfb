// Backends by name: what `--device` and a project's "device" look up.
#include <catch2/catch.hpp>

#include "engine/core/backend_registry.h"
#include "engine/cpu/cpu_backend.h"

using namespace mls;

TEST_CASE("the backend registry opens devices by name and says which ones this build has",
          "[backend]") {
  cpu::init();
  auto cpu = backend_registry().open("cpu");
  REQUIRE(cpu);
  CHECK(*cpu == &cpu::backend());
  auto cpu0 = backend_registry().open("cpu:0");
  REQUIRE(cpu0);
  CHECK(*cpu0 == &cpu::backend());

  auto second = backend_registry().open("cpu:1");
  REQUIRE_FALSE(second);
  CHECK(second.error().message == "device 'cpu:1': there is one CPU device: cpu (or cpu:0)");
  auto missing = backend_registry().open("vulkan");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message.find(
            "device 'vulkan' is not available in this build (available: cpu") == 0);
  CHECK_FALSE(backend_registry().check("cuda:1"));
  CHECK(backend_registry().check("cpu"));

  for (const char* bad : {"cpu:", "cpu:x", "cpu:-1", "cpu:1x", ":0"}) {
    INFO(bad);
    CHECK_FALSE(parse_device(bad));
  }
  auto p = parse_device("vulkan:12");
  REQUIRE(p);
  CHECK(p->first == "vulkan");
  CHECK(p->second == 12);

  // A backend that registers later is found; one of the same name replaces it.
  BackendRegistry reg;
  int opened = 0;
  reg.add({"fake", DeviceKind::Vulkan, [&](int i) -> Result<Backend*> {
             ++opened;
             if (i > 0) return make_error("no device " + std::to_string(i));
             return &cpu::backend();
           }});
  CHECK(reg.open("fake"));
  auto no_device = reg.open("fake:2");
  REQUIRE_FALSE(no_device);
  CHECK(no_device.error().message == "device 'fake:2': no device 2");
  reg.add({"fake", DeviceKind::Vulkan,
           [](int) -> Result<Backend*> { return make_error("driver failed"); }});
  CHECK(reg.names() == std::vector<std::string>{"fake"});
  CHECK_FALSE(reg.open("fake"));
  CHECK(opened == 2);
}
