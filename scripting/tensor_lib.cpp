// mls tensors: constructors, arithmetic metamethods, methods, indexing, printing and eager
// autograd. Lua counts from 1, so do indices and axes here (-1 is the last).
//
// [SECTION] constructors     zeros, ones, full, randn, rand, arange, tensor
// [SECTION] arithmetic       __add __sub __mul __div __unm __pow
// [SECTION] methods          shape, dtype, matmul, reductions, unary math, views
// [SECTION] indexing         t[i], t[{i, {a, b}, {}}]
// [SECTION] printing         __tostring (the text: tensor_print.cpp)
// Autograd (requires_grad, backward, no_grad) lives in autograd_lib.cpp.
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/ops/layout.h"
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

// Lua axis (1-based, negative from the end) to an engine axis (0-based); -1 when out of range.
int64_t engine_axis(int64_t axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  else
    axis -= 1;
  return axis >= 0 && axis < rank ? axis : -1;
}

ValueType type_of(Runtime& rt, const LuaTensor& t) {
  if (t.trace_id == 0) return {t.value.dtype(), t.value.shape()};
  Trace* tr = rt.find_trace(t.trace_id);
  return tr ? tr->type_of(t.ref) : ValueType{DType::F32, {}};
}

// [SECTION] constructors

// A shape given as one table ({3, 4}) or as integers (3, 4), from argument `idx` on.
Shape read_shape(lua_State* L, int idx, int* next) {
  Shape s;
  if (lua_istable(L, idx)) {
    IntList l = check_ints(L, idx, "shape");
    for (int i = 0; i < l.n; ++i) s.push_back(l.v[static_cast<size_t>(i)]);
    *next = idx + 1;
  } else {
    int i = idx;
    while (lua_type(L, i) == LUA_TNUMBER) s.push_back(luaL_checkinteger(L, i++));
    *next = i;
  }
  check_shape_size(L, s);
  return s;
}

int make_filled(lua_State* L, double value, int first) {
  int next = first;
  Shape s = read_shape(L, first, &next);
  DType dt = check_dtype(L, next, DType::F32);
  check_fits(L, numel(s), dt);
  Runtime& rt = runtime(L);
  Tensor t = Tensor::zeros(rt.backend, dt, std::move(s), AllocTag::Activation);
  if (value != 0.0)
    t.fill_from_host(std::vector<float>(static_cast<size_t>(t.numel()), static_cast<float>(value)));
  push_value(L, std::move(t));
  return 1;
}

int l_zeros(lua_State* L) {
  return make_filled(L, 0.0, 1);
}
int l_ones(lua_State* L) {
  return make_filled(L, 1.0, 1);
}
int l_full(lua_State* L) {
  const double v = luaL_checknumber(L, 2);
  lua_remove(L, 2);
  return make_filled(L, v, 1);
}

int random_tensor(lua_State* L, bool normal) {
  int next = 1;
  Shape s = read_shape(L, 1, &next);
  check_fits(L, numel(s), DType::F32);
  Runtime& rt = runtime(L);
  std::vector<float> v(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!normal) {
      v[i] = static_cast<float>(rt.rng.uniform());
      continue;
    }
    // Box-Muller; u1 in (0, 1] so the log is finite.
    const double u1 = 1.0 - rt.rng.uniform(), u2 = rt.rng.uniform();
    v[i] = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
  push_value(L, Tensor::from_f32(rt.backend, std::move(s), v, AllocTag::Activation));
  return 1;
}
int l_randn(lua_State* L) {
  return random_tensor(L, true);
}
int l_rand(lua_State* L) {
  return random_tensor(L, false);
}

// arange(n): 0 .. n-1; arange(a, b[, step]): a, a+step, ... < b (as PyTorch and numpy).
int l_arange(lua_State* L) {
  double a = 0, b = 0, step = 1;
  if (lua_isnoneornil(L, 2)) {
    b = luaL_checknumber(L, 1);
  } else {
    a = luaL_checknumber(L, 1);
    b = luaL_checknumber(L, 2);
    step = luaL_optnumber(L, 3, 1.0);
  }
  if (step == 0) luaL_argerror(L, 3, "step must not be 0");
  // An end on the wrong side of the start gives an empty tensor, as in PyTorch and numpy
  // (a negative count was taken for a huge allocation and stopped as the memory limit).
  double count = std::ceil((b - a) / step);
  if (count < 0) count = 0;  // NaN stays NaN, refused below
  if (!(count < 1e9)) luaL_error(L, "arange(%f, %f, %f): too many elements", a, b, step);
  const DType dt = check_dtype(L, lua_isnoneornil(L, 2) ? 2 : 4, DType::F32);
  check_fits(L, static_cast<int64_t>(count), DType::F32);
  std::vector<float> v;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    v.push_back(static_cast<float>(a + step * static_cast<double>(i)));
  Runtime& rt = runtime(L);
  Tensor t = Tensor::empty(rt.backend, dt, {static_cast<int64_t>(v.size())}, AllocTag::Activation);
  t.fill_from_host(v);
  push_value(L, std::move(t));
  return 1;
}

