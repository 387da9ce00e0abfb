// mls.onnx: a model built in Lua, written as an ONNX file. The model's forward is traced in
// evaluation mode on a symbolic input, and the traced graph goes through the engine's graph
// exporter (engine/onnx/graph_export.h), the same op mapping the importer reads.
//
//   local net = mls.nn.Sequential(mls.nn.Conv2d(1, 8, 3), mls.nn.ReLU(), mls.nn.Flatten(),
//                                 mls.nn.Linear(8 * 26 * 26, 10))
//   local info = mls.onnx.export(net, "net.onnx", {input = {1, 28, 28}})
//   -- info.nodes == 4, info.ops == {"Conv", "Relu", "Flatten", "Gemm"}
//   -- options: input_name ("input"), output_name ("output"), batch (the traced batch, 1)
//
// The file takes [N, 1, 28, 28] for any N: the forward is traced at two batch sizes, and the
// dims that differ are the batch's. The model is left in the training mode it had.
#include "engine/onnx/graph_export.h"
#include "engine/onnx/onnx_file.h"
#include "scripting/bindings.h"
#include "scripting/libs.h"

namespace mls::lua {

namespace {

// model:train(mode)
void set_training(lua_State* L, int model, bool mode) {
  lua_getfield(L, model, "train");
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushvalue(L, model);
  lua_pushboolean(L, mode);
  lua_call(L, 2, 0);
}

// The trace mls.onnx.export is recording (its id, in the registry while it runs), whose ops
// _scope labels.
constexpr const char* kExportTraceKey = "mls.onnx.trace";

// model:_label_layers(on): the child modules label what they record with their paths.
void label_layers(lua_State* L, int model, bool on) {
  lua_getfield(L, model, "_label_layers");
  if (!lua_isfunction(L, -1)) {
    lua_pop(L, 1);
    return;
  }
  lua_pushvalue(L, model);
  lua_pushboolean(L, on);
  lua_call(L, 2, 0);
}

// mls.onnx._scope(label) -> the label it replaces: what the exported trace's next ops carry.
int l_scope(lua_State* L) {
  const char* label = luaL_checkstring(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, kExportTraceKey);
  const auto id = static_cast<uint32_t>(lua_tointeger(L, -1));
  lua_pop(L, 1);
  Trace* t = id ? runtime(L).find_trace(id) : nullptr;
  if (t == nullptr) {
    lua_pushstring(L, "");
    return 1;
  }
  lua_pushstring(L, t->graph().label().c_str());
  t->graph().set_label(label);
  return 1;
}

// Calls model(x) on a traced input; the graph's output is what it returns. Lua errors come
// back as the message.
Result<Graph> trace_forward(lua_State* L, int model, const Shape& x_shape,
                            const std::string& input_name,
                            const std::vector<std::pair<std::string, LuaTensor*>>& params,
                            const std::vector<std::pair<std::string, LuaTensor*>>& buffers,
                            std::vector<LuaTensor*>* tensors) {
  Runtime& rt = runtime(L);
  const int top = lua_gettop(L);
  Trace& tr = rt.begin_trace("model");
  tr.training = false;
  for (const auto& [name, t] : params) tr.register_param(*t, name, true);
  for (const auto& [name, t] : buffers) tr.register_param(*t, name, false);
  Ref x = tr.graph().add_input(input_name, {DType::F32, x_shape});
  lua_pushinteger(L, tr.id);
  lua_setfield(L, LUA_REGISTRYINDEX, kExportTraceKey);
  lua_pushcfunction(L, traceback_handler);
  lua_pushvalue(L, model);
  push_traced(L, tr.id, x);
  std::string err;
  const int status = lua_pcall(L, 1, 1, top + 1);
  lua_pushnil(L);
  lua_setfield(L, LUA_REGISTRYINDEX, kExportTraceKey);
  if (status != LUA_OK) {
    err = std::string("the model's forward failed: ") +
          (lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object)");
  } else {
    auto* y = static_cast<LuaTensor*>(luaL_testudata(L, -1, "mls.Tensor"));
    if (!tr.error.empty())
      err = tr.error;
    else if (!y || y->trace_id != tr.id)
      err = "the model's forward must return a tensor computed from its input";
    else
      tr.graph().set_outputs({y->ref});
  }
  lua_settop(L, top);
  Graph g = std::move(tr.graph());
  *tensors = tr.params;  // the tensors behind g.params(), in order (captured ones included)
  rt.end_trace(tr);
  if (!err.empty()) return make_error(err);
  if (auto v = g.verify(); !v) return v.error();
  return g;
}

// mls.onnx.export(model, path, {input = {C, H, W} [, batch =, input_name =, output_name =]})
int l_export(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  const std::string path = luaL_checkstring(L, 2);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_getfield(L, 3, "input");
  if (lua_isnil(L, -1))
    return luaL_argerror(L, 3, "give the shape of one input sample: {input = {1, 28, 28}}");
  IntList sample = check_shape(L, lua_gettop(L));
  lua_pop(L, 1);
  const int64_t batch = opt_integer(L, 3, "batch", 1);
  if (batch < 1 || batch > 4096) return luaL_argerror(L, 3, "batch must be in [1, 4096]");
  const std::string input_name = opt_string(L, 3, "input_name", "input");
  const std::string output_name = opt_string(L, 3, "output_name", "output");
  Runtime& rt = runtime(L);

  std::vector<std::pair<std::string, LuaTensor*>> params, buffers;
  lua_newtable(L);  // keeps the tensors alive while the trace runs (on the stack until we return)
  const int anchor = lua_gettop(L);
  for (auto [method, out] : {std::pair{"named_parameters", &params}, std::pair{"named_buffers", &buffers}})
    if (!named_tensors(L, 1, method, anchor, "mls.onnx.export", out))
      luaL_error(L, "mls.onnx.export: the model must be a module (it has no %s())", method);
  lua_getfield(L, 1, "training");
  const bool was_training = lua_isnil(L, -1) || lua_toboolean(L, -1);
  lua_pop(L, 1);
  set_training(L, 1, false);
  label_layers(L, 1, true);

  bool ok = true;
  int nodes = 0;
  std::vector<std::string> ops;
  {
    Shape x_shape{batch};
    x_shape.insert(x_shape.end(), sample.v.begin(), sample.v.begin() + sample.n);
    std::vector<LuaTensor*> tensors, twin_tensors;
    auto g = trace_forward(L, 1, x_shape, input_name, params, buffers, &tensors);
    // Traced at a second batch size too: the dims that differ carry the batch.
    x_shape[0] = batch + 1;
    auto twin = g ? trace_forward(L, 1, x_shape, input_name, params, buffers, &twin_tensors) : g;
    std::string target = path;
    if (g) {
      if (auto c = rt.allowed_path(path, true); !c) {
        rt.error = c.error().message;
        ok = false;
      } else {
        target = *c;
      }
    }
    if (!g || !twin) {
      rt.error = "mls.onnx.export: " + (g ? twin : g).error().message;
      ok = false;
    } else if (ok) {
      std::map<std::string, CheckpointTensor> values;
      for (size_t i = 0; i < g->params().size() && i < tensors.size(); ++i) {
        const std::string& name = g->value(g->params()[i]).name;
        values[name] = onnx::host_copy(name, tensors[i]->value);
      }
      onnx::GraphExportOptions o;
      o.batch = batch;
      o.twin = &*twin;
      o.output_names = {output_name};
      auto m = onnx::export_graph(*g, values, o);
      if (!m) {
        rt.error = "mls.onnx.export: " + m.error().message;
        ok = false;
      } else {
        m->doc = "Exported from a Lua model by mlstudio";
        if (auto w = onnx::write_model(*m, target); !w) {
          rt.error = "mls.onnx.export: " + w.error().message;
          ok = false;
        }
        nodes = static_cast<int>(m->nodes.size());
        for (const onnx::Node& n : m->nodes) ops.push_back(n.op_type);
      }
    }
  }
  label_layers(L, 1, false);
  set_training(L, 1, was_training);
  if (!ok) return raise(L);
  lua_createtable(L, 0, 3);
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  lua_pushinteger(L, nodes);
  lua_setfield(L, -2, "nodes");
  lua_createtable(L, static_cast<int>(ops.size()), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    lua_pushstring(L, ops[i].c_str());
    lua_seti(L, -2, static_cast<lua_Integer>(i + 1));
  }
  lua_setfield(L, -2, "ops");
  return 1;
}

const luaL_Reg kOnnx[] = {{"export", l_export}, {"_scope", l_scope}, {nullptr, nullptr}};

}  // namespace

void open_onnx_lib(lua_State* L) {
  lua_newtable(L);
  set_funcs(L, kOnnx);
  lua_setfield(L, -2, "onnx");
}

}  // namespace mls::lua
