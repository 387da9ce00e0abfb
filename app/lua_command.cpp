// `mlstudio lua [FILE [ARGS...]]`: a Lua script with the mls module, or the REPL.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <thread>

#include "app/commands.h"
#include "engine/cpu/cpu_backend.h"
#include "runner/checkpoints.h"
#include "scripting/jail.h"
#include "scripting/lua_host.h"
#include "scripting/repl.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

namespace fs = std::filesystem;

int run_script(const LuaOptions& o, const lua::ScriptOptions& so) {
  lua::LuaHost host(cpu::backend(), so);
  auto r = host.run_file(o.file, o.args);
  if (!r) {
    std::fprintf(stderr, "mlstudio: %s\n", r.error().message.c_str());
    const std::string& m = r.error().message;
    if (o.memory_limit_mib > 0 && (m.find("not enough memory") != std::string::npos ||
                                   m.find("out of memory") != std::string::npos))
      std::fprintf(stderr, "mlstudio: the sandbox's memory limit is %lld MiB (--memory-limit)\n",
                   static_cast<long long>(o.memory_limit_mib));
    if (o.file_limit_mib > 0 && m.find("File too large") != std::string::npos)
      std::fprintf(stderr, "mlstudio: the sandbox's file size limit is %lld MiB (--file-limit)\n",
                   static_cast<long long>(o.file_limit_mib));
    return 1;
  }
  return 0;
}

// The address space this process maps now (/proc/self/statm's first field, in pages).
uint64_t mapped_bytes() {
  unsigned long long pages = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

// The second wall around a sandboxed script, kept by the kernel (scripting/jail.h): what
// the in-VM sandbox allows, and no more, in case the VM's own checks are ever got round.
jail::JailLimits script_jail(const LuaOptions& o, const lua::ScriptOptions& so) {
  jail::JailLimits l;
  // The limit is what the script may add: the process already maps about 1 GB before any
  // script runs (libraries, malloc arenas, OpenBLAS's buffers), and a limit below that would
  // only stop the engine's own start-up.
  // The VM counts what the script holds against the same --memory-limit and stops it first
  // with a traceback; the kernel's wall sits a quarter (and 256 MiB of engine workspace,
  // thread stacks and allocator slack) beyond, for what the VM cannot see.
  if (o.memory_limit_mib > 0) {
    // (A limit past an exbibyte is none: the shift would wrap.)
    const uint64_t held = static_cast<uint64_t>(std::min<int64_t>(o.memory_limit_mib, 1LL << 40))
                          << 20;
    l.address_space_bytes = mapped_bytes() + held + held / 4 + (uint64_t{256} << 20);
  }
  if (o.time_limit > 0) {
    // The in-VM limit fires first with a traceback; the wall clock (a second later) stops
    // what the VM cannot interrupt: a backtracking pattern, a blocking open, a long kernel.
    l.wall_seconds = o.time_limit + 1 + 0.1 * o.time_limit;
    // All threads together: the CPU limit is a backstop that must not beat the wall clock.
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    l.cpu_seconds = std::ceil(l.wall_seconds * cores) + 1;
  }
  // What the process itself reads once jailed: libraries loaded late (iconv, NSS), the
  // time zone, CPU counts, its own executable and /proc entries.
  l.read_paths = {"/usr",           "/lib",
                  "/lib64",         "/etc/ld.so.cache",
                  "/etc/localtime", "/sys/devices/system/cpu",
                  "/proc/self",     "/dev/urandom"};
  char exe[4096];
  if (const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1); n > 0)
    l.read_paths.emplace_back(exe, static_cast<size_t>(n));
  for (const auto& r : so.read_only_roots) l.read_paths.push_back(r);
  l.write_paths = {so.root, "/dev/null"};
  // The run database that mls.train and mls.log write is the host's, not the script's: the
  // database and its -wal and -shm files are writable, never the folder they sit in (by
  // default the working folder, perhaps $HOME). It is created here, in WAL mode, so the
  // script's SQLite creates and removes no file beside it (lua_command tidies up after).
  if (!so.db_path.empty()) {
    const std::string db = fs::absolute(so.db_path).lexically_normal().string();
    std::string error;
    if (auto store = store::RunStore::open(db); !store) error = store.error().message;
    std::vector<std::string> files;
    if (error.empty()) files = jail::database_files(db, &error);
    if (!error.empty())
      std::fprintf(stderr, "mlstudio: the run database is not writable in the sandbox: %s\n",
                   error.c_str());
    l.write_paths.insert(l.write_paths.end(), files.begin(), files.end());
    // mls.train's checkpoints go beside the database (runner/checkpoints.h): that folder too.
    const fs::path ckpt = fs::path(runner::checkpoint_dir(db, 1)).parent_path();
    std::error_code ec;
    fs::create_directories(ckpt, ec);
    if (!ec) l.write_paths.push_back(ckpt.string());
  }
  if (o.file_limit_mib > 0)
    l.file_size_bytes = static_cast<uint64_t>(std::min<int64_t>(o.file_limit_mib, 1LL << 40)) << 20;
  return l;
}

