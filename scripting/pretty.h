// Lua values as readable text: tables as indented trees (the REPL's results, print() of a
// table in the REPL and the editor's console, a notebook cell's returned values), tensors as
// the tensor printer shows them, functions of the mls module by name.
//
//   lua_newtable(L); ...                       -- {a = 1, b = {2, 3}}
//   describe_value(L, -1)                      -- "{\n  a = 1,\n  b = {2, 3},\n}"
//   describe_value(L, -1, {.max_depth = 1})    -- nested tables past the depth as "{...}"
#pragma once

#include <lua.hpp>

#include <cstddef>
#include <string>

namespace mls::lua {

struct PrettyOptions {
  int max_depth = 5;         // tables nested deeper show as "{... N items}"
  int max_items = 40;        // entries shown per table; the rest as "... (N more)"
  size_t max_string = 120;   // strings inside tables are cut past this many bytes
  size_t inline_width = 72;  // a table of plain values this short stays on one line
};

// The text of the value at `idx`. A top-level string is itself (as print shows it), strings
// inside tables are quoted; a table whose metatable has __tostring (an nn module) and a
// userdata (a tensor, an optimizer) show their own text; other userdata show their __name.
// Cycles show as "<cycle: the table above>". Never raises; leaves the stack as it found it.
std::string describe_value(lua_State* L, int idx, const PrettyOptions& o = {});

// What print() shows for argument `idx`: describe_value for tables, luaL_tolstring for the
// rest (so `tostring` and the text of strings and numbers stay standard).
std::string print_text(lua_State* L, int idx);

// A print() that writes print_text of each argument, tab-separated, to stdout: the REPL's.
int pretty_print(lua_State* L);

}  // namespace mls::lua
