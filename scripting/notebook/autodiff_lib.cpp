// mls.autodiff: forward and reverse mode on a small function, with the graph drawn
// (autodiff_view.h). The function is traced once (as mls.jit traces), every value's tangent
// or adjoint is evaluated with the ops' own rules, the figure is appended to the running
// cell's output, and the numbers come back as a table.
//
//   local f = function(x) return x * x * mls.sin(x) end
//   local r = mls.autodiff.forward(f, 2)      -- r.value 3.6372, r.derivative 1.9726
//   r.wires[2]                                -- {name = "v1", op = "mul", inputs = {"x", "x"},
//                                             --  formula = "x · x", value = 4, tangent = 4}
//   mls.autodiff.reverse(f, 2).wires[1].adjoint   -- 1.9726: df/dx, swept back from f
//   mls.autodiff.compare(f, 2).agree              -- true; one figure, the two side by side
//   mls.autodiff.forward(function(x, y) return x * y end, {2, 3}, {1, 0})   -- df/dx = 3
//
// Arguments are checked first (raising before any C++ object exists); the work runs in a
// scope and its error is raised after it, as bindings.h asks.
#include <cmath>
#include <cstring>

#include "scripting/bindings.h"
#include "scripting/libs.h"
#include "scripting/notebook/autodiff_view.h"

namespace mls::lua {

namespace {

constexpr int kMaxArgs = 8;
constexpr size_t kMaxDrawn = 400;

// The number of arguments at `idx`: a number or a one-element eager tensor (1), or a table of
// 1 to 8 numbers. Raises "bad argument #idx to 'WHO' (...)" otherwise.
int check_point(lua_State* L, int idx, const char* what) {
  if (lua_type(L, idx) == LUA_TNUMBER) return 1;
  if (LuaTensor* t = to_tensor(L, idx)) {
    check_tensor(L, idx);  // raises for a closed one
    if (t->trace_id) luaL_argerror(L, idx, "a traced value has no data");
    if (t->value.numel() != 1 || t->value.dtype() != DType::F32) {
      lua_pushfstring(L, "%s must be one number (a one-element f32 tensor)", what);
      luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    return 1;
  }
  if (lua_type(L, idx) == LUA_TTABLE) {
    const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, idx));
    if (n < 1 || n > kMaxArgs) {
      lua_pushfstring(L, "%s: a table of 1 to %d numbers expected, got %d entries", what, kMaxArgs,
                      static_cast<int>(n));
      luaL_argerror(L, idx, lua_tostring(L, -1));
    }
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, i);
      const bool num = lua_type(L, -1) == LUA_TNUMBER;
      lua_pop(L, 1);
      if (!num) {
        lua_pushfstring(L, "%s[%d] is not a number", what, static_cast<int>(i));
        luaL_argerror(L, idx, lua_tostring(L, -1));
      }
    }
    return static_cast<int>(n);
  }
  lua_pushfstring(L, "%s: a number, a one-element tensor or a table of numbers expected, got %s",
                  what, luaL_typename(L, idx));
  return luaL_argerror(L, idx, lua_tostring(L, -1));
}

// The values at `idx` (check_point accepted it), with each argument's shape.
void read_point(lua_State* L, int idx, std::vector<double>* v, std::vector<Shape>* shapes) {
  if (lua_type(L, idx) == LUA_TNUMBER) {
    v->push_back(lua_tonumber(L, idx));
    if (shapes) shapes->push_back({});
  } else if (LuaTensor* t = to_tensor(L, idx)) {
    v->push_back(t->value.to_f64().at(0));
    if (shapes) shapes->push_back(t->value.shape());
  } else {
    const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, idx));
    for (lua_Integer i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, i);
      v->push_back(lua_tonumber(L, -1));
      lua_pop(L, 1);
      if (shapes) shapes->push_back({});
    }
  }
}

