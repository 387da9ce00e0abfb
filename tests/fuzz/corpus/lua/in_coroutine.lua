
-- run inside a coroutine by the driver: yields and errors
local t = mls.zeros{2, 2}
coroutine.yield(t)
for i = 1, 10 do coroutine.yield(i) end
local ok = pcall(coroutine.yield, 1)
error("done")
