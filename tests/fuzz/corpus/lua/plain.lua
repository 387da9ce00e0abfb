local t = {}
for i = 1, 10 do t[i] = i * i end
assert(#t == 10)
local s = ("abc"):rep(3)
return s