// The names of the Lua function's parameters at `fn` ("x", "y"), "x1", "x2", ... where it has
// none (a C function, varargs) or where one would be taken for a value's name ("v1", "c2").
std::vector<std::string> param_names(lua_State* L, int fn, int n) {
  std::vector<std::string> names;
  lua_pushvalue(L, fn);
  for (int i = 1; i <= n; ++i) {
    const char* p = lua_getlocal(L, nullptr, i);
    std::string s = p && p[0] != '(' ? p : "";
    const bool value_like = s.size() > 1 && (s[0] == 'v' || s[0] == 'c') &&
                            s.find_first_not_of("0123456789", 1) == std::string::npos;
    if (s.empty() || value_like) s = n == 1 ? "x" : "x" + std::to_string(i);
    for (const std::string& taken : names)
      if (taken == s) s += "_" + std::to_string(i);
    names.push_back(s);
  }
  lua_pop(L, 1);
  return names;
}

// Traces the function at index 1 on a graph whose inputs are its arguments; false (message in
// Runtime::error) when it fails or returns anything but a tensor computed from them.
bool trace(lua_State* L, const char* who, Graph& g, const std::vector<Shape>& shapes, Ref* output) {
  Runtime& rt = runtime(L);
  const std::vector<std::string> names = param_names(L, 1, static_cast<int>(shapes.size()));
  Refs in;
  for (size_t i = 0; i < shapes.size(); ++i)
    in.push_back(g.add_input(names[i], {DType::F32, shapes[i]}));
  Trace& t = rt.begin_trace(g);
  t.capture_params = false;
  const int top = lua_gettop(L);
  lua_pushvalue(L, 1);
  for (Ref r : in) push_traced(L, t.id, r);
  std::string error;
  if (lua_pcall(L, static_cast<int>(in.size()), 1, 0) != LUA_OK) {
    const char* m = lua_tostring(L, -1);
    error = std::string(who) + ": f failed: " + (m ? m : "(error object)");
  } else {
    auto* y = static_cast<LuaTensor*>(luaL_testudata(L, -1, "mls.Tensor"));
    if (!y)
      error = std::string(who) + ": f must return a tensor computed from its argument, got " +
              luaL_typename(L, -1);
    else if (y->trace_id != t.id)
      error = std::string(who) + ": f's result does not depend on its argument";
    else
      *output = y->ref;
  }
  lua_settop(L, top);
  if (error.empty() && !t.error.empty()) error = std::string(who) + ": f failed: " + t.error;
  rt.end_trace(t);
  rt.error = error;
  return error.empty();
}

void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}

// A wire's numbers: a number for one element, a list otherwise.
void push_numbers(lua_State* L, const std::vector<double>& v) {
  if (v.size() == 1) {
    lua_pushnumber(L, v[0]);
    return;
  }
  lua_createtable(L, static_cast<int>(v.size()), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    lua_pushnumber(L, v[i]);
    lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
  }
}

void push_evaluation(lua_State* L, const autodiff::Evaluation& e) {
  const bool fwd = e.mode == autodiff::Mode::Forward;
  lua_createtable(L, 0, 6);
  set_number(L, "value", e.value);
  set_number(L, "derivative", e.derivative);
  lua_pushstring(L, fwd ? "forward" : "reverse");
  lua_setfield(L, -2, "mode");
  if (!fwd) {
    push_numbers(L, e.gradient);
    lua_setfield(L, -2, "gradient");
  }
  lua_pushstring(L, autodiff::title(e).c_str());
  lua_setfield(L, -2, "title");
  lua_createtable(L, static_cast<int>(e.wires.size()), 0);
  for (size_t k = 0; k < e.wires.size(); ++k) {
    const autodiff::Wire& w = e.wires[k];
    lua_createtable(L, 0, 7);
    lua_pushstring(L, w.name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, w.op.c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, w.formula.c_str());
    lua_setfield(L, -2, "formula");
    lua_createtable(L, static_cast<int>(w.inputs.size()), 0);
    for (size_t i = 0; i < w.inputs.size(); ++i) {
      lua_pushstring(L, w.inputs[i].c_str());
      lua_rawseti(L, -2, static_cast<lua_Integer>(i + 1));
    }
    lua_setfield(L, -2, "inputs");
    push_numbers(L, w.value);
    lua_setfield(L, -2, "value");
    push_numbers(L, fwd ? w.tangent : w.adjoint);
    lua_setfield(L, -2, fwd ? "tangent" : "adjoint");
    if (k == e.output) {
      lua_pushboolean(L, 1);
      lua_setfield(L, -2, "output");
    }
    lua_rawseti(L, -2, static_cast<lua_Integer>(k + 1));
  }
  lua_setfield(L, -2, "wires");
}

