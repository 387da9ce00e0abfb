#include "scripting/bindings.h"

#include <new>
#include <stdexcept>

namespace mls::lua {

namespace {

// Every binding runs inside this: a C++ exception (std::length_error from a negative size,
// bad_alloc, ...) becomes a Lua error with its message at the caller's line. Without it, Lua
// (built as C++) catches it as an error without a message. Lua's own errors are not
// std::exceptions, so they pass through untouched.
int guarded(lua_State* L) {
  const auto f = reinterpret_cast<lua_CFunction>(lua_touserdata(L, lua_upvalueindex(3)));
  std::string msg;
  try {
    return f(L);
  } catch (const std::bad_alloc&) {
    msg = "out of memory";
  } catch (const std::exception& e) {
    msg = e.what();
  }
  return luaL_error(L, "%s", msg.c_str());
}

void push_binding(lua_State* L, lua_CFunction f) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushlightuserdata(L, reinterpret_cast<void*>(f));
  lua_pushcclosure(L, guarded, 3);
}

}  // namespace

void set_funcs(lua_State* L, const luaL_Reg* funcs) {
  for (; funcs->name; ++funcs) {
    push_binding(L, funcs->func);
    lua_setfield(L, -2, funcs->name);
  }
}

void protect_metatable(lua_State* L) {
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

void check_shape_size(lua_State* L, const std::vector<int64_t>& dims, bool allow_infer) {
  // 2^34 elements (64 GiB of f32): past any real tensor, and far from int64 overflow in
  // byte counts. The product leaves zeros out: strides multiply the other sizes, so
  // {0, 2^31, 3^31} would overflow them though it holds nothing.
  constexpr int64_t kMax = int64_t{1} << 34;
  int64_t n = 1;
  int infer = 0;
  for (int64_t d : dims) {
    if (d == -1 && allow_infer && infer++ == 0) continue;
    if (d < 0)
      luaL_error(L, "shape %s: sizes must be >= 0%s", shape_text(dims).c_str(),
                 allow_infer ? " (or one -1)" : "");
    if (d == 0) continue;
    if (n > kMax / d)
      luaL_error(L, "shape %s: too large (the product of its sizes must be at most 2^34)",
                 shape_text(dims).c_str());
    n *= d;
  }
}

LuaTensor* to_tensor(lua_State* L, int idx) {
  void* p = lua_touserdata(L, idx);
  if (p == nullptr || !lua_getmetatable(L, idx)) return nullptr;
  const bool ok = lua_rawequal(L, -1, lua_upvalueindex(2));
  lua_pop(L, 1);
  return ok ? static_cast<LuaTensor*>(p) : nullptr;
}

LuaTensor* check_tensor(lua_State* L, int idx) {
  LuaTensor* t = to_tensor(L, idx);
  if (t == nullptr) luaL_typeerror(L, idx, "tensor");
  if (t->closed) luaL_argerror(L, idx, "the tensor was closed");
  return t;
}

bool named_tensors(lua_State* L, int model, const char* method, int anchor, const char* who,
                   std::vector<std::pair<std::string, LuaTensor*>>* out) {
  model = lua_absindex(L, model);
  anchor = lua_absindex(L, anchor);
  lua_getfield(L, model, method);
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return false;
  }
  lua_pushvalue(L, model);
  lua_call(L, 1, 1);
  if (!lua_istable(L, -1)) luaL_error(L, "%s: %s() must return a list of {name, tensor} pairs", who, method);
  const lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, -1, i);
    if (lua_istable(L, -1)) {
      lua_geti(L, -1, 1);
      lua_geti(L, -2, 2);
    } else {
      lua_pushnil(L);
      lua_pushnil(L);
    }
    LuaTensor* t = to_tensor(L, -1);
    if (lua_type(L, -2) != LUA_TSTRING || t == nullptr || t->closed || t->trace_id != 0)
      luaL_error(L, "%s: %s()[%d] is not a {name, tensor} pair (an open eager tensor)", who, method,
                 static_cast<int>(i));
    out->push_back({lua_tostring(L, -2), t});
    lua_pushvalue(L, -1);
    lua_seti(L, anchor, static_cast<lua_Integer>(luaL_len(L, anchor) + 1));
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
  return true;
}