// Walks a nested table: the shape from the first elements, then every element checked.
void table_shape(lua_State* L, int idx, Shape* s) {
  lua_pushvalue(L, idx);
  while (lua_istable(L, -1)) {
    s->push_back(static_cast<int64_t>(luaL_len(L, -1)));
    if (s->back() == 0) break;
    lua_geti(L, -1, 1);
    lua_remove(L, -2);
  }
  lua_pop(L, 1);
}

bool table_values(lua_State* L, const Shape& s, size_t axis, std::vector<float>* out,
                  std::string* where) {
  if (axis == s.size()) {
    int isnum = 0;
    double v = lua_tonumberx(L, -1, &isnum);
    if (!isnum && lua_isboolean(L, -1)) {
      v = lua_toboolean(L, -1);
      isnum = 1;
    }
    if (!isnum) {
      *where = std::string("a ") + luaL_typename(L, -1) + " where a number belongs";
      return false;
    }
    out->push_back(static_cast<float>(v));
    return true;
  }
  if (!lua_istable(L, -1) || luaL_len(L, -1) != s[axis]) {
    *where = "rows of different lengths at depth " + std::to_string(axis + 1) + " (expected " +
             std::to_string(s[axis]) + " entries)";
    return false;
  }
  for (int64_t i = 1; i <= s[axis]; ++i) {
    lua_geti(L, -1, i);
    bool ok = table_values(L, s, axis + 1, out, where);
    lua_pop(L, 1);
    if (!ok) return false;
  }
  return true;
}

// mls.tensor({{1, 2}, {3, 4}} [, dtype]); a number gives a 0-d tensor.
int l_tensor(lua_State* L) {
  if (to_tensor(L, 1)) {  // a copy of a tensor
    LuaTensor* t = check_tensor(L, 1);
    if (t->trace_id) return raise(L, "mls.tensor: cannot copy a traced value");
    push_value(L, t->value.contiguous(AllocTag::Activation));
    return 1;
  }
  luaL_argexpected(L, lua_istable(L, 1) || lua_isnumber(L, 1), 1, "table or number");
  const DType dt = check_dtype(L, 2, DType::F32);
  bool ok = true;
  {
    Shape s;
    std::vector<float> v;
    std::string where;
    if (lua_isnumber(L, 1)) {
      v.push_back(static_cast<float>(lua_tonumber(L, 1)));
    } else {
      table_shape(L, 1, &s);
      lua_pushvalue(L, 1);
      ok = table_values(L, s, 0, &v, &where);
      lua_pop(L, 1);
    }
    if (!ok) {
      runtime(L).error = "mls.tensor: " + where;
    } else {
      Runtime& rt = runtime(L);
      Tensor t = Tensor::empty(rt.backend, dt, s, AllocTag::Activation);
      t.fill_from_host(v);
      push_value(L, std::move(t));
    }
  }
  return ok ? 1 : raise(L);
}

int l_manual_seed(lua_State* L) {
  Runtime& rt = runtime(L);
  rt.seed = static_cast<uint64_t>(luaL_checkinteger(L, 1));
  rt.rng = Rng(rt.seed);
  rt.params_made = 0;
  return 0;
}

// [SECTION] arithmetic

// a OP b where either may be a number.
template <typename TT, typename TS, typename ST>
int binary(lua_State* L, TT both, TS tensor_scalar, ST scalar_tensor) {
  LuaTensor* a = to_tensor(L, 1);
  LuaTensor* b = to_tensor(L, 2);
  if (a && b) {
    if (a->closed || b->closed) {  // raise the "closed" message
      check_tensor(L, 1);
      check_tensor(L, 2);
    }
    LuaTensor* in[2] = {a, b};
    return emit_op(L, in, 2, [&](Emitter& e, const Ref* r) { return both(e, r[0], r[1]); });
  }
  if (a) {
    check_tensor(L, 1);
    const double s = luaL_checknumber(L, 2);
    return emit_op(L, &a, 1, [&](Emitter& e, const Ref* r) { return tensor_scalar(e, r[0], s); });
  }
  b = check_tensor(L, 2);
  const double s = luaL_checknumber(L, 1);
  return emit_op(L, &b, 1, [&](Emitter& e, const Ref* r) { return scalar_tensor(e, s, r[0]); });
}

Ref scalar_like(Emitter& e, Ref like, double v) {
  return fill(e, {e.type_of(like).dtype, {}}, v);
}

