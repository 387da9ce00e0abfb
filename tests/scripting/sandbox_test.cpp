// The sandbox: every escape a script might try is refused with a message that says what
// and why; a runaway loop is stopped by the instruction or time limit, even under pcall.
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::run_err;
using mls::test::run_ok;
using mls::test::sandboxed;

TEST_CASE("Sandboxed scripts cannot run programs, load C code or bytecode, or touch files outside their folder", "[lua][sandbox]") {
  test::TempDir dir("mls_sandbox");
  {
    std::ofstream(dir.file("data.txt")) << "inside\n";
    std::ofstream(dir.file("mod.lua")) << "return {answer = 42}\n";
  }
  lua::LuaHost h(cpu::backend(), sandboxed(dir.str()));
  const std::pair<const char*, const char*> escapes[] = {
      {"os.execute('touch /tmp/mls_pwned')", "os.execute is not allowed"},
      {"io.popen('id')", "io.popen is not allowed"},
      {"package.loadlib('/lib/x86_64-linux-gnu/libc.so.6', 'system')", "package.loadlib is not allowed"},
      {"os.remove('/tmp/x')", "os.remove is not allowed"},
      {"os.getenv('HOME')", "os.getenv is not allowed"},
      {"os.exit(3)", "os.exit is not allowed"},
      {"io.open('/etc/passwd')", "is outside the script's folder"},
      {"io.open('../escape.txt', 'w')", "is outside the script's folder"},
      {"io.lines('/etc/hostname')", "is outside the script's folder"},
      {"dofile('/etc/passwd')", "is outside the script's folder"},
      {"loadfile('/etc/passwd')", "is outside the script's folder"},
      {"load(string.dump(function() end))", "binary chunks are not allowed"},
      {"require('socket')", "loads modules only from its folder"},
      {"require('..etc.passwd')", "is outside the script's folder"},
      {"debug.sethook()", "attempt to index a nil value (global 'debug')"},
      {"mls.data.open{source = 'csv', path = '/etc/passwd', csv = {target = 'x'}}", "is outside the script's folder"},
      {"mls.project.open('/etc/hostname')", "is outside the script's folder"},
  };
  for (const auto& [code, expect] : escapes) {
    INFO(code);
    const std::string e = run_err(h, code);
    CHECK(e.find(expect) != std::string::npos);
  }
  // What is allowed still works: files in the folder, Lua modules beside the script, the
  // installed datasets for reading.
  run_ok(h, "local f = assert(io.open('" + dir.file("data.txt") + "')); line = f:read('l'); f:close()");
  run_ok(h, "local f = assert(io.open('" + dir.file("out.txt") + "', 'w')); f:write('ok'); f:close()");
  run_ok(h, "assert(require('mod').answer == 42)");
  run_ok(h, "assert(load('return 1 + 1')() == 2)");
  lua::ScriptOptions open = sandboxed(dir.str());
  open.sandbox = false;
  lua::LuaHost trusted(cpu::backend(), open);
  run_ok(trusted, "assert(io.open('/etc/hostname') ~= nil); assert(os.getenv('PATH') ~= nil)");
}

TEST_CASE("A runaway loop is stopped by the instruction limit, even inside pcall", "[lua][sandbox]") {
  lua::ScriptOptions o;
  o.sandbox = true;
  o.instruction_limit = 2'000'000;
  lua::LuaHost h(cpu::backend(), o);
  std::string e = run_err(h, "while true do end");
  CHECK(e.find("limit of 2000000 instructions") != std::string::npos);
  e = run_err(h, "while true do pcall(function() while true do end end) end");
  CHECK(e.find("limit of 2000000 instructions") != std::string::npos);
  // The limit is per run: the next one starts afresh.
  run_ok(h, "local s = 0; for i = 1, 1000 do s = s + i end; assert(s == 500500)");
}

TEST_CASE("A runaway loop is stopped by the time limit", "[lua][sandbox]") {
  lua::ScriptOptions o;
  o.time_limit_s = 0.2;
  lua::LuaHost h(cpu::backend(), o);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = run_err(h, "local x = 0; while true do x = x + 1 end");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(e.find("time limit") != std::string::npos);
  CHECK(s < 5.0);
}

TEST_CASE("An interrupt flag set from another thread stops a running entry, even inside pcall",
          "[lua]") {
  lua::LuaHost h(cpu::backend());
  std::atomic<bool> stop{false};
  h.set_interrupt(&stop);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.store(true);
  });
  const std::string e =
      run_err(h, "local x = 0; while true do pcall(function() while true do x = x + 1 end end) end");
  setter.join();
  CHECK(e.find("interrupted (stopped by the user)") != std::string::npos);
  // The flag belongs to the host that set it: cleared, the next entry runs to its end.
  stop.store(false);
  run_ok(h, "local s = 0; for i = 1, 100000 do s = s + i end; assert(s == 5000050000)");
  h.set_interrupt(nullptr);
  run_ok(h, "local s = 0; for i = 1, 1000 do s = s + i end; assert(s == 500500)");
}
