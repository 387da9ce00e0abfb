#include "store/process_owner.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace mls::store {

namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id.empty() ? "unknown" : id;
}

// Field 22 of /proc/PID/stat: the process's start time in clock ticks after boot; "" when
// there is no such process. The command name (field 2) may hold spaces and parentheses,
// so fields are counted after its last ')'.
std::string start_ticks(long pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return "";
  const auto close = line.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(rest >> field)) return "";
  return field;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

}  // namespace

std::string this_process() {
  const long pid = static_cast<long>(getpid());
  return host_name() + "/" + boot_id() + "/" + std::to_string(pid) + "/" + start_ticks(pid);
}

bool owner_gone(const std::string& owner) {
  const auto parts = split(owner, '/');
  if (parts.size() != 4 || parts[0] != host_name()) return false;
  if (parts[1] != boot_id()) return true;  // the machine restarted since
  long pid = 0;
  try {
    pid = std::stol(parts[2]);
  } catch (...) {
    return false;
  }
  if (pid <= 0) return false;
  return start_ticks(pid) != parts[3];  // no such process, or a new one with a reused pid
}

}  // namespace mls::store