int l_add(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return add(e, a, b); },
      [](Emitter& e, Ref a, double s) { return add_scalar(e, a, s); },
      [](Emitter& e, double s, Ref b) { return add_scalar(e, b, s); });
}
int l_sub(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return sub(e, a, b); },
      [](Emitter& e, Ref a, double s) { return add_scalar(e, a, -s); },
      [](Emitter& e, double s, Ref b) { return add_scalar(e, neg(e, b), s); });
}
int l_mul(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return mul(e, a, b); },
      [](Emitter& e, Ref a, double s) { return scale(e, a, s); },
      [](Emitter& e, double s, Ref b) { return scale(e, b, s); });
}
int l_div(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return div(e, a, b); },
      [](Emitter& e, Ref a, double s) { return scale(e, a, 1.0 / s); },
      [](Emitter& e, double s, Ref b) { return div(e, scalar_like(e, b, s), b); });
}
int l_pow(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return pow(e, a, b); },
      [](Emitter& e, Ref a, double s) {
        return s == 2.0 ? mul(e, a, a) : pow(e, a, scalar_like(e, a, s));
      },
      [](Emitter& e, double s, Ref b) { return pow(e, scalar_like(e, b, s), b); });
}
int l_maximum(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return maximum(e, a, b); },
      [](Emitter& e, Ref a, double s) { return maximum(e, a, scalar_like(e, a, s)); },
      [](Emitter& e, double s, Ref b) { return maximum(e, scalar_like(e, b, s), b); });
}
int l_minimum(lua_State* L) {
  return binary(
      L, [](Emitter& e, Ref a, Ref b) { return minimum(e, a, b); },
      [](Emitter& e, Ref a, double s) { return minimum(e, a, scalar_like(e, a, s)); },
      [](Emitter& e, double s, Ref b) { return minimum(e, scalar_like(e, b, s), b); });
}

#define MLS_COMPARE(NAME, FN)                                                        \
  int l_##NAME(lua_State* L) {                                                       \
    return binary(                                                                   \
        L, [](Emitter& e, Ref a, Ref b) { return FN(e, a, b); },                     \
        [](Emitter& e, Ref a, double s) { return FN(e, a, scalar_like(e, a, s)); },  \
        [](Emitter& e, double s, Ref b) { return FN(e, scalar_like(e, b, s), b); }); \
  }
MLS_COMPARE(eq, equal)
MLS_COMPARE(ne, not_equal)
MLS_COMPARE(lt, less)
MLS_COMPARE(le, less_equal)
MLS_COMPARE(gt, greater)
MLS_COMPARE(ge, greater_equal)
#undef MLS_COMPARE

int l_where(lua_State* L) {
  LuaTensor* in[3] = {check_tensor(L, 1), check_tensor(L, 2), check_tensor(L, 3)};
  return emit_op(L, in, 3, [](Emitter& e, const Ref* r) { return where(e, r[0], r[1], r[2]); });
}

// [SECTION] methods

template <typename F>
int unary(lua_State* L, F f) {
  LuaTensor* x = check_tensor(L, 1);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return f(e, r[0]); });
}

#define MLS_UNARY(NAME, EXPR)                                \
  int l_##NAME(lua_State* L) {                               \
    return unary(L, [](Emitter& e, Ref x) { return EXPR; }); \
  }
MLS_UNARY(neg, neg(e, x))
MLS_UNARY(exp, exp(e, x))
MLS_UNARY(log, log(e, x))
MLS_UNARY(sqrt, sqrt(e, x))
MLS_UNARY(rsqrt, rsqrt(e, x))
MLS_UNARY(abs, abs(e, x))
MLS_UNARY(sign, sign(e, x))
MLS_UNARY(relu, relu(e, x))
MLS_UNARY(tanh, e.emit1("tanh", {x}))
MLS_UNARY(sin, e.emit1("sin", {x}))
MLS_UNARY(cos, e.emit1("cos", {x}))
MLS_UNARY(sigmoid, e.emit1("sigmoid", {x}))
MLS_UNARY(silu, silu(e, x))
#undef MLS_UNARY

int l_gelu(lua_State* L) {
  const std::string approx = luaL_optstring(L, 2, "none");
  if (approx != "none" && approx != "tanh") return luaL_argerror(L, 2, "'none' or 'tanh'");
  const bool tanh_form = approx == "tanh";
  return unary(L, [&](Emitter& e, Ref x) { return gelu(e, x, tanh_form ? "tanh" : "none"); });
}
int l_leaky_relu(lua_State* L) {
  const double a = luaL_optnumber(L, 2, 0.01);
  return unary(L, [&](Emitter& e, Ref x) { return leaky_relu(e, x, a); });
}
int l_softplus(lua_State* L) {
  const double beta = luaL_optnumber(L, 2, 1.0);
  return unary(L, [&](Emitter& e, Ref x) { return softplus(e, x, beta); });
}
int l_clamp(lua_State* L) {
  const double lo = luaL_optnumber(L, 2, -HUGE_VAL), hi = luaL_optnumber(L, 3, HUGE_VAL);
  return unary(L, [&](Emitter& e, Ref x) { return clamp(e, x, lo, hi); });
}

