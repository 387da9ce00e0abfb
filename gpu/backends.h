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

namespace mls::gpu {

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
