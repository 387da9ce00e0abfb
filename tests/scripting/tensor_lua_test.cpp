// Tensors from Lua: values against hand-computed and float64 references, gradients against
// finite differences, errors that name the op and the shapes, memory that stays flat.
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::global_string;
using mls::test::run_err;
using mls::test::run_ok;

TEST_CASE("Lua tensors: constructors, arithmetic, reductions and indexing give the right values", "[lua]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local a = mls.tensor{{1, 2, 3}, {4, 5, 6}}
    s1 = (a * 2 + 1):sum():item()                 -- 2*21 + 6 = 48
    s2 = a:matmul(a:t()):tolist()[2][1]            -- [4,5,6].[1,2,3] = 32
    s3 = a:mean(2):tolist()[2]                     -- mean of row 2 = 5
    s4 = a[2][3]:item()                            -- 6 (1-based)
    s5 = a[{{1, 2}, 2}]:sum():item()               -- column 2: 2 + 5 = 7
    s6 = (1 / mls.tensor{4}):item()                -- 0.25
    s7 = mls.arange(5):sum():item()                -- 0+1+2+3+4 = 10
    s8 = #a                                        -- 2
    s9 = a:reshape{3, -1}:size(2)                  -- 2
    s10 = mls.zeros(2, 3):numel() + mls.ones{4}:sum():item()  -- 6 + 4
    s11 = (a:max() - a:min()):item()               -- 5
    s12 = a:softmax(2):sum(2):tolist()[1]          -- 1
    dt = mls.tensor({1, 2}, "i64"):dtype()
  )");
  CHECK(global_number(h, "s1") == 48);
  CHECK(global_number(h, "s2") == 32);
  CHECK(global_number(h, "s3") == Approx(5));
  CHECK(global_number(h, "s4") == 6);
  CHECK(global_number(h, "s5") == 7);
  CHECK(global_number(h, "s6") == 0.25);
  CHECK(global_number(h, "s7") == 10);
  CHECK(global_number(h, "s8") == 2);
  CHECK(global_number(h, "s9") == 2);
  CHECK(global_number(h, "s10") == 10);
  CHECK(global_number(h, "s11") == 5);
  CHECK(global_number(h, "s12") == Approx(1).epsilon(1e-6));
  CHECK(global_string(h, "dt") == "i64");
}

TEST_CASE("Lua tensors print like PyTorch and summarise large tensors", "[lua]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    small = tostring(mls.tensor{{1, -2.5}, {3, 4}})
    big = tostring(mls.arange(2000))
    grad = tostring(mls.ones{2}:requires_grad())
  )");
  CHECK(global_string(h, "small") == "tensor([[ 1.0000, -2.5000],\n        [ 3.0000,  4.0000]])");
  const std::string big = global_string(h, "big");
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.find("1999.0000") != std::string::npos);
  CHECK(big.find("shape=[2000]") != std::string::npos);
  CHECK(big.size() < 200);
  CHECK(global_string(h, "grad") == "tensor([1.0000, 1.0000], requires_grad=true)");
}

TEST_CASE("Lua autograd matches finite differences", "[lua]") {
  lua::LuaHost h(cpu::backend());
  // f(x, w) = sum(tanh(x w) ^ 2) + mean(sigmoid(x)); gradient w.r.t. w, checked entry by entry
  // against central differences computed through the same eager ops.
  run_ok(h, R"(
    mls.manual_seed(3)
    local x = mls.randn{4, 3}
    local w0 = mls.randn{3, 2} * 0.5
    local function f(w) return (x:matmul(w):tanh() ^ 2):sum() + x:sigmoid():mean() end
    local w = mls.tensor(w0):requires_grad()
    f(w):backward()
    local g = w.grad:tolist()
    worst = 0
    local base = w0:tolist()
    for i = 1, 3 do for j = 1, 2 do
      local hi, lo = mls.tensor(base), mls.tensor(base)
      local e = mls.zeros{3, 2}:tolist(); e[i][j] = 1e-2
      local d = mls.tensor(e)
      local num = (f(w0 + d):item() - f(w0 - d):item()) / 2e-2
      worst = math.max(worst, math.abs(num - g[i][j]) / math.max(1, math.abs(num)))
    end end
  )");
  CHECK(global_number(h, "worst") < 2e-3);
}

