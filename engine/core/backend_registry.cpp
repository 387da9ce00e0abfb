#include "engine/core/backend_registry.h"

#include <charconv>

namespace mls {

void BackendRegistry::add(BackendFactory f) {
  std::lock_guard lock(mu_);
  for (BackendFactory& have : factories_)
    if (have.name == f.name) {
      have = std::move(f);
      return;
    }
  factories_.push_back(std::move(f));
}

bool BackendRegistry::has(std::string_view name) const {
  std::lock_guard lock(mu_);
  for (const BackendFactory& f : factories_)
    if (f.name == name) return true;
  return false;
}

std::vector<std::string> BackendRegistry::names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const BackendFactory& f : factories_) out.push_back(f.name);
  return out;
}

Backend* BackendRegistry::host() {
  std::function<Result<Backend*>(int)> open;
  {
    std::lock_guard lock(mu_);
    for (const BackendFactory& f : factories_)
      if (f.kind == DeviceKind::CPU) {
        open = f.open;
        break;
      }
  }
  if (!open) return nullptr;
  auto b = open(0);
  return b ? *b : nullptr;
}

Result<std::pair<std::string, int>> parse_device(std::string_view device) {
  const size_t colon = device.find(':');
  std::string name(device.substr(0, colon));
  if (name.empty())
    return make_error("empty device name (cpu, vulkan, cuda; a second GPU as vulkan:1)");
  int index = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = device.substr(colon + 1);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0)
      return make_error("device '" + std::string(device) +
                        "': the index after ':' must be a number >= 0");
  }
  return std::pair{std::move(name), index};
}

Result<void> BackendRegistry::check(std::string_view device) const {
  auto parsed = parse_device(device);
  if (!parsed) return parsed.error();
  if (has(parsed->first)) return {};
  std::string available;
  for (const std::string& n : names()) available += (available.empty() ? "" : ", ") + n;
  return make_error("device '" + parsed->first + "' is not available in this build (available: " +
                    (available.empty() ? std::string("none registered") : available) + ")");
}

Result<Backend*> BackendRegistry::open(std::string_view device) {
  if (auto c = check(device); !c) return c.error();
  auto parsed = parse_device(device);
  std::function<Result<Backend*>(int)> open;
  {
    std::lock_guard lock(mu_);
    for (const BackendFactory& f : factories_)
      if (f.name == parsed->first) open = f.open;
  }
  if (!open) return make_error("device '" + parsed->first + "' has no way to open it");
  auto b = open(parsed->second);
  if (!b) return make_error("device '" + std::string(device) + "': " + b.error().message);
  return b;
}

std::function<Result<Backend*>(int)> open_once(std::function<Result<std::unique_ptr<Backend>>(int)> create) {
  struct Devices {
    std::mutex mu;
    std::vector<Backend*> open;
    std::vector<std::string> failed;
  };
  auto devices = std::make_shared<Devices>();
  return [devices, create = std::move(create)](int index) -> Result<Backend*> {
    constexpr int kMaxDevices = 64;
    if (index < 0 || index >= kMaxDevices) return make_error("device index out of range");
    std::lock_guard lock(devices->mu);
    const auto i = static_cast<size_t>(index);
    if (devices->open.size() <= i) {
      devices->open.resize(i + 1, nullptr);
      devices->failed.resize(i + 1);
    }
    if (devices->open[i]) return devices->open[i];
    if (!devices->failed[i].empty()) return make_error(devices->failed[i]);
    auto b = create(index);
    if (!b) {
      devices->failed[i] = b.error().message;
      return b.error();
    }
    devices->open[i] = b->release();
    // Open for the process, never closed: also listed where no exit-time destructor reaches
    // (the registry and its factories are destroyed at exit), so LeakSanitizer sees an open
    // device and what it holds as reachable rather than leaked.
    static auto* const kept = new std::vector<Backend*>;
    static std::mutex kept_mu;
    {
      std::lock_guard kept_lock(kept_mu);
      kept->push_back(devices->open[i]);
    }
    return devices->open[i];
  };
}

BackendRegistry& backend_registry() {
  static BackendRegistry reg;
  return reg;
}

}  // namespace mls
