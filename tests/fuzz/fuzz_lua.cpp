// The Lua sandbox: any script a project may carry runs with the instruction, time and memory
// limits and cannot crash the host (bindings with bad arguments raise Lua errors).
//
// The input's first byte picks how it runs, so the fuzzer explores each way: as a chunk;
// inside a coroutine, resumed until it ends (limits and errors must cross resume); or
// through load() with a mode ("t", "b", "bt", none, or a non-string) and an environment
// table. After it, full collections run every finaliser, so objects a script brings back
// to life from a __gc are used after their own finaliser ran.
#include "engine/cpu/cpu_backend.h"
#include "fuzz_util.h"
#include "scripting/lua_host.h"

#include <lua.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mls::fuzz::init_once();
  mls::lua::ScriptOptions o;
  o.sandbox = true;
  o.root = "/nonexistent-fuzz-root";
  o.instruction_limit = 200'000;
  o.time_limit_s = 2;
  o.memory_limit = 256 << 20;
  o.db_path = "/nonexistent-fuzz-root/runs.db";
  mls::lua::LuaHost host(mls::cpu::backend(), o);
  const std::string code(reinterpret_cast<const char*>(data), size);
  const int way = size > 0 ? data[0] % 3 : 0;
  if (way == 0) {
    (void)host.run_string(code, "=fuzz");
  } else {
    lua_pushlstring(host.state(), code.data(), code.size());
    lua_setglobal(host.state(), "fuzz_source");
    if (way == 1) {
      (void)host.run_string(R"(
        local f = assert(load(fuzz_source, "=fuzz", "t"))
        local co = coroutine.create(f)
        for _ = 1, 64 do
          coroutine.resume(co)
          if coroutine.status(co) == "dead" then break end
        end)",
                            "=driver");
    } else {
      const char* modes[] = {"'t'", "'b'", "'bt'", "nil", "{}", "1"};
      const std::string mode = modes[(size > 1 ? data[1] : 0) % 6];
      (void)host.run_string(
          "local env = setmetatable({}, {__index = _G})\n"
          "local f = load(fuzz_source, '=fuzz', " +
              mode + ", env)\nif f then f() end",
          "=driver");
    }
  }
  (void)host.run_string("collectgarbage(); collectgarbage()", "=gc");
  return 0;
}
