// mls.ui: widgets of a notebook cell, each bound to a global of its name.
//
//   lr   = mls.ui.slider("lr", {min = 0.001, max = 0.1, step = 0.001, value = 0.01, label = "lr"})
//   act  = mls.ui.select("act", {options = {"relu", "gelu"}, value = "relu"})
//   flag = mls.ui.checkbox("flag", {value = true})
//   n    = mls.ui.button("go", {label = "Run"})   -- clicks so far
//
// Each returns Runtime::widget_values[name] when the user has set it (and it has the
// widget's type; a slider's is clamped to its range, a select's must be an option), else the
// spec's value, and appends the Widget to the running cell's output. Specs are checked
// (raising before any C++ object exists).
#include <algorithm>
#include <cmath>

#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

void check_opts(lua_State* L, const char* who) {
  luaL_checkstring(L, 1);
  if (lua_isnoneornil(L, 2)) {
    lua_settop(L, 1);
    lua_newtable(L);
  }
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_getfield(L, 2, "label");
  if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING)
    luaL_error(L, "%s: label must be a string", who);
  lua_pop(L, 1);
}

double num_field(lua_State* L, const char* who, const char* key, double def) {
  lua_getfield(L, 2, key);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "%s: %s must be a number", who, key);
    v = lua_tonumber(L, -1);
    if (!std::isfinite(v)) luaL_error(L, "%s: %s must be finite", who, key);
  }
  lua_pop(L, 1);
  return v;
}

// Appends the widget (name, label and value filled in here), and pushes its value.
int finish(lua_State* L, Widget w, const nlohmann::json& spec_value,
           bool (*accept)(const Widget&, const nlohmann::json&)) {
  Runtime& rt = runtime(L);
  w.name = lua_tostring(L, 1);
  lua_getfield(L, 2, "label");
  w.label = lua_isstring(L, -1) ? lua_tostring(L, -1) : w.name;
  lua_pop(L, 1);
  w.value = spec_value;
  if (auto it = rt.widget_values.find(w.name);
      it != rt.widget_values.end() && accept(w, it->second)) {
    w.value = it->second;
    if (w.kind == "slider") w.value = std::clamp(w.value.get<double>(), w.min, w.max);
  }
  const nlohmann::json& v = w.value;
  if (v.is_boolean())
    lua_pushboolean(L, v.get<bool>());
  else if (v.is_number_integer())
    lua_pushinteger(L, v.get<lua_Integer>());
  else if (v.is_number())
    lua_pushnumber(L, v.get<double>());
  else
    lua_pushstring(L, v.get<std::string>().c_str());
  if (rt.cell_output != nullptr) rt.cell_output->widgets.push_back(std::move(w));
  return 1;
}

int l_slider(lua_State* L) {
  const char* who = "mls.ui.slider";
  check_opts(L, who);
  const double mn = num_field(L, who, "min", 0), mx = num_field(L, who, "max", 1);
  if (!(mn < mx)) luaL_error(L, "%s: min (%f) must be less than max (%f)", who, mn, mx);
  const double step = num_field(L, who, "step", 0);
  if (step < 0) luaL_error(L, "%s: step must be >= 0, got %f", who, step);
  const double value = num_field(L, who, "value", mn);
  if (value < mn || value > mx)
    luaL_error(L, "%s: value %f is outside [%f, %f]", who, value, mn, mx);
  Widget w;
  w.kind = "slider";
  w.min = mn;
  w.max = mx;
  w.step = step;
  return finish(L, std::move(w), value,
                [](const Widget&, const nlohmann::json& j) { return j.is_number(); });
}

int l_select(lua_State* L) {
  const char* who = "mls.ui.select";
  check_opts(L, who);
  lua_getfield(L, 2, "options");
  if (!lua_istable(L, -1)) luaL_error(L, "%s: options must be a list of strings", who);
  const int opts = lua_gettop(L);
  const auto n = static_cast<lua_Integer>(lua_rawlen(L, opts));
  if (n == 0) luaL_error(L, "%s: options is empty", who);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, opts, i);
    if (lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: options[%d] is not a string", who, static_cast<int>(i));
    lua_pop(L, 1);
  }
  lua_getfield(L, 2, "value");
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: value must be a string", who);
    bool found = false;
    for (lua_Integer i = 1; i <= n && !found; ++i) {
      lua_rawgeti(L, opts, i);
      found = lua_rawequal(L, -1, -2);
      lua_pop(L, 1);
    }
    if (!found) luaL_error(L, "%s: value '%s' is not among the options", who, lua_tostring(L, -1));
  }
  const int value = lua_gettop(L);
  Widget w;
  w.kind = "select";
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_rawgeti(L, opts, i);
    w.options.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  nlohmann::json def = lua_isnil(L, value) ? w.options[0] : std::string(lua_tostring(L, value));
  return finish(L, std::move(w), def, [](const Widget& w, const nlohmann::json& j) {
    return j.is_string() &&
           std::find(w.options.begin(), w.options.end(), j.get<std::string>()) != w.options.end();
  });
}

int l_checkbox(lua_State* L) {
  const char* who = "mls.ui.checkbox";
  check_opts(L, who);
  lua_getfield(L, 2, "value");
  if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) luaL_error(L, "%s: value must be a boolean", who);
  const bool value = lua_toboolean(L, -1);
  lua_pop(L, 1);
  Widget w;
  w.kind = "checkbox";
  return finish(L, std::move(w), value,
                [](const Widget&, const nlohmann::json& j) { return j.is_boolean(); });
}

int l_button(lua_State* L) {
  const char* who = "mls.ui.button";
  check_opts(L, who);
  Widget w;
  w.kind = "button";
  return finish(L, std::move(w), 0, [](const Widget&, const nlohmann::json& j) {
    return j.is_number_integer() && j.get<int64_t>() >= 0;
  });
}

const luaL_Reg kUi[] = {{"slider", l_slider},
                        {"select", l_select},
                        {"checkbox", l_checkbox},
                        {"button", l_button},
                        {nullptr, nullptr}};

}  // namespace

void open_ui_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kUi);
  lua_setfield(L, -2, "ui");
}

}  // namespace mls::lua
