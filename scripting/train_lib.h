// What mls.data, mls.optim (train_lib.cpp) and mls.train (run_lib.cpp) share: the dataset
// and optimizer objects a script holds, and Lua tables read as JSON settings.
//
//   Dataset* ds = test_object<Dataset>(L, idx, kDatasetMeta);   // nullptr: not a dataset
//   Result<nlohmann::json> j = to_json(L, idx);                 // {epochs = 3} -> {"epochs": 3}
#pragma once

#include <lua.hpp>

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/dataset_spec.h"
#include "engine/train/optimizer.h"

namespace mls::lua {

inline constexpr const char* kDatasetMeta = "mls.Dataset";
inline constexpr const char* kOptimMeta = "mls.Optimizer";

struct Dataset {
  data::DatasetSplits splits;
  int64_t epochs[3] = {0, 0, 0};  // per split: the next epoch number for batches()
  std::string source;             // "fashion-mnist:/usr/share/...", recorded with a run
};

struct Optim {
  OptimizerConfig config;
  std::optional<Optimizer> opt;
  std::vector<Tensor> attached;  // the parameter values the state was made for
};

// A Lua value as JSON (tables with 1..n keys become arrays); errors say what cannot be.
Result<nlohmann::json> to_json(lua_State* L, int idx, int depth = 0);

class Runtime;
// A sandboxed script's dataset: every path the spec names goes through Runtime::check_path
// and is replaced by what was checked (links resolved). Nothing to do without a sandbox.
Result<void> check_dataset_paths(Runtime& rt, data::DatasetSpec& spec);

// mls.train{...} (run_lib.cpp).
int l_train(lua_State* L);

}  // namespace mls::lua
