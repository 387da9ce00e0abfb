// Lua values as trees (scripting/pretty.h): nested, array and mixed tables, cycles, the depth
// and item limits, tensors inside tables, and the REPL's output of a table.
#include "scripting/pretty.h"

#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::run_ok;

namespace {

// describe_value of the global `v` after running `code`.
std::string describe(lua::LuaHost& h, const std::string& code, const lua::PrettyOptions& o = {}) {
  run_ok(h, code);
  lua_State* L = h.state();
  const int top = lua_gettop(L);
  lua_getglobal(L, "v");
  std::string s = lua::describe_value(L, -1, o);
  lua_pop(L, 1);
  CHECK(lua_gettop(L) == top);
  return s;
}

}  // namespace

TEST_CASE("pretty: arrays in order, keys sorted, short tables on one line", "[pretty]") {
  lua::LuaHost h(cpu::backend());
  CHECK(describe(h, "v = {3, 1, 2}") == "{3, 1, 2}");
  CHECK(describe(h, "v = {}") == "{}");
  // Array part first, then numbers by value, then strings, quoted strings inside tables.
  CHECK(
      describe(h, R"(v = {"x", "y", b = true, a = "s", [10] = 1, [-2] = 0, ["two words"] = 2})") ==
      R"({"x", "y", [-2] = 0, [10] = 1, a = "s", b = true, ["two words"] = 2})");
  CHECK(describe(h, "v = {1.5, 2}") == "{1.5, 2}");
  // A top-level string is itself, as print shows it.
  CHECK(describe(h, R"(v = "hi")") == "hi");
}

TEST_CASE("pretty: nested tables are indented trees", "[pretty]") {
  lua::LuaHost h(cpu::backend());
  CHECK(describe(h, "v = {a = 1, b = {2, 3}}") == "{\n  a = 1,\n  b = {2, 3},\n}");
  CHECK(describe(h, "v = {{1, {2}}, k = {x = {y = 1}}}") ==
        "{\n"
        "  {\n"
        "    1,\n"
        "    {2},\n"
        "  },\n"
        "  k = {\n"
        "    x = {y = 1},\n"
        "  },\n"
        "}");
  // A long row of plain values is a column.
  const std::string long_row = describe(h, "v = {} for i = 1, 30 do v[i] = 1000 + i end");
  CHECK(long_row.rfind("{\n  1001,\n  1002,\n", 0) == 0);
  CHECK(long_row.size() > 30 * 5);
}

TEST_CASE("pretty: a cycle is named, not followed", "[pretty]") {
  lua::LuaHost h(cpu::backend());
  CHECK(describe(h, "v = {name = 'a'}; v.self = v") ==
        "{name = \"a\", self = <cycle: the table above>}");
  // A table seen twice but not inside itself prints twice.
  CHECK(describe(h, "local s = {1}; v = {s, s}") == "{\n  {1},\n  {1},\n}");
}

TEST_CASE("pretty: depth, item and string limits", "[pretty]") {
  lua::LuaHost h(cpu::backend());
  lua::PrettyOptions o;
  o.max_depth = 2;
  CHECK(describe(h, "v = {a = {b = {c = {1, 2, 3}}}}", o) ==
        "{\n  a = {\n    b = {... 1 item},\n  },\n}");
  o = {};
  o.max_items = 3;
  CHECK(describe(h, "v = {} for i = 1, 10 do v[i] = i end", o) == "{1, 2, 3, ... (7 more)}");
  CHECK(describe(h, "v = {1, 2, x = 1, y = 2}", o) == "{1, 2, x = 1, ... (1 more)}");
  o = {};
  o.max_string = 5;
  CHECK(describe(h, "v = {string.rep('a', 12)}", o) == "{\"aaaaa\"... (12 bytes)}");
  CHECK(describe(h, "v = {'a\\nb'}") == "{\"a\\nb\"}");
  // A large table shows its first entries and the count of the rest (keys sorted first).
  o.max_items = 3;
  CHECK(describe(h, "v = {} for i = 1, 100000 do v['k' .. i] = i end", o) ==
        "{k1 = 1, k10 = 10, k100 = 100, ... (99997 more)}");
  // A table as a key is summarised; a deep chain is cut at the depth limit.
  CHECK(describe(h, "v = {[{1}] = true}") == "{[{... 1 item}] = true}");
  o = {};
  const std::string deep =
      describe(h, "v = {} local t = v for i = 1, 1000 do t.n = {} t = t.n end", o);
  CHECK(deep.find("n = {... 1 item}") != std::string::npos);
  CHECK(std::count(deep.begin(), deep.end(), '\n') == 2 * o.max_depth);
}

TEST_CASE("pretty: tensors, functions, modules and other userdata inside tables", "[pretty]") {
  lua::LuaHost h(cpu::backend());
  // Tensors through the tensor printer, their rows indented with the tree.
  CHECK(describe(h, "v = {w = mls.tensor{{1, 2}, {3, 4}}}") ==
        "{\n  w = tensor([[1.0000, 2.0000],\n              [3.0000, 4.0000]]),\n}");
  CHECK(describe(h, "v = {mls.tensor{{1, 2}, {3, 4}}}") ==
        "{\n  tensor([[1.0000, 2.0000],\n          [3.0000, 4.0000]]),\n}");
  CHECK(describe(h, "v = {f = mls.zeros, g = function() end, s = mls.nn.Linear(2, 3)}") ==
        "{f = function: mls.zeros, g = function, s = Linear(2 -> 3)}");
  CHECK(describe(h, "v = mls.F.linear") == "function: mls.F.linear");
  CHECK(describe(h, "v = mls.ones{1}.exp") == "function: Tensor:exp");
  // Userdata with __tostring show it (Lua's files); a coroutine is named.
  const std::string file = describe(h, "v = {io.stdout}");
  CHECK(file.rfind("{file (0x", 0) == 0);
  CHECK(file.substr(file.size() - 2) == ")}");
  CHECK(describe(h, "v = {coroutine.create(print), false}") == "{<coroutine>, false}");
}

TEST_CASE("pretty: the REPL's eval shows a table as a tree, and print in the REPL does too",
          "[pretty]") {
  lua::LuaHost h(cpu::backend());
  std::string out;
  REQUIRE(h.eval("{a = 1, b = {2, 3}}", &out) == lua::LuaHost::Status::Ok);
  CHECK(out == "{\n  a = 1,\n  b = {2, 3},\n}");
  REQUIRE(h.eval("1, 'x', nil", &out) == lua::LuaHost::Status::Ok);
  CHECK(out == "1\tx\tnil");
  REQUIRE(h.eval("mls.zeros", &out) == lua::LuaHost::Status::Ok);
  CHECK(out == "function: mls.zeros");
  // tostring stays standard.
  REQUIRE(h.eval("tostring({}):match('^table: ') ~= nil", &out) == lua::LuaHost::Status::Ok);
  CHECK(out == "true");
  // print_text: tables as trees, the rest as tostring.
  run_ok(h, "v = {1, {2}}");
  lua_getglobal(h.state(), "v");
  CHECK(lua::print_text(h.state(), -1) == "{\n  1,\n  {2},\n}");
  lua_pop(h.state(), 1);
  lua_pushnumber(h.state(), 0.5);
  CHECK(lua::print_text(h.state(), -1) == "0.5");
  lua_pop(h.state(), 1);
}