int axis_arg(lua_State* L, int idx, int64_t rank, int64_t def_lua) {
  const int64_t a = luaL_optinteger(L, idx, def_lua);
  const int64_t ax = engine_axis(a, rank);
  if (ax < 0)
    luaL_argerror(
        L, idx,
        ("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank)).c_str());
  return static_cast<int>(ax);
}

int l_softmax(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int ax = axis_arg(L, 2, static_cast<int64_t>(type_of(runtime(L), *x).shape.size()), -1);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return softmax(e, r[0], ax); });
}
int l_log_softmax(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int ax = axis_arg(L, 2, static_cast<int64_t>(type_of(runtime(L), *x).shape.size()), -1);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return log_softmax(e, r[0], ax); });
}
int l_argmax(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int ax = axis_arg(L, 2, static_cast<int64_t>(type_of(runtime(L), *x).shape.size()), -1);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) {
    return e.emit1("argmax", {r[0]}, {{"axis", int64_t{ax}}});
  });
}

int l_matmul(lua_State* L) {
  LuaTensor* in[2] = {check_tensor(L, 1), check_tensor(L, 2)};
  return emit_op(L, in, 2, [](Emitter& e, const Ref* r) { return matmul(e, r[0], r[1]); });
}

// Reductions: x:sum() over every axis; x:sum(axis or {axes} [, keepdim]).
template <typename F>
int reduction(lua_State* L, F f) {
  LuaTensor* x = check_tensor(L, 1);
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *x).shape.size());
  IntList axes;
  opt_ints(L, 2, "axes", &axes);
  const bool keep = lua_toboolean(L, 3) != 0;
  for (int i = 0; i < axes.n; ++i) {
    auto& a = axes.v[static_cast<size_t>(i)];
    const int64_t ax = engine_axis(a, rank);
    if (ax < 0)
      return luaL_argerror(
          L, 2,
          ("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank)).c_str());
    a = ax;
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return f(e, r[0], axes.vec(), keep); });
}
int l_sum(lua_State* L) {
  return reduction(L, [](Emitter& e, Ref x, std::vector<int64_t> a, bool k) {
    return sum(e, x, std::move(a), k);
  });
}
int l_mean(lua_State* L) {
  return reduction(L, [](Emitter& e, Ref x, std::vector<int64_t> a, bool k) {
    return mean(e, x, std::move(a), k);
  });
}
int l_max(lua_State* L) {
  if (to_tensor(L, 2)) return l_maximum(L);
  return reduction(L, [](Emitter& e, Ref x, std::vector<int64_t> a, bool k) {
    return max(e, x, std::move(a), k);
  });
}
int l_min(lua_State* L) {
  if (to_tensor(L, 2)) return l_minimum(L);
  return reduction(L, [](Emitter& e, Ref x, std::vector<int64_t> a, bool k) {
    return min(e, x, std::move(a), k);
  });
}
int l_var(lua_State* L) {
  return reduction(L, [](Emitter& e, Ref x, std::vector<int64_t> a, bool k) {
    return var(e, x, std::move(a), k, 1);
  });
}

// Views and layout.
int l_reshape(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  int next = 2;
  Shape s = [&] {
    Shape out;
    if (lua_istable(L, 2)) {
      IntList l = check_ints(L, 2, "shape");
      out.assign(l.v.begin(), l.v.begin() + l.n);
    } else {
      for (int i = 2; lua_type(L, i) == LUA_TNUMBER; ++i) out.push_back(luaL_checkinteger(L, i));
    }
    return out;
  }();
  check_shape_size(L, s, true);
  (void)next;
  // One -1 takes what the others leave.
  const Shape in = type_of(runtime(L), *x).shape;
  int64_t known = 1, free_axis = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (free_axis >= 0) return luaL_argerror(L, 2, "at most one -1");
      free_axis = static_cast<int64_t>(i);
    } else {
      known *= s[i];
    }
  }
  if (free_axis >= 0 && known > 0) s[static_cast<size_t>(free_axis)] = numel(in) / known;
  LuaTensor* in_t[1] = {x};
  return emit_op(L, in_t, 1, [&](Emitter& e, const Ref* r) {
    // A strided eager value is made contiguous by leaf(); a traced one is always contiguous.
    return reshape(e, r[0], s);
  });
}

