// Check cells' world: a copy of the globals from before any submitted code ran, the `lab`
// table, and the goals' results.
#include "scripting/notebook/lab_checks.h"

#include <cmath>
#include <cstdio>
#include <cstring>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

#include "scripting/bindings.h"

namespace mls::lua {

namespace {

// Pushes a copy of the value at `src`: tables are copied (to `depth` levels, then shared),
// with their metatables; everything else is the value itself. `memo` maps originals to
// copies, so shared and cyclic tables stay shared and cyclic.
void push_copy(lua_State* L, int src, int memo, int depth) {
  src = lua_absindex(L, src);
  if (lua_type(L, src) != LUA_TTABLE || depth <= 0) {
    lua_pushvalue(L, src);
    return;
  }
  lua_pushvalue(L, src);
  if (lua_rawget(L, memo) != LUA_TNIL) return;
  lua_pop(L, 1);
  luaL_checkstack(L, 8, "lab checks: copying the globals");
  lua_newtable(L);
  const int dst = lua_gettop(L);
  lua_pushvalue(L, src);
  lua_pushvalue(L, dst);
  lua_rawset(L, memo);
  lua_pushnil(L);
  while (lua_next(L, src) != 0) {
    // key at -2, value at -1
    push_copy(L, -1, memo, depth - 1);  // value copy
    lua_pushvalue(L, -3);               // key
    lua_insert(L, -2);                  // key, copy
    lua_rawset(L, dst);
    lua_pop(L, 1);  // the original value; the key stays for lua_next
  }
  if (lua_getmetatable(L, src)) lua_setmetatable(L, dst);
}

LabChecks* self(lua_State* L) {
  return static_cast<LabChecks*>(lua_touserdata(L, lua_upvalueindex(1)));
}

std::string goal_arg(lua_State* L, const char* fn) {
  if (lua_type(L, 1) != LUA_TSTRING)
    luaL_error(L, "lab.%s: the first argument is a goal id (a string)", fn);
  std::string id = lua_tostring(L, 1);
  const nodes::LabSpec& lab = self(L)->lab();
  if (lab.goals.empty())
    luaL_error(L, "lab.%s: this project is not a lab (it has no goals)", fn);
  if (!lab.find(id)) {
    std::string list;
    for (const auto& g : lab.goals) list += (list.empty() ? "" : ", ") + g.id;
    luaL_error(L, "lab.%s: no goal '%s' in this lab (its goals: %s)", fn, id.c_str(),
               list.c_str());
  }
  return id;
}

double number_arg(lua_State* L, int i, const char* fn, const char* what) {
  if (lua_type(L, i) != LUA_TNUMBER)
    luaL_error(L, "lab.%s: %s must be a number, got %s%s", fn, what, luaL_typename(L, i),
               lua_type(L, i) == LUA_TUSERDATA ? " (a tensor? pass t:item())" : "");
  return lua_tonumber(L, i);
}

std::string exact(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}

int l_check(lua_State* L) {
  const std::string goal = goal_arg(L, "check");
  if (lua_type(L, 2) != LUA_TBOOLEAN)
    return luaL_error(L, "lab.check: the second argument must be true or false, got %s",
                      luaL_typename(L, 2));
  const bool ok = lua_toboolean(L, 2);
  std::string msg = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : (ok ? "ok" : "not met");
  self(L)->report(goal, ok, msg);
  lua_pushboolean(L, ok);
  return 1;
}

int l_near(lua_State* L) {
  const std::string goal = goal_arg(L, "near");
  const double got = number_arg(L, 2, "near", "the value");
  const double want = number_arg(L, 3, "near", "the expected value");
  const double tol = number_arg(L, 4, "near", "the tolerance");
  const bool ok = std::isfinite(got) && std::fabs(got - want) <= tol;
  self(L)->report(goal, ok, "got " + exact(got) + ", want " + exact(want) + " ± " + exact(tol));
  lua_pushboolean(L, ok);
  return 1;
}

template <bool AtLeast>
int l_bound(lua_State* L) {
  const char* fn = AtLeast ? "at_least" : "at_most";
  const std::string goal = goal_arg(L, fn);
  const double got = number_arg(L, 2, fn, "the value");
  const double bound = number_arg(L, 3, fn, "the bound");
  const bool ok = std::isfinite(got) && (AtLeast ? got >= bound : got <= bound);
  self(L)->report(goal, ok,
                  "got " + exact(got) + ", want " + (AtLeast ? "≥ " : "≤ ") + exact(bound));
  lua_pushboolean(L, ok);
  return 1;
}

// A plain value as text, and whether it is one (numbers, strings, booleans, arrays of them).
bool plain_text(lua_State* L, int i, std::string* out, int depth = 0) {
  i = lua_absindex(L, i);
  switch (lua_type(L, i)) {
    case LUA_TNUMBER: {  // exact: integers in full, floats in 17 digits (2 and 2.0 agree)
      char b[64];
      if (lua_isinteger(L, i))
        std::snprintf(b, sizeof b, "%lld", static_cast<long long>(lua_tointeger(L, i)));
      else
        std::snprintf(b, sizeof b, "%.17g", lua_tonumber(L, i));
      *out += b;
      return true;
    }
    case LUA_TBOOLEAN:
      *out += lua_toboolean(L, i) ? "true" : "false";
      return true;
    case LUA_TSTRING: {  // quoted, with \ and " escaped: no string reads as two
      size_t n = 0;
      const char* p = lua_tolstring(L, i, &n);
      *out += '"';
      for (size_t k = 0; k < n; ++k) {
        if (p[k] == '"' || p[k] == '\\') *out += '\\';
        *out += p[k];
      }
      *out += '"';
      return true;
    }
    case LUA_TTABLE: {
      if (depth > 4) return false;
      const lua_Integer n = static_cast<lua_Integer>(lua_rawlen(L, i));
      *out += "{";
      for (lua_Integer k = 1; k <= n; ++k) {
        lua_rawgeti(L, i, k);
        if (k > 1) *out += ", ";
        const bool ok = plain_text(L, -1, out, depth + 1);
        lua_pop(L, 1);
        if (!ok) return false;
      }
      *out += "}";
      return true;
    }
    default:
      return false;
  }
}

int l_equal(lua_State* L) {
  const std::string goal = goal_arg(L, "equal");
  std::string got, want;
  if (!plain_text(L, 2, &got))
    return luaL_error(L, "lab.equal: the value must be a number, string, boolean or an array of "
                         "them, got %s", luaL_typename(L, 2));
  if (!plain_text(L, 3, &want))
    return luaL_error(L, "lab.equal: the expected value must be a number, string, boolean or an "
                         "array of them, got %s", luaL_typename(L, 3));
  const bool ok = got == want;
  self(L)->report(goal, ok, "got " + got + (ok ? "" : ", want " + want));
  lua_pushboolean(L, ok);
  return 1;
}

// __index of a check or locked cell's environment: print as the cell has it, then what the
// locked cells defined, then the snapshot (without `lab` for a locked cell), then the
// student's globals (raw: a metatable on _G does not answer for the others).
// Upvalues: the snapshot, the locked cells' values, whether `lab` is hidden.
int env_index(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING && std::string_view(lua_tostring(L, 2)) == "print") {
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_pushliteral(L, "print");
    lua_rawget(L, -2);
    return 1;
  }
  lua_pushvalue(L, 2);
  if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL) return 1;
  lua_pop(L, 1);
  const bool hide_lab = lua_toboolean(L, lua_upvalueindex(3)) && lua_type(L, 2) == LUA_TSTRING &&
                        std::string_view(lua_tostring(L, 2)) == "lab";
  if (!hide_lab) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, 2);
  lua_rawget(L, -2);
  return 1;
}

