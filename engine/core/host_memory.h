// What this machine's memory can hold, from /proc/meminfo and the cgroup (v2) the process
// runs in: the figures behind the CPU backend's largest allocation and the pre-flight's
// "does it fit".
//
//   HostMemory m = read_host_memory();
//   m.available;                 // MemAvailable, capped by what the cgroup has left
//   host_allocation_limit();     // RAM + swap, capped by the cgroup's memory.max; cached
//
// Why a limit of our own: Linux may grant an allocation larger than the machine (overcommit),
// and the process is then killed by the OOM killer when the pages are touched, mid-run and
// without a word. A buffer that can never be backed is refused up front instead, as
// std::bad_alloc, which the compiled plan reports with its size.
#pragma once

#include <cstdint>
#include <optional>

namespace mls {

struct HostMemory {
  std::optional<int64_t> total;         // MemTotal
  std::optional<int64_t> swap;          // SwapTotal
  std::optional<int64_t> available;     // MemAvailable, and no more than the cgroup has left
  std::optional<int64_t> cgroup_limit;  // memory.max, when not "max"
};
HostMemory read_host_memory();

// The largest single allocation that could ever be backed here: RAM + swap, or the
// cgroup's limit when lower; INT64_MAX when neither can be read. Read once.
int64_t host_allocation_limit();

// A whole number from a one-line file (a cgroup or /proc knob); empty when it is missing,
// "max", or not a number.
std::optional<int64_t> read_int_file(const char* path);

}  // namespace mls
