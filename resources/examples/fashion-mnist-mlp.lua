-- The Fashion-MNIST MLP of fashion-mnist-mlp.mls, written in Lua: 784-256-128-10 with
-- ReLU, SGD with momentum 0.9, lr 0.05 on a cosine schedule, batch 128, 10 epochs, seed 42.
-- mls.train traces the model into the same compiled training step as `mlstudio --run`,
-- so it trains as fast and lands in the same run database.
--
--   mlstudio lua resources/examples/fashion-mnist-mlp.lua [EPOCHS]
local nn = mls.nn
local epochs = tonumber(arg and arg[1]) or 10

mls.manual_seed(42)  -- the same weights as the node graph under seed 42
local model = nn.Sequential(
  nn.Flatten(),
  nn.Linear(784, 256), nn.ReLU(),
  nn.Linear(256, 128), nn.ReLU(),
  nn.Linear(128, 10))
print(model)
print(("%d parameters"):format(model:num_parameters()))

local data = mls.data.fashion_mnist()  -- /usr/share/datasets/fashion-mnist (Debian's package)
print(data)

local result = mls.train{
  model = model, data = data, loss = "cross_entropy",
  optimizer = mls.optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9}),
  schedule = {type = "cosine"}, epochs = epochs, batch_size = 128, seed = 42,
  name = "fashion-mnist-mlp (lua)"}
print(("test accuracy %.4f, median epoch %.2f s, run %d"):format(result.test_accuracy, result.epoch_seconds, result.run_id))
