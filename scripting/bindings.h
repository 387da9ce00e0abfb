// Helpers shared by the binding files (tensor_lib.cpp, nn_lib.cpp, train_lib.cpp, ...).
//
// Every C function of the `mls` module is registered with two upvalues: the Runtime (light
// userdata) and the tensor metatable, so finding either costs no table lookup.
//
// Lua raises errors with longjmp, which skips C++ destructors. So a binding checks its
// arguments first (the luaL_check* calls, before it makes any C++ object), does its C++ work
// in a scope or a helper that returns, and only then raises: `return raise(L)` with the
// message left in Runtime::error.
//
//   int l_exp(lua_State* L) {
//     LuaTensor* x = check_tensor(L, 1);
//     return unary(L, x, [](Emitter& e, Ref a) { return exp(e, a); });
//   }
#pragma once

#include <lua.hpp>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "scripting/runtime.h"

namespace mls::lua {

inline Runtime& runtime(lua_State* L) {
  return *static_cast<Runtime*>(lua_touserdata(L, lua_upvalueindex(1)));
}

// Registers `funcs` into the table on the top of the stack with the two shared upvalues.
// Each runs guarded: a C++ exception it throws becomes a Lua error with the exception's
// message.
void set_funcs(lua_State* L, const luaL_Reg* funcs);

// Sets __metatable in the metatable on the top of the stack, so getmetatable() gives a
// script `false`, not the table (whose __gc it could call by hand) nor a way to change it.
// Every metatable of a userdata the mls module makes is protected so.
void protect_metatable(lua_State* L);

// C++ objects in userdata (datasets, optimizers, projects, graphs, traced functions). The
// userdata holds a pointer: Lua may finalise an object a script can still reach (a
// finaliser that runs later brings it back to life), so __gc deletes the object and clears
// the pointer, and check_object raises "the NAME was closed" for a cleared one instead of
// touching freed memory.
template <typename T>
T* push_object(lua_State* L, const char* meta, std::unique_ptr<T> obj, int user_values = 0) {
  auto** slot = static_cast<T**>(lua_newuserdatauv(L, sizeof(T*), user_values));
  *slot = nullptr;
  luaL_setmetatable(L, meta);
  *slot = obj.release();
  return *slot;
}
template <typename T>
T* check_object(lua_State* L, int idx, const char* meta, const char* name) {
  T* p = *static_cast<T**>(luaL_checkudata(L, idx, meta));
  if (p == nullptr) luaL_error(L, "the %s was closed (collected as garbage)", name);
  return p;
}
// The object at `idx`, or null for anything else or a closed one.
template <typename T>
T* test_object(lua_State* L, int idx, const char* meta) {
  auto** slot = static_cast<T**>(luaL_testudata(L, idx, meta));
  return slot ? *slot : nullptr;
}
// Deletes the object once; null when there was none (already closed).
template <typename T>
std::unique_ptr<T> take_object(lua_State* L, int idx, const char* meta) {
  auto** slot = static_cast<T**>(luaL_testudata(L, idx, meta));
  if (slot == nullptr) return nullptr;
  std::unique_ptr<T> p(*slot);
  *slot = nullptr;
  return p;
}

// "{2, 3}"; raises "shape {..}: ..." when a size is negative (one -1 allowed when
// `allow_infer`) or the element count would pass 2^34 (the product is checked, so it never
// wraps).
std::string shape_text(const std::vector<int64_t>& dims);
void check_shape_size(lua_State* L, const std::vector<int64_t>& dims, bool allow_infer = false);
// Raises the memory limit's message when a new tensor of `n` elements of `dt` would not fit
// (after a full collection), before anything is allocated.
void check_fits(lua_State* L, int64_t n, DType dt);

// The tensor at `idx`, or null when it is something else.
LuaTensor* to_tensor(lua_State* L, int idx);
// The tensor at `idx`; raises "bad argument #idx (tensor expected, got ...)" otherwise, and
// "the tensor was closed" for a closed one.
LuaTensor* check_tensor(lua_State* L, int idx);
// model:METHOD() (named_parameters, named_buffers) as {name, tensor} pairs of open eager
// tensors; raises "WHO: METHOD()[i] is not a {name, tensor} pair" otherwise. Each tensor is
// also put in the table at `anchor` (a stack index): the script's own lists may drop them
// while the caller runs the model, and the pointers in `out` must stay valid. False, with
// nothing left on the stack, when the model has no such method.
bool named_tensors(lua_State* L, int model, const char* method, int anchor, const char* who,
                   std::vector<std::pair<std::string, LuaTensor*>>* out);
// A new tensor userdata on the stack.
LuaTensor* push_tensor(lua_State* L);
// Pushes an eager tensor holding `value` (a leaf).
LuaTensor* push_value(lua_State* L, Tensor value);

// Pushes a symbolic value `r` of trace `trace_id` (a graph input, a traced argument).
void push_traced(lua_State* L, uint32_t trace_id, Ref r);
// The value of an eager tensor argument; raises for a traced one ("WHAT: a traced value has
// no data ...").
const Tensor& eager_value(lua_State* L, int idx, const char* what);
// Registers metatable `name` whose __index is a table of `methods`, with __tostring and
// __gc when given. Every function gets the two shared upvalues.
void register_class(lua_State* L, const char* name, const luaL_Reg* methods, lua_CFunction tostring,
                    lua_CFunction gc);

// Raises Runtime::error with the caller's file:line in front.
int raise(lua_State* L);
int raise(lua_State* L, const std::string& message);

// A shape or axis list given as a Lua table {2, 3} (or a bare integer): at most 8 entries.
struct IntList {
  int n = 0;
  std::array<int64_t, 8> v{};
  std::vector<int64_t> vec() const { return {v.begin(), v.begin() + n}; }
};
IntList check_ints(lua_State* L, int idx, const char* what);
// A shape argument (check_ints) whose sizes check_shape_size accepts.
IntList check_shape(lua_State* L, int idx);
// Optional: `def` when the argument is absent or nil.
bool opt_ints(lua_State* L, int idx, const char* what, IntList* out);
DType check_dtype(lua_State* L, int idx, DType def);

// Reads options from a table argument: opt_number(L, idx, "lr", 0.01).
double opt_number(lua_State* L, int idx, const char* key, double def);
int64_t opt_integer(lua_State* L, int idx, const char* key, int64_t def);
bool opt_bool(lua_State* L, int idx, const char* key, bool def);
std::string opt_string(lua_State* L, int idx, const char* key, const char* def);

// Where an op with these tensor inputs runs: the trace of any traced input, else the eager
// session. Returns false (message in Runtime::error) when inputs come from two traces or
// from a trace that has ended.
struct Target {
  Emitter* e = nullptr;
  Trace* trace = nullptr;
};
bool find_target(Runtime& rt, LuaTensor* const* in, int n, Target* out);
// The input's Ref on that target.
Ref input_ref(Runtime& rt, const Target& t, LuaTensor& x);
// After the builder ran: false (message in Runtime::error) when an op failed.
bool take_error(Runtime& rt, const Target& t);
// Pushes result `r` of target `t` as a new tensor.
void push_result(lua_State* L, Runtime& rt, const Target& t, Ref r);

// The most tensors one op takes (F.multi_head_attention: x, four weights, four biases).
inline constexpr int kMaxOpInputs = 12;

// Runs `build(Emitter&, const Ref* inputs) -> Ref` on the inputs' target and pushes the
// result: the one path of every tensor op, eager or traced.
template <typename F>
int emit_op(lua_State* L, LuaTensor* const* in, int n, F&& build) {
  if (n < 0 || n > kMaxOpInputs)
    return luaL_error(L, "internal: an op was given %d tensors (at most %d)", n, kMaxOpInputs);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    Target t;
    if (!find_target(rt, in, n, &t)) {
      ok = false;
    } else {
      if (!t.trace && rt.session.num_values() >= rt.reset_values) {
        rt.before_op();
        if (rt.want_collect()) {
          lua_gc(L, LUA_GCCOLLECT);
          rt.before_op();
        }
      }
      std::array<Ref, kMaxOpInputs> refs{};
      for (int i = 0; i < n; ++i) refs[static_cast<size_t>(i)] = input_ref(rt, t, *in[i]);
      Ref r = build(*t.e, refs.data());
      if (!take_error(rt, t))
        ok = false;
      else
        push_result(L, rt, t, r);
    }
  }
  return ok ? 1 : raise(L);
}

// lua_pcall's message handler for Lua code called back from C++ (a model's forward inside
// mls.train, a traced function): appends the traceback, so the user's line shows.
int traceback_handler(lua_State* L);

// Lua source of the library parts written in Lua (generated from scripting/lua/*.lua).
extern const char* const kNnLua;

}  // namespace mls::lua
