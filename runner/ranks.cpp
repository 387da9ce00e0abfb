#include "runner/ranks.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/backend_registry.h"

namespace mls::runner {

std::string rank_name(const Collective& job, int rank) {
  const auto& hosts = job.hosts();
  const std::string host = rank >= 0 && static_cast<size_t>(rank) < hosts.size()
                               ? hosts[static_cast<size_t>(rank)]
                               : "?";
  return "rank " + std::to_string(rank) + " (" + host + ")";
}

std::string rank_prefix(const Collective& job) {
  return rank_name(job, job.rank()) + ": ";
}

std::string hosts_text(const Collective& job) {
  std::vector<std::string> seen;
  for (const std::string& h : job.hosts())
    if (std::find(seen.begin(), seen.end(), h) == seen.end()) seen.push_back(h);
  std::string text;
  for (const std::string& h : seen) text += (text.empty() ? "" : ", ") + h;
  return text;
}

std::string rank_device(std::string_view device, int rank, int count) {
  auto parsed = parse_device(device);
  if (!parsed || parsed->first == "cpu" || count < 2 || rank < 0) return std::string(device);
  const int index = (parsed->second + rank) % count;
  return index == 0 ? parsed->first : parsed->first + ":" + std::to_string(index);
}

std::string no_mpi_message(const LaunchEnv& env) {
  const std::string launcher = env.launcher.empty() ? "an MPI launcher" : env.launcher;
  return "this mlstudio was built without MPI but " + launcher + " launched it as one of " +
         std::to_string(env.size) +
         " ranks: install libopenmpi-dev (scripts/setup) and rebuild, or run it without mpirun";
}

Result<std::string> share_text(Collective& job, const std::string& text) {
  uint64_t size = job.rank() == 0 ? text.size() : 0;
  if (auto r = job.broadcast(&size, sizeof size); !r) return r.error();
  std::string out = job.rank() == 0 ? text : std::string(size, '\0');
  if (size > 0)
    if (auto r = job.broadcast(out.data(), size); !r) return r.error();
  return out;
}

Result<std::vector<int>> ranks_not_ready(Collective& job, bool ready) {
  std::vector<double> missing(static_cast<size_t>(job.size()), 0.0);
  missing[static_cast<size_t>(job.rank())] = ready ? 0.0 : 1.0;
  if (auto r = job.sum(missing.data(), missing.size()); !r) return r.error();
  std::vector<int> out;
  for (size_t i = 0; i < missing.size(); ++i)
    if (missing[i] > 0) out.push_back(static_cast<int>(i));
  return out;
}

}  // namespace mls::runner
