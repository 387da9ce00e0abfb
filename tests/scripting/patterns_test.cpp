// The sandbox's pattern functions (scripting/patterns.cpp) against Lua's own: the same
// results and the same errors, over a table of patterns and subjects.
#include <lua.hpp>

#include <string>

#include "tests/scripting/lua_test_util.h"

using namespace mls;

namespace {

// Runs every case and returns one line per case: results or the error (without position).
const char* const kCases = R"LUA(
local subjects = {"", "a", "hello world", "x=1, y=22, zz=333", "  trim me  ", "[[nested [x] ]]",
  "THE (quick) fox", "aaa", "a.b.c", "f(a(b)c)d", "\0bin\0ary", "12ab34cd", "one two  three",
  "key = value # comment", "%x%", "a-b-c", "ab$", "^start"}
local patterns = {"", "a", "l+", "o w", "%a+", "%d+", "(%w+)=(%w+)", "^%s*(.-)%s*$", "%b[]", "%b()",
  "%f[%a]%a+", "%f[%A]", "()a()", "(a)(b)?", "a-b", "a*", "a?a?a", "[%a_][%w_]*", "[^%s]+",
  "[]]", "[^]]", "[a-c]+", "[%]]", "%.", ".-%.", "(.)%1", "(%d)(%d)%2", "$", "^", "^a", "a$",
  "%s+$", "^(%w+)", "(h)(e)(l)(l)(o)", "[%-]", "%-", "ab$", "%^start", "%$", "x*$",
  -- errors
  "[a", "%", "(", ")", "%1", "(()", "%b", "%fa", "%g+"}
local out = {}
local function show(...)
  local t = table.pack(...)
  for i = 1, t.n do t[i] = tostring(t[i]) end
  return table.concat(t, ",", 1, t.n)
end
local function try(f, ...)
  local r = table.pack(pcall(f, ...))
  if not r[1] then return "error: " .. tostring(r[2]):gsub("^[^:]*:%d+: ", "") end
  return show(table.unpack(r, 2, r.n))
end
for _, s in ipairs(subjects) do
  for _, p in ipairs(patterns) do
    for _, init in ipairs({1, 2, -3, 0, 100}) do
      out[#out + 1] = "find " .. try(string.find, s, p, init)
      out[#out + 1] = "plain " .. try(string.find, s, p, init, true)
      out[#out + 1] = "match " .. try(string.match, s, p, init)
      out[#out + 1] = "gmatch " .. try(function()
        local r = {}
        for a, b in string.gmatch(s, p, init) do r[#r + 1] = show(a, b); if #r > 50 then break end end
        return table.concat(r, ";")
      end)
    end
    for _, repl in ipairs({"<%0>", "%1-%1", "%%", "%2", "x", 7}) do
      out[#out + 1] = "gsub " .. try(string.gsub, s, p, repl)
      out[#out + 1] = "gsub2 " .. try(string.gsub, s, p, repl, 2)
    end
    out[#out + 1] = "gsubf " .. try(string.gsub, s, p, function(a, b) if a == "a" then return nil end return "[" .. tostring(a) .. tostring(b) .. "]" end)
    out[#out + 1] = "gsubt " .. try(string.gsub, s, p, {hello = "HI", a = false, x = 1})
    out[#out + 1] = "gsubbad " .. try(string.gsub, s, p, function() return {} end)
    out[#out + 1] = "gsubtype " .. try(string.gsub, s, p, true)
  end
end
result = table.concat(out, "\n")
)LUA";

std::string run_cases(lua_State* L) {
  if (luaL_dostring(L, kCases) != LUA_OK)
    return std::string("script error: ") + lua_tostring(L, -1);
  lua_getglobal(L, "result");
  std::string r = lua_tostring(L, -1);
  lua_pop(L, 1);
  return r;
}

}  // namespace

TEST_CASE("The sandbox's pattern functions give Lua's results and errors", "[lua][sandbox]") {
  lua_State* plain = luaL_newstate();
  luaL_openlibs(plain);
  const std::string want = run_cases(plain);
  lua_close(plain);
  lua::ScriptOptions o;
  o.sandbox = true;
  o.time_limit_s = 60;
  lua::LuaHost h(cpu::backend(), o);
  const std::string got = run_cases(h.state());
  REQUIRE(want.size() > 10000);
  // Line by line, so a difference shows where.
  size_t a = 0, b = 0;
  int line = 0;
  while (a < want.size() || b < got.size()) {
    const size_t ea = std::min(want.find('\n', a), want.size());
    const size_t eb = std::min(got.find('\n', b), got.size());
    ++line;
    INFO("case line " << line);
    REQUIRE(got.substr(b, eb - b) == want.substr(a, ea - a));
    a = ea + 1;
    b = eb + 1;
  }
}
