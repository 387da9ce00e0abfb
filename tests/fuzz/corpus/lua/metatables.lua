-- metatables and finalisers of every object type
local objs = {mls.zeros{2, 2}, mls.project.new(), mls.data.open{source = 'synthetic', synthetic = {samples = 16}},
  mls.optim.SGD({mls.zeros{2}:requires_grad()}, {lr = 0.1}), mls.graph('g'), mls.jit(function(x) return x end)}
for _, o in ipairs(objs) do
  local mt = getmetatable(o)
  print(mt, pcall(function() return mt.__gc(o) end), pcall(setmetatable, o, {}))
  local holder = setmetatable({}, {__gc = function(s) revived = s.x end})
  holder.x = o
end
objs = nil
collectgarbage(); collectgarbage()
print(pcall(function() return revived + 1 end), pcall(tostring, revived))
print(pcall(mls.zeros, {2^31, 2^31, 2^31}), pcall(mls.zeros, {2^32, 2^32}), pcall(mls.nn.Linear, -1, 5))
local t = setmetatable({}, {__index = function(t, k) return k end, __gc = function() error("gc") end})
print(t.x, getmetatable("").__index == string)
