// The interactive console of `mlstudio lua`: line editing and history (GNU readline), tab
// completion of names (mls.ze<TAB> -> mls.zeros), results printed without `print`, entries
// that span lines, and errors with a traceback that leave the session usable.
//
//   LuaHost host(cpu::backend());
//   return run_repl(host, "~/.mlstudio_history");   // until Ctrl-D or os.exit()
#pragma once

#include <string>

#include "scripting/lua_host.h"

namespace mls::lua {

// Reads entries from the terminal (readline) or, when stdin is not one, line by line.
// Returns the exit status: 0.
int run_repl(LuaHost& host, const std::string& history_file);

}  // namespace mls::lua
