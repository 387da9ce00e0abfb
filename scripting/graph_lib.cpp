// Static graphs from Lua: build one op by op (mls.graph), trace an eager function into a
// compiled plan (mls.jit), or get a function's gradient as a graph (mls.grad).
//
//   local g = mls.graph("affine")
//   local x = g:input("x", {4, 3})
//   local w = g:param("w", {3, 2})
//   g:output((x:matmul(w)):relu():sum())
//   g:grad({w})                 -- appends the backward graph: outputs d sum / d w
//   print(g:dump())             -- the SSA text
//   local out = g:run{x = mls.randn{4, 3}, w = mls.ones{3, 2}}
//
//   local f = mls.jit(function(a, b) return (a * b):sum() end)
//   f(mls.ones{3}, mls.ones{3})          -- traces, compiles, runs; later calls reuse the plan
//   local df = mls.grad(function(w, x) return (x:matmul(w)):relu():sum() end)
//   local gw, gx = df(w, x)               -- d f / d each argument; df:dump() shows the graph
#include <cstring>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/jit.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

constexpr const char* kGraphMeta = "mls.Graph";
constexpr const char* kFnMeta = "mls.TracedFunction";

// [SECTION] mls.graph

struct GraphBox {
  uint32_t trace_id = 0;      // the trace recording it (0 once finished)
  std::optional<Graph> done;  // after finish(): the graph itself
  std::optional<CompiledPlan> plan;
};

GraphBox* check_graph(lua_State* L, int idx) {
  return check_object<GraphBox>(L, idx, kGraphMeta, "graph");
}

Trace* live_trace(lua_State* L, GraphBox* g) {
  Trace* t = g->trace_id ? runtime(L).find_trace(g->trace_id) : nullptr;
  if (t == nullptr)
    luaL_error(L, "the graph is finished: no more inputs, params or outputs can be added");
  return t;
}

int l_graph_new(lua_State* L) {
  const std::string name = luaL_optstring(L, 1, "graph");
  GraphBox* g = push_object(L, kGraphMeta, std::make_unique<GraphBox>());
  g->trace_id = runtime(L).begin_trace(name).id;
  runtime(L).find_trace(g->trace_id)->capture_params = false;  // eager tensors read are constants
  return 1;
}

// g:input(name, shape [, dtype])
int l_graph_input(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  const std::string name = luaL_checkstring(L, 2);
  IntList s = check_shape(L, 3);
  const DType dt = check_dtype(L, 4, DType::F32);
  Trace* t = live_trace(L, g);
  push_traced(L, t->id, t->graph().add_input(name, {dt, s.vec()}));
  return 1;
}

// g:param(name, shape [, {init = "kaiming_uniform"}])
int l_graph_param(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  const std::string name = luaL_checkstring(L, 2);
  IntList s = check_shape(L, 3);
  const std::string init = opt_string(L, 4, "init", "kaiming_uniform");
  Trace* t = live_trace(L, g);
  ParamInit pi{init, s.n ? s.v[0] : 1, s.n > 1 ? s.v[1] : 1};
  push_traced(L, t->id, t->graph().add_param(name, {DType::F32, s.vec()}, pi));
  return 1;
}

// g:output(y, ...): the graph's outputs, in order.
int l_graph_output(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  Trace* t = live_trace(L, g);
  for (int i = 2; i <= lua_gettop(L); ++i) {
    LuaTensor* y = check_tensor(L, i);
    if (y->trace_id != t->id) return luaL_argerror(L, i, "not a value of this graph");
    t->graph().add_output(y->ref);
  }
  return 0;
}

// g:grad({w1, w2}): appends the backward of output 1 (a scalar) and returns the gradients
// as values of the graph, which are added to its outputs.
int l_graph_grad(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  Trace* t = live_trace(L, g);
  if (t->graph().outputs().empty())
    return luaL_error(L, "grad: give the graph an output first (g:output(loss))");
  const lua_Integer n = luaL_len(L, 2);
  bool ok = true;
  {
    Refs wrt;
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_geti(L, 2, i);
      LuaTensor* w = check_tensor(L, -1);
      lua_pop(L, 1);
      if (w->trace_id != t->id) {
        runtime(L).error = "grad: entry " + std::to_string(i) + " is not a value of this graph";
        ok = false;
        break;
      }
      wrt.push_back(w->ref);
    }
    if (ok) {
      auto grads = append_backward(t->graph(), t->graph().outputs()[0], wrt);
      if (!grads) {
        runtime(L).error = "grad: " + grads.error().message;
        ok = false;
      } else {
        for (Ref r : *grads) {
          if (r.valid()) {
            t->graph().add_output(r);
            push_traced(L, t->id, r);
          } else {
            lua_pushnil(L);  // the output does not depend on it
          }
        }
      }
    }
  }
  return ok ? static_cast<int>(n) : raise(L);
}

