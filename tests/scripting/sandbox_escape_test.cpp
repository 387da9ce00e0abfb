// Escapes and crashes a hostile script tried (issue 24, items 6 to 9): each must end in a Lua
// error that says what was refused, never in a write or read outside the folder, a crash, or
// a run past its limits.
#include <stb_image_write.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::run_err;
using mls::test::run_ok;
using mls::test::sandboxed;
namespace fs = std::filesystem;

namespace {

// A version 1.0 .npy file: f32 [n, 2] features or i64 [n] labels.
void write_npy(const std::string& path, bool labels, int n) {
  std::string header =
      labels
          ? "{'descr': '<i8', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }"
          : "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(n) + ", 2), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  for (int i = 0; i < n; ++i) {
    if (labels) {
      const int64_t v = i % 2;
      f.write(reinterpret_cast<const char*>(&v), 8);
    } else {
      const float v[2] = {float(i), float(-i)};
      f.write(reinterpret_cast<const char*>(v), 8);
    }
  }
}

}  // namespace

TEST_CASE("A symlink in the script's folder cannot take a write or a read outside it",
          "[lua][sandbox]") {
  test::TempDir dir("mls_sb_link");
  const std::string root = dir.file("root"), out = dir.file("outside");
  fs::create_directories(root);
  fs::create_directories(out);
  std::ofstream(out + "/secret.txt") << "secret\n";
  std::ofstream(out + "/mod.lua") << "return {answer = 666}\n";
  // Dangling links (the file they name does not exist yet) and links to what exists.
  fs::create_symlink(out + "/created.txt", root + "/dangling.txt");
  fs::create_symlink("../outside/relative.txt", root + "/relative.txt");
  fs::create_symlink(out + "/saved.mls", root + "/saved.mls");
  fs::create_symlink(out + "/secret.txt", root + "/secret.txt");
  fs::create_symlink(out + "/mod.lua", root + "/mod.lua");
  fs::create_symlink(out, root + "/sub");
  fs::create_symlink(root + "/loop1", root + "/loop2");
  fs::create_symlink(root + "/loop2", root + "/loop1");
  REQUIRE(mkfifo((root + "/fifo").c_str(), 0600) == 0);
  lua::LuaHost h(cpu::backend(), sandboxed(root));
  const std::pair<std::string, const char*> escapes[] = {
      {"io.open('" + root + "/dangling.txt', 'w')", "is outside the script's folder"},
      {"io.open('" + root + "/dangling.txt', 'a+')", "is outside the script's folder"},
      {"io.open('" + root + "/relative.txt', 'w')", "is outside the script's folder"},
      {"io.open('" + root + "/sub/new.txt', 'w')", "is outside the script's folder"},
      {"io.open('" + root + "/secret.txt')", "is outside the script's folder"},
      {"io.lines('" + root + "/secret.txt')", "is outside the script's folder"},
      {"loadfile('" + root + "/mod.lua')", "is outside the script's folder"},
      {"dofile('" + root + "/mod.lua')", "is outside the script's folder"},
      {"require('mod')", "is outside the script's folder"},
      {"mls.project.new():save('" + root + "/saved.mls')", "is outside the script's folder"},
      {"io.open('" + root + "/loop1', 'w')", "too many levels of symbolic links"},
      // A FIFO would block the script past any time limit: only regular files open.
      {"io.open('" + root + "/fifo')", "not a regular file"},
  };
  for (const auto& [code, expect] : escapes) {
    INFO(code);
    const std::string e = run_err(h, "assert(" + code + ")");
    CHECK(e.find(expect) != std::string::npos);
  }
  CHECK_FALSE(fs::exists(out + "/created.txt"));
  CHECK_FALSE(fs::exists(out + "/relative.txt"));
  CHECK_FALSE(fs::exists(out + "/new.txt"));
  CHECK_FALSE(fs::exists(out + "/saved.mls"));
  // A link that stays inside is fine, for reading and writing, and io.lines, loadfile and
  // require still read files in the folder (a first line starting with # is skipped).
  fs::create_symlink(root + "/data.txt", root + "/inner.txt");
  std::ofstream(root + "/lib.lua") << "#!/usr/bin/env lua\nreturn {answer = 42}\n";
  run_ok(h, "local f = assert(io.open('" + root +
                "/inner.txt', 'w')); f:write('a\\nb\\n'); f:close()");
  CHECK(fs::is_regular_file(root + "/data.txt"));
  run_ok(h, "n = 0; for l in io.lines('" + root + "/data.txt') do n = n + #l end");
  CHECK(global_number(h, "n") == 2);
  run_ok(h, "assert(require('lib').answer == 42); assert(dofile('" + root +
                "/lib.lua').answer == 42); assert(loadfile('" + root +
                "/lib.lua', 't', {})().answer == 42)");
  run_ok(h, "local f, err = io.open('" + root +
                "/missing.txt'); assert(f == nil and err:find('No such file'))");
  run_ok(h, "local f = assert(io.open('" + root +
                "/data.txt', 'r+')); assert(f:read('l') == 'a'); f:close()");
}