int l_flatten(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const Shape in = type_of(runtime(L), *x).shape;
  const int64_t start =
      in.empty() ? 0 : engine_axis(luaL_optinteger(L, 2, 1), static_cast<int64_t>(in.size()));
  if (start < 0) return luaL_argerror(L, 2, "axis out of range");
  Shape s(in.begin(), in.begin() + start);
  int64_t rest = 1;
  for (size_t i = static_cast<size_t>(start); i < in.size(); ++i) rest *= in[i];
  s.push_back(rest);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return reshape(e, r[0], s); });
}

int l_transpose(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *x).shape.size());
  if (rank < 2 && lua_isnoneornil(L, 2))
    return luaL_argerror(L, 1, "t() needs a tensor of rank >= 2");
  const int a = axis_arg(L, 2, rank, rank - 1), b = axis_arg(L, 3, rank, rank);
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
  std::swap(perm[static_cast<size_t>(a)], perm[static_cast<size_t>(b)]);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return transpose(e, r[0], perm); });
}

int l_permute(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *x).shape.size());
  IntList p = check_ints(L, 2, "permutation");
  if (p.n != rank) return luaL_argerror(L, 2, "the permutation must name every axis once");
  for (int i = 0; i < p.n; ++i) {
    auto& a = p.v[static_cast<size_t>(i)];
    a = engine_axis(a, rank);
    if (a < 0) return luaL_argerror(L, 2, "axis out of range");
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return transpose(e, r[0], p.vec()); });
}

int l_unsqueeze(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *x).shape.size());
  const int ax = axis_arg(L, 2, rank + 1, 1);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return unsqueeze(e, r[0], ax); });
}

int l_squeeze(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *x).shape.size());
  IntList axes;
  opt_ints(L, 2, "axes", &axes);
  for (int i = 0; i < axes.n; ++i) {
    auto& a = axes.v[static_cast<size_t>(i)];
    a = engine_axis(a, rank);
    if (a < 0) return luaL_argerror(L, 2, "axis out of range");
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return squeeze(e, r[0], axes.vec()); });
}

int l_expand(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  IntList s = check_ints(L, 2, "shape");
  check_shape_size(L, s.vec(), true);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return expand(e, r[0], s.vec()); });
}

int l_cat(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const lua_Integer n = luaL_len(L, 1);
  if (n < 1 || n > kMaxOpInputs) return luaL_argerror(L, 1, "1 to 12 tensors");
  LuaTensor* in[kMaxOpInputs];
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, 1, i);
    in[i - 1] = check_tensor(L, -1);
    lua_pop(L, 1);  // still referenced by the table
  }
  const int64_t rank = static_cast<int64_t>(type_of(runtime(L), *in[0]).shape.size());
  const int ax = axis_arg(L, 2, rank, 1);
  return emit_op(L, in, static_cast<int>(n), [&](Emitter& e, const Ref* r) {
    return concat(e, std::vector<Ref>(r, r + n), ax);
  });
}

int l_cast(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const DType dt = check_dtype(L, 2, DType::F32);
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) { return cast(e, r[0], dt); });
}
int l_float(lua_State* L) {
  lua_settop(L, 1);
  lua_pushstring(L, "f32");
  return l_cast(L);
}
int l_long(lua_State* L) {
  lua_settop(L, 1);
  lua_pushstring(L, "i64");
  return l_cast(L);
}

// x:to("cpu") / x:to("f16"): a device or a dtype.
int l_to(lua_State* L) {
  check_tensor(L, 1);
  const char* what = luaL_checkstring(L, 2);
  if (parse_dtype(what)) return l_cast(L);
  if (std::strcmp(what, "cpu") == 0) {
    lua_settop(L, 1);
    return 1;
  }
  return luaL_error(
      L, "device '%s' is not available in this build: the CPU backend is the only one so far",
      what);
}

int l_shape(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const Shape s = type_of(runtime(L), *x).shape;
  lua_createtable(L, static_cast<int>(s.size()), 0);
  for (size_t i = 0; i < s.size(); ++i) {
    lua_pushinteger(L, s[i]);
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  return 1;
}
int l_size(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) return l_shape(L);
  const Shape s = type_of(runtime(L), *x).shape;
  const int ax = axis_arg(L, 2, static_cast<int64_t>(s.size()), 1);
  lua_pushinteger(L, s[static_cast<size_t>(ax)]);
  return 1;
}
int l_dim(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  lua_pushinteger(L, static_cast<lua_Integer>(type_of(runtime(L), *x).shape.size()));
  return 1;
}
int l_numel(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  lua_pushinteger(L, numel(type_of(runtime(L), *x).shape));
  return 1;
}
int l_len(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const Shape s = type_of(runtime(L), *x).shape;
  lua_pushinteger(L, s.empty() ? 1 : s[0]);
  return 1;
}
int l_dtype(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const std::string_view n = dtype_name(type_of(runtime(L), *x).dtype);
  lua_pushlstring(L, n.data(), n.size());
  return 1;
}

