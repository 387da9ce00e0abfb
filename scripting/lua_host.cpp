// [SECTION] opening the mls module
// [SECTION] limits          instruction and time limits (a count hook)
// [SECTION] sandbox         io, os, load, require replaced by checked versions
// [SECTION] running         files, strings, REPL entries, completion
#include "scripting/lua_host.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "scripting/bindings.h"
#include "scripting/help.h"
#include "scripting/libs.h"
#include "scripting/patterns.h"
#include "scripting/pretty.h"

namespace mls::lua {

namespace fs = std::filesystem;

namespace {

// The host's per-state data, in the registry under this key.
struct HostData {
  ScriptOptions* options;
  Runtime* rt;
  int64_t instructions = 0;
  bool tripped = false;  // a limit was hit: the hook runs at every instruction
};
const char kHostKey = 'H';

HostData& host_data(lua_State* L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &kHostKey);
  auto* h = static_cast<HostData*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return *h;
}

int is_tensor(lua_State* L) {
  lua_pushboolean(L, to_tensor(L, 1) != nullptr);
  return 1;
}

// Runs inside a closure with the Runtime and the tensor metatable as upvalues 1 and 2, so
// every function it registers gets them too.
int open_mls(lua_State* L) {
  lua_newtable(L);
  open_tensor_lib(L);
  open_autograd_lib(L);
  open_nn_lib(L);
  open_attention_lib(L);
  open_words_lib(L);
  open_graph_lib(L);
  open_train_lib(L);
  open_project_lib(L);
  open_onnx_lib(L);
  open_plot_lib(L);
  open_ui_lib(L);
  open_autodiff_lib(L);
  open_teach_lib(L);
  const luaL_Reg extra[] = {{"is_tensor", is_tensor}, {nullptr, nullptr}};
  set_funcs(L, extra);
  lua_pushstring(L, "0.1.0");
  lua_setfield(L, -2, "version");
  // mls.nn, written in Lua over mls.F.
  if (luaL_loadbuffer(L, kNnLua, std::strlen(kNnLua), "=mls.nn") != LUA_OK) return lua_error(L);
  lua_pushvalue(L, -2);
  lua_call(L, 1, 1);
  lua_setfield(L, -2, "nn");
  return 1;
}

// [SECTION] limits

constexpr int kHookEvery = 1000;
// Coroutines: Lua keeps a hook count per thread, and a thread that ends before its count
// runs out is never counted. So each new thread is charged its count up front and runs with
// a smaller one: what a coroutine runs is always counted, at most this much too high.
constexpr int kThreadHookEvery = 250;

void limit_hook(lua_State* L, lua_Debug*) {
  HostData& h = host_data(L);
  Runtime& rt = *h.rt;
  h.instructions += lua_gethookcount(L);
  if (rt.stop.empty()) {
    const ScriptOptions& o = *h.options;
    char msg[160];
    if (rt.cancelled() && !rt.hold_cancel) {
      rt.stop = "interrupted (stopped by the user)";
    } else if (o.instruction_limit > 0 && h.instructions > o.instruction_limit) {
      std::snprintf(msg, sizeof msg, "stopped: the script ran past its limit of %lld instructions",
                    static_cast<long long>(o.instruction_limit));
      rt.stop = msg;
    } else if (o.time_limit_s > 0 && rt.past_deadline()) {
      std::snprintf(msg, sizeof msg, "stopped: the script ran past its time limit of %.14g s",
                    o.time_limit_s);
      rt.stop = msg;
    } else {
      return;
    }
  }
  if (lua_gethookcount(L) != 1) {
    // From now on every instruction raises, so a script cannot swallow the error with pcall
    // and go on: the first instruction outside the pcall raises again.
    h.tripped = true;
    lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1);
  }
  luaL_error(L, "%s", rt.stop.c_str());
}

