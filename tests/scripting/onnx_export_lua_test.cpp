// mls.onnx.export: a model built in Lua with mls.nn, written as ONNX through the graph
// exporter, then run by ONNX Runtime (tools/onnx/ort_compare.js, onnxruntime-node under
// build/ort) and by mlstudio's own ONNX reader on the inputs mlstudio's forward saw.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/onnx/onnx_file.h"
#include "engine/onnx/onnx_graph.h"
#include "tests/common/ort_compare.h"
#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

std::vector<float> global_floats(lua::LuaHost& h, const char* name) {
  lua_State* L = h.state();
  lua_getglobal(L, name);
  INFO(name);
  REQUIRE(lua_istable(L, -1));
  std::vector<float> v;
  const lua_Integer n = luaL_len(L, -1);
  for (lua_Integer i = 1; i <= n; ++i) {
    lua_geti(L, -1, i);
    v.push_back(static_cast<float>(lua_tonumber(L, -1)));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return v;
}

// A small CNN with a fixed seed; `x` [3,1,12,12] and `y`, its eager forward in evaluation
// mode, flattened into the globals xs and ys.
const char* kCnn = R"(
  mls.manual_seed(7)
  local nn = mls.nn
  net = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(4, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
  -- Running statistics that are not 0 and 1, so the exported normalisation does something.
  net[2].running_mean = mls.randn{4} * 0.1
  net[2].running_var = mls.rand{4} + 0.5
  local x = mls.randn{3, 1, 12, 12}
  net:eval()
  local y = net(x)
  net:train()
  xs = x:reshape{-1}:tolist()
  ys = y:reshape{-1}:tolist()
)";

// The file's model run by the engine's own ONNX reader on `x` (shape `shape`, batch first).
std::vector<float> engine_forward(const onnx::Model& m, const Shape& shape, const std::vector<float>& x) {
  auto g = onnx::to_graph(m, shape.at(0));
  INFO((g.ok() ? "" : g.error().message));
  REQUIRE(g.ok());
  onnx::HostValue in{shape, DType::F32, {}};
  in.bytes.resize(x.size() * sizeof(float));
  std::memcpy(in.bytes.data(), x.data(), in.bytes.size());
  auto out = onnx::run(*g, cpu::backend(), {{m.inputs[0].name, in}}, {m.outputs[0].name});
  REQUIRE(out.ok());
  return (*out)[0].floats();
}

}  // namespace

TEST_CASE(
    "a CNN built in Lua exports to ONNX, and ONNX Runtime matches mlstudio's forward within 1e-4",
    "[scripting][onnx]") {
  test::TempDir dir("mls_onnx_lua");
  const std::string file = dir.file("cnn.onnx");
  lua::LuaHost h(cpu::backend());
  test::run_ok(h, kCnn);
  test::run_ok(h, "info = mls.onnx.export(net, '" + file +
                      "', {input = {1, 12, 12}})\n"
                      "ops = table.concat(info.ops, ' ')\n"
                      "still_training = net.training and net[2].training");
  const std::vector<float> x = global_floats(h, "xs"), y = global_floats(h, "ys");
  REQUIRE(x.size() == 3 * 12 * 12);
  REQUIRE(y.size() == 3 * 10);
  // The layers became ONNX's own ops (a conv's bias inside Conv, BatchNorm and Linear as one
  // op each), and export left the model in training mode.
  CHECK(test::global_string(h, "ops") ==
        "Conv BatchNormalization Relu MaxPool Conv Relu Flatten Gemm");
  lua_getglobal(h.state(), "still_training");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);

  // The file: traced at batch 1, declared for any batch "N"; read back and run by mlstudio at 3.
  auto m = onnx::read_model(file);
  REQUIRE(m.ok());
  REQUIRE(m->inputs.size() == 1);
  CHECK(m->inputs[0].dims.at(0).param == "N");
  CHECK(m->inputs[0].dims.at(1).value == 1);
  CHECK(m->outputs.at(0).dims.at(1).value == 10);
  CHECK(m->initializers.size() >= 8);  // 2 conv + 4 batch norm + 2 linear tensors
  const std::vector<float> back = engine_forward(*m, {3, 1, 12, 12}, x);
  REQUIRE(back.size() == y.size());
  float engine_diff = 0;
  for (size_t i = 0; i < y.size(); ++i)
    engine_diff = std::max(engine_diff, std::abs(back[i] - y[i]));
  CHECK(engine_diff <= 1e-5f);

  // ONNX Runtime on the same input.
  if (!test::ort_available()) {
    WARN("onnxruntime-node is not installed under " << test::ort_modules().string()
                                                    << " (scripts/setup): ORT not run");
    return;
  }
  test::write_f32(dir.file("x.f32"), x);
  test::write_f32(dir.file("y.f32"), y);
  const test::OrtRun r = test::run_ort(
      nlohmann::json::array(
          {test::ort_case(file, {{dir.file("x.f32"), {3, 1, 12, 12}}}, dir.file("y.f32"), 1e-4)}),
      dir.file("cases.json"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.results.size() == 1);
  CHECK(r.results[0].at("max_abs_diff").get<double>() <= 1e-4);
  CHECK(r.results[0].at("values").get<int>() == 30);
}

