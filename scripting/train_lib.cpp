// mls.data, mls.optim and mls.log: the training toolbox from Lua. mls.train (run_lib.cpp)
// hands a model to the run session that `mlstudio --run` uses.
//
// [SECTION] mls.data    datasets as the project's "dataset" section describes them
// [SECTION] mls.optim   optimizers over eager tensors with .grad
// [SECTION] runs        mls.start_run, mls.log, mls.end_run
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>

#include "datasets/dataset_spec.h"
#include "engine/ops/nn.h"
#include "engine/train/optimizer.h"
#include "engine/train/progress_line.h"
#include "engine/train/trainer.h"
#include "nodes/json_fields.h"
#include "nodes/training_spec.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/train_lib.h"
#include "store/file_hash.h"

namespace mls::lua {

using nlohmann::json;

// A Lua value as JSON (tables with 1..n keys become arrays).
Result<nlohmann::json> to_json(lua_State* L, int idx, int depth) {
  if (depth > 32) return make_error("nested too deeply");
  idx = lua_absindex(L, idx);
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return json(nullptr);
    case LUA_TBOOLEAN:
      return json(lua_toboolean(L, idx) != 0);
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) return json(static_cast<int64_t>(lua_tointeger(L, idx)));
      return json(lua_tonumber(L, idx));
    case LUA_TSTRING:
      return json(std::string(lua_tostring(L, idx)));
    case LUA_TTABLE: {
      const lua_Integer n = luaL_len(L, idx);
      if (n > 0) {
        json a = json::array();
        for (lua_Integer i = 1; i <= n; ++i) {
          lua_geti(L, idx, i);
          auto v = to_json(L, -1, depth + 1);
          lua_pop(L, 1);
          if (!v) return v;
          a.push_back(std::move(*v));
        }
        return a;
      }
      json o = json::object();
      lua_pushnil(L);
      while (lua_next(L, idx) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING) {
          lua_pop(L, 2);
          return make_error("table keys must be strings");
        }
        std::string k = lua_tostring(L, -2);
        auto v = to_json(L, -1, depth + 1);
        lua_pop(L, 1);
        if (!v) {
          lua_pop(L, 1);
          return make_error(k + ": " + v.error().message);
        }
        o[k] = std::move(*v);
      }
      return o;
    }
    default:
      return make_error(std::string("a ") + luaL_typename(L, idx) + " cannot be a setting");
  }
}

Result<void> check_dataset_paths(Runtime& rt, data::DatasetSpec& spec) {
  if (!rt.check_path) return {};
  // Every field of a dataset spec that names a file or folder. A new one goes here.
  for (std::string* p : {&spec.path, &spec.npy.labels}) {
    const bool dflt = p == &spec.path && p->empty();  // the default dataset's folder
    if (p->empty() && !dflt) continue;
    auto allowed = rt.check_path(dflt ? data::kDefaultDatasetPath : *p, false);
    if (!allowed) return allowed.error();
    if (!dflt) *p = *allowed;  // the reader opens what was checked, links resolved
  }
  return {};
}

