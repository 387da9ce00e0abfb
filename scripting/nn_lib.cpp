// mls.F: the layers as functions of tensors (the engine's builders: one rule per op, shared
// with the node graph's lowering), and mls.parameter / mls.buffer, which make the tensors a
// module owns. mls.nn (scripting/lua/nn.lua) builds its modules from these.
//
//   local w = mls.parameter({784, 256}, {init = "kaiming_uniform", fan_in = 784, fan_out = 256})
//   local y = mls.F.linear(x, w, b):relu()
//   local l = mls.F.cross_entropy(y, labels)
#include <cstring>

#include "engine/ops/conv.h"
#include "engine/ops/layers.h"
#include "engine/ops/nn.h"
#include "engine/train/init.h"
#include "engine/train/rng.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

// [SECTION] parameters

// mls.parameter(shape, {init = "kaiming_uniform", fan_in = .., fan_out = ..}): a leaf that
// requires grad, initialised now from the script's generator (mls.manual_seed). The scheme
// is kept, so a trained graph re-initialises it the way the node graph would.
int l_parameter(lua_State* L) {
  IntList s = check_shape(L, 1);
  const std::string scheme = opt_string(L, 2, "init", "kaiming_uniform");
  int64_t fan_in = opt_integer(L, 2, "fan_in", s.n >= 1 ? s.v[0] : 1);
  int64_t fan_out = opt_integer(L, 2, "fan_out", s.n >= 2 ? s.v[1] : 1);
  const bool trainable = opt_bool(L, 2, "requires_grad", true);
  check_fits(L, numel(Shape(s.vec())), DType::F32);
  Runtime& rt = runtime(L);
  bool ok = true;
  {
    ParamInit init{scheme, fan_in, fan_out};
    Tensor t = Tensor::empty(rt.backend, DType::F32, s.vec(), AllocTag::Parameter);
    if (auto r = initialise(t, init, mix_seed(rt.seed, rt.params_made++)); !r) {
      rt.error = "mls.parameter: " + r.error().message;
      ok = false;
    } else {
      LuaTensor* p = push_value(L, std::move(t));
      p->requires_grad = trainable;
      p->init = std::move(init);
    }
  }
  return ok ? 1 : raise(L);
}

// mls.buffer(shape, value): state a module keeps that is not trained (running statistics).
int l_buffer(lua_State* L) {
  IntList s = check_shape(L, 1);
  const double v = luaL_optnumber(L, 2, 0.0);
  check_fits(L, numel(Shape(s.vec())), DType::F32);
  Runtime& rt = runtime(L);
  Tensor t = Tensor::empty(rt.backend, DType::F32, s.vec(), AllocTag::Parameter);
  t.fill_from_host(std::vector<float>(static_cast<size_t>(t.numel()), static_cast<float>(v)));
  LuaTensor* p = push_value(L, std::move(t));
  p->init = {v == 0.0 ? "zeros" : "ones", s.n ? s.v[0] : 1, s.n ? s.v[0] : 1};
  return 1;
}

// mls.layer_params("conv2d", {n_in = 1, n_out = 8, kernel = 3 [, groups =, bias =, init =]}): the
// layer's parameters as engine/ops/layers.h declares them for the node types too, in order:
// {{name = "weight", shape = {8, 1, 3, 3}, init = "kaiming_uniform", fan_in = 9, fan_out = 72,
// trainable = true}, ...}. mls.nn's layers make their tensors from it.
int l_layer_params(lua_State* L) {
  const std::string layer = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  LayerConfig c;
  c.in = opt_integer(L, 2, "n_in", 0);
  c.out = opt_integer(L, 2, "n_out", 0);
  c.kernel = opt_integer(L, 2, "kernel", 1);
  c.groups = opt_integer(L, 2, "groups", 1);
  c.bias = opt_bool(L, 2, "bias", true);
  c.init = opt_string(L, 2, "init", "kaiming_uniform");
  bool ok = true;
  {
    auto ps = layer_params(layer, c);
    if (!ps) {
      runtime(L).error = "mls.layer_params: " + ps.error().message;
      ok = false;
    } else {
      lua_createtable(L, static_cast<int>(ps->size()), 0);
      for (size_t i = 0; i < ps->size(); ++i) {
        const LayerParam& p = (*ps)[i];
        lua_createtable(L, 0, 6);
        lua_pushstring(L, p.name.c_str());
        lua_setfield(L, -2, "name");
        lua_createtable(L, static_cast<int>(p.shape.size()), 0);
        for (size_t d = 0; d < p.shape.size(); ++d) {
          lua_pushinteger(L, p.shape[d]);
          lua_seti(L, -2, static_cast<lua_Integer>(d + 1));
        }
        lua_setfield(L, -2, "shape");
        lua_pushstring(L, p.init.scheme.c_str());
        lua_setfield(L, -2, "init");
        lua_pushinteger(L, p.init.fan_in);
        lua_setfield(L, -2, "fan_in");
        lua_pushinteger(L, p.init.fan_out);
        lua_setfield(L, -2, "fan_out");
        lua_pushboolean(L, p.trainable);
        lua_setfield(L, -2, "trainable");
        lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
      }
    }
  }
  return ok ? 1 : raise(L);
}

