#include "runner/system_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <thread>

namespace mls::runner {

namespace {

// The first "KEY : value" line of /proc/cpuinfo with this key ("" when there is none).
std::string cpuinfo(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> system_info(const Backend& backend) {
  std::vector<std::pair<std::string, std::string>> out;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) out.emplace_back("host", host);
  utsname u{};
  if (uname(&u) == 0) out.emplace_back("os", std::string(u.sysname) + " " + u.release + " " + u.machine);
  if (std::string model = cpuinfo("model name"); !model.empty()) out.emplace_back("cpu", model);
  const std::string flags = " " + cpuinfo("flags") + " ";
  std::string simd;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "amx_tile"})
    if (flags.find(std::string(" ") + f + " ") != std::string::npos) simd += (simd.empty() ? "" : " ") + std::string(f);
  if (!simd.empty()) out.emplace_back("cpu_features", simd);
  out.emplace_back("cores", std::to_string(std::thread::hardware_concurrency()));
  out.emplace_back("threads", std::to_string(backend.num_threads()));
  out.emplace_back("device", std::string(backend.name()));
#ifdef MLSTUDIO_VERSION
  out.emplace_back("version", MLSTUDIO_VERSION);
#endif
  return out;
}

}  // namespace mls::runner
