// What machine a run ran on, recorded with it (the store's system_info): host, operating
// system, CPU model and features, cores, the threads the backend uses, the mlstudio version.
//
//   for (const auto& [k, v] : runner::system_info(backend)) store.set_system_info(run, ...);
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/core/backend.h"

namespace mls::runner {

std::vector<std::pair<std::string, std::string>> system_info(const Backend& backend);

}  // namespace mls::runner
