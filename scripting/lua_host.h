// A Lua 5.4 interpreter with the `mls` module: runs script files and REPL entries, with
// errors that carry file:line and a traceback, and an optional sandbox for scripts that come
// with a project.
//
//   LuaHost host(cpu::backend(), {.sandbox = true, .root = "projects/lab1", .instruction_limit =
//   50'000'000}); Result<void> r = host.run_file("projects/lab1/train.lua", {"--fast"}); if (!r)
//   std::cerr << r.error().message << "\n";   // "train.lua:12: ...\nstack traceback: ..."
//
// The sandbox (ScriptOptions::sandbox): no os.execute, io.popen, package.loadlib, C modules,
// binary chunks or debug library; files (io.open, io.lines, dofile, loadfile, require,
// mls.data, mls.project) only under `root` (and, for reading, the dataset folders Debian
// installs), checked where they really are (links followed, see sandbox_path) and opened
// only when regular; a memory limit (1 GiB unless set) on the Lua heap and the script's
// tensors. Each refusal raises a Lua error that says what was refused and why.
//
// Limits (sandboxed or not): the instruction and time limits hold in every coroutine, in
// the pattern matcher and in mls.train; once one is reached it is raised again at every
// instruction until the entry ends, so neither pcall nor coroutine.resume can swallow it.
// The userdata the mls module makes have protected metatables and survive a finaliser that
// revives them (closed: every use raises), and a C++ exception in a binding is a Lua error.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"

struct lua_State;

namespace mls::lua {

class Runtime;

struct ScriptOptions {
  bool sandbox = false;
  std::string root;  // sandbox: the folder a script may read and write ("" : the working directory)
  std::vector<std::string> read_only_roots = {"/usr/share/datasets"};
  int64_t instruction_limit = 0;  // VM instructions per run or REPL entry; 0: no limit
  double time_limit_s = 0;        // seconds per run or REPL entry; 0: no limit
  // Bytes of Lua heap plus tensor data a script may hold; 0: 1 GiB in a sandbox, else none.
  int64_t memory_limit = 0;
  std::string db_path = "mlstudio-runs.db";  // where mls.train and mls.log record runs
  int64_t resume_run = 0;                    // > 0: the script's first mls.train continues this run
};

class LuaHost {
 public:
  explicit LuaHost(Backend& backend, ScriptOptions options = {});
  ~LuaHost();
  LuaHost(const LuaHost&) = delete;
  LuaHost& operator=(const LuaHost&) = delete;

  // Runs a script; `args` become the global table `arg` (arg[0] is the path).
  Result<void> run_file(const std::string& path, const std::vector<std::string>& args = {});
  Result<void> run_string(const std::string& code, const std::string& chunkname = "=(string)");

  // One REPL entry: an expression's values are returned as text (as print would show
  // them); a statement runs. Incomplete input (an open block or string) asks for more.
  enum class Status { Ok, Incomplete, Error };
  Status eval(const std::string& code, std::string* out);
  // Names that complete `prefix` ("mls.ze" -> "mls.zeros"; "x:res" -> "x:reshape").
  std::vector<std::string> completions(const std::string& prefix);

  // A flag another thread sets to stop the running entry: Lua code stops at its next
  // instruction with "interrupted", a pcall cannot swallow it, and mls.train stops after its
  // current step (the run is recorded as interrupted). Null removes it.
  void set_interrupt(const std::atomic<bool>* flag);

  lua_State* state() { return L_; }
  Runtime& runtime() { return *rt_; }
  const ScriptOptions& options() const { return options_; }

 private:
  Result<void> call(int nargs, int nresults);  // pcall with a traceback, limits reset
  void open_libs();
  void install_sandbox();

  ScriptOptions options_;
  std::unique_ptr<Runtime> rt_;
  lua_State* L_ = nullptr;
};

// The path `path` really names: every symbolic link followed, dangling ones included (the
// target of a dangling link is where a write would create the file), "." and ".." applied
// to real folders as the kernel does. Nothing is opened or created. An error for a link
// loop.
Result<std::string> resolve_links(const std::string& path);

// Where files may be opened under `o`: the resolved path (resolve_links), or an error naming
// the path and the folder it must be under. The one check of every path a script names: the
// sandbox's io functions, loadfile, dofile and require, and mls.data (every path field of a
// dataset) and mls.project, which then open the resolved path.
// The line of chunk `name` that an error message names first ("name:12: ..." or in its
// traceback); 0 when it names none. For "=cell a" chunks, name is "cell a".
int error_line(const std::string& message, const std::string& name);

Result<std::string> sandbox_path(const ScriptOptions& o, const std::string& path, bool write);

}  // namespace mls::lua
