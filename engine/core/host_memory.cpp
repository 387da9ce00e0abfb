#include "engine/core/host_memory.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

namespace mls {

std::optional<int64_t> read_int_file(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return std::nullopt;
  try {
    return std::stoll(s);
  } catch (...) {
    return std::nullopt;
  }
}

HostMemory read_host_memory() {
  HostMemory m;
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  int64_t kb = 0;
  while (f >> key >> kb) {
    std::getline(f, unit);  // " kB", or nothing (HugePages_Total and the like)
    if (key == "MemTotal:") m.total = kb * 1024;
    if (key == "SwapTotal:") m.swap = kb * 1024;
    if (key == "MemAvailable:") m.available = kb * 1024;
  }
  m.cgroup_limit = read_int_file("/sys/fs/cgroup/memory.max");
  auto used = read_int_file("/sys/fs/cgroup/memory.current");
  if (m.cgroup_limit && used) {
    const int64_t left = std::max<int64_t>(0, *m.cgroup_limit - *used);
    m.available = m.available ? std::min(*m.available, left) : left;
  }
  return m;
}

int64_t host_allocation_limit() {
  static const int64_t limit = [] {
    const HostMemory m = read_host_memory();
    int64_t l = std::numeric_limits<int64_t>::max();
    if (m.total) l = *m.total + m.swap.value_or(0);
    if (m.cgroup_limit) l = std::min(l, *m.cgroup_limit);
    return l;
  }();
  return limit;
}

}  // namespace mls
