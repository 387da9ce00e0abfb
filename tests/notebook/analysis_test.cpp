// The cell analysis (scripting/notebook/cell_analysis.h): globals read and written, found in
// the bytecode of the compiled cell.
#include <catch2/catch.hpp>
#include <lua.hpp>

#include "scripting/notebook/cell_analysis.h"

using namespace mls::lua;
using Names = std::set<std::string>;

namespace {
CellSymbols analyse(const std::string& src) {
  auto r = analyse_cell(src, "=cell t");
  REQUIRE(r.ok());
  return *r;
}
}  // namespace

TEST_CASE("Cell analysis: a read and a write are a GETTABUP and a SETTABUP on _ENV", "[notebook]") {
  // The opcodes' numbers as Lua 5.4's lopcodes.h gives them, checked on a real chunk.
  auto s = analyse("y = x");
  CHECK(s.reads == Names{"x"});
  CHECK(s.writes == Names{"y"});
  CHECK_FALSE(s.reads_project);
}

TEST_CASE("Cell analysis: locals are not globals", "[notebook]") {
  auto s = analyse("local a = 1\nlocal b = a + c\nd = b\nfor i = 1, 3 do e = i end");
  CHECK(s.reads == Names{"c"});
  CHECK(s.writes == Names{"d", "e"});
}

TEST_CASE("Cell analysis: x = x + 1 defines x and does not read it", "[notebook]") {
  auto s = analyse("x = x + 1");
  CHECK(s.reads.empty());
  CHECK(s.writes == Names{"x"});
}

TEST_CASE("Cell analysis: nested functions count as the cell", "[notebook]") {
  auto s = analyse("function f(a)\n  local g = function() return a + w end\n  return g() + z\nend");
  CHECK(s.reads == Names{"w", "z"});
  CHECK(s.writes == Names{"f"});
  // A local function's upvalue is no global; the function's own name, local, is none either.
  auto u = analyse("local k = 3\nlocal function h() k = k + q; return k end\nr = h()");
  CHECK(u.reads == Names{"q"});
  CHECK(u.writes == Names{"r"});
}

TEST_CASE("Cell analysis: _ENV.x and _ENV['x'] are globals, a computed key is not named",
          "[notebook]") {
  auto s = analyse("_ENV.a = _ENV['b']\nlocal k = 'c'\n_ENV[k] = 1");
  CHECK(s.reads == Names{"b"});
  CHECK(s.writes == Names{"a"});
  // A local _ENV: its fields are no globals of the notebook (print is read before it).
  auto t = analyse("local _ENV = {print = print}\nx = 1\nprint(y)");
  CHECK(t.reads == Names{"print"});
  // A function under a local _ENV: its _ENV upvalue is that local, not the globals.
  auto u = analyse("local _ENV = {}\nfunction f() return y end\ng = 1");
  CHECK(u.reads.empty());
  CHECK(u.writes.empty());
  // A local _ENV inside a function only: the rest of the cell still uses the globals.
  auto v = analyse("function h() local _ENV = {} ; q = 1 end\nfunction k() return p end");
  CHECK(v.reads == Names{"p"});
  CHECK(v.writes == Names{"h", "k"});
  CHECK(t.writes.empty());
}

TEST_CASE("Cell analysis: mls.project is detected, other mls fields are not", "[notebook]") {
  CHECK(analyse("local g = mls.project.current()").reads_project);
  CHECK(analyse("function f() return mls.project.current():nodes() end").reads_project);
  auto s = analyse("t = mls.zeros{2}\nlocal project = 3");
  CHECK_FALSE(s.reads_project);
  CHECK(s.reads == Names{"mls"});
  CHECK_FALSE(analyse("local p = other.project").reads_project);
  // Followed through a local; a field named project further down is not it.
  CHECK(analyse("local m = mls\nlocal p = m.project").reads_project);
  CHECK_FALSE(analyse("local p = mls.data.project").reads_project);
  CHECK_FALSE(analyse("local m = mls\nm = {}\nlocal p = m.project").reads_project);
}

TEST_CASE("Cell analysis: a syntax error is Lua's message with the cell's name and line",
          "[notebook]") {
  auto r = analyse_cell("x = 1\ny = = 2", "=cell b");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.rfind("cell b:2:", 0) == 0);
  CHECK(r.error().message.find("near '='") != std::string::npos);
}

TEST_CASE("Cell analysis: the chunk decoder refuses other versions and truncated chunks",
          "[notebook]") {
  std::string v53("\x1bLua\x53\x00", 6);
  auto r = decode_lua_chunk(v53);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("version 5.3") != std::string::npos);
  std::string v54("\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08", 15);
  auto t = decode_lua_chunk(v54);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message.find("byte order") != std::string::npos);
}

TEST_CASE("Cell analysis: every truncation of a real chunk is refused, never read past its end",
          "[notebook]") {
  lua_State* L = luaL_newstate();
  REQUIRE(L != nullptr);
  const char* src =
      "local a = {1, 2.5, 'k', true}\nfunction f(x) return function() return x + y end end\nz = "
      "f(1)";
  REQUIRE(luaL_loadstring(L, src) == LUA_OK);
  std::string chunk;
  lua_dump(
      L,
      [](lua_State*, const void* p, size_t n, void* ud) {
        static_cast<std::string*>(ud)->append(static_cast<const char*>(p), n);
        return 0;
      },
      &chunk, 0);
  lua_close(L);
  auto whole = decode_lua_chunk(chunk);
  REQUIRE(whole.ok());
  CHECK(whole->upvalues.size() == 1);
  CHECK(whole->upvalues[0].name == "_ENV");
  REQUIRE(whole->protos.size() == 1);
  REQUIRE(whole->protos[0].protos.size() == 1);
  CHECK(whole->protos[0].num_params == 1);
  CHECK(whole->protos[0].line_defined == 2);
  CHECK(whole->locvars.size() == 1);
  CHECK(whole->locvars[0].name == "a");
  int refused = 0;
  for (size_t n = 0; n < chunk.size(); ++n)
    refused += decode_lua_chunk(chunk.substr(0, n)).ok() ? 0 : 1;
  CHECK(refused == static_cast<int>(chunk.size()));
}
