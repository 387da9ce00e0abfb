// mls.nn.MultiheadAttention and mls.F's attention from Lua: values against a float64 reference
// written here in plain Lua (numbers are doubles), gradients against that reference's central
// differences, the token-id cast of nn.Embedding, and the messages of misuse.
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::run_err;
using mls::test::run_ok;

namespace {

// The float64 reference: ref_mha(x, W, B, heads, causal) over nested lists, x [N][T][E],
// W[1..4] [E][E] ([in, out]), B[1..4] [E]; the same definition as torch.nn.MultiheadAttention.
const char* kReference = R"(
  local function proj(x, w, b)
    local out = {}
    for n = 1, #x do
      out[n] = {}
      for t = 1, #x[n] do
        local row = {}
        for j = 1, #w[1] do
          local s = b[j]
          for i = 1, #w do s = s + x[n][t][i] * w[i][j] end
          row[j] = s
        end
        out[n][t] = row
      end
    end
    return out
  end
  function ref_mha(x, W, B, heads, causal)
    local q, k, v = proj(x, W[1], B[1]), proj(x, W[2], B[2]), proj(x, W[3], B[3])
    local e = #W[1]
    local d = e // heads
    local joined = {}
    for n = 1, #x do
      local T = #x[n]
      joined[n] = {}
      for t = 1, T do joined[n][t] = {} end
      for h = 0, heads - 1 do
        for t = 1, T do
          local p, m = {}, -math.huge
          local last = causal and t or T
          for u = 1, last do
            local s = 0
            for c = h * d + 1, (h + 1) * d do s = s + q[n][t][c] * k[n][u][c] end
            p[u] = s / math.sqrt(d)
            m = math.max(m, p[u])
          end
          local z = 0
          for u = 1, last do p[u] = math.exp(p[u] - m); z = z + p[u] end
          for c = h * d + 1, (h + 1) * d do
            local s = 0
            for u = 1, last do s = s + p[u] / z * v[n][u][c] end
            joined[n][t][c] = s
          end
        end
      end
    end
    return proj(joined, W[4], B[4])
  end
  -- sum(y * r) over nested lists of the same shape.
  function dot3(y, r)
    local s = 0
    for n = 1, #y do for t = 1, #y[n] do for j = 1, #y[n][t] do s = s + y[n][t][j] * r[n][t][j] end end end
    return s
  end
  function max_diff3(a, b)
    local m = 0
    for n = 1, #a do for t = 1, #a[n] do for j = 1, #a[n][t] do
      m = math.max(m, math.abs(a[n][t][j] - b[n][t][j]))
    end end end
    return m
  end
)";

}  // namespace

TEST_CASE("nn.MultiheadAttention matches a float64 reference, causal and not, with biases",
          "[lua][attention]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, kReference);
  run_ok(h, R"(
    mls.manual_seed(7)
    local names = {"q_proj", "k_proj", "v_proj", "out_proj"}
    worst, worst_plain, n_params = 0, 0, 0
    for _, causal in ipairs({true, false}) do
      local mha = mls.nn.MultiheadAttention(8, 2, {causal = causal})
      n_params = #mha:parameters()
      -- Biases start at zero; give them values so that they are tested too.
      for _, nm in ipairs(names) do mha[nm .. ".bias"] = mls.randn{8}:requires_grad() end
      local x = mls.randn{2, 5, 8}
      local W, B = {}, {}
      for i, nm in ipairs(names) do
        W[i] = mha[nm .. ".weight"]:tolist()
        B[i] = mha[nm .. ".bias"]:tolist()
      end
      local want = ref_mha(x:tolist(), W, B, 2, causal)
      worst = math.max(worst, max_diff3(mha(x):tolist(), want))
      -- The function form, without biases, against the reference with zero biases.
      local w = {}
      for i, nm in ipairs(names) do w[i] = mha[nm .. ".weight"] end
      local zero = {}
      for i = 1, 4 do zero[i] = {0, 0, 0, 0, 0, 0, 0, 0} end
      local plain = mls.F.multi_head_attention(x, w, nil, {num_heads = 2, causal = causal})
      worst_plain = math.max(worst_plain, max_diff3(plain:tolist(), ref_mha(x:tolist(), W, zero, 2, causal)))
    end
    -- Causal: the first step attends to itself only, so its output is out(v(x_1)).
  )");
  CHECK(global_number(h, "n_params") == 8);
  // f32 sums of 8 products of O(1) values, twice projected: a few 1e-6 at most.
  CHECK(global_number(h, "worst") < 2e-5);
  CHECK(global_number(h, "worst_plain") < 2e-5);
  CHECK(global_number(h, "worst") > 0);  // the comparison saw f32 values, not the same doubles
}