void push_element(lua_State* L, DType dt, double v) {
  if (dt == DType::Bool)
    lua_pushboolean(L, v != 0);
  else if (dt == DType::I64 || dt == DType::I32 || dt == DType::U8 || dt == DType::I8)
    lua_pushinteger(L, static_cast<lua_Integer>(v));
  else
    lua_pushnumber(L, v);
}

int l_item(lua_State* L) {
  const Tensor& t = eager_value(L, 1, "item");
  if (t.numel() != 1)
    return luaL_error(L, "item: the tensor has %d elements (shape %s); item() needs exactly one",
                      static_cast<int>(t.numel()), shape_str(t.shape()).c_str());
  const double v = t.to_f64()[0];
  push_element(L, t.dtype(), v);
  return 1;
}

void push_list(lua_State* L, const Shape& s, size_t axis, const std::vector<double>& v, size_t* at,
               DType dt) {
  if (axis == s.size()) {
    push_element(L, dt, v[(*at)++]);
    return;
  }
  lua_createtable(L, static_cast<int>(s[axis]), 0);
  for (int64_t i = 0; i < s[axis]; ++i) {
    push_list(L, s, axis + 1, v, at, dt);
    lua_seti(L, -2, i + 1);
  }
}

int l_tolist(lua_State* L) {
  const Tensor& t = eager_value(L, 1, "tolist");
  if (t.numel() > 10'000'000)
    return luaL_error(L, "tolist: %d elements are too many for a Lua table",
                      static_cast<int>(t.numel()));
  const Shape s = t.shape();
  const DType dt = t.dtype();
  std::vector<double> v = t.to_f64();
  size_t at = 0;
  push_list(L, s, 0, v, &at, dt);
  return 1;
}

int l_close(lua_State* L) {
  LuaTensor* t = to_tensor(L, 1);
  if (t && !t->closed) {
    runtime(L).forget(*t);
    runtime(L).uncharge(*t);
    t->value = Tensor();
    t->grad = Tensor();
    t->closed = true;
  }
  return 0;
}

int l_tensor_gc(lua_State* L) {
  LuaTensor* t = to_tensor(L, 1);
  // Idempotent, and the userdata stays a valid closed tensor: a finaliser that runs after
  // this one may bring it back to life, and every use of a closed tensor raises.
  if (t && !t->closed) {
    Runtime& rt = runtime(L);
    rt.forget(*t);
    rt.uncharge(*t);
    if (t->value.defined()) rt.session.recycle(t->value.release_buffer());
    rt.keep_spare(std::move(t->value));
    t->value = Tensor();
    t->grad = Tensor();
    t->closed = true;
  }
  if (t) t->init = ParamInit();
  return 0;
}

// [SECTION] indexing

// One index per axis, Lua style: an integer picks one entry (the axis goes away), {a, b}
// the entries a..b inclusive (as Torch7), {a} a..last, {} all of them.
int index_impl(lua_State* L, LuaTensor* x, int key) {
  const Shape s = type_of(runtime(L), *x).shape;
  struct Pick {
    int64_t start, end;
    bool drop;
  };
  std::array<Pick, 8> picks{};
  int n = 0;
  auto read = [&](int idx, int64_t axis) {
    const int64_t size = s[static_cast<size_t>(axis)];
    auto norm = [&](int64_t i) { return i < 0 ? i + size : i - 1; };
    if (lua_type(L, idx) == LUA_TNUMBER) {
      const int64_t i = norm(luaL_checkinteger(L, idx));
      if (i < 0 || i >= size)
        luaL_error(L, "index %d is out of range for axis %d of size %d",
                   static_cast<int>(lua_tointeger(L, idx)), static_cast<int>(axis + 1),
                   static_cast<int>(size));
      picks[static_cast<size_t>(n++)] = {i, i + 1, true};
      return;
    }
    if (!lua_istable(L, idx)) luaL_error(L, "an index is an integer or a table {first, last}");
    const lua_Integer len = luaL_len(L, idx);
    int64_t a = 0, b = size - 1;
    if (len >= 1) {
      lua_geti(L, idx, 1);
      a = norm(luaL_checkinteger(L, -1));
      lua_pop(L, 1);
    }
    if (len >= 2) {
      lua_geti(L, idx, 2);
      b = norm(luaL_checkinteger(L, -1));
      lua_pop(L, 1);
    }
    if (a < 0 || b >= size || a > b + 1)
      luaL_error(L, "range {%d, %d} is out of range for axis %d of size %d",
                 static_cast<int>(a + 1), static_cast<int>(b + 1), static_cast<int>(axis + 1),
                 static_cast<int>(size));
    picks[static_cast<size_t>(n++)] = {a, b + 1, false};
  };
  if (s.empty()) return luaL_error(L, "a 0-d tensor cannot be indexed (use item())");
  if (lua_type(L, key) == LUA_TNUMBER) {
    read(key, 0);
  } else {
    const lua_Integer len = luaL_len(L, key);
    if (len > static_cast<lua_Integer>(s.size()))
      return luaL_error(L, "%d indices for a tensor of rank %d", static_cast<int>(len),
                        static_cast<int>(s.size()));
    for (lua_Integer i = 1; i <= len; ++i) {
      lua_geti(L, key, i);
      read(lua_gettop(L), i - 1);
      lua_pop(L, 1);
    }
  }
  return emit_op(L, &x, 1, [&](Emitter& e, const Ref* r) {
    Ref v = r[0];
    Shape out;
    for (size_t ax = 0; ax < s.size(); ++ax) {
      if (static_cast<int>(ax) < n) {
        const Pick& p = picks[ax];
        if (p.start != 0 || p.end != s[ax])
          v = slice(e, v, static_cast<int64_t>(ax), p.start, p.end);
        if (!p.drop) out.push_back(p.end - p.start);
      } else {
        out.push_back(s[ax]);
      }
    }
    return e.shape_of(v) == out ? v : reshape(e, v, out);
  });
}