namespace {

constexpr const char* kBatchMeta = "mls.BatchBuffer";  // a batches() iterator's buffer

// [SECTION] mls.data

Dataset* check_dataset(lua_State* L, int idx) {
  return check_object<Dataset>(L, idx, kDatasetMeta, "dataset");
}

// Every field of a dataset spec that names a file or folder: a sandbox checks each (and
// the reader then opens the resolved path). A new path field of DatasetSpec goes here.
// mls.data.open{source = "fashion-mnist", limit = 1000, validation = 0.1, transforms = {...}}
// [, seed]: every key of a project's "dataset" section (datasets/dataset_spec.h).
int l_data_open(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  Runtime& rt = runtime(L);
  // Shuffling and splits follow the script's seed (mls.manual_seed), as a project's follow
  // its training seed.
  const uint64_t seed =
      static_cast<uint64_t>(luaL_optinteger(L, 2, static_cast<lua_Integer>(rt.seed)));
  bool ok = true;
  {
    auto j = to_json(L, 1);
    Result<data::DatasetSpec> spec =
        j ? data::parse_dataset_spec(*j, "mls.data.open") : Result<data::DatasetSpec>(j.error());
    std::string base = std::filesystem::current_path().string();
    if (spec)
      if (auto checked = check_dataset_paths(rt, *spec); !checked) spec = checked.error();
    Result<data::DatasetSplits> s = spec ? data::open_dataset(*spec, base, seed, true)
                                         : Result<data::DatasetSplits>(spec.error());
    if (!s) {
      rt.error = "mls.data: " + s.error().message;
      ok = false;
    } else {
      push_object(L, kDatasetMeta,
                  std::make_unique<Dataset>(
                      Dataset{std::move(*s), {0, 0, 0}, spec->source + ":" + spec->path}));
    }
  }
  return ok ? 1 : raise(L);
}

int l_data_fashion_mnist(lua_State* L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_pushstring(L, "fashion-mnist");
  lua_setfield(L, 1, "source");
  return l_data_open(L);
}

BatchSource* split_of(lua_State* L, Dataset* d, int idx, int* which) {
  const char* name = luaL_optstring(L, idx, "train");
  if (std::strcmp(name, "train") == 0)
    *which = 0;
  else if (std::strcmp(name, "validation") == 0)
    *which = 1;
  else if (std::strcmp(name, "test") == 0)
    *which = 2;
  else
    luaL_argerror(L, idx, "'train', 'validation' or 'test'");
  BatchSource* s = *which == 0   ? d->splits.train.get()
                   : *which == 1 ? d->splits.validation.get()
                                 : d->splits.test.get();
  if (s == nullptr) luaL_error(L, "the dataset has no %s split", name);
  return s;
}

// Pushes one batch as tensors: x f32 [n, ...sample], y i64 [n] or f32 [n, ...target].
void push_batch(lua_State* L, Runtime& rt, const BatchSource& src, const HostBatch& b) {
  Shape xs{b.size};
  for (int64_t d : src.sample_shape()) xs.push_back(d);
  push_value(L, Tensor::from_f32(rt.backend, xs, b.x, AllocTag::Input));
  if (src.target_kind() == TargetKind::Classes) {
    push_value(L, Tensor::from_i64(rt.backend, {b.size}, b.y, AllocTag::Input));
  } else {
    Shape ts{b.size};
    for (int64_t d : src.target_shape()) ts.push_back(d);
    push_value(L, Tensor::from_f32(rt.backend, ts, b.t, AllocTag::Input));
  }
}

int batches_next(lua_State* L) {
  Dataset* d = check_dataset(L, lua_upvalueindex(3));
  const int which = static_cast<int>(lua_tointeger(L, lua_upvalueindex(4)));
  const int64_t bs = lua_tointeger(L, lua_upvalueindex(5));
  BatchSource* src = which == 0   ? d->splits.train.get()
                     : which == 1 ? d->splits.validation.get()
                                  : d->splits.test.get();
  // Finalised like every object: an iterator a finaliser brought back raises "closed".
  HostBatch* b = check_object<HostBatch>(L, lua_upvalueindex(6), kBatchMeta, "batch iterator");
  if (!src->next(bs, *b)) return 0;
  push_batch(L, runtime(L), *src, *b);
  return 2;
}

int hostbatch_gc(lua_State* L) {
  take_object<HostBatch>(L, 1, kBatchMeta);
  return 0;
}

// for x, y in data:batches("train", 128) do ... end: one epoch, shuffled anew each call.
int l_data_batches(lua_State* L) {
  Dataset* d = check_dataset(L, 1);
  int which = 0;
  BatchSource* src = split_of(L, d, 2, &which);
  const int64_t bs = luaL_optinteger(L, 3, 128);
  if (bs < 1) return luaL_argerror(L, 3, "batch size must be >= 1");
  src->start_epoch(d->epochs[which]++);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, which);
  lua_pushinteger(L, bs);
  push_object(L, kBatchMeta, std::make_unique<HostBatch>());
  lua_pushcclosure(L, batches_next, 6);
  return 1;
}

