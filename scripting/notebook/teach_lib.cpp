// mls.teach: the framework's ideas drawn on the learner's own function or project, as figures
// added to the running cell's output (teach_figures.h draws them).
//
//   local r = mls.teach.eager_vs_traced(function(a, b) return (a * b + a):relu():sum() end, a, b)
//   r.eager_ops, r.graph_nodes, r.max_abs_diff          -- 4, 4, 0
//   mls.teach.passes(mls.project.current())             -- {{pass =, nodes_before =, nodes_after
//   =}} mls.teach.placement(p, {device = "vulkan"})         -- {device_ops =, cpu_ops =, fallbacks
//   =} mls.teach.memory(p, {checkpointing = "auto"})       -- {parameters =, gradients =, ...}
//
// Every figure comes from the path the engine really takes: the eager session's tape, the
// pass pipeline the trainer compiles with (build_step), the compiled plan's placement and the
// pre-flight memory plan. Arguments are checked first; the C++ work runs in a helper that
// leaves its message in Runtime::error, raised after it (bindings.h).
//
// [SECTION] helpers
// [SECTION] eager_vs_traced
// [SECTION] passes
// [SECTION] placement
// [SECTION] memory
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include "engine/core/backend_registry.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "engine/exec/eager.h"
#include "engine/train/preflight.h"
#include "engine/train/step_graph.h"
#include "nodes/training_spec.h"
#include "runner/project.h"
#include "runner/run_session.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/notebook/teach_figures.h"
#include "scripting/train_lib.h"

