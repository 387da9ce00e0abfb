// [SECTION] opening the mls module
// [SECTION] limits          instruction and time limits (a count hook)
// [SECTION] sandbox         io, os, load, require replaced by checked versions
// [SECTION] running         files, strings, REPL entries, completion
#include "scripting/lua_host.h"

#include <chrono>
#include <cstring>
#include <filesystem>

#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace fs = std::filesystem;

namespace {

// The host's per-state data, in the registry under this key.
struct HostData {
  ScriptOptions* options;
  Runtime* rt;
  int64_t instructions = 0;
  std::chrono::steady_clock::time_point start;
  bool tripped = false;
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
  open_graph_lib(L);
  open_train_lib(L);
  open_project_lib(L);
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

void limit_hook(lua_State* L, lua_Debug*) {
  HostData& h = host_data(L);
  h.instructions += h.tripped ? 1 : kHookEvery;
  const ScriptOptions& o = *h.options;
  const bool over_count = o.instruction_limit > 0 && h.instructions > o.instruction_limit;
  const bool over_time =
      o.time_limit_s > 0 &&
      std::chrono::duration<double>(std::chrono::steady_clock::now() - h.start).count() >
          o.time_limit_s;
  const bool cancelled = h.rt->cancelled();
  if (!over_count && !over_time && !cancelled) return;
  if (!h.tripped) {
    // From now on every instruction raises, so a script cannot swallow the error with pcall
    // and go on: the first instruction outside the pcall raises again.
    h.tripped = true;
    lua_sethook(L, limit_hook, LUA_MASKCOUNT, 1);
  }
  if (cancelled) luaL_error(L, "interrupted (stopped by the user)");
  if (over_count)
    luaL_error(L, "stopped: the script ran past its limit of %I instructions",
               static_cast<lua_Integer>(o.instruction_limit));
  luaL_error(L, "stopped: the script ran past its time limit of %f s", o.time_limit_s);
}

// The count hook runs while there is a limit or an interrupt flag to watch.
void install_hook(lua_State* L) {
  const HostData& h = host_data(L);
  const bool watch =
      h.options->instruction_limit > 0 || h.options->time_limit_s > 0 || h.rt->cancel;
  lua_sethook(L, watch ? limit_hook : nullptr, watch ? LUA_MASKCOUNT : 0, kHookEvery);
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

// io.open(path [, mode]) under the sandbox's folders.
int sb_io_open(lua_State* L) {
  const int base = lua_gettop(L);
  const char* path = luaL_checkstring(L, 1);
  const char* mode = luaL_optstring(L, 2, "r");
  const bool write = std::strpbrk(mode, "wa+") != nullptr;
  std::string p = checked(L, path, write);
  lua_pushvalue(L, lua_upvalueindex(1));  // the real io.open
  lua_pushstring(L, p.c_str());
  lua_pushstring(L, mode);
  lua_call(L, 2, LUA_MULTRET);
  return lua_gettop(L) - base;
}

int sb_io_lines(lua_State* L) {
  const int n = lua_gettop(L);
  if (n >= 1 && !lua_isnil(L, 1)) {
    std::string p = checked(L, luaL_checkstring(L, 1), false);
    lua_pushstring(L, p.c_str());
    lua_replace(L, 1);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

// load(chunk [, name [, mode [, env]]]) with text chunks only: precompiled bytecode can
// crash the VM, so a sandbox refuses it.
int sb_load(lua_State* L) {
  lua_settop(L, 4);
  if (lua_type(L, 1) == LUA_TSTRING && lua_rawlen(L, 1) > 0 && lua_tostring(L, 1)[0] == '\x1b')
    return luaL_error(L, "load: binary chunks are not allowed in a sandboxed script");
  if (!lua_isnil(L, 3) && std::strcmp(lua_tostring(L, 3), "t") != 0 &&
      std::strchr(lua_tostring(L, 3), 'b'))
    return luaL_error(L, "load: binary chunks are not allowed in a sandboxed script");
  lua_pushstring(L, "t");
  lua_replace(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 4, LUA_MULTRET);
  return lua_gettop(L);
}

int sb_loadfile(lua_State* L) {
  std::string p = checked(L, luaL_checkstring(L, 1), false);
  if (luaL_loadfilex(L, p.c_str(), "t") != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  return 1;
}

int sb_dofile(lua_State* L) {
  std::string p = checked(L, luaL_checkstring(L, 1), false);
  if (luaL_loadfilex(L, p.c_str(), "t") != LUA_OK) return lua_error(L);
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L) - 1;
}

// require(name): package.loaded, package.preload, else NAME.lua (dots as folders) under the
// sandbox's folder. No C modules, no search path the script can point elsewhere.
int sb_require(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
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
  std::string p = checked(L, (root / (rel + ".lua")).string().c_str(), false);
  if (!fs::exists(p))
    return luaL_error(
        L, "module '%s' not found: a sandboxed script loads modules only from its folder (no %s)",
        name, p.c_str());
  if (luaL_loadfilex(L, p.c_str(), "t") != LUA_OK) return lua_error(L);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  if (lua_istable(L, -3)) {  // package: remember it
    lua_getfield(L, -3, "loaded");
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

Result<std::string> sandbox_path(const ScriptOptions& o, const std::string& path, bool write) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return make_error("cannot resolve '" + path + "': " + ec.message());
  auto under = [&](const std::string& root) {
    const fs::path r =
        fs::weakly_canonical(fs::absolute(root.empty() ? fs::current_path() : fs::path(root)));
    auto [a, b] = std::mismatch(r.begin(), r.end(), p.begin(), p.end());
    return a == r.end();
  };
  const std::string root = o.root.empty() ? fs::current_path().string() : o.root;
  if (!o.sandbox || under(root)) return p.string();
  if (!write)
    for (const std::string& r : o.read_only_roots)
      if (under(r)) return p.string();
  return make_error("'" + path + "' is outside the script's folder " + root +
                    (write ? "" : " (and the dataset folders)") + ": a sandboxed script may " +
                    (write ? "write" : "read") + " only there");
}

LuaHost::LuaHost(Backend& backend, ScriptOptions options)
    : options_(std::move(options)), rt_(std::make_unique<Runtime>(backend)) {
  L_ = luaL_newstate();
  MLS_CHECK(L_ != nullptr, "luaL_newstate failed");
  rt_->db_path = options_.db_path;
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
  install_hook(L);
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
  lua_pushstring(L, "package.loadlib");
  lua_pushcclosure(L, refuse, 1);
  lua_setfield(L, -2, "loadlib");
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
  h.start = std::chrono::steady_clock::now();
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
  if (status != LUA_OK) {
    std::string msg = lua_tostring(L_, -1) ? lua_tostring(L_, -1) : "(error)";
    lua_pop(L_, 1);
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
  for (int i = top + 1; i <= lua_gettop(L_); ++i) {
    if (i > top + 1) *out += "\t";
    size_t len = 0;
    const char* s = luaL_tolstring(L_, i, &len);
    out->append(s, len);
    lua_pop(L_, 1);
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

}  // namespace mls::lua