// The count hook runs while there is a limit or an interrupt flag to watch.
void install_hook(lua_State* L) {
  const HostData& h = host_data(L);
  const bool watch = h.options->instruction_limit > 0 || h.options->time_limit_s > 0 ||
                     h.rt->cancel || h.rt->memory_limit > 0;
  lua_sethook(L, watch ? limit_hook : nullptr, watch ? LUA_MASKCOUNT : 0, kHookEvery);
}

// The limits checked from C code that runs long without the hook (the pattern matcher).
void check_limits(lua_State* L) {
  if (lua_gethook(L) != nullptr) limit_hook(L, nullptr);
}

// After a coroutine returned to `L`: a limit hit inside it is raised again here, in the
// thread that resumed it, with that thread's hook at every instruction too. Without this a
// resume or a wrap would turn the stop into a return value and the script would go on.
void rethrow_stop(lua_State* L) {
  HostData& h = host_data(L);
  if (h.rt->stop.empty()) return;
  h.tripped = true;
  lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1);
  luaL_error(L, "%s", h.rt->stop.c_str());
}

// coroutine.create(f): the new thread runs under the limit hook (see kThreadHookEvery).
int co_create(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  HostData& h = host_data(L);
  lua_State* co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  if (lua_gethook(L) != nullptr) {
    h.instructions += kThreadHookEvery;
    lua_sethook(co, limit_hook, LUA_MASKCOUNT, h.tripped ? 1 : kThreadHookEvery);
  }
  return 1;
}

// coroutine.resume(co, ...): Lua's, then any stop raised again.
int co_resume(lua_State* L) {
  const int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  rethrow_stop(L);
  return lua_gettop(L);
}

int co_wrap_call(lua_State* L) {
  const int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));  // the real coroutine.resume
  lua_pushvalue(L, lua_upvalueindex(2));  // the thread
  lua_rotate(L, 1, 2);
  lua_call(L, n + 1, LUA_MULTRET);
  rethrow_stop(L);
  if (lua_toboolean(L, 1)) return lua_gettop(L) - 1;
  // As Lua's wrap: the error goes on to the caller, a message with the caller's position.
  lua_settop(L, 2);
  if (lua_type(L, 2) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

// coroutine.wrap(f): a function that resumes a thread made by co_create.
int co_wrap(lua_State* L) {
  lua_settop(L, 1);
  co_create(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, -2);
  lua_pushcclosure(L, co_wrap_call, 2);
  return 1;
}

// The Lua heap under ScriptOptions::memory_limit (with the script's tensors, see
// Runtime::charge). A refused allocation is a Lua memory error, and sets the stop that the
// hook raises from then on. After the stop, a small reserve lets the error and its
// traceback be built.
void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* rt = static_cast<Runtime*>(ud);
  const int64_t old = ptr ? static_cast<int64_t>(osize) : 0;
  if (nsize == 0) {
    std::free(ptr);
    rt->lua_bytes -= old;
    return nullptr;
  }
  const int64_t grow = static_cast<int64_t>(nsize) - old;
  constexpr int64_t kReserve = 4 << 20;
  // used + grow > limit + reserve, written so that nothing overflows when the limit is
  // INT64_MAX (no limit): the sizes are far below 2^62, so only the limit side is rearranged.
  const int64_t used = rt->lua_bytes + rt->tensor_bytes;
  const int64_t reserve = rt->stop.empty() ? 0 : kReserve;
  if (grow > 0 && rt->memory_limit > 0 && used + grow - reserve > rt->memory_limit) {
    rt->memory_exceeded();
    return nullptr;
  }
  void* p = std::realloc(ptr, nsize);
  if (p) rt->lua_bytes += grow;
  return p;
}

int at_panic(lua_State* L) {
  const char* msg = lua_tostring(L, -1);
  std::fprintf(stderr, "mlstudio: Lua panic: %s\n", msg ? msg : "(error object is not a string)");
  return 0;  // Lua aborts
}