TEST_CASE("Every path a dataset names is checked, and image class folders stay inside",
          "[lua][sandbox]") {
  test::TempDir dir("mls_sb_data");
  const std::string root = dir.file("root"), out = dir.file("outside");
  fs::create_directories(root);
  fs::create_directories(out + "/cats");
  write_npy(root + "/x.npy", false, 4);
  write_npy(root + "/y.npy", true, 4);
  write_npy(out + "/y.npy", true, 4);
  lua::LuaHost h(cpu::backend(), sandboxed(root));
  run_ok(h, "d = mls.data.open{source = 'npy', path = '" + root + "/x.npy', npy = {labels = '" +
                root + "/y.npy'}}");
  std::string e = run_err(h, "mls.data.open{source = 'npy', path = '" + root +
                                 "/x.npy', npy = {labels = '" + out + "/y.npy'}}");
  CHECK(e.find("is outside the script's folder") != std::string::npos);
  // A class folder that is a link out of the dataset folder is refused, even unsandboxed.
  std::vector<uint8_t> px(8 * 8 * 3, 200);
  REQUIRE(stbi_write_png((out + "/cats/a.png").c_str(), 8, 8, 3, px.data(), 24) != 0);
  fs::create_directories(root + "/images/dogs");
  REQUIRE(stbi_write_png((root + "/images/dogs/b.png").c_str(), 8, 8, 3, px.data(), 24) != 0);
  fs::create_symlink(out + "/cats", root + "/images/cats");
  e = run_err(h, "mls.data.open{source = 'image-folder', path = '" + root + "/images'}");
  CHECK(e.find("leaves the dataset folder") != std::string::npos);
  lua::LuaHost trusted(cpu::backend());
  e = run_err(trusted, "mls.data.open{source = 'image-folder', path = '" + root + "/images'}");
  CHECK(e.find("leaves the dataset folder") != std::string::npos);
  // A link inside the dataset folder is followed.
  fs::remove(root + "/images/cats");
  fs::create_directories(root + "/images/.store/cats");
  REQUIRE(stbi_write_png((root + "/images/.store/cats/a.png").c_str(), 8, 8, 3, px.data(), 24) !=
          0);
  fs::create_symlink(root + "/images/.store/cats", root + "/images/cats");
  run_ok(trusted, "d = mls.data.open{source = 'image-folder', path = '" + root + "/images'}");
}