int l_index(lua_State* L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    // Methods live in the metatable itself.
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL) return 1;
    lua_pop(L, 1);
    const char* k = lua_tostring(L, 2);
    LuaTensor* x = check_tensor(L, 1);
    if (std::strcmp(k, "grad") == 0) {
      if (!x->grad.defined()) {
        lua_pushnil(L);
      } else {
        LuaTensor* g = push_tensor(L);
        g->value = x->grad;
      }
      return 1;
    }
    if (std::strcmp(k, "is_leaf") == 0) {
      lua_pushboolean(L, x->is_leaf);
      return 1;
    }
    return luaL_error(L, "tensor has no field or method '%s'", k);
  }
  LuaTensor* x = check_tensor(L, 1);
  return index_impl(L, x, 2);
}

int l_newindex(lua_State* L) {
  LuaTensor* x = check_tensor(L, 1);
  const char* k = lua_tostring(L, 2);
  if (k && std::strcmp(k, "grad") == 0) {
    if (lua_isnil(L, 3)) {
      x->grad = Tensor();
      return 0;
    }
    LuaTensor* g = check_tensor(L, 3);
    if (g->trace_id) return luaL_error(L, "grad: a traced value cannot be a gradient");
    if (g->value.shape() != x->value.shape())
      return luaL_error(L, "grad: shape %s does not match the tensor's %s",
                        shape_str(g->value.shape()).c_str(), shape_str(x->value.shape()).c_str());
    x->grad = g->value;
    return 0;
  }
  return luaL_error(
      L,
      "tensors are immutable from Lua: only .grad can be assigned (use ops to make new tensors)");
}

// [SECTION] printing