TEST_CASE("mls.onnx.export names the op that has no ONNX mapping", "[scripting][onnx]") {
  test::TempDir dir("mls_onnx_lua");
  const std::string file = dir.file("bad.onnx");
  lua::LuaHost h(cpu::backend());
  const std::string err = test::run_err(h, R"(
    local nn = mls.nn
    local net = nn.Sequential(nn.Linear(4, 3), function(x) return x - x:var() end)
    mls.onnx.export(net, ')" + file + R"(', {input = {4}}))");
  CHECK(err.find("mls.onnx.export") != std::string::npos);
  CHECK(err.find("op 'var' (node '2')") !=
        std::string::npos);  // the layer, by its path in the model
  CHECK(err.find("has no ONNX mapping") != std::string::npos);
  CHECK_FALSE(fs::exists(file));
}

TEST_CASE("mls.onnx.export checks its arguments and the sandbox's paths", "[scripting][onnx]") {
  test::TempDir dir("mls_onnx_lua");
  lua::LuaHost h(cpu::backend(), test::sandboxed(dir.str()));
  const std::string outside = (fs::temp_directory_path() / "mls-onnx-outside.onnx").string();
  const std::string err =
      test::run_err(h, "mls.onnx.export(mls.nn.Linear(4, 2), '" + outside + "', {input = {4}})");
  CHECK(err.find(outside) != std::string::npos);
  CHECK_FALSE(fs::exists(outside));
  CHECK(test::run_err(h, "mls.onnx.export(mls.nn.Linear(4, 2), 'a.onnx', {})").find("input") !=
        std::string::npos);
  // Inside the folder it writes; the forward's own error comes back with the model's line.
  test::run_ok(h, "mls.onnx.export(mls.nn.Linear(4, 2), '" + dir.file("ok.onnx") +
                      "', {input = {4}, output_name = 'scores'})");
  CHECK(fs::exists(dir.file("ok.onnx")));
  auto m = onnx::read_model(dir.file("ok.onnx"));
  REQUIRE(m.ok());
  CHECK(m->outputs.at(0).name == "scores");
  const std::string shape_err = test::run_err(
      h, "mls.onnx.export(mls.nn.Linear(4, 2), '" + dir.file("wrong.onnx") + "', {input = {5}})");
  CHECK(shape_err.find("matmul") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("wrong.onnx")));
}

TEST_CASE("a Lua model that folds the batch into another dim exports for any batch size",
          "[scripting][onnx]") {
  test::TempDir dir("mls_onnx_lua");
  const std::string file = dir.file("fold.onnx");
  lua::LuaHost h(cpu::backend());
  // [N, 8] -> [4N, 2] -> [N, 8]: the batch leaves dim 0 alone only at the ends.
  test::run_ok(h, R"(
    mls.manual_seed(3)
    local nn = mls.nn
    net = nn.Sequential(nn.Linear(8, 8), function(x) return x:reshape{-1, 2}:softmax(-1):reshape{-1, 8} end,
                        nn.Linear(8, 3))
    local x = mls.randn{5, 8}
    xs = x:reshape{-1}:tolist()
    ys = net(x):reshape{-1}:tolist()
    mls.onnx.export(net, ')" +
                      file + R"(', {input = {8}, batch = 2}))");
  const std::vector<float> x = global_floats(h, "xs"), y = global_floats(h, "ys");
  auto m = onnx::read_model(file);
  REQUIRE(m.ok());
  CHECK(m->inputs.at(0).dims.at(0).param == "N");
  const std::vector<float> back = engine_forward(*m, {5, 8}, x);
  REQUIRE(back.size() == y.size());
  for (size_t i = 0; i < y.size(); ++i) CHECK(std::abs(back[i] - y[i]) <= 1e-5f);
}
