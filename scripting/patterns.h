// string.find, string.match, string.gmatch and string.gsub with Lua 5.4's pattern language,
// but a matcher that checks the script's limits as it goes. Lua's own matcher backtracks in C
// where the count hook never runs: `("a"):rep(60):find(("a*"):rep(30) .. "b")` would run for
// years past any time limit. Same results, errors and argument rules as Lua's functions.
#pragma once

#include <lua.hpp>

namespace mls::lua {

// Replaces the four functions in the global `string` table (which strings' methods use).
// `check` runs every few thousand matcher steps and raises when a limit is reached.
void open_checked_patterns(lua_State* L, void (*check)(lua_State* L));

}  // namespace mls::lua