LuaTensor* push_tensor(lua_State* L) {
  void* p = lua_newuserdatauv(L, sizeof(LuaTensor), 0);
  auto* t = new (p) LuaTensor();
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_setmetatable(L, -2);
  return t;
}

LuaTensor* push_value(lua_State* L, Tensor value) {
  LuaTensor* t = push_tensor(L);
  t->value = std::move(value);
  if (!runtime(L).charge(*t)) raise(L);
  // Lua sees a small userdata; tell its collector about the memory behind it, so that a
  // loop of large temporaries is collected as often as their size asks for.
  const size_t kb = t->value.defined() ? t->value.nbytes() >> 10 : 0;
  if (kb >= 64) lua_gc(L, LUA_GCSTEP, static_cast<int>(std::min<size_t>(kb, 1 << 20)));
  return t;
}

void push_traced(lua_State* L, uint32_t trace_id, Ref r) {
  void* p = lua_newuserdatauv(L, sizeof(LuaTensor), 0);
  auto* x = new (p) LuaTensor();
  x->trace_id = trace_id;
  x->ref = r;
  x->is_leaf = false;
  luaL_setmetatable(L, "mls.Tensor");
}

void register_class(lua_State* L, const char* name, const luaL_Reg* methods, lua_CFunction tostring,
                    lua_CFunction gc) {
  luaL_newmetatable(L, name);
  protect_metatable(L);
  lua_newtable(L);
  set_funcs(L, methods);
  lua_setfield(L, -2, "__index");
  const luaL_Reg meta[] = {{"__tostring", tostring}, {"__gc", gc}};
  for (const luaL_Reg& m : meta) {
    if (m.func == nullptr) continue;
    push_binding(L, m.func);
    lua_setfield(L, -2, m.name);
  }
  lua_pop(L, 1);
}

int traceback_handler(lua_State* L) {
  const char* msg = lua_tostring(L, 1);
  luaL_traceback(L, L, msg ? msg : "(error object)", 1);
  return 1;
}

int raise(lua_State* L) {
  return luaL_error(L, "%s", runtime(L).error.c_str());
}

int raise(lua_State* L, const std::string& message) {
  runtime(L).error = message;
  return raise(L);
}

namespace {

bool read_int(lua_State* L, int idx, int64_t* out) {
  int isnum = 0;
  lua_Integer v = lua_tointegerx(L, idx, &isnum);
  if (!isnum) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

}  // namespace

IntList check_ints(lua_State* L, int idx, const char* what) {
  IntList l;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    if (!read_int(L, idx, &l.v[0]))
      luaL_argerror(L, idx, (std::string(what) + ": an integer expected").c_str());
    l.n = 1;
    return l;
  }
  if (!lua_istable(L, idx))
    luaL_argerror(L, idx, (std::string(what) + ": a table of integers expected").c_str());
  const lua_Integer n = luaL_len(L, idx);
  if (n > 8) luaL_argerror(L, idx, (std::string(what) + ": at most 8 entries").c_str());
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, idx, i);
    int64_t v = 0;
    if (!read_int(L, -1, &v))
      luaL_argerror(
          L, idx,
          (std::string(what) + ": entry " + std::to_string(i) + " is not an integer").c_str());
    lua_pop(L, 1);
    l.v[static_cast<size_t>(l.n++)] = v;
  }
  return l;
}

