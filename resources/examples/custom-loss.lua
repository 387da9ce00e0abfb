-- A custom loss written in Lua: focal loss (Lin et al. 2017), which weighs each sample's
-- cross-entropy by (1 - p_true)^gamma so that easy examples count less. mls.train traces
-- it into the compiled training step together with the model.
--   mlstudio lua resources/examples/custom-loss.lua
local nn, F = mls.nn, mls.F
mls.manual_seed(7)

local function focal_loss(logits, labels, gamma)
  local logp = logits:log_softmax(2)                  -- [N, C]
  local onehot = mls.op("one_hot", {labels}, {num_classes = logits:size(2)})
  local logp_true = (logp * onehot):sum(2)            -- [N]
  local p_true = logp_true:exp()
  return (-((1 - p_true) ^ gamma) * logp_true):mean()
end

local data = mls.data.open{source = "synthetic", synthetic = {kind = "spirals", samples = 2000, noise = 0.1}}
local model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
local r = mls.train{
  model = model, data = data, epochs = 200, batch_size = 64,
  loss = function(logits, labels) return focal_loss(logits, labels, 2) end,
  optimizer = mls.optim.Adam(model:parameters(), {lr = 0.01}), name = "spirals-focal"}
print(("focal loss on two spirals: test accuracy %.4f"):format(r.test_accuracy))
