#include "runner/backends.h"

#include <thread>

#include "engine/core/backend_registry.h"
#include "gpu/backends.h"
#include "runner/training_run.h"

namespace mls::runner {

void init_backends() { gpu::init_backends(); }

std::vector<DeviceLine> describe_devices() {
  init_backends();
  std::vector<DeviceLine> out;
  out.push_back({"cpu", std::to_string(cpu::backend().num_threads()) + " threads", true});
#ifdef MLSTUDIO_HAVE_VULKAN
  if (auto devices = vulkan::list_devices(); !devices) {
    out.push_back({"vulkan", devices.error().message, false});
  } else if (devices->empty()) {
    out.push_back({"vulkan", "no Vulkan device (install mesa-vulkan-drivers for lavapipe, or a GPU driver)", false});
  } else {
    for (size_t i = 0; i < devices->size(); ++i) {
      const auto& d = (*devices)[i];
      out.push_back({i == 0 ? "vulkan" : "vulkan:" + std::to_string(i),
                     d.name + ", " + d.type + ", " + bytes_text(static_cast<int64_t>(d.memory_bytes)), true});
    }
  }
#else
  out.push_back({"vulkan", "not in this build (needs libvulkan-dev and glslc when building)", false});
#endif
#ifdef MLSTUDIO_HAVE_CUDA
  if (auto devices = cuda::list_devices(); !devices) {
    out.push_back({"cuda", devices.error().message, false});
  } else {
    for (size_t i = 0; i < devices->size(); ++i) {
      const auto& d = (*devices)[i];
      out.push_back({i == 0 ? "cuda" : "cuda:" + std::to_string(i),
                     d.name + ", " + bytes_text(static_cast<int64_t>(d.memory_bytes)), true});
    }
  }
#else
  out.push_back({"cuda", "not in this build (needs nvcc, the CUDA toolkit, when building)", false});
#endif
  return out;
}

int device_count(std::string_view device) {
  auto parsed = parse_device(device);
  return parsed ? gpu::device_count(parsed->first) : 0;
}

}  // namespace mls::runner
