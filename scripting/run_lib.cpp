// mls.train: the Lua front end of the run session (runner/run_session.h). A model written
// with mls.nn is traced into a graph and trained by the session that `mlstudio --run` and
// the editor use: the same store, checkpoints, resume, pre-flight, telemetry and summary.
// A project handle (mls.project.open / current) trains its document as it is held.
//
//   local run = mls.train{model = net, data = ds, loss = "cross_entropy", epochs = 3}
//   mls.train{model = net, data = ds, epochs = 3, resume = run.run_id}   -- after a kill
//   mls.train{project = mls.project.current(), epochs = 1}               -- the canvas's model
//
// [SECTION] model       tracing a Lua model for the trainer
// [SECTION] events      what a run from Lua says, and how it stops
// [SECTION] mls.train
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <thread>

#include "engine/core/atomic_file.h"
#include "engine/ops/nn.h"
#include "engine/train/progress_line.h"
#include "nodes/json_fields.h"
#include "nodes/training_spec.h"
#include "runner/training_run.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/train_lib.h"
#include "store/file_hash.h"

namespace mls::lua {

namespace {

using nlohmann::json;

// [SECTION] model


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
  // An evaluation plan is traced between epochs: a Stop then ends the run after its next step
  // (Runtime::hold_cancel). The training plan's trace comes first and stays stoppable, so a
  // forward that never returns is still stopped there.
  const bool held = rt.hold_cancel;
  rt.hold_cancel = held || !training;
  const int status = lua_pcall(L, 5, 2, top + 1);
  rt.hold_cancel = held;
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
  if (r.has_validation) {  // the last epoch's validation
    lua_pushnumber(L, r.validation.loss);
    lua_setfield(L, -2, "val_loss");
    if (!r.validation.regression) {
      lua_pushnumber(L, r.validation.accuracy);
      lua_setfield(L, -2, "val_accuracy");
    }
  }
  lua_createtable(L, static_cast<int>(r.epoch_losses.size()), 0);
  for (size_t i = 0; i < r.epoch_losses.size(); ++i) {
    lua_pushnumber(L, r.epoch_losses[i]);
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "epoch_losses");
}

// [SECTION] events

// What a run started from Lua says and how it stops: lines go to the host's report sink
// (the editor's console) or to stderr with a progress bar; the host's Stop and the script's
// time limit stop the trainer after its current step (the VM's hook does not run while C++
// trains); the host's instruments get a live feed.
class LuaRunEvents {
 public:
  LuaRunEvents(Runtime& rt, bool quiet) : rt_(rt), quiet_(quiet), bar_(!rt.report && !quiet && isatty(STDERR_FILENO) != 0) {
    events.message = [this](const std::string& line) { say("mlstudio: " + line); };
    events.warning = [this](const std::string& line) { say("mlstudio: warning: " + line); };
    if (!quiet_ && !rt_.report) events.progress = [this](const ProgressInfo& i) { bar_.update(i); };
    if (rt_.report)
      events.epoch_end = [this](const EpochReport& e) {
        char line[200];
        std::snprintf(line, sizeof line, "epoch %lld/%lld: train loss %.4f (%.2f s)",
                      static_cast<long long>(e.epoch), static_cast<long long>(e.epochs), e.train_loss,
                      e.seconds);
        std::string text = line;
        if (e.has_validation) text += ", validation " + runner::eval_text(e.validation);
        say(text);
      };
    events.cancel = &stop_;
    if (rt_.new_telemetry) telemetry_ = rt_.new_telemetry();
    watch_ = std::jthread([this](std::stop_token st) {
      while (!st.stop_requested()) {
        if (rt_.cancelled() || rt_.past_deadline()) {
          past_deadline_ = !rt_.cancelled();
          stop_.store(true);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  ~LuaRunEvents() { done(); }
  void done() {
    if (!watch_.joinable()) return;
    watch_.request_stop();
    watch_.join();
  }
  void say(const std::string& line) const {
    if (quiet_) return;
    if (rt_.report)
      rt_.report(line);
    else
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  void options(runner::RunOptions& o, std::optional<int64_t> resume) const {
    o.db = rt_.db_path;
    o.resume = resume;
    o.telemetry = telemetry_.get();
    o.preflight = true;
    o.memory_check = memory_check;
    o.breaks = breaks;
    o.health = health;
  }
  bool past_deadline() const { return past_deadline_; }

  runner::RunEvents events;
  bool memory_check = true;  // mls.train{memory_check = false}: start even if it will not fit
  Breakpoints breaks;        // mls.train{breaks = "nan,spike:3"}
  HealthConfig health;       // mls.train{health_every = 10}

 private:
  Runtime& rt_;
  bool quiet_;
  Progress bar_;
  std::shared_ptr<Telemetry> telemetry_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> past_deadline_{false};
  std::jthread watch_;
};

// After the session: the summary line and the result table, or the message to raise.
bool finish(lua_State* L, Runtime& rt, LuaRunEvents& ev, const Result<runner::RunOutcome>& r) {
  ev.done();
  if (!r) {
    rt.error = "mls.train: " + r.error().message;
    return false;
  }
  // A notebook cell that trains names its run (the last one, when it trains several).
  if (rt.cell_output && r->run_id > 0) rt.cell_output->run_id = r->run_id;
  if (r->result.interrupted) {
    // Stopped by the host (the editor's Stop) or the time limit: the weights stay as they were.
    if (ev.past_deadline()) {
      char limit[120];
      std::snprintf(limit, sizeof limit, "stopped: the script ran past its time limit of %.14g s",
                    rt.time_limit_s);
      rt.stop = limit;  // raised again by the hook: a pcall cannot go on training
    }
    rt.error = "mls.train: " + (ev.past_deadline() ? rt.stop : std::string("interrupted")) +
               " after " + std::to_string(r->result.steps) + " steps (run " +
               std::to_string(r->run_id) + " recorded as interrupted; " +
               runner::summary_line(*r) + ")";
    return false;
  }
  if (r->result.breakpoint) {
    // Paused before the step that went wrong: the script stops here (pcall can catch it), its
    // state kept to resume or fork.
    rt.error = "mls.train: " + runner::summary_line(*r);
    return false;
  }
  ev.say("mlstudio: " + runner::summary_line(*r));
  push_result_table(L, r->run_id, r->result, r->epochs_done);
  return true;
}

std::optional<int64_t> resume_of(lua_State* L, Runtime& rt) {
  lua_getfield(L, 1, "resume");
  std::optional<int64_t> resume;
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1)
      luaL_error(L, "mls.train: 'resume' is the id of the run to continue (an integer >= 1)");
    resume = lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  // `mlstudio lua FILE --resume ID` applies to the script's first mls.train.
  if (!resume && rt.resume_run > 0) resume = rt.resume_run;
  rt.resume_run = 0;
  return resume;
}

std::optional<int64_t> opt_integer_field(lua_State* L, int idx, const char* key) {
  lua_getfield(L, idx, key);
  std::optional<int64_t> v;
  if (!lua_isnil(L, -1)) {
    if (!lua_isinteger(L, -1)) luaL_error(L, "mls.train: '%s' must be an integer", key);
    v = lua_tointeger(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

// mls.train{breaks = "nan,spike:3", health_every = 10}: the debugger, as --break and
// --health-every arm it.
void debugger_fields(lua_State* L, LuaRunEvents& ev) {
  lua_getfield(L, 1, "breaks");
  if (!lua_isnil(L, -1)) {
    if (!lua_isstring(L, -1)) luaL_error(L, "mls.train: 'breaks' is a string such as \"nan,spike:3\"");
    auto b = parse_breakpoints(lua_tostring(L, -1));
    if (!b) luaL_error(L, "mls.train: %s", b.error().message.c_str());
    ev.breaks = *b;
  }
  lua_pop(L, 1);
  if (auto n = opt_integer_field(L, 1, "health_every"); n) {
    if (*n < 1) luaL_error(L, "mls.train: 'health_every' is a number of steps (>= 1)");
    ev.health.every = *n;
  }
}

std::string script_name(const Runtime& rt) {
  return rt.script_path.empty() ? std::string("lua")
                                : std::filesystem::path(rt.script_path).stem().string();
}

// [SECTION] mls.train

// mls.train{project = p, epochs = 1, batch_size = 64, lr = 0.01, seed = 7, limit = 1000}:
// the project's document, as the handle holds it, through the project front end.
bool train_project(lua_State* L, Runtime& rt, int project, std::optional<int64_t> resume, bool quiet) {
  runner::RunRequest req;
  const nodes::Document* doc = project_document(L, project, &req.project.path);
  if (!doc) luaL_error(L, "mls.train: 'project' must be a project (mls.project.open or current)");
  auto copy = std::make_shared<nodes::Document>(*doc);
  if (auto r = opt_integer_field(L, 1, "epochs"); r) req.project.epochs = *r;
  if (auto r = opt_integer_field(L, 1, "batch_size"); r) req.project.batch_size = *r;
  if (auto r = opt_integer_field(L, 1, "limit"); r) req.project.limit = *r;
  if (auto r = opt_integer_field(L, 1, "seed"); r) req.project.seed = static_cast<uint64_t>(*r);
  lua_getfield(L, 1, "lr");
  if (!lua_isnil(L, -1)) req.project.lr = luaL_checknumber(L, -1);
  lua_pop(L, 1);
  if (rt.check_path) {
    // A sandboxed script reads only what its sandbox allows, through the project as well.
    const std::filesystem::path base = req.project.path.empty()
                                           ? std::filesystem::current_path()
                                           : std::filesystem::absolute(req.project.path).parent_path();
    for (std::string* p : {&copy->dataset.path, &copy->dataset.npy.labels, &copy->weights})
      if (!p->empty() && std::filesystem::path(*p).is_relative()) *p = (base / *p).string();
    if (auto r = check_dataset_paths(rt, copy->dataset); !r) {
      rt.error = "mls.train: " + r.error().message;
      return false;
    }
    if (!copy->weights.empty()) {
      auto w = rt.allowed_path(copy->weights, false);
      if (!w) {
        rt.error = "mls.train: " + w.error().message;
        return false;
      }
      copy->weights = *w;
    }
  }
  req.project.document = std::move(copy);
  LuaRunEvents ev(rt, quiet);
  ev.memory_check = opt_bool(L, 1, "memory_check", true);
  debugger_fields(L, ev);
  ev.options(req, resume);
  return finish(L, rt, ev, runner::run_training(req, ev.events));
}

// mls.train{model = net, data = ds, loss = "cross_entropy" | function(y, t) ... end,
//           optimizer = mls.optim.SGD(net:parameters(), {lr = 0.05, momentum = 0.9}),
//           epochs = 10, batch_size = 128, seed = 42, schedule = {type = "cosine"},
//           clip_grad_norm = 0, name = "mlp", quiet = false, resume = RUN_ID}
bool train_model(lua_State* L, Runtime& rt, std::optional<int64_t> resume, bool quiet) {
  lua_getfield(L, 1, "model");
  const int model = lua_gettop(L);
  if (!lua_istable(L, model)) luaL_error(L, "mls.train: 'model' must be a module (mls.nn)");
  lua_getfield(L, 1, "data");
  if (test_object<Dataset>(L, -1, kDatasetMeta) == nullptr && luaL_testudata(L, -1, kDatasetMeta))
    luaL_error(L, "mls.train: the dataset was closed (collected as garbage)");
  Dataset* ds = test_object<Dataset>(L, -1, kDatasetMeta);
  if (!ds) luaL_error(L, "mls.train: 'data' must be a dataset (mls.data.open{...})");
  lua_getfield(L, 1, "optimizer");
  Optim* o = lua_isnil(L, -1) ? nullptr : check_object<Optim>(L, lua_gettop(L), kOptimMeta, "optimizer");
  lua_getfield(L, 1, "loss");
  const int loss_idx = lua_gettop(L);
  std::string loss_name = "cross_entropy";
  if (lua_type(L, loss_idx) == LUA_TSTRING)
    loss_name = lua_tostring(L, loss_idx);
  else if (!lua_isnil(L, loss_idx) && !lua_isfunction(L, loss_idx) && !lua_istable(L, loss_idx))
    luaL_error(L,
               "mls.train: 'loss' is a name ('cross_entropy', 'mse', 'l1', 'huber', "
               "'bce_with_logits') or a function");
  if (loss_name != "cross_entropy" && loss_name != "mse" && loss_name != "l1" &&
      loss_name != "huber" && loss_name != "bce_with_logits")
    luaL_error(L, "mls.train: unknown loss '%s'", loss_name.c_str());
  const std::string name = opt_string(L, 1, "name", "");
  if (!ds->splits.train) luaL_error(L, "mls.train: the dataset has no training split");

  // The training settings, read by the project format's own parser (same defaults, same
  // messages).
  json training = json::object();
  for (const char* k : {"epochs", "batch_size", "seed", "schedule", "clip_grad_norm",
                        "clip_grad_value", "early_stopping", "precision", "mode"}) {
    lua_getfield(L, 1, k);
    if (!lua_isnil(L, -1)) {
      auto v = to_json(L, -1);
      if (!v) luaL_error(L, "mls.train: '%s': %s", k, v.error().message.c_str());
      training[k] = *v;
    }
    lua_pop(L, 1);
  }
  if (o) {
    json oj{{"type", o->config.type}, {"lr", o->config.lr}, {"weight_decay", o->config.weight_decay}};
    if (o->config.type == "sgd") {
      oj["momentum"] = o->config.momentum;
      oj["nesterov"] = o->config.nesterov;
    }
    training["optimizer"] = oj;
  }
  nodes::TrainingSpec spec;
  nodes::FieldReader reader("mls.train");
  if (auto parsed = nodes::parse_training(reader, json{{"training", training}}, spec); !parsed) {
    rt.error = parsed.error().message;
    return false;
  }
  LuaModel m{L,
             &rt,
             LUA_NOREF,
             LUA_NOREF,
             loss_name,
             {},
             {},
             ds->splits.sample_shape,
             ds->splits.target_kind == TargetKind::Values ? ds->splits.target_shape : Shape{}};
  lua_newtable(L);  // holds every tensor in m.params and m.buffers until training ends
  const int anchor = lua_gettop(L);
  if (!named_tensors(L, model, "named_parameters", anchor, "mls.train", &m.params) ||
      !named_tensors(L, model, "named_buffers", anchor, "mls.train", &m.buffers)) {
    rt.error = "mls.train: 'model' must be a module (mls.nn.Module or a layer)";
    return false;
  }
  lua_pushvalue(L, model);
  m.model_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (lua_isfunction(L, loss_idx) || lua_istable(L, loss_idx)) {
    lua_pushvalue(L, loss_idx);
    m.loss_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  }
  // mls.train ends the script's own run (mls.start_run / mls.log): the session opens its own.
  rt.end_run("finished");
  std::string script_text;
  if (!rt.script_path.empty())
    if (auto bytes = read_whole_file(rt.script_path, 64 << 20); bytes)
      script_text.assign(bytes->begin(), bytes->end());

  auto factory = [&](const runner::Resumed*) -> Result<runner::RunModel> {
    runner::RunModel rm;
    rm.name = name.empty() ? script_name(rt) : name;
    rm.source = rt.script_path.empty() ? "a Lua model" : rt.script_path;
    rm.source_path =
        rt.script_path.empty() ? "" : std::filesystem::absolute(rt.script_path).string();
    if (!script_text.empty()) {
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(store::fnv1a64(script_text)));
      rm.source_hash = hex;
      rm.snapshot = {"lua", script_text};
    }
    rm.backend = &rt.backend;
    rm.builder = [&m](int64_t batch, bool training) { return build_lua_model(m, batch, training); };
    rm.train = ds->splits.train.get();
    rm.validation = ds->splits.validation.get();
    rm.test = ds->splits.test.get();
    rm.config = nodes::train_config(spec);
    if (o) rm.config.opt = o->config;  // everything the optimizer was made with, betas included
    rm.mode = std::string(nodes::to_string(spec.mode));
    rm.settings = {{"source", "lua"},
                   {"dataset", ds->source},
                   {"loss", m.loss_ref != LUA_NOREF ? std::string("a Lua function") : loss_name},
                   {"train_samples", std::to_string(ds->splits.train->num_samples())},
                   {"validation_samples", std::to_string(ds->splits.validation ? ds->splits.validation->num_samples() : 0)},
                   {"test_samples", std::to_string(ds->splits.test ? ds->splits.test->num_samples() : 0)}};
    rm.notes = {{"threads", std::to_string(rt.backend.num_threads())}};
    rm.explain_change = [](const std::string& key, const std::string& value) {
      return "the script now trains with " + key + " " + value;
    };
    // A new run starts from the weights the script holds (made under mls.manual_seed, or
    // trained); a resumed one from its checkpoint.
    rm.initial_weights = [&m](Trainer& t) {
      std::vector<Tensor> values;
      for (const auto& [n, v] : m.params) values.push_back(v->value);
      for (const auto& [n, v] : m.buffers) values.push_back(v->value);
      return t.set_param_values(values);
    };
    // A finished run's weights go back into the script's tensors.
    rm.after = [&m, &rt](Trainer& t, runner::RunOutcome& out) {
      if (out.status != "finished") return;
      const auto& pv = t.params();
      size_t i = 0;
      for (auto* list : {&m.params, &m.buffers})
        for (auto& [n, v] : *list) {
          rt.forget(*v);
          v->value = pv[i++];
          v->grad = Tensor();
        }
    };
    const std::string script = rt.script_path.empty() ? "SCRIPT.lua" : rt.script_path;
    rm.resume_command = "mlstudio lua " + script + " --resume {id} (or mls.train{..., resume = {id}})";
    return rm;
  };
  bool ok;
  {
    LuaRunEvents ev(rt, quiet);
    ev.memory_check = opt_bool(L, 1, "memory_check", true);
    debugger_fields(L, ev);
    runner::RunOptions options;
    ev.options(options, resume);
    ok = finish(L, rt, ev, runner::run_session(options, factory, ev.events));
  }
  // The model goes back to training mode whatever the last build left it in.
  lua_getfield(L, model, "train");
  lua_pushvalue(L, model);
  lua_pushboolean(L, 1);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, m.model_ref);
  if (m.loss_ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, m.loss_ref);
  return ok;
}

}  // namespace

int l_train(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  Runtime& rt = runtime(L);
  bool ok;
  {
    const std::optional<int64_t> resume = resume_of(L, rt);
    const bool quiet = opt_bool(L, 1, "quiet", false);
    lua_getfield(L, 1, "project");
    if (!lua_isnil(L, -1)) {
      ok = train_project(L, rt, lua_gettop(L), resume, quiet);
    } else {
      lua_pop(L, 1);
      ok = train_model(L, rt, resume, quiet);
    }
  }
  return ok ? 1 : raise(L);
}

}  // namespace mls::lua