int lua_command(const LuaOptions& o) {
  lua::ScriptOptions so;
  so.db_path = o.db;
  so.resume_run = o.resume;
  so.instruction_limit = o.instruction_limit;
  so.time_limit_s = o.time_limit;
  // One --memory-limit for both walls: the VM counts the Lua heap and tensors and stops the
  // script with a traceback; the kernel (the jail) is the backstop for what it cannot see.
  so.memory_limit = o.memory_limit_mib > 0
                        ? static_cast<int64_t>(std::min<int64_t>(o.memory_limit_mib, 1LL << 40))
                              << 20
                        : std::numeric_limits<int64_t>::max();
  if (o.instruction_limit < 0 || o.time_limit < 0 || o.memory_limit_mib < 0 ||
      o.file_limit_mib < 0) {
    std::fprintf(stderr,
                 "mlstudio: --instruction-limit, --time-limit, --memory-limit and --file-limit "
                 "must be >= 0\n");
    return 1;
  }
  if (o.file.empty()) {
    lua::LuaHost host(cpu::backend(), so);
    const char* home = std::getenv("HOME");
    return lua::run_repl(host, std::string(home ? home : ".") + "/.mlstudio_history");
  }
  // A script file runs sandboxed unless the user vouches for it: it may read and write
  // only under its own folder (or --root), and read the installed datasets.
  so.sandbox = !o.trust;
  so.root = fs::absolute(!o.root.empty() ? fs::path(o.root) : fs::absolute(o.file).parent_path())
                .lexically_normal()
                .string();
  if (o.trust) return run_script(o, so);

  // Sandboxed: in a jailed child process. It forks before the host exists, so the child
  // builds its own engine threads.
  const jail::JailLimits limits = script_jail(o, so);
  jail::Walls walls = jail::probe_walls();
  std::fprintf(stderr, "mlstudio: sandbox: %s", walls.describe().c_str());
  if (limits.address_space_bytes)
    std::fprintf(stderr, ", memory %lld MiB", static_cast<long long>(o.memory_limit_mib));
  if (limits.wall_seconds > 0) std::fprintf(stderr, ", time %g s", o.time_limit);
  std::fprintf(stderr, " (--trust lifts it)\n");
  const jail::JailResult r = jail::run_jailed(limits, [&] { return run_script(o, so); });
  // The jailed SQLite could not remove its -wal and -shm on closing; SQLite does it here when
  // no one else has the database open.
  if (!so.db_path.empty()) {
    (void)store::RunStore::open(fs::absolute(so.db_path).string());
    // The checkpoints folder made for the jail goes again when no run wrote into it.
    std::error_code ec;
    fs::remove(fs::path(runner::checkpoint_dir(fs::absolute(so.db_path).string(), 1)).parent_path(),
               ec);
  }
  if (r.timed_out) {
    std::fprintf(stderr,
                 "mlstudio: %s: stopped by the sandbox: the script ran past its time limit of %g s "
                 "and did not stop (killed after %.1f s)\n",
                 o.file.c_str(), o.time_limit, r.wall_seconds);
    return 1;
  }
  if (r.reason.rfind("memory limit", 0) == 0 ||
      r.reason.find("perhaps out of memory") != std::string::npos) {
    std::fprintf(stderr,
                 "mlstudio: %s: stopped by the sandbox: %s; the script may use %lld MiB "
                 "(--memory-limit)\n",
                 o.file.c_str(), r.reason.c_str(), static_cast<long long>(o.memory_limit_mib));
    return 1;
  }
  if (!r.reason.empty()) {
    std::fprintf(stderr, "mlstudio: %s: stopped by the sandbox: %s\n", o.file.c_str(),
                 r.reason.c_str());
    return 1;
  }
  return r.exit_code;
}

}  // namespace mls::app
