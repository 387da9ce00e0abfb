// mls.F's attention: the engine's builders (engine/ops/attention.h), the ones the
// MultiHeadAttention node lowers to, so a script and a node graph run the very same ops.
// mls.nn.MultiheadAttention (scripting/lua/nn.lua) is built on F.multi_head_attention.
//
//   local y = mls.F.multi_head_attention(x, {wq, wk, wv, wo}, {bq, bk, bv, bo},
//                                        {num_heads = 4, causal = true})   -- x [N,T,E]
//   local o = mls.F.scaled_dot_product_attention(q, k, v, true)           -- [..., T, d]
#include "engine/ops/attention.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

Shape shape_of(lua_State* L, const LuaTensor& t) {
  if (t.trace_id == 0) return t.value.shape();
  Trace* tr = runtime(L).find_trace(t.trace_id);
  return tr ? tr->type_of(t.ref).shape : Shape{};
}

// Reads tensors 1..n of the table at `idx` into `out`; `what` names the argument in errors.
void tensor_list(lua_State* L, int idx, int n, const char* what, LuaTensor** out) {
  if (!lua_istable(L, idx) || luaL_len(L, idx) != n)
    luaL_error(L, "F.multi_head_attention: %s is a table of %d tensors", what, n);
  for (int i = 0; i < n; ++i) {
    lua_geti(L, idx, i + 1);
    out[i] = check_tensor(L, -1);
    lua_pop(L, 1);
  }
}

// F.multi_head_attention(x, {wq, wk, wv, wo} [, {bq, bk, bv, bo}] [, {num_heads =, causal =}]):
// self-attention over x [N,T,E] as PyTorch's nn.MultiheadAttention(E, heads, batch_first =
// true) called with query = key = value = x. Weights [E,E] ([in, out], as Linear's), biases [E].
int l_multi_head_attention(lua_State* L) {
  LuaTensor* in[9] = {check_tensor(L, 1)};
  tensor_list(L, 2, 4, "the weights {wq, wk, wv, wo}", in + 1);
  const bool biases = lua_istable(L, 3) && luaL_len(L, 3) > 0;
  if (biases) tensor_list(L, 3, 4, "the biases {bq, bk, bv, bo}", in + 5);
  const int opts = biases || lua_isnil(L, 3) ? 4 : 3;
  const int64_t heads = opt_integer(L, opts, "num_heads", 1);
  const bool causal = opt_bool(L, opts, "causal", false);
  // The engine's builder asserts on shapes; a script gets a message instead.
  const Shape x = shape_of(L, *in[0]);
  if (x.size() != 3)
    return luaL_error(L, "F.multi_head_attention: x has shape %s; it expects [N, T, E]",
                      shape_str(x).c_str());
  const int64_t e = x[2];
  if (heads < 1 || e % heads != 0)
    return luaL_error(L, "F.multi_head_attention: num_heads %d does not divide E = %d",
                      static_cast<int>(heads), static_cast<int>(e));
  for (int i = 1; i < (biases ? 9 : 5); ++i) {
    const Shape want = i < 5 ? Shape{e, e} : Shape{e};
    if (shape_of(L, *in[i]) != want)
      return luaL_error(L, "F.multi_head_attention: %s %d has shape %s; E = %d needs %s",
                        i < 5 ? "weight" : "bias", i < 5 ? i : i - 4,
                        shape_str(shape_of(L, *in[i])).c_str(), static_cast<int>(e),
                        shape_str(want).c_str());
  }
  return emit_op(L, in, biases ? 9 : 5, [&](Emitter& em, const Ref* r) {
    AttentionBiases b;
    if (biases) b = {r[5], r[6], r[7], r[8]};
    return multi_head_attention(em, r[0], r[1], r[2], r[3], r[4], b, heads, causal);
  });
}

// F.scaled_dot_product_attention(q, k, v [, causal]): softmax(q k^T / sqrt(d)) v over the last
// two axes, q [..., Tq, d], k [..., Tk, d], v [..., Tk, dv].
int l_sdpa(lua_State* L) {
  LuaTensor* in[3] = {check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3)};
  const bool causal = lua_toboolean(L, 4) != 0;
  const Shape q = shape_of(L, *in[0]), k = shape_of(L, *in[1]), v = shape_of(L, *in[2]);
  if (q.size() < 2 || k.size() != q.size() || v.size() != q.size() || q.back() != k.back() ||
      k[k.size() - 2] != v[v.size() - 2])
    return luaL_error(L,
                      "F.scaled_dot_product_attention: q %s, k %s, v %s do not fit ([..., Tq, d], "
                      "[..., Tk, d], [..., Tk, dv])",
                      shape_str(q).c_str(), shape_str(k).c_str(), shape_str(v).c_str());
  return emit_op(L, in, 3, [&](Emitter& e, const Ref* r) {
    return scaled_dot_product_attention(e, r[0], r[1], r[2], causal);
  });
}

const luaL_Reg kAttentionFuncs[] = {{"multi_head_attention", l_multi_head_attention},
                                    {"scaled_dot_product_attention", l_sdpa},
                                    {nullptr, nullptr}};

}  // namespace

void open_attention_lib(lua_State* L) {
  lua_getfield(L, -1, "F");
  set_funcs(L, kAttentionFuncs);
  lua_pop(L, 1);
}

}  // namespace mls::lua