TEST_CASE("A script cannot crash the host through metatables, finalisers, load or shapes",
          "[lua][sandbox]") {
  test::TempDir dir("mls_sb_crash");
  lua::ScriptOptions o = sandboxed(dir.str());
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  // Each object: made, finalised by hand if the script can reach __gc, then used.
  // Each object: how to make it, how to use it.
  const std::pair<const char*, const char*> objects[] = {
      {"mls.zeros{2, 2}", "revived + 1"},
      {"mls.project.new()", "revived:text()"},
      {"mls.data.open{source = 'synthetic', synthetic = {samples = 16}}",
       "revived:batches('train', 4)"},
      {"mls.optim.SGD({mls.zeros{2}:requires_grad()}, {lr = 0.1})", "revived:step()"},
      {"mls.graph('g')", "revived:input('x', {2})"},
      {"mls.jit(function(x) return x end)", "revived(mls.zeros{2})"},
  };
  for (const auto& [make, use] : objects) {
    INFO(make);
    // The metatable is not the script's: getmetatable gives no __gc to call.
    run_ok(h, std::string("local o = ") + make +
                  "; local mt = getmetatable(o); assert(type(mt) ~= 'table' or rawget(mt, '__gc') "
                  "== nil, 'metatable exposed')");
    run_ok(h, std::string("o = ") + make + "; pcall(function() getmetatable(o).__gc(o) end)");
    run_ok(h, "pcall(function() return tostring(o) end)");
    // Brought back to life by a finaliser that runs after the object's own.
    run_ok(h, std::string("local holder = setmetatable({}, {__gc = function(s) revived = s.x "
                          "end}); holder.x = ") +
                  make + "; holder = nil; collectgarbage(); collectgarbage()");
    const std::string e =
        run_err(h, std::string("assert(revived ~= nil); print(revived); local _ = ") + use);
    CHECK(e.find("closed") != std::string::npos);
  }
  // load with a mode that is not a string, and every mode.
  std::string e = run_err(h, "load('return 1', 'x', {})");
  CHECK(e.find("string expected") != std::string::npos);
  run_ok(h,
         "assert(load('return 1', 'x', 't', {})() == 1); assert(load('return x', 'x', nil, {x = "
         "5})() == 5)");
  e = run_err(h, "assert(load(string.dump(function() end), 'x', 'bt'))");
  CHECK(e.find("binary chunks are not allowed") != std::string::npos);
  e = run_err(h, "assert(load(function() return nil end, 'x', 'b'))");
  CHECK(e.find("binary chunks are not allowed") != std::string::npos);
  // Shapes whose element count overflows are refused, naming the shape.
  e = run_err(h, "print(mls.zeros{2^31, 2^31, 2^31})");
  CHECK(e.find("2147483648, 2147483648, 2147483648") != std::string::npos);
  e = run_err(h, "local t = mls.zeros{2^32, 2^32}; print(t:numel())");
  CHECK(e.find("4294967296, 4294967296") != std::string::npos);
  // Found by fuzz_lua: a zero size left the other sizes' product (the strides) unchecked.
  e = run_err(h, "mls.zeros{0, 2^31, 3^31}");
  CHECK(e.find("shape {0, 2147483648, 617673396283947}: too large") != std::string::npos);
  e = run_err(h, "mls.ones{-1, 4}");
  CHECK(e.find("-1") != std::string::npos);
  // A C++ exception in a binding becomes a Lua error with its message and the line.
  e = run_err(h, "mls.nn.Linear(-1, 5)");
  CHECK(e.find("shape {-1, 5}: sizes must be >= 0") != std::string::npos);
  e = run_err(h, "mls.parameter({2^40, 2^40})");
  CHECK(e.find("shape {1099511627776, 1099511627776}: too large") != std::string::npos);
  CHECK(e.find("(error)") == std::string::npos);
  CHECK(e.find("test:1:") != std::string::npos);
}

