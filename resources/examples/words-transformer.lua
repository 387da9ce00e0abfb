-- The character-level transformer of words-transformer.mls, written in Lua: a makemore-style
-- language model over the word list of Debian's wamerican package (/usr/share/dict/words).
-- Token embedding (27 -> 64) and learned positions over a context of 8 characters, two
-- pre-norm blocks (x + attention(LN(x)), causal with 4 heads; x + MLP(LN(x)), 64-256-64 with
-- GELU), a final LayerNorm, the last step, and Linear(64, 27) over '.' and a..z. AdamW, lr
-- 0.003 with 30 warm-up steps, batch 256, seed 7, one epoch on 8000 words of the training pool
-- (a tenth kept for validation), tests on 1000: the node graph's settings. The layers make
-- their tensors in the node graph's order, so under the same seed they start from its weights.
-- After training it prints ten new words, drawn by the sampler `mlstudio --run` uses.
--
--   mlstudio lua resources/examples/words-transformer.lua [EPOCHS] [WORD_FILE]
local nn = mls.nn
local epochs = tonumber(arg and arg[1]) or 1
local words = arg and arg[2] or nil  -- default: /usr/share/dict/words
local T, E, heads, layers = 8, 64, 4, 2

-- One pre-norm block: attention and an MLP, each added back to its input.
local Block = nn.Module:extend("Block")
function Block:init(e, h)
  self.ln1 = nn.LayerNorm(e)
  self.attn = nn.MultiheadAttention(e, h, {causal = true})
  self.ln2 = nn.LayerNorm(e)
  self.mlp = nn.Sequential(nn.Linear(e, 4 * e), nn.GELU(), nn.Linear(4 * e, e))
end
function Block:forward(x)
  x = x + self.attn(self.ln1(x))
  return x + self.mlp(self.ln2(x))
end

local WordsModel = nn.Module:extend("WordsModel")
function WordsModel:init()
  self.tok = nn.Embedding(27, E)
  self.pos = nn.PositionalEmbedding(T, E)
  self.blocks = nn.Sequential()
  for _ = 1, layers do self.blocks:add(Block(E, heads)) end
  self.ln_f = nn.LayerNorm(E)
  self.head = nn.Linear(E, 27)
end
function WordsModel:forward(ids)  -- ids [N, T] -> logits [N, 27] for the next character
  local x = self.ln_f(self.blocks(self.pos(self.tok(ids))))
  return self.head(x[{{}, -1}])  -- the last step: x[:, -1] in PyTorch
end

mls.manual_seed(7)
local model = WordsModel()
print(model)
print(("%d parameters"):format(model:num_parameters()))

local data = mls.data.open{source = "words", path = words, words = {block_size = T},
                           validation = 0.1, test_fraction = 0.1, limit = 8000, test_limit = 1000}
print(data)

local result = mls.train{
  model = model, data = data, loss = "cross_entropy",
  optimizer = mls.optim.AdamW(model:parameters(), {lr = 0.003, weight_decay = 0.01}),
  schedule = {type = "cosine", warmup_steps = 30}, epochs = epochs, batch_size = 256, seed = 7,
  name = "words-transformer (lua)"}
print(("validation loss %.4f, test accuracy %.4f, median epoch %.2f s, run %d"):format(
  result.val_loss, result.test_accuracy, result.epoch_seconds, result.run_id))

model:eval()
print("samples: " .. table.concat(mls.sample_words(model, {block_size = T, count = 10, seed = 7}), " "))
