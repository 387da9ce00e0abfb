-- Linear regression from scratch with autograd: fit y = 3 x - 2 (plus noise) by gradient
-- descent on w and b, written out by hand (no mls.nn, no optimizer).
--   mlstudio lua resources/examples/linear-regression.lua
mls.manual_seed(0)
local n = 256
local x = mls.randn{n, 1}
local y = x * 3 - 2 + mls.randn{n, 1} * 0.1

local w = mls.zeros{1, 1}:requires_grad()
local b = mls.zeros{1}:requires_grad()
local lr = 0.1
for step = 1, 200 do
  local pred = x:matmul(w) + b
  local loss = ((pred - y) ^ 2):mean()
  loss:backward()
  -- the update itself is not recorded: new leaves from the old values and their gradients
  mls.no_grad(function()
    w = (w - w.grad * lr):requires_grad()
    b = (b - b.grad * lr):requires_grad()
  end)
  if step % 50 == 0 then print(("step %3d  loss %.5f"):format(step, loss:item())) end
end
print(("w = %.3f (true 3), b = %.3f (true -2)"):format(w:item(), b:item()))