TEST_CASE("Coroutines cannot swallow a limit or run uncounted", "[lua][sandbox]") {
  lua::ScriptOptions o;
  o.sandbox = true;
  o.instruction_limit = 2'000'000;
  lua::LuaHost h(cpu::backend(), o);
  const char* loops[] = {
      "print(coroutine.resume(coroutine.create(function() while true do end end)))",
      "print(pcall(coroutine.wrap(function() while true do end end)))",
      "local co = coroutine.wrap(function() print(coroutine.resume(coroutine.create(function() "
      "while true do end end))) end); print(pcall(co))",
      "print(coroutine.resume(coroutine.create(function() while true do pcall(function() while "
      "true do end end) end end)))",
      // Many coroutines that each stay below the hook's count.
      "for i = 1, 1000000 do coroutine.wrap(function() for j = 1, 40 do end end)() end",
      "for i = 1, 1000000 do coroutine.resume(coroutine.create(function() for j = 1, 40 do end "
      "end)) end",
  };
  for (const char* code : loops) {
    INFO(code);
    const std::string e = run_err(h, code);
    CHECK(e.find("limit of 2000000 instructions") != std::string::npos);
  }
  // Coroutines that stay within the limit work as before: yield across pcall, wrap, status.
  run_ok(h, R"(
    local gen = coroutine.wrap(function() for i = 1, 3 do pcall(coroutine.yield, i) end end)
    s = gen() + gen() + gen()
    local co = coroutine.create(function(a) local b = coroutine.yield(a + 1); return b * 2 end)
    local ok1, v1 = coroutine.resume(co, 1)
    local ok2, v2 = coroutine.resume(co, 10)
    assert(ok1 and v1 == 2 and ok2 and v2 == 20 and coroutine.status(co) == 'dead')
    local ok3, err = coroutine.resume(coroutine.create(function() error('boom') end))
    assert(not ok3 and err:find('boom'))
    local w = coroutine.wrap(function() error('bang') end)
    local ok4, err4 = pcall(w)
    assert(not ok4 and err4:find('bang'))
  )");
  CHECK(global_number(h, "s") == 6);
}

TEST_CASE("The time limit stops pattern backtracking and mls.train", "[lua][sandbox]") {
  test::TempDir dir("mls_sb_time");
  lua::ScriptOptions o = sandboxed(dir.str());
  o.db_path = dir.file("runs.db");
  o.time_limit_s = 0.5;
  lua::LuaHost h(cpu::backend(), o);
  const char* slow[] = {
      "string.find(string.rep('a', 60), string.rep('a*', 30) .. 'b')",
      "string.match(string.rep('a', 60), string.rep('a-', 30) .. 'b')",
      "for _ in string.gmatch(string.rep('a', 60), string.rep('a*', 30) .. 'b') do end",
      "string.gsub(string.rep('a', 60), string.rep('a*', 30) .. 'b', '')",
      R"(local nn = mls.nn
         local model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 3))
         local data = mls.data.open{source = 'synthetic', synthetic = {samples = 3000}}
         mls.train{model = model, data = data, quiet = true, epochs = 100000, batch_size = 8})",
  };
  for (const char* code : slow) {
    INFO(code);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string e = run_err(h, code);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(e.find("time limit") != std::string::npos);
    CHECK(s < 5.0);
  }
  run_ok(h,
         "assert(string.find('hello world', 'o w') == 5); assert(('x=1, y=2'):gsub('(%w+)=(%w+)', "
         "'%2=%1') == '1=x, 2=y')");
}

TEST_CASE("A script over its memory limit stops with a clear error", "[lua][sandbox]") {
  lua::ScriptOptions o;
  o.sandbox = true;
  o.memory_limit = 64 << 20;
  lua::LuaHost h(cpu::backend(), o);
  const char* hogs[] = {
      "local t = {}; for i = 1, 1e9 do t[i] = i end",
      "local t = {}; for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end",
      "local t = {}; for i = 1, 1e9 do pcall(function() t[#t + 1] = {i, i, i} end) end",
      "local t = {}; for i = 1, 1000 do t[i] = mls.zeros{1024, 1024} end",
      "local t = mls.zeros{1024, 1024, 1024}",
      "local w = mls.parameter({65536, 65536})",
      "local m = mls.nn.Linear(100000, 100000)",
      "local t = {}; local x = mls.ones{256, 1024}; for i = 1, 1000 do t[i] = x * 2 end",
  };
  for (const char* code : hogs) {
    INFO(code);
    const std::string e = run_err(h, code);
    CHECK(e.find("memory limit of 64 MiB reached") != std::string::npos);
    // Each run starts afresh once the last one's garbage is gone.
    run_ok(h, "collectgarbage()");
  }
  run_ok(h, "local t = {}; for i = 1, 1000 do t[i] = mls.zeros{64, 64} end");
}