int l_data_info(lua_State* L) {
  Dataset* d = check_dataset(L, 1);
  lua_createtable(L, 0, 8);
  lua_pushinteger(L, d->splits.train ? d->splits.train->num_samples() : 0);
  lua_setfield(L, -2, "train");
  lua_pushinteger(L, d->splits.validation ? d->splits.validation->num_samples() : 0);
  lua_setfield(L, -2, "validation");
  lua_pushinteger(L, d->splits.test ? d->splits.test->num_samples() : 0);
  lua_setfield(L, -2, "test");
  lua_pushinteger(L, d->splits.num_classes);
  lua_setfield(L, -2, "classes");
  lua_createtable(L, 4, 0);
  for (size_t i = 0; i < d->splits.sample_shape.size(); ++i) {
    lua_pushinteger(L, d->splits.sample_shape[i]);
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "sample_shape");
  lua_createtable(L, static_cast<int>(d->splits.class_names.size()), 0);
  for (size_t i = 0; i < d->splits.class_names.size(); ++i) {
    lua_pushstring(L, d->splits.class_names[i].c_str());
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "class_names");
  return 1;
}

int l_data_tostring(lua_State* L) {
  Dataset* d = check_dataset(L, 1);
  lua_pushfstring(L, "Dataset(train %d, validation %d, test %d, sample %s, %d classes)",
                  static_cast<int>(d->splits.train ? d->splits.train->num_samples() : 0),
                  static_cast<int>(d->splits.validation ? d->splits.validation->num_samples() : 0),
                  static_cast<int>(d->splits.test ? d->splits.test->num_samples() : 0),
                  shape_str(d->splits.sample_shape).c_str(),
                  static_cast<int>(d->splits.num_classes));
  return 1;
}

int l_data_gc(lua_State* L) {
  take_object<Dataset>(L, 1, kDatasetMeta);
  return 0;
}

// [SECTION] mls.optim

Optim* check_optim(lua_State* L, int idx) {
  return check_object<Optim>(L, idx, kOptimMeta, "optimizer");
}

// mls.optim.SGD(params, {lr = 0.05, momentum = 0.9}) and Adam, AdamW, RMSprop, Adagrad.
int make_optim(lua_State* L, const char* type) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer n = luaL_len(L, 1);
  // The optimizer keeps its own copy of the list, checked once here: the script may change
  // its table afterwards (put a string or a file in it), and step() reads the copy.
  lua_createtable(L, static_cast<int>(std::min<lua_Integer>(n, 1 << 16)), 0);
  const int own = lua_gettop(L);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 1, i);
    LuaTensor* t = check_tensor(L, -1);
    if (!t->is_leaf || !t->requires_grad)
      return luaL_error(L, "optimizer: parameter %d does not require grad", static_cast<int>(i));
    lua_seti(L, own, i);
  }
  OptimizerConfig c;
  c.type = type;
  c.lr = opt_number(L, 2, "lr", std::strcmp(type, "sgd") == 0 ? 0.01 : 0.001);
  c.momentum = opt_number(L, 2, "momentum", 0.0);
  c.nesterov = opt_bool(L, 2, "nesterov", false);
  c.weight_decay = opt_number(L, 2, "weight_decay", std::strcmp(type, "adamw") == 0 ? 0.01 : 0.0);
  c.beta1 = opt_number(L, 2, "beta1", 0.9);
  c.beta2 = opt_number(L, 2, "beta2", 0.999);
  c.eps = opt_number(L, 2, "eps", 1e-8);
  c.alpha = opt_number(L, 2, "alpha", 0.99);
  if (!(c.lr > 0)) return luaL_error(L, "optimizer: lr must be > 0");
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    auto o = Optimizer::create(rt.backend, c);
    if (!o) {
      rt.error = "optimizer: " + o.error().message;
      ok = false;
    } else {
      push_object(L, kOptimMeta, std::make_unique<Optim>(Optim{c, std::move(*o), {}}), 1);
      lua_pushvalue(L, own);
      lua_setiuservalue(L, -2, 1);  // the private parameter list
    }
  }
  return ok ? 1 : raise(L);
}