namespace mls::lua {

namespace {

// [SECTION] helpers

void add_figure(Runtime& rt, Figure f) {
  if (rt.cell_output != nullptr) rt.cell_output->figures.push_back(std::move(f));
}

void set_int(lua_State* L, const char* key, int64_t v) {
  lua_pushinteger(L, static_cast<lua_Integer>(v));
  lua_setfield(L, -2, key);
}

void push_strings(lua_State* L, const std::vector<std::string>& v) {
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushlstring(L, v[i].data(), v[i].size());
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

// The project at `idx` opened as a run opens it (its data described, not loaded), with the
// sandbox's checks on the files it names. Null, with Runtime::error set, when it fails.
std::unique_ptr<runner::Project> open_project(lua_State* L, Runtime& rt, int idx, const char* who,
                                              const std::optional<std::string>& checkpointing) {
  runner::ProjectOptions po;
  const nodes::Document* doc = project_document(L, idx, &po.path);
  auto copy = std::make_shared<nodes::Document>(*doc);
  if (rt.check_path) {
    namespace fs = std::filesystem;
    const fs::path base =
        po.path.empty() ? fs::current_path() : fs::absolute(po.path).parent_path();
    for (std::string* p : {&copy->dataset.path, &copy->dataset.npy.labels, &copy->weights})
      if (!p->empty() && fs::path(*p).is_relative()) *p = (base / *p).string();
    if (auto r = check_dataset_paths(rt, copy->dataset); !r) {
      rt.error = std::string(who) + ": " + r.error().message;
      return nullptr;
    }
    if (!copy->weights.empty()) {
      auto w = rt.allowed_path(copy->weights, false);
      if (!w) {
        rt.error = std::string(who) + ": " + w.error().message;
        return nullptr;
      }
      copy->weights = *w;
    }
  }
  po.document = std::move(copy);
  po.load_data = false;
  po.activation_checkpointing = checkpointing;
  auto p = runner::open_project(po);
  if (!p) {
    rt.error = std::string(who) + ": " + p.error().message;
    return nullptr;
  }
  return std::make_unique<runner::Project>(std::move(*p));
}

// The training step of the project as the trainer builds it on `backend`, every stage kept.
std::optional<StepGraph> project_step(Runtime& rt, const runner::Project& p, Backend& backend,
                                      const char* who) {
  auto m = p.builder()(p.doc.training.batch_size, true);
  if (!m) {
    rt.error = std::string(who) + ": " + m.error().message;
    return std::nullopt;
  }
  StepOptions so = step_options(p.train_config());
  so.keep_stages = true;
  auto s = build_step(std::move(*m), backend, so);
  if (!s) {
    rt.error = std::string(who) + ": " + s.error().message;
    return std::nullopt;
  }
  return std::move(*s);
}

// The name of the `i`-th parameter (1-based) of the Lua function at `fn`, else "x<i>".
std::string param_name(lua_State* L, int fn, int i) {
  lua_pushvalue(L, fn);
  const char* name = lua_getlocal(L, nullptr, i);
  std::string out = name ? name : "x" + std::to_string(i);
  lua_pop(L, 1);
  return out;
}

// A function traced into a graph of its own, as mls.jit traces it: its arguments become the
// graph's inputs, the tensors it returns its outputs.
std::optional<Graph> trace_function(lua_State* L, Runtime& rt, int fn, int first, int n,
                                    const char* who) {
  const int top = lua_gettop(L);
  Trace& t = rt.begin_trace("traced");
  t.capture_params = false;  // tensors the function captures are constants, as in mls.jit
  lua_pushcfunction(L, traceback_handler);
  lua_pushvalue(L, fn);
  for (int i = 0; i < n; ++i) {
    const Tensor& v = to_tensor(L, first + i)->value;
    push_traced(L, t.id, t.graph().add_input(param_name(L, fn, i + 1), {v.dtype(), v.shape()}));
  }
  if (lua_pcall(L, n, LUA_MULTRET, top + 1) != LUA_OK) {
    t.error = lua_tostring(L, -1) ? lua_tostring(L, -1) : "error in the traced function";
  } else {
    for (int i = top + 2; i <= lua_gettop(L); ++i) {
      LuaTensor* y = to_tensor(L, i);
      if (!y || y->trace_id != t.id) break;
      t.graph().add_output(y->ref);
    }
    if (t.error.empty() && t.graph().outputs().empty())
      t.error = "the function must return a tensor computed from its arguments";
  }
  lua_settop(L, top);
  std::optional<Graph> g;
  if (!t.error.empty())
    rt.error = std::string(who) + ": tracing: " + t.error;
  else
    g.emplace(std::move(t.graph()));
  rt.end_trace(t);
  return g;
}

// Arguments 2.. of a call taking (f, tensors...): eager, open, floating-point tensors.
int check_function_args(lua_State* L, const char* who) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  const int n = lua_gettop(L) - 1;
  for (int i = 2; i <= n + 1; ++i) {
    LuaTensor* t = check_tensor(L, i);
    if (t->trace_id) luaL_error(L, "%s: argument %d is a traced value; give eager tensors", who, i);
    if (!dtype_is_float(t->value.dtype()))
      luaL_error(L, "%s: argument %d is %s; the figures follow floating-point tensors", who, i,
                 std::string(dtype_name(t->value.dtype())).c_str());
  }
  return n;
}

// [SECTION] eager_vs_traced

struct EagerVsTraced {
  size_t eager_ops = 0, graph_nodes = 0, optimized_nodes = 0;
  double max_abs_diff = 0;
};

// The function run eagerly on copies of its arguments that require grad, so the session's
// tape records every op that depends on them, in the order it ran. The session is not reset
// while it runs, nor before or after: a forward the script made earlier keeps its tape for
// its backward.
bool run_eager(lua_State* L, Runtime& rt, int n, std::vector<teach::EagerOp>* ops, Tensor* result) {
  const char* who = "mls.teach.eager_vs_traced";
  const size_t first = rt.session.tape_size();
  const size_t saved_reset = rt.reset_values;
  const bool saved_grad = rt.grad_enabled;
  rt.reset_values = std::numeric_limits<size_t>::max();  // no new generation mid-function
  rt.grad_enabled = true;
  const int top = lua_gettop(L);
  lua_pushcfunction(L, traceback_handler);
  lua_pushvalue(L, 1);
  for (int i = 0; i < n; ++i) push_value(L, to_tensor(L, 2 + i)->value)->requires_grad = true;
  bool ok = lua_pcall(L, n, 1, top + 1) == LUA_OK;
  if (!ok) {
    rt.error = std::string(who) + ": the eager run failed: " +
               (lua_tostring(L, -1) ? lua_tostring(L, -1) : "an error");
  } else if (LuaTensor* y = to_tensor(L, -1); !y || y->trace_id || y->closed) {
    rt.error = std::string(who) + ": the function must return a tensor";
    ok = false;
  } else if (rt.session.failed()) {
    rt.error = std::string(who) + ": " + rt.session.error();
    ok = false;
  } else {
    *result = y->value.contiguous(AllocTag::Activation);
    for (const TapeEntry& e : rt.session.tape().subspan(first))
      ops->push_back(
          {e.op->name,
           e.outputs.empty() ? "-" : teach::shape_label(rt.session.value(e.outputs[0]).shape())});
  }
  lua_settop(L, top);
  rt.reset_values = saved_reset;
  rt.grad_enabled = saved_grad;
  return ok;
}

bool eager_vs_traced(lua_State* L, Runtime& rt, int n, EagerVsTraced* out) {
  const char* who = "mls.teach.eager_vs_traced";
  std::vector<teach::EagerOp> ops;
  Tensor eager;
  if (!run_eager(L, rt, n, &ops, &eager)) return false;
  std::optional<Graph> g = trace_function(L, rt, 1, 2, n, who);
  if (!g) return false;
  auto stages = run_passes(*g, rt.backend, default_passes());
  if (!stages) {
    rt.error = std::string(who) + ": " + stages.error().message;
    return false;
  }
  const Graph& cg = stages->back().graph;
  auto plan = CompiledPlan::compile(cg, rt.backend);
  if (!plan) {
    rt.error = std::string(who) + ": " + plan.error().message;
    return false;
  }
  for (int i = 0; i < n; ++i) {
    const Tensor& v = to_tensor(L, 2 + i)->value;
    if (auto b =
            plan->bind(cg.inputs()[static_cast<size_t>(i)], v.is_contiguous() ? v : v.contiguous());
        !b) {
      rt.error = std::string(who) + ": " + b.error().message;
      return false;
    }
  }
  plan->run();
  const Tensor& traced = plan->tensor(cg.outputs()[0]);
  if (traced.shape() != eager.shape()) {
    rt.error = std::string(who) + ": the eager result has shape " +
               teach::shape_label(eager.shape()) + " but the traced one " +
               teach::shape_label(traced.shape()) +
               " (the function takes another path when traced)";
    return false;
  }
  const std::vector<double> a = eager.to_f64(), b = traced.to_f64();
  for (size_t i = 0; i < a.size(); ++i)
    out->max_abs_diff = std::max(out->max_abs_diff, std::abs(a[i] - b[i]));
  out->eager_ops = ops.size();
  out->graph_nodes = g->nodes().size();
  out->optimized_nodes = cg.nodes().size();
  add_figure(rt, teach::eager_vs_traced_figure(ops, *g, cg.nodes().size(), out->max_abs_diff));
  return true;
}

// mls.teach.eager_vs_traced(f, ...): f run eagerly and traced; returns {eager_ops,
// graph_nodes, optimized_nodes, max_abs_diff}.
int l_eager_vs_traced(lua_State* L) {
  const int n = check_function_args(L, "mls.teach.eager_vs_traced");
  Runtime& rt = runtime(L);
  EagerVsTraced r;
  if (!eager_vs_traced(L, rt, n, &r)) return raise(L);
  lua_createtable(L, 0, 4);
  set_int(L, "eager_ops", static_cast<int64_t>(r.eager_ops));
  set_int(L, "graph_nodes", static_cast<int64_t>(r.graph_nodes));
  set_int(L, "optimized_nodes", static_cast<int64_t>(r.optimized_nodes));
  lua_pushnumber(L, r.max_abs_diff);
  lua_setfield(L, -2, "max_abs_diff");
  return 1;
}

// [SECTION] passes

struct PassRow {
  std::string pass;
  size_t before = 0, after = 0;
};

bool passes(lua_State* L, Runtime& rt, int n, std::vector<PassRow>* rows) {
  const char* who = "mls.teach.passes";
  std::vector<PassRecord> stages;
  std::string name;
  if (lua_isfunction(L, 1)) {
    std::optional<Graph> g = trace_function(L, rt, 1, 2, n, who);
    if (!g) return false;
    auto s = run_passes(*g, rt.backend, default_passes());
    if (!s) {
      rt.error = std::string(who) + ": " + s.error().message;
      return false;
    }
    stages = std::move(*s);
    name = "the traced function";
  } else {
    std::unique_ptr<runner::Project> p = open_project(L, rt, 1, who, std::nullopt);
    if (!p) return false;
    auto device = runner::open_backend(*p);
    if (!device) {
      rt.error = std::string(who) + ": " + device.error().message;
      return false;
    }
    std::optional<StepGraph> step = project_step(rt, *p, **device, who);
    if (!step) return false;
    stages = std::move(step->stages);
    name = p->doc.name.empty() ? "the project's training step" : p->doc.name + "'s training step";
  }
  std::vector<teach::PassCount> counts;
  for (size_t i = 0; i < stages.size(); ++i) {
    counts.push_back({stages[i].name, stages[i].graph.nodes().size()});
    if (i > 0)
      rows->push_back(
          {stages[i].name, stages[i - 1].graph.nodes().size(), stages[i].graph.nodes().size()});
  }
  const size_t first = stages.front().graph.nodes().size(),
               last = stages.back().graph.nodes().size();
  add_figure(rt, teach::passes_figure(counts, "The compiler's passes on " + name + ": " +
                                                  std::to_string(first) + " nodes -> " +
                                                  std::to_string(last)));
  add_figure(rt, teach::before_after_figure(stages.front().graph, stages.back().graph,
                                            "Before and after the passes: " + name));
  return true;
}

// mls.teach.passes(project) or mls.teach.passes(f, ...): a table of {pass, nodes_before,
// nodes_after}, one per pass in pipeline order.
int l_passes(lua_State* L) {
  const char* who = "mls.teach.passes";
  int n = 0;
  if (lua_isfunction(L, 1))
    n = check_function_args(L, who);
  else if (!project_document(L, 1, nullptr))
    luaL_error(L,
               "%s: give a project (mls.project.current() or open) or a function and its "
               "arguments",
               who);
  Runtime& rt = runtime(L);
  std::vector<PassRow> rows;
  if (!passes(L, rt, n, &rows)) return raise(L);
  lua_createtable(L, static_cast<int>(rows.size()), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    lua_createtable(L, 0, 3);
    lua_pushlstring(L, rows[i].pass.data(), rows[i].pass.size());
    lua_setfield(L, -2, "pass");
    set_int(L, "nodes_before", static_cast<int64_t>(rows[i].before));
    set_int(L, "nodes_after", static_cast<int64_t>(rows[i].after));
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}

// [SECTION] placement

struct Placement {
  std::string device;
  size_t device_ops = 0, cpu_ops = 0;
  size_t transfers = 0, transfer_bytes = 0;  // copies between the device and the host per step
  std::vector<std::string> fallbacks, placed;
};

bool placement(lua_State* L, Runtime& rt, const std::string& device_name, Placement* out) {
  const char* who = "mls.teach.placement";
  std::unique_ptr<runner::Project> p = open_project(L, rt, 1, who, std::nullopt);
  if (!p) return false;
  const std::string name = device_name.empty() ? p->doc.training.device : device_name;
  auto device = backend_registry().open(name.empty() ? "cpu" : name);
  if (!device) {
    rt.error = std::string(who) + ": " + device.error().message;
    return false;
  }
  Backend& be = **device;
  std::optional<StepGraph> step = project_step(rt, *p, be, who);
  if (!step) return false;
  const Graph& g = step->graph();
  PlanOptions po;
  po.allocate = false;
  po.host_labels = p->train_config().host_nodes;
  auto plan = CompiledPlan::compile(g, be, po);
  if (!plan) {
    rt.error = std::string(who) + ": " + plan.error().message;
    return false;
  }
  const bool cpu = be.kind() == DeviceKind::CPU;
  out->device = cpu ? "cpu" : std::string(be.name());
  std::vector<int> where(g.nodes().size(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (plan->node_waves()[i] < 0) continue;
    const bool host = plan->on_host(i);
    const bool placed = host && std::find(po.host_labels.begin(), po.host_labels.end(),
                                          g.nodes()[i].label) != po.host_labels.end();
    where[i] = !host ? 0 : placed ? 2 : 1;
    (cpu || host ? out->cpu_ops : out->device_ops)++;
  }
  out->fallbacks = plan->fallbacks();
  out->placed = plan->placed();
  if (!plan->fallbacks().empty() || !plan->placed().empty()) {
    // The plan counts its copies when it makes their host buffers: compile it for real.
    po.allocate = true;
    auto real = CompiledPlan::compile(g, be, po);
    if (!real) {
      rt.error = std::string(who) + ": " + real.error().message;
      return false;
    }
    out->transfers = real->stats().transfers;
    out->transfer_bytes = real->stats().transfer_bytes;
  }
  const std::string copies =
      out->transfers == 0 ? ""
                          : std::to_string(out->transfers) + " copies per step (" +
                                teach::bytes_label(static_cast<int64_t>(out->transfer_bytes)) + ")";
  add_figure(rt, teach::placement_figure(g, where, cpu ? "cpu" : name,
                                         "Where each op of the training step runs (" +
                                             (cpu ? std::string("cpu") : name) + ")",
                                         copies));
  return true;
}

// mls.teach.placement(project [, {device = "vulkan"}]): {device, device_ops, cpu_ops,
// transfers, transfer_bytes, fallbacks = {names}, placed = {names}}.
int l_placement(lua_State* L) {
  const char* who = "mls.teach.placement";
  if (!project_document(L, 1, nullptr))
    luaL_error(L, "%s: give a project (mls.project.current() or open)", who);
  const std::string device = opt_string(L, 2, "device", "");
  Runtime& rt = runtime(L);
  Placement r;
  if (!placement(L, rt, device, &r)) return raise(L);
  lua_createtable(L, 0, 7);
  lua_pushlstring(L, r.device.data(), r.device.size());
  lua_setfield(L, -2, "device");
  set_int(L, "device_ops", static_cast<int64_t>(r.device_ops));
  set_int(L, "cpu_ops", static_cast<int64_t>(r.cpu_ops));
  set_int(L, "transfers", static_cast<int64_t>(r.transfers));
  set_int(L, "transfer_bytes", static_cast<int64_t>(r.transfer_bytes));
  push_strings(L, r.fallbacks);
  lua_setfield(L, -2, "fallbacks");
  push_strings(L, r.placed);
  lua_setfield(L, -2, "placed");
  return 1;
}

// [SECTION] memory

// The categories a student reads, from the memory plan's at the step's peak.
const std::pair<const char*, MemCat> kMemCats[] = {{"parameters", MemCat::Parameter},
                                                   {"gradients", MemCat::Gradient},
                                                   {"optimizer_state", MemCat::OptimizerState},
                                                   {"activations", MemCat::Activation},
                                                   {"backward", MemCat::Backward},
                                                   {"workspace", MemCat::Workspace},
                                                   {"inputs", MemCat::Input},
                                                   {"constants", MemCat::Constant}};

const char* mem_label(const char* key) {
  const std::string k = key;
  if (k == "optimizer_state") return "optimizer state";
  if (k == "backward") return "backward temporaries";
  return key;
}

struct MemoryResult {
  std::string name;
  teach::MemoryColumn column;
  std::vector<std::pair<std::string, int64_t>> bytes;  // by key, then "total"
};

bool memory_of(lua_State* L, Runtime& rt, const std::optional<std::string>& checkpointing,
               MemoryResult* out) {
  const char* who = "mls.teach.memory";
  std::unique_ptr<runner::Project> p = open_project(L, rt, 1, who, checkpointing);
  if (!p) return false;
  auto device = runner::open_backend(*p);
  if (!device) {
    rt.error = std::string(who) + ": " + device.error().message;
    return false;
  }
  PreflightOptions po;
  po.free_bytes = std::numeric_limits<int64_t>::max();  // the plan, not whether it fits
  po.search_max_batch = false;
  auto e = preflight(p->builder(), p->train_config(), **device, runner::device_rates(**device), po);
  if (!e) {
    rt.error = std::string(who) + ": " + e.error().message;
    return false;
  }
  const MemoryTimeline& t = e->timeline;
  out->column.name = "checkpointing " + checkpointing.value_or("off");
  for (const auto& [key, cat] : kMemCats) {
    // Each category at its largest during the step (forward activations peak before the
    // backward frees them, gradients at its end); the total is the planned peak.
    int64_t b = 0;
    for (const MemoryTimeline::Sample& s : t.samples)
      b = std::max(b, s.bytes[static_cast<size_t>(mem_cat_index(cat))]);
    out->bytes.push_back({key, b});
    out->column.categories.push_back({mem_label(key), b});
  }
  out->column.total = t.total_bytes;
  out->bytes.push_back({"total", t.total_bytes});
  out->name = p->doc.name;
  return true;
}

void push_memory(lua_State* L, const MemoryResult& m) {
  lua_createtable(L, 0, static_cast<int>(m.bytes.size()));
  for (const auto& [key, b] : m.bytes) set_int(L, key.c_str(), b);
}

// mls.teach.memory(project [, {checkpointing = "auto"}]): bytes by category at the training
// step's peak; with checkpointing, the step without it as well, both drawn: {off = {...},
// [mode] = {...}} plus the off figures at the top level.
int l_teach_memory(lua_State* L) {
  const char* who = "mls.teach.memory";
  if (!project_document(L, 1, nullptr))
    luaL_error(L, "%s: give a project (mls.project.current() or open)", who);
  const std::string mode = opt_string(L, 2, "checkpointing", "");
  Runtime& rt = runtime(L);
  bool ok = true;
  std::vector<MemoryResult> results(1);
  {
    if (!mode.empty()) {
      if (auto parsed = nodes::parse_activation_checkpointing(mode); !parsed) {
        rt.error = std::string(who) + ": checkpointing: " + parsed.error().message;
        ok = false;
      }
    }
    ok = ok && memory_of(L, rt, std::string("off"), &results[0]);
    if (ok && !mode.empty() && mode != "off") {
      results.emplace_back();
      ok = memory_of(L, rt, mode, &results[1]);
    }
    if (ok) {
      std::vector<teach::MemoryColumn> cols;
      for (const MemoryResult& m : results) cols.push_back(m.column);
      const std::string name = results[0].name.empty() ? "the project" : results[0].name;
      add_figure(rt, teach::memory_figure(cols, "Memory of one training step: " + name));
    }
  }
  if (!ok) return raise(L);
  push_memory(L, results[0]);
  if (results.size() > 1) {
    push_memory(L, results[0]);
    lua_setfield(L, -2, "off");
    push_memory(L, results[1]);
    lua_setfield(L, -2, mode.c_str());
  }
  return 1;
}

const luaL_Reg kTeach[] = {{"eager_vs_traced", l_eager_vs_traced},
                           {"passes", l_passes},
                           {"placement", l_placement},
                           {"memory", l_teach_memory},
                           {nullptr, nullptr}};

}  // namespace

void open_teach_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kTeach);
  lua_setfield(L, -2, "teach");
}

}  // namespace mls::lua