// [SECTION] sandbox

ScriptOptions& opts(lua_State* L) {
  return *host_data(L).options;
}

// The checked path for a file a script names, or a Lua error.
std::string checked(lua_State* L, const char* path, bool write) {
  std::string out;
  std::string err;
  {
    auto r = sandbox_path(opts(L), path, write);
    if (r)
      out = *r;
    else
      err = r.error().message;
  }
  if (!err.empty()) luaL_error(L, "%s", err.c_str());
  return out;
}

int refuse(lua_State* L) {
  return luaL_error(
      L, "%s is not allowed in a sandboxed script (run it with --trust if it is your own)",
      lua_tostring(L, lua_upvalueindex(1)));
}

// The files a script opens itself (io.open, io.lines, loadfile, dofile, require) go
// through open_checked: the path sandbox_path allows (every link resolved, so it names the
// real file), opened without following a link at its last part (one made after the check
// cannot redirect the open), non-blocking, and kept only when it is a regular file (a FIFO
// or a device would block past the time limit or never end).

// Lua's io library's modes: "r", "w", "a", with "+" and "b".
int open_flags(lua_State* L, const char* mode) {
  const char* m = mode;
  int flags = 0;
  switch (*m++) {
    case 'r':
      flags = O_RDONLY;
      break;
    case 'w':
      flags = O_WRONLY | O_CREAT | O_TRUNC;
      break;
    case 'a':
      flags = O_WRONLY | O_CREAT | O_APPEND;
      break;
    default:
      return luaL_argerror(L, 2, "invalid mode");
  }
  if (*m == '+') {
    flags = (flags & ~O_WRONLY) | O_RDWR;
    ++m;
  }
  while (*m == 'b') ++m;
  if (*m != '\0') return luaL_argerror(L, 2, "invalid mode");
  return flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
}

int close_stream(lua_State* L) {
  auto* p = static_cast<luaL_Stream*>(luaL_checkudata(L, 1, LUA_FILEHANDLE));
  errno = 0;
  return luaL_fileresult(L, std::fclose(p->f) == 0, nullptr);
}

