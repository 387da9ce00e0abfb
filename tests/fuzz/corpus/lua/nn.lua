local nn = mls.nn
local m = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
local out = m(mls.ones{5, 4})
print(out:shape())
local ok, err = pcall(function() return mls.zeros{2, 2}:matmul(mls.zeros{3, 3}) end)
print(ok, err)