int l_tensor_tostring(lua_State* L) {
  LuaTensor* x = to_tensor(L, 1);
  if (x == nullptr) return luaL_typeerror(L, 1, "tensor");
  Runtime& rt = runtime(L);
  std::string s;
  if (x->closed) {
    s = "tensor(<closed>)";
  } else if (x->trace_id) {
    Trace* tr = rt.find_trace(x->trace_id);
    s = tr ? "tensor(<traced " + tr->value_name(x->ref) + ": " +
                 std::string(dtype_name(tr->type_of(x->ref).dtype)) +
                 shape_str(tr->type_of(x->ref).shape) + " in graph '" + tr->graph().name() + "'>)"
           : std::string("tensor(<traced value of an ended graph>)");
  } else {
    s = tensor_repr(x->value, x->requires_grad);
  }
  lua_pushlstring(L, s.data(), s.size());
  return 1;
}
// mls.clock(): wall-clock seconds from a steady clock (os.clock counts the CPU time of
// every thread, the engine's workers included, so it is no stopwatch for a benchmark).
int l_clock(lua_State* L) {
  lua_pushnumber(
      L,
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
  return 1;
}

int l_tensor_memory(lua_State* L) {
  Runtime& rt = runtime(L);
  const MemoryStats st = rt.backend.memory().stats();
  lua_createtable(L, 0, 7);
  lua_pushinteger(L, st.total_current);
  lua_setfield(L, -2, "current");
  lua_pushinteger(L, st.total_peak);
  lua_setfield(L, -2, "peak");
  lua_pushinteger(L, static_cast<lua_Integer>(rt.session.num_values()));
  lua_setfield(L, -2, "session_values");
  lua_pushinteger(L, static_cast<lua_Integer>(rt.session.tape_size()));
  lua_setfield(L, -2, "tape");
  lua_pushinteger(L, rt.gen);
  lua_setfield(L, -2, "generation");
  // Freed small buffers the session keeps for reuse (up to 1 MiB); part of `current`.
  lua_pushinteger(L, static_cast<lua_Integer>(rt.session.cached_bytes()));
  lua_setfield(L, -2, "cached");
  return 1;
}

const luaL_Reg kMeta[] = {{"__add", l_add},
                          {"__sub", l_sub},
                          {"__mul", l_mul},
                          {"__div", l_div},
                          {"__unm", l_neg},
                          {"__pow", l_pow},
                          {"__len", l_len},
                          {"__index", l_index},
                          {"__newindex", l_newindex},
                          {"__tostring", l_tensor_tostring},
                          {"__gc", l_tensor_gc},
                          {"__close", l_close},
                          // methods (found by __index in this same table)
                          {"add", l_add},
                          {"sub", l_sub},
                          {"mul", l_mul},
                          {"div", l_div},
                          {"pow", l_pow},
                          {"neg", l_neg},
                          {"maximum", l_maximum},
                          {"minimum", l_minimum},
                          {"eq", l_eq},
                          {"ne", l_ne},
                          {"lt", l_lt},
                          {"le", l_le},
                          {"gt", l_gt},
                          {"ge", l_ge},
                          {"exp", l_exp},
                          {"log", l_log},
                          {"sqrt", l_sqrt},
                          {"rsqrt", l_rsqrt},
                          {"abs", l_abs},
                          {"sign", l_sign},
                          {"relu", l_relu},
                          {"tanh", l_tanh},
                          {"sin", l_sin},
                          {"cos", l_cos},
                          {"sigmoid", l_sigmoid},
                          {"silu", l_silu},
                          {"gelu", l_gelu},
                          {"leaky_relu", l_leaky_relu},
                          {"softplus", l_softplus},
                          {"clamp", l_clamp},
                          {"softmax", l_softmax},
                          {"log_softmax", l_log_softmax},
                          {"argmax", l_argmax},
                          {"matmul", l_matmul},
                          {"sum", l_sum},
                          {"mean", l_mean},
                          {"max", l_max},
                          {"min", l_min},
                          {"var", l_var},
                          {"reshape", l_reshape},
                          {"view", l_reshape},
                          {"flatten", l_flatten},
                          {"t", l_transpose},
                          {"transpose", l_transpose},
                          {"permute", l_permute},
                          {"unsqueeze", l_unsqueeze},
                          {"squeeze", l_squeeze},
                          {"expand", l_expand},
                          {"cast", l_cast},
                          {"float", l_float},
                          {"long", l_long},
                          {"to", l_to},
                          {"shape", l_shape},
                          {"size", l_size},
                          {"dim", l_dim},
                          {"numel", l_numel},
                          {"dtype", l_dtype},
                          {"item", l_item},
                          {"tolist", l_tolist},
                          {"close", l_close},
                          {nullptr, nullptr}};

const luaL_Reg kTensorFuncs[] = {{"tensor", l_tensor},
                                 {"zeros", l_zeros},
                                 {"ones", l_ones},
                                 {"full", l_full},
                                 {"randn", l_randn},
                                 {"rand", l_rand},
                                 {"arange", l_arange},
                                 {"manual_seed", l_manual_seed},
                                 {"where", l_where},
                                 {"cat", l_cat},
                                 {"memory", l_tensor_memory},
                                 {"clock", l_clock},
                                 // functional forms of the methods
                                 {"matmul", l_matmul},
                                 {"exp", l_exp},
                                 {"log", l_log},
                                 {"sqrt", l_sqrt},
                                 {"abs", l_abs},
                                 {"relu", l_relu},
                                 {"tanh", l_tanh},
                                 {"sin", l_sin},
                                 {"cos", l_cos},
                                 {"sigmoid", l_sigmoid},
                                 {"softmax", l_softmax},
                                 {"log_softmax", l_log_softmax},
                                 {"sum", l_sum},
                                 {"mean", l_mean},
                                 {"maximum", l_maximum},
                                 {"minimum", l_minimum},
                                 {"argmax", l_argmax},
                                 {"reshape", l_reshape},
                                 {"transpose", l_transpose},
                                 {"clamp", l_clamp},
                                 {nullptr, nullptr}};

}  // namespace

const Tensor& eager_value(lua_State* L, int idx, const char* what) {
  LuaTensor* x = check_tensor(L, idx);
  if (x->trace_id)
    luaL_error(L, "%s: a traced value has no data while the graph is being built", what);
  return x->value;
}

void open_tensor_lib(lua_State* L) {
  // Expects the mls table on top, with upvalues 1 and 2 set up by the caller's closure.
  set_funcs(L, kTensorFuncs);
  lua_pushvalue(L, lua_upvalueindex(2));
  set_funcs(L, kMeta);
  lua_pushstring(L, "mls.Tensor");
  lua_setfield(L, -2, "__name");
  protect_metatable(L);
  lua_pop(L, 1);
}

}  // namespace mls::lua