// Pushes an io file for `path` (checked) opened with `mode`; or, when the open fails as
// io.open's would (no such file, permission), nil, the message and errno. Raises for a
// path the sandbox refuses and for a file that is not regular. Returns whether it opened.
bool open_checked(lua_State* L, const char* path, const char* mode) {
  const int flags = open_flags(L, mode);
  const bool write = (flags & (O_WRONLY | O_RDWR)) != 0;
  const std::string p = checked(L, path, write);
  auto* stream = static_cast<luaL_Stream*>(lua_newuserdatauv(L, sizeof(luaL_Stream), 0));
  stream->f = nullptr;
  stream->closef = nullptr;  // a closed file until it is open
  luaL_setmetatable(L, LUA_FILEHANDLE);
  const int fd = ::open(p.c_str(), flags, 0666);
  if (fd < 0) {
    const int err = errno;
    lua_pop(L, 1);
    errno = err;
    luaL_fileresult(L, 0, path);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    luaL_error(L, "'%s' is not a regular file: a sandboxed script opens only regular files", path);
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  stream->f = ::fdopen(fd, mode);
  if (stream->f == nullptr) {
    const int err = errno;
    ::close(fd);
    lua_pop(L, 1);
    errno = err;
    luaL_fileresult(L, 0, path);
    return false;
  }
  stream->closef = close_stream;
  return true;
}

// io.open(path [, mode]) under the sandbox's folders.
int sb_io_open(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  const char* mode = luaL_optstring(L, 2, "r");
  return open_checked(L, path, mode) ? 1 : 3;
}

// io.lines(path, ...): the file's lines, closed when the loop ends (the fourth value is
// the generic for's to-be-closed variable, as with Lua's io.lines). io.lines() reads
// standard input, as Lua's.
int sb_io_lines(lua_State* L) {
  if (lua_isnoneornil(L, 1)) {
    const int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
  }
  const char* path = luaL_checkstring(L, 1);
  if (!open_checked(L, path, "r")) {  // as Lua's io.lines: an error, not nil
    lua_pop(L, 1);
    return lua_error(L);
  }
  lua_replace(L, 1);  // the file
  const int n = lua_gettop(L);
  luaL_getmetafield(L, 1, "__index");
  lua_getfield(L, -1, "lines");
  lua_remove(L, -2);
  for (int i = 1; i <= n; ++i) lua_pushvalue(L, i);
  lua_call(L, n, 1);  // file:lines(...)
  lua_pushnil(L);
  lua_pushnil(L);
  lua_pushvalue(L, 1);
  return 4;
}

// Loads a Lua text file through open_checked, as luaL_loadfilex does (a first line starting
// with # is skipped). Returns the status of the load, with the chunk or the message pushed.
int load_checked(lua_State* L, const char* path) {
  if (!open_checked(L, path, "r")) {
    lua_pop(L, 1);  // errno
    lua_pushfstring(L, "cannot open %s", lua_tostring(L, -1));
    lua_replace(L, -3);
    lua_pop(L, 1);
    return LUA_ERRFILE;
  }
  auto* stream = static_cast<luaL_Stream*>(lua_touserdata(L, -1));
  FILE* f = stream->f;
  luaL_Buffer b;
  luaL_buffinit(L, &b);  // counted by the Lua allocator, so under the memory limit
  char chunk[4096];
  size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) luaL_addlstring(&b, chunk, n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  stream->closef = nullptr;  // closed now, not when collected
  luaL_pushresult(&b);
  if (failed) {
    lua_pop(L, 1);
    lua_pushfstring(L, "cannot read %s", path);
    lua_replace(L, -2);
    return LUA_ERRFILE;
  }
  size_t len = 0;
  const char* text = lua_tolstring(L, -1, &len);
  std::string body(text, len);
  if (!body.empty() && body[0] == '#') body.insert(0, "--");  // keeps the line numbers
  const std::string name = std::string("@") + path;
  const int status = luaL_loadbufferx(L, body.data(), body.size(), name.c_str(), "t");
  // Leave only the chunk (or the message): drop the file and its text.
  lua_replace(L, -3);
  lua_pop(L, 1);
  return status;
}

// load(chunk [, name [, mode [, env]]]) with text chunks only: precompiled bytecode can
// crash the VM, so a sandbox refuses it.
int sb_load(lua_State* L) {
  lua_settop(L, 4);
  if (lua_type(L, 1) == LUA_TSTRING && lua_rawlen(L, 1) > 0 && lua_tostring(L, 1)[0] == '\x1b')
    return luaL_error(L, "load: binary chunks are not allowed in a sandboxed script");
  const char* mode = luaL_optstring(L, 3, "t");
  if (std::strchr(mode, 'b') != nullptr)
    return luaL_error(L, "load: binary chunks are not allowed in a sandboxed script");
  lua_pushstring(L, "t");
  lua_replace(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 4, LUA_MULTRET);
  return lua_gettop(L);
}

// loadfile(path [, mode [, env]]): text only.
int sb_loadfile(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  const char* mode = luaL_optstring(L, 2, "t");
  if (std::strchr(mode, 'b') != nullptr)
    return luaL_error(L, "loadfile: binary chunks are not allowed in a sandboxed script");
  const bool has_env = !lua_isnone(L, 3);
  if (load_checked(L, path) != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  if (has_env) {
    lua_pushvalue(L, 3);
    if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);
  }
  return 1;
}

int sb_dofile(lua_State* L) {
  const char* path = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  if (load_checked(L, path) != LUA_OK) return lua_error(L);
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L) - 1;
}