enum class Call { Forward, Reverse, Compare };

int run(lua_State* L, Call call) {
  const char* who = call == Call::Forward   ? "mls.autodiff.forward"
                    : call == Call::Reverse ? "mls.autodiff.reverse"
                                            : "mls.autodiff.compare";
  luaL_checktype(L, 1, LUA_TFUNCTION);
  const int n = check_point(L, 2, "x");
  if (!lua_isnoneornil(L, 3) && check_point(L, 3, "dx") != n) {
    lua_pushfstring(L, "dx must have one entry per argument (%d)", n);
    return luaL_argerror(L, 3, lua_tostring(L, -1));
  }
  lua_settop(L, 3);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    std::vector<double> x, dx;
    std::vector<Shape> shapes;
    read_point(L, 2, &x, &shapes);
    if (lua_isnil(L, 3)) {
      dx.assign(x.size(), 0.0);
      dx[0] = 1.0;  // df/dx, or df/dx1 for several arguments
    } else {
      read_point(L, 3, &dx, nullptr);
    }
    Graph g("f");
    Ref y;
    ok = trace(L, who, g, shapes, &y);
    std::vector<autodiff::Evaluation> evs;
    for (autodiff::Mode m : {autodiff::Mode::Forward, autodiff::Mode::Reverse}) {
      if (!ok || (call == Call::Forward && m == autodiff::Mode::Reverse) ||
          (call == Call::Reverse && m == autodiff::Mode::Forward))
        continue;
      auto e = autodiff::evaluate(g, y, rt.backend, x, dx, m);
      if (!e) {
        rt.error = std::string(who) + ": " + e.error().message;
        ok = false;
      } else {
        evs.push_back(std::move(*e));
      }
    }
    if (ok) {
      // A figure is for a small function: past kMaxDrawn values it would be metres tall.
      const size_t values = evs[0].wires.size();
      if (rt.cell_output != nullptr && values > kMaxDrawn) {
        rt.cell_output->text += std::string(who) + ": " + std::to_string(values) +
                                " values, too many to draw (at most " + std::to_string(kMaxDrawn) +
                                "); the numbers are returned\n";
      } else if (rt.cell_output != nullptr) {
        rt.cell_output->figures.push_back(call == Call::Compare
                                              ? autodiff::compare_figure(evs[0], evs[1])
                                              : autodiff::figure(evs[0]));
      }
      if (call == Call::Compare) {
        lua_createtable(L, 0, 3);
        push_evaluation(L, evs[0]);
        lua_setfield(L, -2, "forward");
        push_evaluation(L, evs[1]);
        lua_setfield(L, -2, "reverse");
        const double a = evs[0].derivative, b = evs[1].derivative;
        lua_pushboolean(L, std::abs(a - b) <= 1e-6 * std::max(1.0, std::abs(a)));
        lua_setfield(L, -2, "agree");
      } else {
        push_evaluation(L, evs[0]);
      }
    }
  }
  return ok ? 1 : raise(L);
}

int l_forward(lua_State* L) {
  return run(L, Call::Forward);
}
int l_reverse(lua_State* L) {
  return run(L, Call::Reverse);
}
int l_compare(lua_State* L) {
  return run(L, Call::Compare);
}

const luaL_Reg kAutodiff[] = {
    {"forward", l_forward}, {"reverse", l_reverse}, {"compare", l_compare}, {nullptr, nullptr}};

}  // namespace

void open_autodiff_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kAutodiff);
  lua_setfield(L, -2, "autodiff");
}

}  // namespace mls::lua
