// The Lua sandbox: any script a project may carry runs with the instruction limit and
// cannot crash the host (bindings with bad arguments raise Lua errors).
#include "engine/cpu/cpu_backend.h"
#include "fuzz_util.h"
#include "scripting/lua_host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mls::fuzz::init_once();
  mls::lua::ScriptOptions o;
  o.sandbox = true;
  o.root = "/nonexistent-fuzz-root";
  o.instruction_limit = 200'000;
  o.db_path = "/nonexistent-fuzz-root/runs.db";
  mls::lua::LuaHost host(mls::cpu::backend(), o);
  (void)host.run_string(std::string(reinterpret_cast<const char*>(data), size), "=fuzz");
  return 0;
}