// __newindex of a locked cell's environment: the global is set (raw) and kept for the
// checks. Upvalue: the locked cells' values.
int locked_newindex(lua_State* L) {
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, -3);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, lua_upvalueindex(1));
  return 0;
}

}  // namespace

LabChecks::LabChecks(lua_State* L, nodes::LabSpec lab) : L_(L), lab_(std::move(lab)) {
  reset();
  const int top = lua_gettop(L);
  lua_newtable(L);  // memo
  const int memo = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  push_copy(L, -1, memo, 8);
  // mls.nn is Lua (scripting/lua/nn.lua): its functions read the globals, the mls table
  // they were loaded with and their classes' shared metatables, all the student's. The
  // checks get their own, loaded over the copy.
  lua_getfield(L, -1, "mls");
  if (lua_istable(L, -1) && luaL_loadbuffer(L, kNnLua, std::strlen(kNnLua), "=mls.nn") == LUA_OK) {
    lua_pushvalue(L, -3);  // the copy: the chunk's _ENV
    lua_setupvalue(L, -2, 1);
    lua_pushvalue(L, -2);  // the copied mls
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
      lua_setfield(L, -2, "nn");
    else
      lua_pop(L, 1);  // the error: the checks keep the copied mls.nn
  }
  lua_pop(L, 1);
  // lab.*: only here, never in the student's globals.
  lua_newtable(L);
  const luaL_Reg fns[] = {{"check", l_check},          {"near", l_near},
                          {"at_least", l_bound<true>}, {"at_most", l_bound<false>},
                          {"equal", l_equal},          {nullptr, nullptr}};
  lua_pushlightuserdata(L, this);
  luaL_setfuncs(L, fns, 1);
  lua_setfield(L, -2, "lab");
  // Strings' metatable is shared by every string and holds the checks' copy of `string`
  // while a check runs: getmetatable("") must not hand it to a function the check calls or
  // a finaliser that runs then.
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  // The copied string library: strings' methods during a check cell.
  lua_getfield(L, -1, "string");
  string_index_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  trusted_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_newtable(L);
  locked_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_settop(L, top);
}

