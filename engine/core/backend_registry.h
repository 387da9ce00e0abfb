// Backends by name. The backends a build has register themselves when app/ (or a test)
// initialises them — the CPU backend always, Vulkan and CUDA where they were built — and
// `--device`, a project's "device" and the editor's picker look one up by name, a second
// device of a kind as "vulkan:1".
//
//   backend_registry().add({"cpu", DeviceKind::CPU, [](int) -> Result<Backend*> { return &cpu; }});
//   Result<Backend*> b = backend_registry().open("vulkan:1");
//   if (!b) say(b.error().message);   // "device 'vulkan' is not available in this build
//   (available: cpu)"
//
// The engine itself never names a backend: it takes a Backend& from whoever opened it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"

namespace mls {

struct BackendFactory {
  std::string name;  // "cpu", "vulkan", "cuda"
  DeviceKind kind = DeviceKind::CPU;
  // The index-th device of this kind, opened on first use and kept for the process; an
  // error says why (no such device, a driver that failed).
  std::function<Result<Backend*>(int index)> open;
};

// The `open` of a GPU backend's factory: device `index` is made by `create` on first use
// and kept for the process (never destroyed: tensors in static storage may outlive any
// destruction order, and the process's exit frees the device); a device that failed to open
// fails again with the same message, without retrying the driver.
std::function<Result<Backend*>(int index)> open_once(
    std::function<Result<std::unique_ptr<Backend>>(int index)> create);

class BackendRegistry {
 public:
  void add(BackendFactory f);  // replaces a factory of the same name
  // "cpu", "vulkan", "vulkan:1". Errors name the device and list the available ones.
  Result<Backend*> open(std::string_view device);
  // Whether `device` names a registered backend, without opening it; the error is open()'s.
  Result<void> check(std::string_view device) const;
  bool has(std::string_view name) const;
  // The host's backend (the first registered CPU one), where a node that a device has no
  // kernel for runs instead; nullptr when none is registered.
  Backend* host();
  std::vector<std::string> names() const;  // in registration order

 private:
  mutable std::mutex mu_;
  std::vector<BackendFactory> factories_;
};

BackendRegistry& backend_registry();

// "vulkan:1" -> {"vulkan", 1}; "cpu" -> {"cpu", 0}. Error on a bad index.
Result<std::pair<std::string, int>> parse_device(std::string_view device);

}  // namespace mls