int l_sgd(lua_State* L) {
  return make_optim(L, "sgd");
}
int l_adam(lua_State* L) {
  return make_optim(L, "adam");
}
int l_adamw(lua_State* L) {
  return make_optim(L, "adamw");
}
int l_rmsprop(lua_State* L) {
  return make_optim(L, "rmsprop");
}
int l_adagrad(lua_State* L) {
  return make_optim(L, "adagrad");
}

// opt:step(): one update of every parameter from its .grad (a parameter without a gradient
// is left alone, as in PyTorch).
int l_optim_step(lua_State* L) {
  Optim* o = check_optim(L, 1);
  lua_getiuservalue(L, 1, 1);
  const int list = lua_gettop(L);
  const lua_Integer n = luaL_len(L, list);
  Runtime& rt = runtime(L);
  {
    std::vector<Tensor> params, grads, with_grad;
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, list, i);
      LuaTensor* t = check_tensor(L, -1);  // the private list: tensors, maybe closed since
      lua_pop(L, 1);
      params.push_back(t->value);
      grads.push_back(t->grad.defined() ? t->grad
                                        : Tensor::zeros(rt.backend, t->value.dtype(),
                                                        t->value.shape(), AllocTag::Gradient));
    }
    bool same = params.size() == o->attached.size();
    for (size_t i = 0; same && i < params.size(); ++i)
      same = params[i].buffer() == o->attached[i].buffer();
    if (!same) {  // first step, or parameters replaced (mls.train hands back new tensors)
      o->opt->attach(params);
      o->attached = params;
    }
    o->opt->step(params, grads);
  }
  return 0;
}

int l_optim_zero_grad(lua_State* L) {
  check_optim(L, 1);
  lua_getiuservalue(L, 1, 1);
  const lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, -1, i);
    check_tensor(L, -1)->grad = Tensor();
    lua_pop(L, 1);
  }
  return 0;
}

// opt:lr() and opt:set_lr(x): for schedules written in Lua.
int l_optim_lr(lua_State* L) {
  lua_pushnumber(L, check_optim(L, 1)->config.lr);
  return 1;
}
int l_optim_set_lr(lua_State* L) {
  Optim* o = check_optim(L, 1);
  const double lr = luaL_checknumber(L, 2);
  if (!(lr >= 0) || !std::isfinite(lr))
    return luaL_argerror(L, 2, "a learning rate is a finite number >= 0");
  o->config.lr = lr;
  o->opt->set_lr(lr);
  return 0;
}

int l_optim_tostring(lua_State* L) {
  Optim* o = check_optim(L, 1);
  lua_pushfstring(L, "Optimizer(%s, lr=%f, momentum=%f, weight_decay=%f)", o->config.type.c_str(),
                  o->config.lr, o->config.momentum, o->config.weight_decay);
  return 1;
}

int l_optim_gc(lua_State* L) {
  take_object<Optim>(L, 1, kOptimMeta);
  return 0;
}

// [SECTION] runs

// Begins a run in the experiment store (Runtime::db_path) for this script.
Result<int64_t> begin_run(Runtime& rt, const std::string& name, uint64_t seed) {
  rt.end_run("finished");
  auto st = rt.open_store();
  if (!st) return st.error();
  std::string hash;
  if (!rt.script_path.empty()) {
    auto h = store::file_hash_hex(rt.script_path);
    if (h) hash = *h;
  }
  auto id = (*st)->begin_run(
      {.name = name,
       .project_path =
           rt.script_path.empty() ? "" : std::filesystem::absolute(rt.script_path).string(),
       .project_hash = hash,
       .device = std::string(rt.backend.name()),
       .seed = seed});
  if (!id) return id.error();
  rt.run_id = *id;
  rt.log_step = 0;
  if (auto r = (*st)->log_param(*id, "source", "lua"); !r) return r.error();
  return *id;
}

std::string default_run_name(Runtime& rt) {
  return rt.script_path.empty() ? std::string("lua")
                                : std::filesystem::path(rt.script_path).stem().string();
}