// require(name): package.loaded, package.preload, else NAME.lua (dots as folders) under the
// sandbox's folder. No C modules, no search path the script can point elsewhere.
int sb_require(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_getglobal(L, "package");
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, "loaded");
    if (lua_istable(L, -1) && lua_getfield(L, -1, name) != LUA_TNIL) return 1;
    lua_pop(L, 2);
    lua_getfield(L, -1, "preload");
    if (lua_istable(L, -1) && lua_getfield(L, -1, name) == LUA_TFUNCTION) {
      lua_pushstring(L, name);
      lua_call(L, 1, 1);
      return 1;
    }
    lua_pop(L, 2);
  }
  std::string rel = name;
  for (char& c : rel)
    if (c == '.') c = '/';
  const fs::path root = opts(L).root.empty() ? fs::current_path() : fs::path(opts(L).root);
  const std::string file = (root / (rel + ".lua")).string();
  const std::string p = checked(L, file.c_str(), false);
  std::error_code ec;
  if (!fs::exists(p, ec))
    return luaL_error(
        L, "module '%s' not found: a sandboxed script loads modules only from its folder (no %s)",
        name, p.c_str());
  if (load_checked(L, file.c_str()) != LUA_OK) return lua_error(L);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  if (lua_istable(L, 2)) {  // package: remember it
    lua_getfield(L, 2, "loaded");
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, name);
    lua_pop(L, 1);
  }
  return 1;
}

// Replaces t[name] with a function that refuses, naming what it refused.
void refuse_field(lua_State* L, const char* table, const char* name) {
  lua_getglobal(L, table);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushfstring(L, "%s.%s", table, name);
  lua_pushcclosure(L, refuse, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

void wrap_field(lua_State* L, const char* table, const char* name, lua_CFunction f) {
  lua_getglobal(L, table);
  lua_getfield(L, -1, name);
  lua_pushcclosure(L, f, 1);
  lua_setfield(L, -2, name);
  lua_pop(L, 1);
}

int traceback(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  if (msg == nullptr) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) return 1;
    msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  luaL_traceback(L, L, msg, 1);
  return 1;
}

}  // namespace