LabChecks::~LabChecks() {
  luaL_unref(L_, LUA_REGISTRYINDEX, trusted_ref_);
  luaL_unref(L_, LUA_REGISTRYINDEX, string_index_ref_);
  luaL_unref(L_, LUA_REGISTRYINDEX, saved_string_index_ref_);
  luaL_unref(L_, LUA_REGISTRYINDEX, locked_ref_);
}

void LabChecks::push_env(bool locked_cell) {
  lua_State* L = L_;
  lua_newtable(L);
  lua_newtable(L);  // its metatable
  lua_rawgeti(L, LUA_REGISTRYINDEX, trusted_ref_);
  lua_rawgeti(L, LUA_REGISTRYINDEX, locked_ref_);
  lua_pushboolean(L, locked_cell);
  lua_pushcclosure(L, env_index, 3);
  lua_setfield(L, -2, "__index");
  if (locked_cell) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, locked_ref_);
    lua_pushcclosure(L, locked_newindex, 1);
    lua_setfield(L, -2, "__newindex");
  }
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_setmetatable(L, -2);
}

void LabChecks::begin_cell(const std::string& cell_id, bool check_cell) {
  cell_ = check_cell ? cell_id : std::string();
  // Strings' methods (("%d"):format(...)) from the copy while the check runs.
  lua_State* L = L_;
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_getfield(L, -1, "__index");
    saved_string_index_ref_ = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_rawgeti(L, LUA_REGISTRYINDEX, string_index_ref_);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

void LabChecks::end_cell(bool ok, const std::string& error) {
  const std::string first_line = error.substr(0, error.find('\n'));
  if (!ok && !cell_.empty()) failed_cells_.emplace_back(cell_, first_line);
  // The cell's reports count once it has ended; a cell that stopped with an error may have
  // stopped before a report that would have failed, so every goal it reported fails.
  std::vector<Report> reports = std::move(pending_);
  pending_.clear();
  for (const Report& r : reports)
    apply(r.goal, ok && r.passed,
          ok ? r.message
             : "check cell '" + cell_ + "' stopped with an error after reporting: " + first_line);
  cell_.clear();
  lua_State* L = L_;
  if (saved_string_index_ref_ == LUA_NOREF) return;
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, saved_string_index_ref_);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  luaL_unref(L, LUA_REGISTRYINDEX, saved_string_index_ref_);
  saved_string_index_ref_ = LUA_NOREF;
}

void LabChecks::report(const std::string& goal, bool passed, const std::string& message) {
  if (!cell_.empty()) pending_.push_back({goal, message, passed});
}

void LabChecks::apply(const std::string& goal, bool passed, const std::string& message) {
  for (GoalState& g : goals_) {
    if (g.id != goal) continue;
    const bool first = !g.reported;
    g.reported = true;
    g.cell = cell_;
    if (first) {
      g.passed = passed;
      g.message = message;
    } else if (g.passed) {
      g.passed = passed;
      g.message = message;
    }
    if (on_report) on_report(g);
    return;
  }
}

std::vector<GoalState> LabChecks::goals() const {
  std::vector<GoalState> out = goals_;
  for (GoalState& g : out) {
    if (g.reported) continue;
    g.message = "not checked";
    if (!failed_cells_.empty())
      g.message += ": check cell '" + failed_cells_.front().first +
                   "' failed: " + failed_cells_.front().second;
  }
  return out;
}

void LabChecks::reset() {
  goals_.clear();
  for (const auto& g : lab_.goals) goals_.push_back({g.id, g.text, g.hidden});
  failed_cells_.clear();
  pending_.clear();
}

}  // namespace mls::lua
