-- coroutines: limits and errors must cross resume and wrap
local gen = coroutine.wrap(function() for i = 1, 3 do pcall(coroutine.yield, i) end end)
print(gen(), gen(), gen())
local co = coroutine.create(function(a) local b = coroutine.yield(a + 1); error(b) end)
print(coroutine.resume(co, 1))
print(coroutine.resume(co, "x"))
print(coroutine.resume(co))
print(coroutine.close(co), coroutine.status(co))
print(coroutine.resume(coroutine.create(function() while true do end end)))
for i = 1, 100000 do coroutine.wrap(function() for j = 1, 40 do end end)() end
