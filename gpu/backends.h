// Registers every backend this build has: the CPU always, Vulkan and CUDA where gpu/ built
// them (their targets define MLSTUDIO_HAVE_VULKAN / MLSTUDIO_HAVE_CUDA for whoever links
// them). Header-only, so the engine-only programs (benchmarks, the GPU tests) and the
// runner share it without a library of its own.
//
//   mls::gpu::init_backends();   // then backend_registry().open("vulkan") finds it
#pragma once

#include "engine/cpu/cpu_backend.h"
#ifdef MLSTUDIO_HAVE_VULKAN
#include "gpu/vulkan/vulkan_backend.h"
#endif
#ifdef MLSTUDIO_HAVE_CUDA
#include "gpu/cuda/cuda_backend.h"
#endif

#include <string_view>

namespace mls::gpu {

// How many devices of a kind ("cpu", "vulkan", "cuda") this host has and this build can list:
// 1 for the CPU; 0 for a kind the build lacks or whose driver lists none.
inline int device_count(std::string_view kind) {
  if (kind == "cpu") return 1;
#ifdef MLSTUDIO_HAVE_VULKAN
  if (kind == "vulkan") {
    auto devices = vulkan::list_devices();
    return devices ? static_cast<int>(devices->size()) : 0;
  }
#endif
#ifdef MLSTUDIO_HAVE_CUDA
  if (kind == "cuda") {
    auto devices = cuda::list_devices();
    return devices ? static_cast<int>(devices->size()) : 0;
  }
#endif
  return 0;
}

inline void init_backends() {
  cpu::init();
#ifdef MLSTUDIO_HAVE_VULKAN
  vulkan::init();
#endif
#ifdef MLSTUDIO_HAVE_CUDA
  cuda::init();
#endif
}

}  // namespace mls::gpu