// mls.start_run{name = "sweep-3", params = {lr = 0.1}}: returns the run id.
int l_start_run(lua_State* L) {
  const std::string name = opt_string(L, 1, "name", "");
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    auto id = begin_run(rt, name.empty() ? default_run_name(rt) : name, rt.seed);
    if (!id) {
      rt.error = "mls.start_run: " + id.error().message;
      ok = false;
    } else if (lua_istable(L, 1)) {
      lua_getfield(L, 1, "params");
      if (lua_istable(L, -1)) {
        lua_pushnil(L);
        while (ok && lua_next(L, -2) != 0) {
          const std::string k = luaL_tolstring(L, -2, nullptr);
          lua_pop(L, 1);
          const std::string v = luaL_tolstring(L, -1, nullptr);
          lua_pop(L, 2);
          if (auto r = rt.store->log_param(*id, k, v); !r) {
            rt.error = r.error().message;
            ok = false;
          }
        }
      }
      lua_pop(L, 1);
    }
    if (ok) lua_pushinteger(L, *id);
  }
  return ok ? 1 : raise(L);
}

// mls.log{loss = 0.3, acc = 0.9 [, step = 10]}: metrics of the current run (one is started
// for the script if none is).
int l_log(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    if (rt.run_id == 0) {
      auto id = begin_run(rt, default_run_name(rt), rt.seed);
      if (!id) {
        rt.error = "mls.log: " + id.error().message;
        ok = false;
      }
    }
    lua_getfield(L, 1, "step");
    int64_t step = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : rt.log_step;
    lua_pop(L, 1);
    lua_pushnil(L);
    while (ok && lua_next(L, 1) != 0) {
      if (lua_type(L, -2) == LUA_TSTRING && std::strcmp(lua_tostring(L, -2), "step") != 0) {
        int isnum = 0;
        double v = lua_tonumberx(L, -1, &isnum);
        if (LuaTensor* t = to_tensor(L, -1); t && t->trace_id == 0 && t->value.numel() == 1) {
          v = t->value.to_f64()[0];
          isnum = 1;
        }
        if (!isnum) {
          rt.error = std::string("mls.log: '") + lua_tostring(L, -2) + "' is not a number";
          ok = false;
        } else {
          rt.store->log_metric(lua_tostring(L, -2), step, v);
        }
      }
      lua_pop(L, 1);
    }
    if (ok) rt.log_step = step + 1;
  }
  return ok ? 0 : raise(L);
}

int l_end_run(lua_State* L) {
  runtime(L).end_run(luaL_optstring(L, 1, "finished"));
  return 0;
}

const luaL_Reg kData[] = {
    {"open", l_data_open}, {"fashion_mnist", l_data_fashion_mnist}, {nullptr, nullptr}};
const luaL_Reg kDataMethods[] = {
    {"batches", l_data_batches}, {"info", l_data_info}, {nullptr, nullptr}};
const luaL_Reg kOptim[] = {{"SGD", l_sgd},         {"Adam", l_adam},       {"AdamW", l_adamw},
                           {"RMSprop", l_rmsprop}, {"Adagrad", l_adagrad}, {nullptr, nullptr}};
const luaL_Reg kOptimMethods[] = {{"step", l_optim_step},
                                  {"zero_grad", l_optim_zero_grad},
                                  {"lr", l_optim_lr},
                                  {"set_lr", l_optim_set_lr},
                                  {nullptr, nullptr}};
const luaL_Reg kTrainTop[] = {{"train", l_train},
                              {"log", l_log},
                              {"start_run", l_start_run},
                              {"end_run", l_end_run},
                              {nullptr, nullptr}};

}  // namespace

void open_train_lib(lua_State* L) {
  set_funcs(L, kTrainTop);
  lua_newtable(L);
  set_funcs(L, kData);
  lua_setfield(L, -2, "data");
  lua_newtable(L);
  set_funcs(L, kOptim);
  lua_setfield(L, -2, "optim");

  register_class(L, kDatasetMeta, kDataMethods, l_data_tostring, l_data_gc);
  register_class(L, kOptimMeta, kOptimMethods, l_optim_tostring, l_optim_gc);
  const luaL_Reg no_methods[] = {{nullptr, nullptr}};
  register_class(L, kBatchMeta, no_methods, nullptr, hostbatch_gc);
}

}  // namespace mls::lua