int l_graph_dump(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  std::string text;
  if (g->done) {
    text = g->done->to_text();
  } else {
    Trace* t = live_trace(L, g);
    text = t->graph().to_text();
  }
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

// Ends recording: verifies the graph and compiles it (on first run()).
bool finish(lua_State* L, GraphBox* g) {
  Runtime& rt = runtime(L);
  if (g->done) return true;
  Trace* t = rt.find_trace(g->trace_id);
  if (t == nullptr) return true;
  if (!t->error.empty()) {
    rt.error = t->error;
    return false;
  }
  if (t->graph().outputs().empty()) {
    rt.error = "the graph has no outputs (g:output(y))";
    return false;
  }
  if (auto v = t->graph().verify(); !v) {
    rt.error = v.error().message;
    return false;
  }
  g->done.emplace(std::move(t->graph()));
  rt.end_trace(*t);
  g->trace_id = 0;
  return true;
}

// g:run{x = tensor, w = tensor}: compiles the graph (once) and runs it; returns its outputs.
int l_graph_run(lua_State* L) {
  GraphBox* g = check_graph(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  Runtime& rt = runtime(L);
  int nout = 0;
  bool ok = finish(L, g);
  if (ok) {
    std::vector<std::string> names;
    for (Ref r : g->done->inputs()) names.push_back(g->done->value(r).name);
    for (Ref r : g->done->params()) names.push_back(g->done->value(r).name);
    std::vector<Tensor> bound;
    for (const std::string& n : names) {
      lua_getfield(L, 2, n.c_str());
      LuaTensor* x = to_tensor(L, -1);
      lua_pop(L, 1);
      if (!x || x->trace_id || x->closed) {
        rt.error = "run: give an eager tensor for '" + n + "'";
        ok = false;
        break;
      }
      bound.push_back(x->value.is_contiguous() ? x->value : x->value.contiguous());
    }
    if (ok && !g->plan) {
      auto p = CompiledPlan::compile(*g->done, rt.backend);
      if (!p) {
        rt.error = "run: " + p.error().message;
        ok = false;
      } else {
        g->plan.emplace(std::move(*p));
      }
    }
    if (ok) {
      std::vector<Ref> bindable(g->done->inputs().begin(), g->done->inputs().end());
      bindable.insert(bindable.end(), g->done->params().begin(), g->done->params().end());
      for (size_t i = 0; ok && i < bindable.size(); ++i) {
        if (auto b = g->plan->bind(bindable[i], bound[i]); !b) {
          rt.error = "run: '" + names[i] + "': " + b.error().message;
          ok = false;
        }
      }
      if (ok) {
        g->plan->run();
        for (Ref r : g->done->outputs())
          push_value(L, g->plan->tensor(r).contiguous(AllocTag::Activation));
        nout = static_cast<int>(g->done->outputs().size());
      }
    }
  }
  return ok ? nout : raise(L);
}

int l_graph_gc(lua_State* L) {
  std::unique_ptr<GraphBox> g = take_object<GraphBox>(L, 1, kGraphMeta);
  if (g && g->trace_id)
    if (Trace* t = runtime(L).find_trace(g->trace_id)) runtime(L).end_trace(*t);
  return 0;
}

// [SECTION] mls.jit and mls.grad

struct FnBox {
  std::optional<TracedFunction> fn;
  bool grad = false;    // mls.grad: returns d out / d each input
  int ref = LUA_NOREF;  // the Lua function
  lua_State* L = nullptr;
};

FnBox* check_fn(lua_State* L, int idx) {
  return check_object<FnBox>(L, idx, kFnMeta, "traced function");
}

// The TracedFunction's body: calls the Lua function on traced stand-ins for its inputs.
Refs call_lua(FnBox* box, Runtime* rt, Emitter& e, std::span<const Ref> in) {
  lua_State* L = box->L;
  const int top = lua_gettop(L);
  Trace& t = rt->begin_trace(e);
  t.capture_params = false;
  lua_pushcfunction(L, traceback_handler);
  lua_rawgeti(L, LUA_REGISTRYINDEX, box->ref);
  for (Ref r : in) push_traced(L, t.id, r);
  Refs outs;
  if (lua_pcall(L, static_cast<int>(in.size()), LUA_MULTRET, top + 1) != LUA_OK) {
    t.error = lua_tostring(L, -1) ? lua_tostring(L, -1) : "error in the traced function";
  } else {
    for (int i = top + 2; i <= lua_gettop(L); ++i) {
      auto* y = static_cast<LuaTensor*>(luaL_testudata(L, i, "mls.Tensor"));
      if (!y || y->trace_id != t.id) {
        if (t.error.empty())
          t.error = "the traced function must return tensors computed from its arguments";
        break;
      }
      outs.push_back(y->ref);
    }
  }
  lua_settop(L, top);
  if (!t.error.empty()) {
    rt->error = t.error;
    outs.clear();
  }
  rt->end_trace(t);
  return outs;
}

int make_fn(lua_State* L, bool grad) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  Runtime* rt = &runtime(L);
  FnBox* box = push_object(L, kFnMeta, std::make_unique<FnBox>());
  box->grad = grad;
  box->L = L;
  lua_pushvalue(L, 1);
  box->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  box->fn.emplace(
      rt->backend,
      [box, rt](Emitter& e, std::span<const Ref> in) { return call_lua(box, rt, e, in); },
      TraceOptions{.name = grad ? "grad" : "jit"});
  return 1;
}

int l_jit(lua_State* L) {
  return make_fn(L, false);
}
int l_grad(lua_State* L) {
  return make_fn(L, true);
}

int l_fn_call(lua_State* L) {
  FnBox* box = check_fn(L, 1);
  const int n = lua_gettop(L) - 1;
  Runtime& rt = runtime(L);
  for (int i = 2; i <= n + 1; ++i)
    if (check_tensor(L, i)->trace_id)
      return luaL_argerror(L, i, "a traced function is called with eager tensors");
  int pushed = 0;
  bool ok = true;
  {
    std::vector<Tensor> in;
    for (int i = 2; i <= n + 1; ++i) in.push_back(to_tensor(L, i)->value);
    rt.error.clear();
    auto r =
        box->fn->call(in, box->grad ? std::vector<bool>(in.size(), true) : std::vector<bool>{});
    if (!r) {
      if (rt.error.empty()) rt.error = r.error().message;
      ok = false;
    } else {
      const std::vector<Tensor>& out = box->grad ? r->grads : r->outputs;
      for (const Tensor& t : out) push_value(L, t);
      pushed = static_cast<int>(out.size());
    }
  }
  return ok ? pushed : raise(L);
}

// f:dump([optimized]): the graph of the last call's signature (with its backward for
// mls.grad); optimized = true shows it after the compiler's passes.
int l_fn_dump(lua_State* L) {
  FnBox* box = check_fn(L, 1);
  const std::string text = box->fn->graph_text(lua_toboolean(L, 2) != 0);
  if (text.empty())
    return luaL_error(L, "dump: call the function once first (a trace is made per input shape)");
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

int l_fn_stats(lua_State* L) {
  FnBox* box = check_fn(L, 1);
  const TraceStats& s = box->fn->stats();
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, s.traces);
  lua_setfield(L, -2, "traces");
  lua_pushinteger(L, s.hits);
  lua_setfield(L, -2, "hits");
  lua_pushinteger(L, static_cast<lua_Integer>(s.entries));
  lua_setfield(L, -2, "entries");
  return 1;
}

int l_fn_gc(lua_State* L) {
  std::unique_ptr<FnBox> box = take_object<FnBox>(L, 1, kFnMeta);
  if (box) luaL_unref(L, LUA_REGISTRYINDEX, box->ref);
  return 0;
}

const luaL_Reg kGraphMethods[] = {{"input", l_graph_input},   {"param", l_graph_param},
                                  {"output", l_graph_output}, {"grad", l_graph_grad},
                                  {"dump", l_graph_dump},     {"run", l_graph_run},
                                  {nullptr, nullptr}};
const luaL_Reg kFnMethods[] = {{"dump", l_fn_dump}, {"stats", l_fn_stats}, {nullptr, nullptr}};
const luaL_Reg kFnCall[] = {{"__call", l_fn_call}, {nullptr, nullptr}};
const luaL_Reg kGraphTop[] = {
    {"graph", l_graph_new}, {"jit", l_jit}, {"grad", l_grad}, {nullptr, nullptr}};

}  // namespace

void open_graph_lib(lua_State* L) {
  set_funcs(L, kGraphTop);
  register_class(L, kGraphMeta, kGraphMethods, nullptr, l_graph_gc);
  register_class(L, kFnMeta, kFnMethods, nullptr, l_fn_gc);
  luaL_getmetatable(L, kFnMeta);
  set_funcs(L, kFnCall);
  lua_pop(L, 1);
}

}  // namespace mls::lua