TEST_CASE("Lua autograd: no_grad records nothing, backward frees the graph, grads accumulate", "[lua]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local x = mls.tensor{1, 2, 3}:requires_grad()
    local y = mls.no_grad(function() return x * 2 end)
    ng = y:needs_grad()
    ;(x * x):sum():backward()
    ;(x * 3):sum():backward()                 -- accumulates: 2x + 3
    acc = x.grad:tolist()[3]                  -- 2*3 + 3 = 9
    local z = (x * x):sum()
    z:backward()
    ok, err = pcall(function() z:backward() end)
  )");
  lua_getglobal(h.state(), "ng");
  CHECK_FALSE(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);
  CHECK(global_number(h, "acc") == 9);
  CHECK(global_string(h, "err").find("freed by an earlier backward") != std::string::npos);
}

TEST_CASE("An engine error becomes a Lua error that names the op, the shapes and the line", "[lua]") {
  lua::LuaHost h(cpu::backend());
  std::string e = run_err(h, "local a = mls.ones{2, 3}\nlocal b = a:matmul(mls.ones{4, 5})");
  CHECK(e.find("test:2:") != std::string::npos);
  CHECK(e.find("matmul") != std::string::npos);
  CHECK(e.find("f32[2,3], f32[4,5]") != std::string::npos);
  CHECK(e.find("stack traceback") != std::string::npos);
  // pcall catches it and the session goes on.
  run_ok(h, R"(
    ok, msg = pcall(function() return mls.ones{3} + mls.ones{4} end)
    after = (mls.ones{2} + mls.ones{2}):sum():item()
  )");
  CHECK(global_string(h, "msg").find("add") != std::string::npos);
  CHECK(global_number(h, "after") == 4);
  e = run_err(h, "local t = mls.ones{2}; t:close(); return t + t");
  CHECK(e.find("closed") != std::string::npos);
  e = run_err(h, "return mls.zeros{2}[3]");
  CHECK(e.find("out of range") != std::string::npos);
}

TEST_CASE("A loop of 100k tensor ops does not grow memory", "[lua]") {
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local a = mls.ones{256}
    local w = mls.ones{256}:requires_grad()
    local function loop(n)
      for i = 1, n do
        local b = (a * 2 + 1):relu()
        local c <close> = b:sum()
        if i % 10 == 0 then (w * a):sum():backward() end   -- the tape path too
        local d = w * 3                                      -- recorded, never backwarded
      end
    end
    loop(1000)
    collectgarbage("collect")
    -- Live bytes: the session's cache of freed buffers (bounded at 1 MiB) is reuse, not a leak.
    local m = mls.memory()
    m1 = m.current - m.cached
    loop(100000)
    collectgarbage("collect")
    m = mls.memory()
    m2 = m.current - m.cached
    cached = m.cached
    lua_kb = collectgarbage("count")
  )");
  const double m1 = global_number(h, "m1"), m2 = global_number(h, "m2");
  INFO("live memory after 1k iterations " << m1 << " bytes, after 100k more " << m2);
  CHECK(m2 <= m1 + 64 * 1024);
  CHECK(global_number(h, "cached") <= 1 << 20);
  CHECK(global_number(h, "lua_kb") < 4096);
}

TEST_CASE("mls.cat joins up to 12 tensors and names the limit past it", "[lua]") {
  lua::LuaHost h(cpu::backend());
  // Every op's inputs pass through one fixed array (scripting/bindings.h): 12 fill it.
  run_ok(h, R"(
    local t = {}
    for i = 1, 12 do t[i] = mls.full({1, 2}, i) end
    local c = mls.cat(t)
    rows = c:size(1)
    total = c:sum():item()                          -- 2 * (1 + ... + 12) = 156
  )");
  CHECK(global_number(h, "rows") == 12);
  CHECK(global_number(h, "total") == 156);
  const std::string e = run_err(h, R"(
    local t = {}
    for i = 1, 13 do t[i] = mls.ones{1} end
    return mls.cat(t)
  )");
  CHECK(e.find("1 to 12 tensors") != std::string::npos);
}
