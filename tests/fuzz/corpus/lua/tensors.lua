local x = mls.randn{2, 3}
local y = (x * 2 + 1):relu():sum()
print(y:item())
