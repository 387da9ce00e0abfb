// `mlstudio lua [FILE [ARGS...]]`: a Lua script with the mls module, or the REPL.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/commands.h"
#include "engine/cpu/cpu_backend.h"
#include "scripting/lua_host.h"
#include "scripting/repl.h"

namespace mls::app {

int lua_command(const LuaOptions& o) {
  lua::ScriptOptions so;
  so.db_path = o.db;
  so.instruction_limit = o.instruction_limit;
  so.time_limit_s = o.time_limit;
  if (o.instruction_limit < 0 || o.time_limit < 0) {
    std::fprintf(stderr, "mlstudio: --instruction-limit and --time-limit must be >= 0\n");
    return 1;
  }
  if (!o.file.empty()) {
    // A script file runs sandboxed unless the user vouches for it: it may read and write
    // only under its own folder (or --root), and read the installed datasets.
    so.sandbox = !o.trust;
    so.root = !o.root.empty() ? o.root : std::filesystem::absolute(o.file).parent_path().string();
  }
  lua::LuaHost host(cpu::backend(), so);
  if (o.file.empty()) {
    const char* home = std::getenv("HOME");
    return lua::run_repl(host, std::string(home ? home : ".") + "/.mlstudio_history");
  }
  auto r = host.run_file(o.file, o.args);
  if (!r) {
    std::fprintf(stderr, "mlstudio: %s\n", r.error().message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace mls::app