// [SECTION] layers

LuaTensor* opt_tensor(lua_State* L, int idx) {
  return lua_isnoneornil(L, idx) ? nullptr : check_tensor(L, idx);
}

Pair2 pair_opt(lua_State* L, int idx, const char* key, Pair2 def) {
  if (!lua_istable(L, idx)) return def;
  lua_getfield(L, idx, key);
  Pair2 out = def;
  if (lua_isinteger(L, -1)) {
    out = {lua_tointeger(L, -1), lua_tointeger(L, -1)};
  } else if (lua_istable(L, -1)) {
    IntList l = check_ints(L, lua_gettop(L), key);
    if (l.n != 2) luaL_error(L, "option '%s' takes one integer or two", key);
    out = {l.v[0], l.v[1]};
  } else if (!lua_isnil(L, -1)) {
    luaL_error(L, "option '%s' takes one integer or two", key);
  }
  lua_pop(L, 1);
  return out;
}

// F.linear(x, w [, b]): x w + b, w [in, out].
int l_linear(lua_State* L) {
  LuaTensor* in[3] = {check_tensor(L, 1), check_tensor(L, 2), opt_tensor(L, 3)};
  const int n = in[2] ? 3 : 2;
  return emit_op(L, in, n, [&](Emitter& e, const Ref* r) {
    return linear(e, r[0], r[1], n == 3 ? r[2] : Ref{});
  });
}

// F.conv2d(x, w [, b] [, {stride=, padding=, dilation=, groups=}]); b [O] is broadcast.
int l_conv2d(lua_State* L) {
  LuaTensor* in[3] = {check_tensor(L, 1), check_tensor(L, 2), to_tensor(L, 3)};
  const int opts = in[2] ? 4 : 3;
  if (in[2]) check_tensor(L, 3);
  Conv2dParams p;
  p.stride = pair_opt(L, opts, "stride", {1, 1});
  p.padding = pair_opt(L, opts, "padding", {0, 0});
  p.dilation = pair_opt(L, opts, "dilation", {1, 1});
  p.groups = opt_integer(L, opts, "groups", 1);
  const int n = in[2] ? 3 : 2;
  return emit_op(L, in, n, [&](Emitter& e, const Ref* r) {
    Ref y = conv2d(e, r[0], r[1], p);
    if (n == 3) {
      const int64_t o = e.shape_of(r[2]).empty() ? 1 : e.shape_of(r[2])[0];
      y = add(e, y, reshape(e, r[2], {o, 1, 1}));
    }
    return y;
  });
}

template <bool Avg>
int pool(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  Pool2dParams p;
  if (lua_istable(L, 2)) {
    p.kernel = pair_opt(L, 2, "kernel", {2, 2});
    p.stride = pair_opt(L, 2, "stride", {0, 0});
    p.padding = pair_opt(L, 2, "padding", {0, 0});
  } else {
    const int64_t k = luaL_optinteger(L, 2, 2);
    const int64_t s = luaL_optinteger(L, 3, k);
    const int64_t pad = luaL_optinteger(L, 4, 0);
    p.kernel = {k, k};
    p.stride = {s, s};
    p.padding = {pad, pad};
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) {
    return Avg ? avg_pool2d(e, r[0], p) : max_pool2d(e, r[0], p);
  });
}

int l_global_avg_pool(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  return emit_op(L, &x, 1, [](Emitter& e, const Ref* r) { return global_avg_pool(e, r[0]); });
}

