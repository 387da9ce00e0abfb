// Runs Lua snippets in a fresh LuaHost and reads back globals, for the scripting tests.
#pragma once

#include <catch2/catch.hpp>
#include <lua.hpp>
#include <string>

#include "engine/cpu/cpu_backend.h"
#include "scripting/lua_host.h"

namespace mls::test {

// Options for a script sandboxed to `root` (the sandbox tests' host).
inline lua::ScriptOptions sandboxed(const std::string& root) {
  lua::ScriptOptions o;
  o.sandbox = true;
  o.root = root;
  return o;
}

// Runs `code`; REQUIREs success (the message is shown when it fails).
inline void run_ok(lua::LuaHost& h, const std::string& code) {
  auto r = h.run_string(code, "=test");
  INFO(code);
  if (!r) FAIL(r.error().message);
}

// The error message of `code`, which must fail.
inline std::string run_err(lua::LuaHost& h, const std::string& code) {
  auto r = h.run_string(code, "=test");
  INFO(code);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

inline double global_number(lua::LuaHost& h, const char* name) {
  lua_getglobal(h.state(), name);
  INFO(name);
  REQUIRE(lua_isnumber(h.state(), -1));
  double v = lua_tonumber(h.state(), -1);
  lua_pop(h.state(), 1);
  return v;
}

inline std::string global_string(lua::LuaHost& h, const char* name) {
  lua_getglobal(h.state(), name);
  const char* s = lua_tostring(h.state(), -1);
  std::string v = s ? s : "";
  lua_pop(h.state(), 1);
  return v;
}

}  // namespace mls::test
