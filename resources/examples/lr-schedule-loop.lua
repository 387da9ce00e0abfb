-- A training loop written out in Lua, eagerly, with a learning-rate schedule of its own
-- (linear warm-up, then cosine decay), metrics logged to the run database with mls.log,
-- and evaluation under mls.no_grad. On 6,000 Fashion-MNIST images, 3 epochs.
--   mlstudio lua resources/examples/lr-schedule-loop.lua [EPOCHS]
local nn, F = mls.nn, mls.F
mls.manual_seed(1)
local epochs = tonumber(arg and arg[1]) or 3
local data = mls.data.fashion_mnist{limit = 6000, test_limit = 2000}
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
local opt = mls.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})

local batch, base_lr, warmup = 64, 0.1, 50
local steps_per_epoch = math.ceil(data:info().train / batch)
local total = epochs * steps_per_epoch
local function lr_at(step)  -- the schedule, in plain Lua
  if step < warmup then return base_lr * (step + 1) / warmup end
  local t = (step - warmup) / math.max(1, total - warmup)
  return base_lr * 0.5 * (1 + math.cos(math.pi * t))
end

mls.start_run{name = "lr-schedule-loop", params = {epochs = epochs, batch = batch, base_lr = base_lr}}
local step = 0
for epoch = 1, epochs do
  local t0, sum, n = mls.clock(), 0, 0
  for x, y in data:batches("train", batch) do
    opt:set_lr(lr_at(step))
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    sum, n, step = sum + loss:item(), n + 1, step + 1
  end
  -- accuracy on the test split, without recording a tape
  local correct, seen = 0, 0
  model:eval()
  mls.no_grad(function()
    for x, y in data:batches("test", 500) do
      correct = correct + (model(x):argmax(2):eq(y)):float():sum():item()
      seen = seen + y:size(1)
    end
  end)
  model:train()
  mls.log{train_loss = sum / n, test_accuracy = correct / seen, lr = opt:lr(), step = epoch}
  print(("epoch %d  loss %.4f  test accuracy %.4f  lr %.4f  %.1fs"):format(epoch, sum / n, correct / seen, opt:lr(), mls.clock() - t0))
end
mls.end_run()