// F.batch_norm(x, gamma, beta, running_mean, running_var, training [, momentum, eps]).
// Training normalises with the batch's statistics and moves the running ones towards them
// (in place, the variance unbiased, as PyTorch); evaluation uses the running ones.
int l_batch_norm(lua_State* L) {
  LuaTensor* in[5] = {check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3),
                      check_tensor(L, 4), check_tensor(L, 5)};
  const bool training = lua_toboolean(L, 6) != 0;
  const double momentum = luaL_optnumber(L, 7, 0.1), eps = luaL_optnumber(L, 8, kNormEps);
  return emit_op(L, in, 5, [&](Emitter& e, const Ref* r) {
    if (!training) return batch_norm_eval(e, r[0], r[1], r[2], r[3], r[4], eps);
    BatchNormOut bn = batch_norm_train(e, r[0], r[1], r[2], eps);
    ema_update(e, r[3], bn.mean, momentum);
    ema_update(e, r[4], scale(e, bn.var, batch_norm_unbiased_factor(e.shape_of(r[0]))), momentum);
    return bn.y;
  });
}

int l_layer_norm(lua_State* L) {
  LuaTensor* in[3] = {check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3)};
  const double eps = luaL_optnumber(L, 4, kNormEps);
  return emit_op(L, in, 3,
                 [&](Emitter& e, const Ref* r) { return layer_norm(e, r[0], r[1], r[2], eps); });
}

// F.dropout(x, p, training): a new mask per call (eager) or per training step (traced).
int l_dropout(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const double p = luaL_optnumber(L, 2, 0.5);
  const bool training = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3) != 0;
  if (!(p >= 0.0 && p < 1.0)) return luaL_argerror(L, 2, "p must be in [0, 1)");
  Runtime& rt = runtime(L);
  const uint64_t layer_seed = rt.rng.next() >> 1;
  if (!training || p == 0.0) {
    lua_settop(L, 1);
    return 1;
  }
  if (x->trace_id == 0) {
    // Eager: the step seed is a fresh number each call.
    Tensor s = Tensor::from_i64(rt.backend, {1}, {static_cast<int64_t>(rt.rng.next() >> 1)});
    LuaTensor* seed = push_value(L, std::move(s));
    LuaTensor* in[2] = {x, seed};
    return emit_op(L, in, 2, [&](Emitter& e, const Ref* r) {
      return dropout(e, r[0], p, layer_seed, r[1], true);
    });
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) {
    Trace& t = static_cast<Trace&>(e);
    if (!t.owns_graph()) {
      t.error =
          "dropout: a function traced by mls.jit or mls.grad cannot draw dropout masks (call it "
          "eagerly)";
      return r[0];
    }
    if (!t.step_seed.valid()) t.step_seed = t.graph().add_input("step_seed", {DType::I64, {1}});
    // The layer seed comes from the trace's own count, so every build of a model (each
    // batch size, training or evaluation) gives each dropout layer the same seed.
    return dropout(e, r[0], p, 0x5EED0000ull + t.graph().nodes().size(), t.step_seed, true);
  });
}

int l_embedding(lua_State* L) {
  LuaTensor* in[2] = {check_tensor(L, 1), check_tensor(L, 2)};
  return emit_op(L, in, 2, [](Emitter& e, const Ref* r) { return embedding(e, r[0], r[1]); });
}

// [SECTION] losses

int l_cross_entropy(lua_State* L) {
  LuaTensor* in[2] = {check_tensor(L, 1), check_tensor(L, 2)};
  const double smoothing = opt_number(L, 3, "label_smoothing", 0.0);
  return emit_op(L, in, 2,
                 [&](Emitter& e, const Ref* r) { return cross_entropy(e, r[0], r[1], smoothing); });
}

#define MLS_LOSS(NAME, EXPR)                                                  \
  int l_##NAME(lua_State* L) {                                                \
    LuaTensor* in[2] = {check_tensor(L, 1), check_tensor(L, 2)};              \
    return emit_op(L, in, 2, [&](Emitter& e, const Ref* r) { return EXPR; }); \
  }
MLS_LOSS(mse_loss, mse_loss(e, r[0], r[1]))
MLS_LOSS(l1_loss, l1_loss(e, r[0], r[1]))
MLS_LOSS(bce_with_logits, bce_with_logits(e, r[0], r[1]))
MLS_LOSS(nll_loss, nll_loss(e, r[0], r[1]))
#undef MLS_LOSS

