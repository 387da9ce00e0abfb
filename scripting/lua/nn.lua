-- mls.nn: modules shaped like torch.nn. A module registers its parameters, buffers and
-- child modules in the order they are assigned; parameters(), train(), eval(), to() and
-- zero_grad() walk them in that order. Layers make their tensors from the one declaration
-- the node graph's layers use too (engine/ops/layers.h, through mls.layer_params: same
-- shapes, schemes and fans), so a layer written here and the same layer drawn as a node start
-- from the same weights under the same seed.
--
--   local nn = mls.nn
--   local Net = nn.Module:extend("Net")
--   function Net:init() self.fc1 = nn.Linear(784, 128); self.fc2 = nn.Linear(128, 10) end
--   function Net:forward(x) return self.fc2(self.fc1(x:flatten(2)):relu()) end
--   local net = Net()
--   print(net)                     -- Net( (fc1): Linear(784 -> 128) ... )
--
-- A plain table with a forward function works too: nn.Sequential(nn.Linear(4, 8),
-- function(x) return x:tanh() end, {forward = function(self, x) return x * 2 end}).
-- Linear keeps its weight as [in, out] (the engine's layout), not PyTorch's [out, in].
local mls = ...
local F = mls.F
local nn = {}

-- [SECTION] Module

local Module = {}
Module.__index = Module
Module.__name = "Module"

local function is_module(v)
  return type(v) == "table" and getmetatable(v) ~= nil and rawget(getmetatable(v), "__is_module") == true
end
nn.is_module = is_module

-- A new class: Module:extend("Name"); instances by calling the class, Name(...), which runs init(...).
function Module:extend(name)
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == "string" and k:sub(1, 2) == "__" then cls[k] = v end
  end
  cls.__index = cls
  cls.__name = name or "Module"
  cls.__is_module = true
  cls.super = self
  return setmetatable(cls, {
    __index = self,
    __call = function(c, ...)
      local obj = setmetatable({_order = {}, training = true}, c)
      obj:init(...)
      return obj
    end,
    __tostring = function(c) return "class " .. c.__name end,
  })
end

-- Fields that hold tensors or modules are remembered in the order they are assigned.
Module.__newindex = function(self, k, v)
  rawset(self, k, v)
  if mls.is_tensor(v) or is_module(v) then table.insert(rawget(self, "_order"), k) end
end
Module.__call = function(self, ...)
  local label = rawget(self, "_label")
  if label == nil then return self:forward(...) end
  -- Being exported (mls.onnx.export): the ops this module records carry its path.
  local outer = mls.onnx._scope(label)
  local out = table.pack(self:forward(...))
  mls.onnx._scope(outer)
  return table.unpack(out, 1, out.n)
end
Module.__is_module = true

function Module:init() end
function Module:forward() error(self.__name .. ": forward is not defined", 2) end

-- (name, value) pairs of the tensors and children, in order.
function Module:_items()
  return rawget(self, "_order") or {}
end

function Module:named_parameters(prefix, out)
  out = out or {}
  prefix = prefix or ""
  for _, k in ipairs(self:_items()) do
    local v = rawget(self, k)
    if mls.is_tensor(v) then
      if v:needs_grad() then table.insert(out, {prefix .. k, v}) end
    elseif is_module(v) then
      v:named_parameters(prefix .. k .. ".", out)
    end
  end
  return out
end

function Module:parameters()
  local out = {}
  for _, nv in ipairs(self:named_parameters()) do table.insert(out, nv[2]) end
  return out
end

-- Tensors that are kept but not trained (BatchNorm's running statistics).
function Module:named_buffers(prefix, out)
  out = out or {}
  prefix = prefix or ""
  for _, k in ipairs(self:_items()) do
    local v = rawget(self, k)
    if mls.is_tensor(v) then
      if not v:needs_grad() then table.insert(out, {prefix .. k, v}) end
    elseif is_module(v) then
      v:named_buffers(prefix .. k .. ".", out)
    end
  end
  return out
end

function Module:children()
  local out = {}
  for _, k in ipairs(self:_items()) do
    local v = rawget(self, k)
    if is_module(v) then table.insert(out, {k, v}) end
  end
  return out
end

function Module:train(mode)
  if mode == nil then mode = true end
  rawset(self, "training", mode)
  for _, kv in ipairs(self:children()) do kv[2]:train(mode) end
  return self
end

function Module:eval() return self:train(false) end

function Module:to(device)
  for _, p in ipairs(self:parameters()) do p:to(device) end  -- raises for a device not built in
  return self
end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

-- Labels each child module with its path ("features.1") while mls.onnx.export traces, so the
-- file's nodes and its errors name the layer; label_layers(false) takes them off again.
function Module:_label_layers(on, prefix)
  for _, kv in ipairs(self:children()) do
    local path = (prefix and prefix .. "." or "") .. kv[1]
    rawset(kv[2], "_label", on and path or nil)
    if kv[2]._label_layers then kv[2]:_label_layers(on, path) end
  end
end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

function Module:extra_repr() return "" end

function Module:__tostring()
  local kids = self:children()
  local head = self.__name .. "(" .. self:extra_repr()
  if #kids == 0 then return head .. ")" end
  local lines = {head}
  for _, kv in ipairs(kids) do
    local s = tostring(kv[2]):gsub("\n", "\n  ")
    table.insert(lines, "  (" .. kv[1] .. "): " .. s)
  end
  table.insert(lines, ")")
  return table.concat(lines, "\n")
end

nn.Module = Module

-- Wraps a plain table {forward = function(self, x) ... end} or a function as a module.
function nn.module(v)
  if is_module(v) then return v end
  local Wrap = Module:extend(type(v) == "function" and "Lambda" or (v.name or "Custom"))
  if type(v) == "function" then
    function Wrap:forward(...) return v(...) end
    return Wrap()
  end
  if type(v) ~= "table" or type(v.forward) ~= "function" then
    error("nn.module: expected a module, a function or a table with a forward function", 2)
  end
  local m = Wrap()
  function m.forward(_, ...) return v.forward(v, ...) end
  -- The table's own tensors and modules, in a stable (sorted) order.
  local keys = {}
  for k, x in pairs(v) do
    if type(k) == "string" and (mls.is_tensor(x) or is_module(x)) then table.insert(keys, k) end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do m[k] = v[k] end
  return m
end

-- [SECTION] layers

local function opt(o, k, d)
  if o == nil or o[k] == nil then return d end
  return o[k]
end

-- The layer's tensors as engine/ops/layers.h declares them (the node types' declaration too:
-- same shapes, fans and schemes, made in the same order, so the same seed gives the same
-- values): parameters, and buffers for what is not trained.
local function make_tensors(self, layer, config)
  for _, p in ipairs(mls.layer_params(layer, config)) do
    if p.trainable then
      self[p.name] = mls.parameter(p.shape, {init = p.init, fan_in = p.fan_in, fan_out = p.fan_out})
    else
      self[p.name] = mls.buffer(p.shape, p.init == "ones" and 1 or 0)
    end
  end
end

nn.Linear = Module:extend("Linear")
function nn.Linear:init(n_in, n_out, o)
  assert(math.type(n_in) == "integer" and math.type(n_out) == "integer", "Linear(in, out): two integers")
  make_tensors(self, "linear", {n_in = n_in, n_out = n_out, bias = opt(o, "bias", true), init = opt(o, "init", nil)})
  rawset(self, "n_in", n_in)
  rawset(self, "n_out", n_out)
end
function nn.Linear:forward(x) return F.linear(x, self.weight, self.bias) end
function nn.Linear:extra_repr() return self.n_in .. " -> " .. self.n_out .. (self.bias and "" or ", no bias") end

nn.Conv2d = Module:extend("Conv2d")
function nn.Conv2d:init(c_in, c_out, k, o)
  local groups = opt(o, "groups", 1)
  make_tensors(self, "conv2d", {n_in = c_in, n_out = c_out, kernel = k, groups = groups, bias = opt(o, "bias", true),
                                init = opt(o, "init", nil)})
  rawset(self, "opts", {stride = opt(o, "stride", 1), padding = opt(o, "padding", 0),
                         dilation = opt(o, "dilation", 1), groups = groups})
  rawset(self, "desc", c_in .. " -> " .. c_out .. ", kernel " .. k)
end
function nn.Conv2d:forward(x)
  if self.bias then return F.conv2d(x, self.weight, self.bias, self.opts) end
  return F.conv2d(x, self.weight, self.opts)
end
function nn.Conv2d:extra_repr() return self.desc end

local function pool_class(name, fn)
  local P = Module:extend(name)
  function P:init(k, stride, padding)
    rawset(self, "k", k or 2)
    rawset(self, "stride", stride or self.k)
    rawset(self, "padding", padding or 0)
  end
  function P:forward(x) return fn(x, self.k, self.stride, self.padding) end
  function P:extra_repr() return "kernel " .. self.k .. ", stride " .. self.stride end
  return P
end
nn.MaxPool2d = pool_class("MaxPool2d", F.max_pool2d)
nn.AvgPool2d = pool_class("AvgPool2d", F.avg_pool2d)

nn.GlobalAvgPool = Module:extend("GlobalAvgPool")
function nn.GlobalAvgPool:forward(x) return F.global_avg_pool(x) end

nn.Flatten = Module:extend("Flatten")
function nn.Flatten:init(start) rawset(self, "start", start or 2) end
function nn.Flatten:forward(x) return x:flatten(self.start) end

local function activation(name, method, ...)
  local A = Module:extend(name)
  local defaults = {...}
  function A:init(...)
    local a = {...}
    rawset(self, "args", #a > 0 and a or defaults)
  end
  function A:forward(x) return x[method](x, table.unpack(self.args)) end
  return A
end
nn.ReLU = activation("ReLU", "relu")
nn.Tanh = activation("Tanh", "tanh")
nn.Sigmoid = activation("Sigmoid", "sigmoid")
nn.GELU = activation("GELU", "gelu")
nn.SiLU = activation("SiLU", "silu")
nn.Softplus = activation("Softplus", "softplus")
nn.LeakyReLU = activation("LeakyReLU", "leaky_relu", 0.01)
nn.Softmax = activation("Softmax", "softmax", -1)
nn.LogSoftmax = activation("LogSoftmax", "log_softmax", -1)

nn.Identity = Module:extend("Identity")
function nn.Identity:forward(x) return x end

nn.Dropout = Module:extend("Dropout")
function nn.Dropout:init(p) rawset(self, "p", p or 0.5) end
function nn.Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function nn.Dropout:extra_repr() return "p=" .. self.p end

local function batch_norm_class(name)
  local B = Module:extend(name)
  function B:init(c, o)
    make_tensors(self, "batch_norm", {n_in = c})
    rawset(self, "momentum", opt(o, "momentum", 0.1))
    rawset(self, "eps", opt(o, "eps", 1e-5))
    rawset(self, "c", c)
  end
  function B:forward(x)
    return F.batch_norm(x, self.weight, self.bias, self.running_mean, self.running_var, self.training,
                        self.momentum, self.eps)
  end
  function B:extra_repr() return tostring(self.c) end
  return B
end
nn.BatchNorm2d = batch_norm_class("BatchNorm2d")
nn.BatchNorm1d = batch_norm_class("BatchNorm1d")

nn.LayerNorm = Module:extend("LayerNorm")
function nn.LayerNorm:init(n, o)
  make_tensors(self, "layer_norm", {n_in = n})
  rawset(self, "eps", opt(o, "eps", 1e-5))
end
function nn.LayerNorm:forward(x) return F.layer_norm(x, self.weight, self.bias, self.eps) end

nn.Embedding = Module:extend("Embedding")
function nn.Embedding:init(v, d)
  make_tensors(self, "embedding", {n_in = v, n_out = d, init = "normal"})
end
-- Token ids may come as numbers (a dataset's inputs are f32): they are cast to i64 first.
function nn.Embedding:forward(idx)
  if idx:dtype() ~= "i64" then idx = idx:long() end
  return F.embedding(self.weight, idx)
end

-- A learned vector per position added to a sequence [N,T,E] (GPT's wpe), as the
-- PositionalEmbedding node: a [T,E] table that starts N(0, 0.01^2) like nn.Embedding's.
nn.PositionalEmbedding = Module:extend("PositionalEmbedding")
function nn.PositionalEmbedding:init(t, e, o)
  assert(math.type(t) == "integer" and math.type(e) == "integer", "PositionalEmbedding(T, E): two integers")
  self.weight = mls.parameter({t, e}, {init = opt(o, "init", "normal"), fan_in = e, fan_out = t})
  rawset(self, "desc", t .. " x " .. e)
end
function nn.PositionalEmbedding:forward(x) return x + self.weight end
function nn.PositionalEmbedding:extra_repr() return self.desc end

-- Self-attention over x [N,T,E] as torch.nn.MultiheadAttention(E, heads, batch_first = true)
-- called with query = key = value = x, and as the MultiHeadAttention node: the same tensors
-- (q, k, v, out projections [E,E] as [in, out], then the four biases), the same schemes
-- (q, k, v Xavier-uniform as PyTorch's one [3E,E] in_proj_weight, out U(+-1/sqrt(E)), biases
-- zero), made in the same order, so the same seed gives the node's weights.
nn.MultiheadAttention = Module:extend("MultiheadAttention")
local kProj = {"q_proj", "k_proj", "v_proj", "out_proj"}
function nn.MultiheadAttention:init(e, heads, o)
  assert(math.type(e) == "integer" and math.type(heads) == "integer" and heads >= 1 and e % heads == 0,
         "MultiheadAttention(E, num_heads): two integers, num_heads dividing E")
  for i, name in ipairs(kProj) do
    local init = i < 4 and "xavier_uniform" or "uniform_fan_in"
    self[name .. ".weight"] = mls.parameter({e, e}, {init = init, fan_in = e, fan_out = i < 4 and 3 * e or e})
  end
  if opt(o, "bias", true) then
    for _, name in ipairs(kProj) do self[name .. ".bias"] = mls.parameter({e}, {init = "zeros"}) end
  end
  rawset(self, "e", e)
  rawset(self, "opts", {num_heads = heads, causal = opt(o, "causal", false)})
end
function nn.MultiheadAttention:forward(x)
  local w, b = {}, {}
  for i, name in ipairs(kProj) do
    w[i] = rawget(self, name .. ".weight")
    b[i] = rawget(self, name .. ".bias")
  end
  return F.multi_head_attention(x, w, #b == 4 and b or nil, self.opts)
end
function nn.MultiheadAttention:extra_repr()
  return self.e .. ", heads " .. self.opts.num_heads .. (self.opts.causal and ", causal" or "")
end

-- [SECTION] containers

nn.Sequential = Module:extend("Sequential")
function nn.Sequential:init(...)
  local layers = {...}
  if #layers == 1 and type(layers[1]) == "table" and not is_module(layers[1]) and layers[1].forward == nil then
    layers = layers[1]  -- Sequential{a, b, c}
  end
  rawset(self, "n", 0)
  for _, l in ipairs(layers) do self:add(l) end
end
function nn.Sequential:add(layer)
  local n = self.n + 1
  rawset(self, "n", n)
  self[tostring(n)] = nn.module(layer)
  return self
end
function nn.Sequential:forward(x)
  for i = 1, self.n do x = self[tostring(i)](x) end
  return x
end
function nn.Sequential:__len() return self.n end
nn.Sequential.__index = function(self, k)
  if math.type(k) == "integer" then return rawget(self, tostring(k)) end
  return nn.Sequential[k]
end

-- [SECTION] losses as modules

local function loss_class(name, fn)
  local Lc = Module:extend(name)
  function Lc:init(o) rawset(self, "o", o) end
  function Lc:forward(a, b) return fn(a, b, self.o) end
  return Lc
end
nn.CrossEntropyLoss = loss_class("CrossEntropyLoss", F.cross_entropy)
nn.MSELoss = loss_class("MSELoss", F.mse_loss)
nn.L1Loss = loss_class("L1Loss", F.l1_loss)
nn.BCEWithLogitsLoss = loss_class("BCEWithLogitsLoss", F.bce_with_logits)

return nn