Result<std::string> resolve_links(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  if (ec) return make_error("cannot resolve '" + path + "': " + ec.message());
  std::vector<std::string> todo;  // the parts still to walk, the next one last
  auto push = [&todo](const fs::path& p) {
    std::vector<std::string> parts;
    for (const fs::path& c : p.relative_path()) parts.push_back(c.string());
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push(abs);
  fs::path cur = "/";
  int links = 0;
  while (!todo.empty()) {
    const std::string c = std::move(todo.back());
    todo.pop_back();
    if (c.empty() || c == ".") continue;
    if (c == "..") {  // `cur` has no links left, so its parent is the real one
      cur = cur.parent_path();
      continue;
    }
    fs::path next = cur / c;
    struct stat st {};
    if (::lstat(next.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      if (++links > 40) return make_error("'" + path + "': too many levels of symbolic links");
      char buf[PATH_MAX];
      const ssize_t n = ::readlink(next.c_str(), buf, sizeof buf);
      if (n < 0 || n == static_cast<ssize_t>(sizeof buf))
        return make_error("cannot resolve '" + path + "': cannot read the link " + next.string());
      const fs::path target(std::string(buf, static_cast<size_t>(n)));
      if (target.is_absolute()) cur = "/";
      push(target);
      continue;
    }
    cur = std::move(next);
  }
  return cur.string();
}

Result<std::string> sandbox_path(const ScriptOptions& o, const std::string& path, bool write) {
  // Checked where it really is, links (dangling ones too) followed: a link in the folder
  // that points out of it is outside.
  auto resolved = resolve_links(path);
  if (!resolved) return resolved.error();
  if (!o.sandbox) return *resolved;
  const fs::path p = *resolved;
  auto under = [&](const std::string& root) {
    auto r = resolve_links(root.empty() ? fs::current_path().string() : root);
    if (!r) return false;
    const fs::path rp = *r;
    auto [a, b] = std::mismatch(rp.begin(), rp.end(), p.begin(), p.end());
    (void)b;
    return a == rp.end();
  };
  const std::string root = o.root.empty() ? fs::current_path().string() : o.root;
  if (under(root)) return p.string();
  if (!write)
    for (const std::string& r : o.read_only_roots)
      if (under(r)) return p.string();
  return make_error("'" + path + "' is outside the script's folder " + root +
                    (write ? "" : " (and the dataset folders)") + ": a sandboxed script may " +
                    (write ? "write" : "read") + " only there");
}

LuaHost::LuaHost(Backend& backend, ScriptOptions options)
    : options_(std::move(options)), rt_(std::make_unique<Runtime>(backend)) {
  if (options_.memory_limit == 0 && options_.sandbox) options_.memory_limit = int64_t{1} << 30;
  rt_->memory_limit = options_.memory_limit;
  rt_->time_limit_s = options_.time_limit_s;
  L_ = lua_newstate(capped_alloc, rt_.get());
  MLS_CHECK(L_ != nullptr, "lua_newstate failed");
  lua_atpanic(L_, at_panic);
  rt_->db_path = options_.db_path;
  rt_->resume_run = options_.resume_run;
  if (options_.sandbox) {
    rt_->check_path = [this](const std::string& p, bool write) {
      return sandbox_path(options_, p, write);
    };
  }
  auto* h = static_cast<HostData*>(lua_newuserdatauv(L_, sizeof(HostData), 0));
  new (h) HostData{&options_, rt_.get()};
  lua_rawsetp(L_, LUA_REGISTRYINDEX, &kHostKey);
  open_libs();
  if (options_.sandbox) install_sandbox();
  // Generational collection suits scripts that make many short-lived tensors: measured on a
  // loop of tiny ops, it keeps memory flat at a fraction of the incremental mode's cost.
  lua_gc(L_, LUA_GCGEN, 0, 0);
}

LuaHost::~LuaHost() {
  lua_close(L_);  // collects every tensor while the runtime still exists
  rt_->end_run("finished");
}

void LuaHost::open_libs() {
  lua_State* L = L_;
  const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},          {LUA_LOADLIBNAME, luaopen_package},
                           {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
                           {LUA_IOLIBNAME, luaopen_io},        {LUA_OSLIBNAME, luaopen_os},
                           {LUA_STRLIBNAME, luaopen_string},   {LUA_MATHLIBNAME, luaopen_math},
                           {LUA_UTF8LIBNAME, luaopen_utf8},    {LUA_DBLIBNAME, luaopen_debug}};
  for (const luaL_Reg& l : libs) {
    if (options_.sandbox && l.func == luaopen_debug)
      continue;  // debug.sethook would lift the limits
    luaL_requiref(L, l.name, l.func, 1);
    lua_pop(L, 1);
  }
  // The tensor metatable, registered so other files find it by name.
  lua_pushlightuserdata(L, rt_.get());
  luaL_newmetatable(L, "mls.Tensor");
  lua_pushcclosure(L, open_mls, 2);
  lua_call(L, 0, 1);
  lua_pushvalue(L, -1);
  lua_setglobal(L, "mls");
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, "mls");
  lua_pop(L, 2);
  open_checked_patterns(L, check_limits);
  // Coroutines under the same limits as the main thread (see co_create).
  lua_getglobal(L, LUA_COLIBNAME);
  lua_pushcfunction(L, co_create);
  lua_setfield(L, -2, "create");
  lua_getfield(L, -1, "resume");
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, co_resume, 1);
  lua_setfield(L, -3, "resume");
  lua_pushcclosure(L, co_wrap, 1);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
  install_hook(L);
  open_help(L);
}