int l_huber_loss(lua_State* L) {
  LuaTensor* in[2] = {check_tensor(L, 1), check_tensor(L, 2)};
  const double delta = luaL_optnumber(L, 3, 1.0);
  return emit_op(L, in, 2,
                 [&](Emitter& e, const Ref* r) { return huber_loss(e, r[0], r[1], delta); });
}

// mls.op(name, {inputs...}, {attr = value, ...}): any registered op by name, its first
// output. For ops without a Lua wrapper; the message of a misuse names the op and types.
int l_op(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  const OpDef* def = op_registry().find(name);
  if (def == nullptr) return luaL_error(L, "mls.op: unknown op '%s'", name);
  const lua_Integer n = luaL_len(L, 2);
  if (n > 8) return luaL_argerror(L, 2, "at most 8 inputs");
  if (def->num_inputs >= 0 && n != def->num_inputs)
    return luaL_error(L, "mls.op: %s takes %d inputs, got %d", name, def->num_inputs,
                      static_cast<int>(n));
  if (def->kind == OpKind::Update)
    return luaL_error(L, "mls.op: %s changes its inputs in place; it is not offered to scripts",
                      name);
  LuaTensor* in[8];
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 2, i);
    in[i - 1] = check_tensor(L, -1);
    lua_pop(L, 1);
  }
  // Attributes: integers, numbers, strings and integer lists.
  struct AttrItem {
    const char* key;
    int kind;  // 0 int, 1 float, 2 ints, 3 string
    int64_t i;
    double d;
    IntList l;
    const char* s;
  };
  std::array<AttrItem, 8> items{};
  int na = 0;
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3) != 0) {
      if (na == 8) return luaL_error(L, "mls.op: at most 8 attributes");
      AttrItem& it = items[static_cast<size_t>(na++)];
      it.key = luaL_checkstring(L, -2);
      if (lua_isinteger(L, -1)) {
        it.kind = 0;
        it.i = lua_tointeger(L, -1);
      } else if (lua_isnumber(L, -1)) {
        it.kind = 1;
        it.d = lua_tonumber(L, -1);
      } else if (lua_istable(L, -1)) {
        it.kind = 2;
        it.l = check_ints(L, lua_gettop(L), it.key);
        // A shape is checked as every shape a script gives (sizes >= 0, a count that fits).
        if (std::strcmp(it.key, "shape") == 0) check_shape_size(L, it.l.vec());
      } else {
        it.kind = 3;
        it.s = luaL_checkstring(L, -1);
      }
      lua_pop(L, 1);
    }
  }
  const std::string op = name;
  return emit_op(L, in, static_cast<int>(n), [&](Emitter& e, const Ref* r) {
    Attrs a;
    for (int k = 0; k < na; ++k) {
      const AttrItem& it = items[static_cast<size_t>(k)];
      if (it.kind == 0)
        a.set(it.key, it.i);
      else if (it.kind == 1)
        a.set(it.key, it.d);
      else if (it.kind == 2)
        a.set(it.key, it.l.vec());
      else
        a.set(it.key, std::string(it.s));
    }
    return e.emit(op, std::span<const Ref>(r, static_cast<size_t>(n)), a)[0];
  });
}

const luaL_Reg kNnLayers[] = {{"linear", l_linear},
                              {"conv2d", l_conv2d},
                              {"max_pool2d", pool<false>},
                              {"avg_pool2d", pool<true>},
                              {"global_avg_pool", l_global_avg_pool},
                              {"batch_norm", l_batch_norm},
                              {"layer_norm", l_layer_norm},
                              {"dropout", l_dropout},
                              {"embedding", l_embedding},
                              {"cross_entropy", l_cross_entropy},
                              {"mse_loss", l_mse_loss},
                              {"l1_loss", l_l1_loss},
                              {"huber_loss", l_huber_loss},
                              {"bce_with_logits", l_bce_with_logits},
                              {"nll_loss", l_nll_loss},
                              {nullptr, nullptr}};

const luaL_Reg kNnTop[] = {{"parameter", l_parameter},
                           {"buffer", l_buffer},
                           {"layer_params", l_layer_params},
                           {"op", l_op},
                           {nullptr, nullptr}};

}  // namespace

void open_nn_lib(lua_State* L) {
  set_funcs(L, kNnTop);
  lua_newtable(L);
  set_funcs(L, kNnLayers);
  lua_setfield(L, -2, "F");
}

}  // namespace mls::lua
