// mls.data, mls.optim, mls.train and mls.log: the training toolbox from Lua. mls.train
// traces the model's forward into a graph and hands it to the same Trainer, progress line
// and run store as `mlstudio --run`, so a model written in Lua trains as fast as the same
// model drawn as nodes, and lands in the same experiment database.
//
// [SECTION] mls.data    datasets as the project's "dataset" section describes them
// [SECTION] mls.optim   optimizers over eager tensors with .grad
// [SECTION] runs        mls.start_run, mls.log, mls.end_run
// [SECTION] mls.train   the batch mode's training loop for a Lua model
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
#include "store/file_hash.h"

namespace mls::lua {

namespace {

using nlohmann::json;

constexpr const char* kDatasetMeta = "mls.Dataset";
constexpr const char* kOptimMeta = "mls.Optimizer";
constexpr const char* kBatchMeta = "mls.BatchBuffer";  // a batches() iterator's buffer

// A Lua value as JSON (tables with 1..n keys become arrays).
Result<json> to_json(lua_State* L, int idx, int depth = 0) {
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

// [SECTION] mls.data

struct Dataset {
  data::DatasetSplits splits;
  int64_t epochs[3] = {0, 0, 0};  // per split: the next epoch number for batches()
};

Dataset* check_dataset(lua_State* L, int idx) {
  return check_object<Dataset>(L, idx, kDatasetMeta, "dataset");
}

// Every field of a dataset spec that names a file or folder: a sandbox checks each (and
// the reader then opens the resolved path). A new path field of DatasetSpec goes here.
std::vector<std::string*> path_fields(data::DatasetSpec& s) {
  return {&s.path, &s.npy.labels};
}

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
    if (spec && rt.check_path) {
      for (std::string* p : path_fields(*spec)) {
        const bool dflt = p == &spec->path && p->empty();  // the default dataset's folder
        if (p->empty() && !dflt) continue;
        auto allowed = rt.check_path(dflt ? data::kDefaultDatasetPath : *p, false);
        if (!allowed) {
          spec = allowed.error();
          break;
        }
        if (!dflt) *p = *allowed;  // the reader opens what was checked, links resolved
      }
    }
    Result<data::DatasetSplits> s = spec ? data::open_dataset(*spec, base, seed, true)
                                         : Result<data::DatasetSplits>(spec.error());
    if (!s) {
      rt.error = "mls.data: " + s.error().message;
      ok = false;
    } else {
      push_object(L, kDatasetMeta, std::make_unique<Dataset>(Dataset{std::move(*s)}));
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

struct Optim {
  OptimizerConfig config;
  std::optional<Optimizer> opt;
  std::vector<Tensor> attached;  // the parameter values the state was made for
};

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

// [SECTION] mls.train

// What the builder needs from Lua: the model, the loss, and the tensors behind the model's
// parameters and buffers, in order.
struct LuaModel {
  lua_State* L;
  Runtime* rt;
  int model_ref, loss_ref;  // registry references
  std::string loss_name;    // a built-in loss, when loss_ref is LUA_NOREF
  std::vector<std::pair<std::string, LuaTensor*>> params, buffers;
  Shape sample, target;  // target empty: class labels
};

Ref builtin_loss(Emitter& e, const std::string& name, Ref y, Ref t) {
  if (name == "mse") return mse_loss(e, y, t);
  if (name == "l1") return l1_loss(e, y, t);
  if (name == "huber") return huber_loss(e, y, t);
  if (name == "bce_with_logits") return bce_with_logits(e, y, t);
  return cross_entropy(e, y, t);
}

// Calls the model (and the loss) on traced inputs. Runs inside the trainer, so Lua errors
// are caught here and come back as a Result.
Result<ModelGraph> build_lua_model(LuaModel& m, int64_t batch, bool training) {
  lua_State* L = m.L;
  Runtime& rt = *m.rt;
  const int top = lua_gettop(L);
  Trace& tr = rt.begin_trace("lua_model");
  tr.training = training;
  ModelGraph mg;
  std::string err;
  {
    for (const auto& [name, t] : m.params) tr.register_param(*t, name, true);
    for (const auto& [name, t] : m.buffers) tr.register_param(*t, name, false);
    Shape xs{batch};
    xs.insert(xs.end(), m.sample.begin(), m.sample.end());
    mg.input = tr.graph().add_input("x", {DType::F32, xs});
    if (m.target.empty()) {
      mg.labels = tr.graph().add_input("labels", {DType::I64, {batch}});
    } else {
      Shape ts{batch};
      ts.insert(ts.end(), m.target.begin(), m.target.end());
      mg.labels = tr.graph().add_input("targets", {DType::F32, ts});
    }
  }
  // model:train(training); logits = model(x); loss = loss(logits, labels)
  lua_pushcfunction(L, [](lua_State* L) -> int {
    // upvalues are not available here: arguments are model, training, x, labels, loss
    lua_getfield(L, 1, "train");
    lua_pushvalue(L, 1);
    lua_pushboolean(L, lua_toboolean(L, 2));
    lua_call(L, 2, 0);
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 3);
    lua_call(L, 1, 1);  // model(x)
    if (!lua_isnil(L, 5)) {
      lua_pushvalue(L, 5);
      lua_pushvalue(L, -2);
      lua_pushvalue(L, 4);
      lua_call(L, 2, 1);  // loss(logits, labels)
      return 2;
    }
    return 1;
  });
  lua_rawgeti(L, LUA_REGISTRYINDEX, m.model_ref);
  lua_pushboolean(L, training);
  for (Ref r : {mg.input, mg.labels}) push_traced(L, tr.id, r);
  if (m.loss_ref != LUA_NOREF)
    lua_rawgeti(L, LUA_REGISTRYINDEX, m.loss_ref);
  else
    lua_pushnil(L);
  lua_pushcfunction(L, traceback_handler);
  lua_insert(L, top + 1);
  const int status = lua_pcall(L, 5, 2, top + 1);
  if (status != LUA_OK) {
    err = std::string("the model's forward failed: ") +
          (lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object)");
  } else {
    LuaTensor* logits = static_cast<LuaTensor*>(luaL_testudata(L, -2, "mls.Tensor"));
    LuaTensor* loss = static_cast<LuaTensor*>(luaL_testudata(L, -1, "mls.Tensor"));
    if (m.loss_ref == LUA_NOREF)
      loss = nullptr;  // the function returned logits only (padded with nil)
    if (!logits || logits->trace_id != tr.id) {
      err = "the model's forward must return a tensor computed from its input";
    } else {
      mg.logits = logits->ref;
      if (loss) {
        if (loss->trace_id != tr.id || !tr.graph().type_of(loss->ref).shape.empty())
          err = "the loss function must return a scalar tensor computed from the model's output";
        else
          mg.loss = loss->ref;
      } else if (m.loss_ref == LUA_NOREF) {
        mg.loss = builtin_loss(tr, m.loss_name, mg.logits, mg.labels);
      } else {
        err = "the loss function must return a tensor";
      }
    }
    if (err.empty() && !tr.error.empty()) err = tr.error;
  }
  lua_settop(L, top);
  if (err.empty()) {
    mg.step_seed = tr.step_seed;
    mg.graph = std::move(tr.graph());
  }
  rt.end_trace(tr);
  if (!err.empty()) return make_error(err);
  return mg;
}

// The named tensors of model:named_parameters() / named_buffers(), each checked to be a
// {name, tensor} pair (raises naming the method and the index otherwise). Each tensor is
// also put in the table `anchor` (an index on the stack): the script's own lists may drop
// them while its forward runs, and the pointers in `out` must stay valid until training
// ends.
bool named_tensors(lua_State* L, int model, const char* method, int anchor,
                   std::vector<std::pair<std::string, LuaTensor*>>* out) {
  lua_getfield(L, model, method);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  lua_pushvalue(L, model);
  lua_call(L, 1, 1);
  if (!lua_istable(L, -1))
    luaL_error(L, "mls.train: %s() must return a list of {name, tensor} pairs", method);
  const lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, -1, i);
    if (lua_istable(L, -1)) {
      lua_geti(L, -1, 1);
      lua_geti(L, -2, 2);
    } else {
      lua_pushnil(L);
      lua_pushnil(L);
    }
    LuaTensor* t = to_tensor(L, -1);
    if (lua_type(L, -2) != LUA_TSTRING || t == nullptr || t->closed)
      luaL_error(L, "mls.train: %s()[%d] is not a {name, tensor} pair (an open tensor)", method,
                 static_cast<int>(i));
    out->push_back({lua_tostring(L, -2), t});
    lua_pushvalue(L, -1);
    lua_seti(L, anchor, static_cast<lua_Integer>(luaL_len(L, anchor) + 1));
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
  return true;
}

void push_result_table(lua_State* L, int64_t run_id, const TrainResult& r, int64_t epochs) {
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, run_id);
  lua_setfield(L, -2, "run_id");
  lua_pushinteger(L, epochs);
  lua_setfield(L, -2, "epochs");
  lua_pushinteger(L, r.steps);
  lua_setfield(L, -2, "steps");
  lua_pushnumber(L, r.final_loss);
  lua_setfield(L, -2, "final_loss");
  lua_pushnumber(L, r.seconds);
  lua_setfield(L, -2, "seconds");
  lua_pushnumber(L, r.median_epoch_seconds);
  lua_setfield(L, -2, "epoch_seconds");
  lua_pushnumber(L, r.samples_per_s);
  lua_setfield(L, -2, "samples_per_s");
  lua_pushinteger(L, r.peak_bytes);
  lua_setfield(L, -2, "peak_bytes");
  if (r.has_test) {
    lua_pushnumber(L, r.test.loss);
    lua_setfield(L, -2, "test_loss");
    if (r.test.regression) {
      lua_pushnumber(L, r.test.values.mae);
      lua_setfield(L, -2, "test_mae");
      lua_pushnumber(L, r.test.values.r2);
      lua_setfield(L, -2, "test_r2");
    } else {
      lua_pushnumber(L, r.test.accuracy);
      lua_setfield(L, -2, "test_accuracy");
      lua_pushnumber(L, r.test.macro_f1);
      lua_setfield(L, -2, "test_macro_f1");
    }
  }
  lua_createtable(L, static_cast<int>(r.epoch_losses.size()), 0);
  for (size_t i = 0; i < r.epoch_losses.size(); ++i) {
    lua_pushnumber(L, r.epoch_losses[i]);
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "epoch_losses");
}

// mls.train{model = net, data = ds, loss = "cross_entropy" | function(y, t) ... end,
//           optimizer = mls.optim.SGD(net:parameters(), {lr = 0.05, momentum = 0.9}),
//           epochs = 10, batch_size = 128, seed = 42, schedule = {type = "cosine"},
//           clip_grad_norm = 0, name = "mlp", quiet = false}
int l_train(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "model");
  const int model = lua_gettop(L);
  if (!lua_istable(L, model)) return luaL_error(L, "mls.train: 'model' must be a module (mls.nn)");
  lua_getfield(L, 1, "data");
  if (test_object<Dataset>(L, -1, kDatasetMeta) == nullptr && luaL_testudata(L, -1, kDatasetMeta))
    return luaL_error(L, "mls.train: the dataset was closed (collected as garbage)");
  Dataset* ds = test_object<Dataset>(L, -1, kDatasetMeta);
  if (!ds) return luaL_error(L, "mls.train: 'data' must be a dataset (mls.data.open{...})");
  lua_getfield(L, 1, "optimizer");
  Optim* o = lua_isnil(L, -1) ? nullptr : check_optim(L, lua_gettop(L));
  lua_getfield(L, 1, "loss");
  const int loss_idx = lua_gettop(L);
  std::string loss_name = "cross_entropy";
  if (lua_type(L, loss_idx) == LUA_TSTRING)
    loss_name = lua_tostring(L, loss_idx);
  else if (!lua_isnil(L, loss_idx) && !lua_isfunction(L, loss_idx) && !lua_istable(L, loss_idx))
    return luaL_error(L,
                      "mls.train: 'loss' is a name ('cross_entropy', 'mse', 'l1', 'huber', "
                      "'bce_with_logits') or a function");
  if (loss_name != "cross_entropy" && loss_name != "mse" && loss_name != "l1" &&
      loss_name != "huber" && loss_name != "bce_with_logits")
    return luaL_error(L, "mls.train: unknown loss '%s'", loss_name.c_str());
  const bool quiet = opt_bool(L, 1, "quiet", false);
  const std::string name = opt_string(L, 1, "name", "");
  Runtime& rt = runtime(L);
  if (!ds->splits.train) return luaL_error(L, "mls.train: the dataset has no training split");