void LuaHost::install_sandbox() {
  lua_State* L = L_;
  for (const char* f : {"execute", "exit", "remove", "rename", "tmpname", "getenv", "setlocale"})
    refuse_field(L, "os", f);
  for (const char* f : {"popen", "tmpfile", "input", "output"}) refuse_field(L, "io", f);
  wrap_field(L, "io", "open", sb_io_open);
  wrap_field(L, "io", "lines", sb_io_lines);
  wrap_field(L, LUA_GNAME, "load", sb_load);
  lua_pushcfunction(L, sb_loadfile);
  lua_setglobal(L, "loadfile");
  lua_pushcfunction(L, sb_dofile);
  lua_setglobal(L, "dofile");
  lua_pushcfunction(L, sb_require);
  lua_setglobal(L, "require");
  // package: no loadlib, no C search path, no searchers to redirect.
  lua_getglobal(L, "package");
  // searchpath fopen()s any path it is given: it would tell which files exist anywhere
  // and block on a FIFO.
  for (const char* f : {"loadlib", "searchpath"}) {
    lua_pushfstring(L, "package.%s", f);
    lua_pushcclosure(L, refuse, 1);
    lua_setfield(L, -2, f);
  }
  lua_pushstring(L, "");
  lua_setfield(L, -2, "cpath");
  lua_pushnil(L);
  lua_setfield(L, -2, "searchers");
  lua_pop(L, 1);
  // string.dump makes bytecode, which load refuses anyway; leave it.
}

void LuaHost::set_interrupt(const std::atomic<bool>* flag) {
  rt_->cancel = flag;
  install_hook(L_);
}

Result<void> LuaHost::call(int nargs, int nresults) {
  HostData& h = host_data(L_);
  h.instructions = 0;
  rt_->stop.clear();
  rt_->deadline = options_.time_limit_s > 0
                      ? std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(options_.time_limit_s))
                      : std::chrono::steady_clock::time_point::max();
  if (h.tripped) {
    h.tripped = false;
    install_hook(L_);
  }
  const int base = lua_gettop(L_) - nargs;
  lua_pushcfunction(L_, traceback);
  lua_insert(L_, base);
  const int status = lua_pcall(L_, nargs, nresults, base);
  lua_remove(L_, base);
  if (h.tripped) {
    h.tripped = false;
    install_hook(L_);
  }
  const std::string stop = std::move(rt_->stop);
  rt_->stop.clear();
  rt_->deadline = std::chrono::steady_clock::time_point::max();
  if (status != LUA_OK) {
    std::string msg = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "(error)";
    lua_pop(L_, 1);
    // A limit reached where Lua could only say "not enough memory" (or where a script's
    // handler replaced the message): the limit's own words.
    if (!stop.empty() && msg.find(stop) == std::string::npos) msg = stop + "\n" + msg;
    rt_->end_run("failed");
    return make_error(msg);
  }
  return {};
}

Result<void> LuaHost::run_file(const std::string& path, const std::vector<std::string>& args) {
  rt_->script_path = path;
  lua_createtable(L_, static_cast<int>(args.size()), 1);
  lua_pushstring(L_, path.c_str());
  lua_seti(L_, -2, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    lua_pushstring(L_, args[i].c_str());
    lua_seti(L_, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setglobal(L_, "arg");
  if (luaL_loadfilex(L_, path.c_str(), options_.sandbox ? "t" : "bt") != LUA_OK) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    return make_error(msg);
  }
  for (const std::string& a : args) lua_pushstring(L_, a.c_str());
  auto r = call(static_cast<int>(args.size()), 0);
  if (r) rt_->end_run("finished");
  return r;
}

Result<void> LuaHost::run_string(const std::string& code, const std::string& chunkname) {
  if (luaL_loadbufferx(L_, code.data(), code.size(), chunkname.c_str(), "t") != LUA_OK) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    return make_error(msg);
  }
  return call(0, 0);
}