void check_fits(lua_State* L, int64_t n, DType dt) {
  Runtime& rt = runtime(L);
  if (rt.fits(n * static_cast<int64_t>(dtype_size(dt)))) return;
  lua_gc(L, LUA_GCCOLLECT);  // tensors the script dropped give their bytes back
  if (rt.fits(n * static_cast<int64_t>(dtype_size(dt)))) return;
  rt.memory_exceeded();
  raise(L);
}

IntList check_shape(lua_State* L, int idx) {
  IntList l = check_ints(L, idx, "shape");
  check_shape_size(L, l.vec());
  return l;
}

bool opt_ints(lua_State* L, int idx, const char* what, IntList* out) {
  if (lua_isnoneornil(L, idx)) return false;
  *out = check_ints(L, idx, what);
  return true;
}

DType check_dtype(lua_State* L, int idx, DType def) {
  if (lua_isnoneornil(L, idx)) return def;
  const char* name = luaL_checkstring(L, idx);
  auto d = parse_dtype(name);
  if (!d) luaL_argerror(L, idx, "unknown dtype (f32, f16, bf16, i64, i32, u8, i8, bool)");
  return *d;
}

double opt_number(lua_State* L, int idx, const char* key, double def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  double v = def;
  if (!lua_isnil(L, -1)) {
    int isnum = 0;
    v = lua_tonumberx(L, -1, &isnum);
    if (!isnum) luaL_error(L, "option '%s' must be a number", key);
  }
  lua_pop(L, 1);
  return v;
}

int64_t opt_integer(lua_State* L, int idx, const char* key, int64_t def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  int64_t v = def;
  if (!lua_isnil(L, -1) && !read_int(L, -1, &v))
    luaL_error(L, "option '%s' must be an integer", key);
  lua_pop(L, 1);
  return v;
}

bool opt_bool(lua_State* L, int idx, const char* key, bool def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  bool v = lua_isnil(L, -1) ? def : lua_toboolean(L, -1) != 0;
  lua_pop(L, 1);
  return v;
}

std::string opt_string(lua_State* L, int idx, const char* key, const char* def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  std::string v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "option '%s' must be a string", key);
    v = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

bool find_target(Runtime& rt, LuaTensor* const* in, int n, Target* out) {
  uint32_t id = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t t = in[i]->trace_id;
    if (t == 0) continue;
    if (id != 0 && t != id) {
      rt.error = "an op mixes values of two different traced graphs";
      return false;
    }
    id = t;
  }
  if (id == 0) {
    out->e = &rt.session;
    out->trace = nullptr;
    rt.session.set_recording(rt.grad_enabled);
    return true;
  }
  Trace* tr = rt.find_trace(id);
  if (tr == nullptr) {
    rt.error =
        "this value belongs to a traced graph that has ended (use the graph's outputs, or trace "
        "again)";
    return false;
  }
  out->e = tr;
  out->trace = tr;
  return true;
}

Ref input_ref(Runtime& rt, const Target& t, LuaTensor& x) {
  if (t.trace == nullptr) return rt.eager_ref(x);
  if (x.trace_id == t.trace->id) return x.ref;
  return t.trace->capture(x);
}

bool take_error(Runtime& rt, const Target& t) {
  if (t.trace) {
    if (t.trace->error.empty()) return true;
    rt.error = t.trace->error;
    return false;
  }
  if (!rt.session.failed()) return true;
  rt.error = rt.session.error();
  rt.session.clear_error();
  return false;
}

void push_result(lua_State* L, Runtime& rt, const Target& t, Ref r) {
  LuaTensor* out = push_tensor(L);
  if (t.trace) {
    out->trace_id = t.trace->id;
    out->ref = r;
    out->is_leaf = false;
    return;
  }
  rt.adopt_output(*out, r);
  if (!rt.charge(*out)) {
    rt.forget(*out);
    raise(L);
  }
  const size_t kb = out->value.nbytes() >> 10;
  if (kb >= 64) lua_gc(L, LUA_GCSTEP, static_cast<int>(std::min<size_t>(kb, 1 << 20)));
}

}  // namespace mls::lua
