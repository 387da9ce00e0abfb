// help(x) in Lua: what an mls function, module or object does, from one table of entries
// (help_docs.cpp). A test walks the mls table so that no function goes without an entry.
//
//   help(mls.zeros)   -- mls.zeros(shape [, dtype]): a tensor of zeros ... Example: mls.zeros{2, 3}
//   help(mls.nn)      -- the module's functions and classes, one line each
//   help(t)           -- a tensor: its methods
//   help("softmax")   -- every entry whose name or text holds the word
#pragma once

#include <lua.hpp>

#include <string>
#include <vector>

namespace mls::lua {

struct HelpEntry {
  const char* name;       // "mls.zeros", "mls.nn" (a module), "Tensor:sum" (a method)
  const char* signature;  // "mls.zeros(shape [, dtype])"
  const char* summary;    // one line: what it does
  const char* example;    // one line of Lua
};

const std::vector<HelpEntry>& help_entries();
const HelpEntry* find_help(const std::string& name);

// The documented name of the function at `idx` ("mls.zeros", "Tensor:sum"), found by walking
// the mls module and the metatables of its objects; "" when it is none of theirs.
std::string function_name(lua_State* L, int idx);

// The text help(x) prints for the value at `idx` (0: help() with no argument).
std::string help_text(lua_State* L, int idx);

// The names of every function reachable from the mls module (and the methods of its objects)
// that have no entry: the coverage test's list, empty when all are documented.
std::vector<std::string> undocumented(lua_State* L);

// Sets the global `help`; it prints through the global `print` (the console's, in the editor).
void open_help(lua_State* L);

}  // namespace mls::lua