LuaHost::Status LuaHost::eval(const std::string& code, std::string* out) {
  out->clear();
  const int top = lua_gettop(L_);
  // As lua.c: first as an expression ("return " .. line), then as a statement.
  const std::string ret = "return " + code + ";";
  if (luaL_loadbufferx(L_, ret.data(), ret.size(), "=stdin", "t") != LUA_OK) {
    lua_pop(L_, 1);
    if (luaL_loadbufferx(L_, code.data(), code.size(), "=stdin", "t") != LUA_OK) {
      size_t len = 0;
      const char* msg = lua_tolstring(L_, -1, &len);
      const bool incomplete = len >= 5 && std::strcmp(msg + len - 5, "<eof>") == 0;
      *out = msg;
      lua_settop(L_, top);
      return incomplete ? Status::Incomplete : Status::Error;
    }
  }
  auto r = call(0, LUA_MULTRET);
  if (!r) {
    *out = r.error().message;
    lua_settop(L_, top);
    return Status::Error;
  }
  // Tables as trees, functions of mls by name (pretty.h), the rest as tostring shows them.
  for (int i = top + 1; i <= lua_gettop(L_); ++i) {
    if (i > top + 1) *out += "\t";
    *out += describe_value(L_, i);
  }
  lua_settop(L_, top);
  return Status::Ok;
}

std::vector<std::string> LuaHost::completions(const std::string& prefix) {
  std::vector<std::string> out;
  // Split "a.b.c:pre" into the table path and the last part.
  const size_t cut = prefix.find_last_of(".:");
  const std::string head = cut == std::string::npos ? "" : prefix.substr(0, cut + 1);
  const std::string last = cut == std::string::npos ? prefix : prefix.substr(cut + 1);
  const int top = lua_gettop(L_);
  lua_pushglobaltable(L_);
  size_t start = 0;
  while (start < head.size()) {
    const size_t dot = head.find_first_of(".:", start);
    const std::string part = head.substr(start, dot - start);
    if (lua_type(L_, -1) == LUA_TTABLE) {
      lua_getfield(L_, -1, part.c_str());
    } else if (lua_getmetatable(L_, -1)) {  // userdata: its metatable holds the methods
      lua_getfield(L_, -1, part.c_str());
      lua_remove(L_, -2);
    } else {
      lua_pushnil(L_);
    }
    lua_remove(L_, -2);
    start = dot + 1;
  }
  // Candidates: a table's keys, plus the methods its metatable's __index table offers.
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      if (!lua_getmetatable(L_, -1)) break;
      if (lua_type(L_, -1) == LUA_TTABLE && lua_getfield(L_, -1, "__index") == LUA_TTABLE) {
        lua_remove(L_, -2);
      } else if (lua_type(L_, -1) == LUA_TTABLE) {
        lua_pop(L_, 1);  // __index is a function: the metatable itself holds the methods (tensors)
      }
    }
    if (lua_type(L_, -1) != LUA_TTABLE) break;
    lua_pushnil(L_);
    while (lua_next(L_, -2) != 0) {
      if (lua_type(L_, -2) == LUA_TSTRING) {
        const std::string k = lua_tostring(L_, -2);
        if (k.compare(0, last.size(), last) == 0 && k.compare(0, 2, "__") != 0 && k[0] != '_')
          out.push_back(head + k);
      }
      lua_pop(L_, 1);
    }
  }
  lua_settop(L_, top);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int error_line(const std::string& message, const std::string& name) {
  const std::string tag = name + ":";
  for (size_t at = message.find(tag); at != std::string::npos; at = message.find(tag, at + 1)) {
    size_t p = at + tag.size();
    int line = 0;
    bool digits = false;
    while (p < message.size() && message[p] >= '0' && message[p] <= '9') {
      line = line * 10 + (message[p++] - '0');
      digits = true;
    }
    if (digits && p < message.size() && message[p] == ':') return line;
  }
  return 0;
}

}  // namespace mls::lua
