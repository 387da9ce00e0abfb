-- Per-op overhead of an eager op called from Lua: c = a + b on 16 elements, in a loop.
-- Prints one line: "lua_add_16 NS ns/op" (the best of several rounds).
--   mlstudio lua --trust bench/lua_overhead.lua [ITERATIONS]
local n = tonumber(arg[1]) or 1000000
local a, b = mls.ones{16}, mls.ones{16}
local best = math.huge
for _ = 1, 5 do
  local t0 = mls.clock()
  for _ = 1, n do
    local c = a + b
  end
  local dt = (mls.clock() - t0) / n
  if dt < best then best = dt end
end
print(("lua_add_16 %.1f ns/op"):format(best * 1e9))
print(("session values now %d, memory %d bytes"):format(mls.memory().session_values, mls.memory().current))
