// The two-spirals example made small and validated, for e2e tests that train many short runs
// (sweeps, MPI jobs): about 50 ms an epoch on one thread.
//
//   std::string p = spirals_project("s.mls", /*samples=*/400, /*epochs=*/3);
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_util.h"

namespace mls::e2e {

inline std::string spirals_project(const std::string& name, int64_t samples, int64_t epochs) {
  nlohmann::json doc = nlohmann::json::parse(
      read_file(std::string(MLS_SOURCE_DIR) + "/resources/examples/two-spirals-mlp.mls"));
  doc["dataset"]["synthetic"]["samples"] = samples;
  doc["dataset"]["validation"] = 0.2;
  doc["training"]["epochs"] = epochs;
  const fs::path p = temp_dir() / name;
  std::ofstream(p) << doc.dump(1);
  return p.string();
}

}  // namespace mls::e2e
