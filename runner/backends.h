// The backends this build has, registered in one place: the CPU always, Vulkan and CUDA
// where they were built (gpu/). The app, the editor's tests and the benchmarks call
// init_backends() once; `--device`, a project's "device" and the editor's picker then find
// them in backend_registry().
//
//   runner::init_backends();
//   for (const DeviceLine& d : runner::describe_devices()) std::cout << d.name << " " << d.detail;
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mls::runner {

void init_backends();

// What `mlstudio devices` prints: every device each backend reports, with whether it opens.
struct DeviceLine {
  std::string name;    // "cpu", "vulkan", "vulkan:1", "cuda"
  std::string detail;  // "llvmpipe (LLVM 15.0.6, 256 bits), CPU (software), 23.4 GiB" or why not
  bool available = false;
};
std::vector<DeviceLine> describe_devices();

// How many devices of `device`'s kind ("cuda", "vulkan:1": CUDA's, Vulkan's) this host has and
// this build can list: what rank_device (runner/ranks.h) shares out among a job's ranks. The
// CPU is one; a kind this build lacks, or whose driver fails to list devices, is 0.
int device_count(std::string_view device);

}  // namespace mls::runner