TEST_CASE("nn.MultiheadAttention: gradients match the float64 reference's central differences",
          "[lua][attention]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, kReference);
  run_ok(h, R"(
    mls.manual_seed(3)
    local names = {"q_proj", "k_proj", "v_proj", "out_proj"}
    local mha = mls.nn.MultiheadAttention(4, 2, {causal = true})
    for _, nm in ipairs(names) do mha[nm .. ".bias"] = (mls.randn{4} * 0.5):requires_grad() end
    local x = mls.randn{2, 3, 4}:requires_grad()
    local r = mls.randn{2, 3, 4}
    ;(mha(x) * r):sum():backward()
    local W, B = {}, {}
    for i, nm in ipairs(names) do
      W[i] = mha[nm .. ".weight"]:tolist()
      B[i] = mha[nm .. ".bias"]:tolist()
    end
    local xs, rs = x:tolist(), r:tolist()
    local function f() return dot3(ref_mha(xs, W, B, 2, true), rs) end
    local eps = 1e-6
    local function central(tbl, i, j)
      local keep = tbl[i][j]
      tbl[i][j] = keep + eps; local up = f()
      tbl[i][j] = keep - eps; local down = f()
      tbl[i][j] = keep
      return (up - down) / (2 * eps)
    end
    worst_grad, checked, largest = 0, 0, 0
    local function compare(got, want)
      worst_grad = math.max(worst_grad, math.abs(got - want))
      largest = math.max(largest, math.abs(want))
      checked = checked + 1
    end
    -- Every weight entry of q and out, every bias entry of k, every input of the 2nd sample.
    for _, which in ipairs({1, 4}) do
      local g = mha[names[which] .. ".weight"].grad:tolist()
      for i = 1, 4 do for j = 1, 4 do compare(g[i][j], central(W[which], i, j)) end end
    end
    local gb = mha["k_proj.bias"].grad:tolist()
    for j = 1, 4 do compare(gb[j], central(B, 2, j)) end
    local gx = x.grad:tolist()
    for t = 1, 3 do for j = 1, 4 do compare(gx[2][t][j], central(xs[2], t, j)) end end
  )");
  CHECK(global_number(h, "checked") == 16 * 2 + 4 + 12);
  CHECK(global_number(h, "largest") > 0.1);  // the gradients compared are not all zero
  CHECK(global_number(h, "worst_grad") < 1e-4);
}

TEST_CASE("nn.Embedding takes token ids as numbers, and attention misuse names the problem",
          "[lua][attention]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    mls.manual_seed(1)
    local emb = mls.nn.Embedding(5, 3)
    local w = emb.weight:tolist()
    local y = emb(mls.tensor{{4, 0}, {2, 2}}):tolist()  -- f32 ids, as a dataset gives them
    emb_err = math.abs(y[1][1][2] - w[5][2]) + math.abs(y[1][2][3] - w[1][3]) + math.abs(y[2][2][1] - w[3][1])
    emb_shape = #y * 100 + #y[1] * 10 + #y[1][1]
  )");
  CHECK(global_number(h, "emb_err") == 0);
  CHECK(global_number(h, "emb_shape") == 223);
  CHECK(run_err(h, "mls.nn.MultiheadAttention(6, 4)").find("num_heads dividing E") !=
        std::string::npos);
  CHECK(run_err(h, "local m = mls.nn.MultiheadAttention(4, 2); m(mls.randn{3, 4})")
            .find("x has shape [3,4]; it expects [N, T, E]") != std::string::npos);
  CHECK(run_err(h, "local m = mls.nn.MultiheadAttention(4, 2); m(mls.randn{1, 3, 6})")
            .find("weight 1 has shape [4,4]; E = 6 needs [6,6]") != std::string::npos);
  CHECK(run_err(h, "mls.F.multi_head_attention(mls.randn{1, 3, 6}, {}, nil, {num_heads = 4})")
            .find("a table of 4 tensors") != std::string::npos);
  CHECK(run_err(h,
                "mls.F.scaled_dot_product_attention(mls.randn{2, 3}, mls.randn{2, 4}, "
                "mls.randn{2, 4})")
            .find("do not fit") != std::string::npos);
}

TEST_CASE("F.scaled_dot_product_attention with causal: the first query sees only the first key",
          "[lua][attention]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    mls.manual_seed(5)
    local q, k, v = mls.randn{1, 4, 2}, mls.randn{1, 4, 2}, mls.randn{1, 4, 3}
    local o = mls.F.scaled_dot_product_attention(q, k, v, true):tolist()
    local vl = v:tolist()
    first_err = 0
    for c = 1, 3 do first_err = first_err + math.abs(o[1][1][c] - vl[1][1][c]) end
    -- Not causal: the first query mixes all four values (differs from v_1).
    local full = mls.F.scaled_dot_product_attention(q, k, v):tolist()
    full_diff = 0
    for c = 1, 3 do full_diff = full_diff + math.abs(full[1][1][c] - vl[1][1][c]) end
  )");
  CHECK(global_number(h, "first_err") < 1e-6);
  CHECK(global_number(h, "full_diff") > 1e-3);
}