  // The training settings, read by the project format's own parser (same defaults, same
  // messages).
  json training = json::object();
  for (const char* k : {"epochs", "batch_size", "seed", "schedule", "clip_grad_norm",
                        "clip_grad_value", "early_stopping", "precision", "mode"}) {
    lua_getfield(L, 1, k);
    if (!lua_isnil(L, -1)) {
      auto v = to_json(L, -1);
      if (!v) return luaL_error(L, "mls.train: '%s': %s", k, v.error().message.c_str());
      training[k] = *v;
    }
    lua_pop(L, 1);
  }
  bool ok = true;
  lua_Integer run_id = 0;
  {
    if (o) {
      json oj{
          {"type", o->config.type}, {"lr", o->config.lr}, {"weight_decay", o->config.weight_decay}};
      if (o->config.type == "sgd") {
        oj["momentum"] = o->config.momentum;
        oj["nesterov"] = o->config.nesterov;
      }
      training["optimizer"] = oj;
    }
    nodes::TrainingSpec spec;
    nodes::FieldReader reader("mls.train");
    auto parsed = nodes::parse_training(reader, json{{"training", training}}, spec);
    LuaModel m{L,
               &rt,
               LUA_NOREF,
               LUA_NOREF,
               loss_name,
               {},
               {},
               ds->splits.sample_shape,
               ds->splits.target_kind == TargetKind::Values ? ds->splits.target_shape : Shape{}};
    if (!parsed) {
      rt.error = parsed.error().message;
      ok = false;
    }
    lua_newtable(L);  // holds every tensor in m.params and m.buffers until training ends
    const int anchor = lua_gettop(L);
    if (ok && (!named_tensors(L, model, "named_parameters", anchor, &m.params) ||
               !named_tensors(L, model, "named_buffers", anchor, &m.buffers))) {
      rt.error = "mls.train: 'model' must be a module (mls.nn.Module or a layer)";
      ok = false;
    }
    if (ok) {
      TrainConfig cfg = nodes::train_config(spec);
      if (o) {  // everything the optimizer was made with, betas and eps included
        cfg.opt = o->config;
      }
      lua_pushvalue(L, model);
      m.model_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      if (lua_isfunction(L, loss_idx) || lua_istable(L, loss_idx)) {
        lua_pushvalue(L, loss_idx);
        m.loss_ref = luaL_ref(L, LUA_REGISTRYINDEX);
      }
      ModelBuilder build = [&m](int64_t batch, bool training) {
        return build_lua_model(m, batch, training);
      };
      Trainer trainer(rt.backend, build, cfg);
      Result<void> step = trainer.init();
      // Start from the weights the script holds (made under mls.manual_seed, or trained).
      std::vector<Tensor> values;
      for (const auto& [n, t] : m.params) values.push_back(t->value);
      for (const auto& [n, t] : m.buffers) values.push_back(t->value);
      if (step) step = trainer.set_param_values(values);
      Result<int64_t> id = step
                               ? begin_run(rt, name.empty() ? default_run_name(rt) : name, cfg.seed)
                               : Result<int64_t>(step.error());
      if (id) {
        run_id = *id;
        auto params = config_params(cfg);
        params.insert(params.end(),
                      {{"train_samples", std::to_string(ds->splits.train->num_samples())},
                       {"test_samples", std::to_string(ds->splits.test ? ds->splits.test->num_samples() : 0)},
                       {"threads", std::to_string(rt.backend.num_threads())}});
        for (const auto& [k, v] : params)
          if (auto r = rt.store->log_param(*id, k, v); !r) id = r.error();
      }
      if (!id) {
        rt.error = "mls.train: " + id.error().message;
        ok = false;
      } else {
        // Lines go to the host's report sink (the editor's console) or to stderr.
        auto say = [&rt, quiet](const std::string& line) {
          if (quiet) return;
          if (rt.report)
            rt.report(line);
          else
            std::fprintf(stderr, "%s\n", line.c_str());
        };
        char buf[512];
        std::snprintf(buf, sizeof buf,
                      "mlstudio: run %lld: %s, %lld epochs, %lld training samples, batch %lld, %s "
                      "on %s (%d threads)",
                      static_cast<long long>(run_id), default_run_name(rt).c_str(),
                      static_cast<long long>(cfg.epochs),
                      static_cast<long long>(ds->splits.train->num_samples()),
                      static_cast<long long>(cfg.batch_size), cfg.opt.type.c_str(),
                      std::string(rt.backend.name()).c_str(), rt.backend.num_threads());
        say(buf);
        Progress bar(!rt.report && isatty(STDERR_FILENO) != 0);
        // The trainer stops after its current step when the host's flag is set or the
        // script's time limit passes (the VM's hook does not run while C++ trains).
        std::atomic<bool> stop_training{false};
        bool past_deadline = false;
        std::jthread watch([&](std::stop_token st) {
          while (!st.stop_requested()) {
            if (rt.cancelled() || rt.past_deadline()) {
              past_deadline = !rt.cancelled();
              stop_training.store(true);
              return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        });
        FitInputs in{.train = *ds->splits.train,
                     .validation = ds->splits.validation.get(),
                     .test = ds->splits.test.get(),
                     .sink = rt.store.get(),
                     .cancel = &stop_training};
        if (!quiet && !rt.report) in.progress = [&](const ProgressInfo& i) { bar.update(i); };
        if (rt.report)
          in.on_epoch_end = [&say](const EpochReport& e) -> Result<void> {
            char line[160];
            std::snprintf(line, sizeof line, "epoch %lld/%lld: train loss %.4f (%.2f s)",
                          static_cast<long long>(e.epoch), static_cast<long long>(e.epochs),
                          e.train_loss, e.seconds);
            say(line);
            return {};
          };
        Result<TrainResult> r = make_error("not started");
        try {
          r = trainer.fit(in);
        } catch (const std::bad_alloc&) {
          r = make_error(
              "out of memory: the model or a batch does not fit (try a smaller batch size or "
              "layer)");
        }
        watch.request_stop();
        watch.join();
        if (!r) {
          rt.end_run("failed");
          rt.error = "mls.train: " + r.error().message + " (run " + std::to_string(run_id) +
                     " recorded as failed)";
          ok = false;
        } else if (r->interrupted) {
          // Stopped by the host (the editor's Stop): the weights stay as they were.
          rt.end_run("interrupted");
          if (past_deadline) {
            char limit[120];
            std::snprintf(limit, sizeof limit,
                          "stopped: the script ran past its time limit of %.14g s",
                          rt.time_limit_s);
            rt.stop = limit;  // raised again by the hook: a pcall cannot go on training
          }
          rt.error = "mls.train: " + (past_deadline ? rt.stop : std::string("interrupted")) +
                     " after " + std::to_string(r->steps) + " steps (run " +
                     std::to_string(run_id) + " recorded as interrupted)";
          ok = false;
        } else {
          rt.end_run("finished");
          // The trained weights go back into the script's tensors.
          const auto& pv = trainer.params();
          size_t i = 0;
          for (auto* list : {&m.params, &m.buffers})
            for (auto& [n, t] : *list) {
              rt.forget(*t);
              t->value = pv[i++];
              t->grad = Tensor();
            }
          const std::string test =
              !r->has_test         ? "(no test split)"
              : r->test.regression ? "MAE " + std::to_string(r->test.values.mae)
                                   : "accuracy " + std::to_string(r->test.accuracy).substr(0, 6);
          std::snprintf(buf, sizeof buf,
                        "mlstudio: run %lld finished in %s: final loss %.4f, test %s, %.0f "
                        "samples/s, epoch %.2fs (median), peak memory %.1f MiB; recorded in %s",
                        static_cast<long long>(run_id), format_duration(r->seconds).c_str(),
                        r->final_loss, test.c_str(), r->samples_per_s, r->median_epoch_seconds,
                        static_cast<double>(r->peak_bytes) / (1 << 20), rt.db_path.c_str());
          say(buf);
          push_result_table(L, run_id, *r, trainer.epochs_done());
        }
      }
      // The model goes back to training mode whatever the last build left it in.
      lua_getfield(L, model, "train");
      lua_pushvalue(L, model);
      lua_pushboolean(L, 1);
      if (lua_pcall(L, 2, 0, 0) != LUA_OK) lua_pop(L, 1);
      luaL_unref(L, LUA_REGISTRYINDEX, m.model_ref);
      if (m.loss_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, m.loss_ref);
    }
  }
  return ok ? 1 : raise(L);
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
const luaL_Reg kTop[] = {{"train", l_train},
                         {"log", l_log},
                         {"start_run", l_start_run},
                         {"end_run", l_end_run},
                         {nullptr, nullptr}};

}  // namespace

void open_train_lib(lua_State* L) {
  set_funcs(L, kTop);
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
