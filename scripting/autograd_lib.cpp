// Eager autograd from Lua: requires_grad, backward (into each leaf's .grad), detach,
// clone, no_grad. The tape is the runtime's eager session (scripting/runtime.h).
#include "engine/ops/layout.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

int l_requires_grad(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const bool on = lua_isnoneornil(L, 2) || lua_toboolean(L, 2);
  if (x->trace_id) return luaL_error(L, "requires_grad: set it on eager tensors, before tracing");
  if (!x->is_leaf && !on)
    return luaL_error(L, "requires_grad(false) on a computed tensor: use detach()");
  if (on && !dtype_is_float(x->value.dtype()))
    return luaL_error(
        L, "requires_grad: only floating-point tensors can require gradients (this one is %s)",
        std::string(dtype_name(x->value.dtype())).c_str());
  Runtime& rt = runtime(L);
  if (x->is_leaf && x->requires_grad != on) {
    rt.forget(*x);  // enters the session again with the new flag
    x->requires_grad = on;
  }
  lua_settop(L, 1);
  return 1;
}

int l_needs_grad(lua_State* L) {
  lua_pushboolean(L, check_tensor(L, 1)->requires_grad);
  return 1;
}

int l_detach(lua_State* L) {
  const Tensor& v = eager_value(L, 1, "detach");
  push_value(L, v);
  return 1;
}

int l_clone(lua_State* L) {
  const Tensor& v = eager_value(L, 1, "clone");
  push_value(L, v.contiguous(AllocTag::Activation));
  return 1;
}

// y:backward([grad] [, {retain_graph = true}]): gradients of y into every leaf's .grad
// (added to what is there, as PyTorch). Frees the recorded graph unless retain_graph.
int l_backward(lua_State* L) {
  LuaTensor* y = check_tensor(L, 1);
  LuaTensor* seed = to_tensor(L, 2);
  const int opts = seed ? 3 : 2;
  const bool retain = opt_bool(L, opts, "retain_graph", false);
  Runtime& rt = runtime(L);
  if (y->trace_id)
    return luaL_error(
        L, "backward: a traced value has no data; use mls.grad to differentiate a graph");
  if (!y->requires_grad)
    return luaL_error(
        L,
        "backward: the tensor does not require grad (no input of its ops called requires_grad(), "
        "or it was computed inside no_grad or before an earlier backward freed its graph)");
  if (!seed && y->value.numel() != 1)
    return luaL_error(
        L, "backward: the tensor has shape %s; backward without a gradient needs a single element",
        shape_str(y->value.shape()).c_str());
  if (y->gen != rt.gen)
    return luaL_error(L,
                      "backward: this tensor's graph was freed by an earlier backward (pass "
                      "{retain_graph=true} to keep it)");
  bool ok = true;
  {
    std::vector<LuaTensor*> leaves;
    Refs wrt;
    for (LuaTensor* t : rt.grad_leaves)
      if (t) {
        leaves.push_back(t);
        wrt.push_back(t->ref);
      }
    rt.session.set_recording(false);
    Refs g;
    if (seed) {
      // d/dx sum(y * seed) == the vector-Jacobian product with seed.
      rt.session.set_recording(true);
      Ref s = rt.eager_ref(*seed);
      Ref l = sum(rt.session, mul(rt.session, y->ref, s), {}, false);
      g = rt.session.grad(l, wrt);
    } else {
      g = rt.session.grad(y->ref, wrt);
    }
    rt.session.set_recording(false);
    for (size_t i = 0; ok && i < leaves.size(); ++i) {
      if (!g[i].valid()) continue;
      Tensor gv = rt.session.value(g[i]);
      if (leaves[i]->grad.defined()) {
        Ref prev = rt.session.leaf(leaves[i]->grad);
        gv = rt.session.value(add(rt.session, prev, g[i]));
      }
      leaves[i]->grad = gv.contiguous(AllocTag::Gradient);
    }
    if (rt.session.failed()) {
      rt.error = "backward: " + rt.session.error();
      ok = false;
    }
    if (!retain || !ok) rt.new_generation();
  }
  return ok ? 0 : raise(L);
}

int l_zero_grad(lua_State* L) {
  check_tensor(L, 1)->grad = Tensor();
  return 0;
}

// mls.no_grad(fn, ...): calls fn with gradient recording off; returns what fn returns.
int l_no_grad(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  Runtime& rt = runtime(L);
  const bool saved = rt.grad_enabled;
  rt.grad_enabled = false;
  const int nargs = lua_gettop(L) - 1;
  const int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
  rt.grad_enabled = saved;
  if (status != LUA_OK) return lua_error(L);  // the message (with its position) goes on
  return lua_gettop(L);
}

int l_is_grad_enabled(lua_State* L) {
  lua_pushboolean(L, runtime(L).grad_enabled);
  return 1;
}

const luaL_Reg kMethods[] = {{"requires_grad", l_requires_grad},
                             {"needs_grad", l_needs_grad},
                             {"detach", l_detach},
                             {"clone", l_clone},
                             {"backward", l_backward},
                             {"zero_grad", l_zero_grad},
                             {nullptr, nullptr}};
const luaL_Reg kAutogradFuncs[] = {
    {"no_grad", l_no_grad}, {"is_grad_enabled", l_is_grad_enabled}, {nullptr, nullptr}};

}  // namespace

void open_autograd_lib(lua_State* L) {
  set_funcs(L, kAutogradFuncs);
  lua_pushvalue(L, lua_upvalueindex(2));  // methods live in the tensor metatable
  set_funcs(L, kMethods);
  lua_pop(L, 1);
}

}  // namespace mls::lua
