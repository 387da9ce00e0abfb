// One declaration per layer (engine/ops/layers.h): a layer drawn as a node and the same layer
// made by mls.nn get the same parameters (names, shapes, fans, schemes) and, under one seed,
// the same initial values.
#include <catch2/catch.hpp>

#include "engine/cpu/cpu_backend.h"
#include "engine/ops/layers.h"
#include "engine/train/init.h"
#include "engine/train/rng.h"
#include "nodes/catalogue.h"
#include "nodes/lower.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;

namespace {

struct Initial {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

// The node lowered alone on an input of `in_shape`, its parameters initialised as the trainer
// initialises a graph's: the i-th from mix_seed(seed, i) (engine/train/trainer.cpp).
std::vector<Initial> node_params(const std::string& type_id, const nlohmann::json& params,
                                 const Shape& in_shape, uint64_t seed) {
  const nodes::NodeTypeDef* type = nodes::builtin_catalogue().find(type_id);
  REQUIRE(type);
  auto full = nodes::complete_params(*type, params);
  REQUIRE(full.ok());
  ModelGraph model{Graph("node"), {}, {}, {}, {}, {}};
  Refs in{model.graph.add_input("x", {DType::F32, in_shape})};
  nodes::InferContext data{{in_shape.begin() + 1, in_shape.end()}, 10, {}};
  nodes::LowerContext ctx{model, "layer", *full, in, in_shape[0], data, false};
  REQUIRE(type->lower(ctx).ok());
  std::vector<Initial> out;
  for (size_t i = 0; i < model.graph.params().size(); ++i) {
    const Value& v = model.graph.value(model.graph.params()[i]);
    Tensor t = Tensor::empty(cpu::backend(), DType::F32, v.type.shape, AllocTag::Parameter);
    REQUIRE(initialise(t, v.init, mix_seed(seed, i)).ok());
    out.push_back({v.name.substr(std::string("layer.").size()), v.type.shape, t.to_f32()});
  }
  return out;
}

// `make` (a Lua expression) after mls.manual_seed(seed): its named_parameters and buffers.
std::vector<Initial> lua_params(lua::LuaHost& h, const std::string& make, uint64_t seed) {
  test::run_ok(h, "mls.manual_seed(" + std::to_string(seed) + ")\nlocal m = " + make + R"(
    got = {}
    local all = m:named_parameters()
    for _, nb in ipairs(m:named_buffers()) do table.insert(all, nb) end
    for _, nt in ipairs(all) do
      table.insert(got, {name = nt[1], shape = nt[2]:shape(), values = nt[2]:reshape{-1}:tolist()})
    end)");
  lua_State* L = h.state();
  lua_getglobal(L, "got");
  std::vector<Initial> out;
  for (lua_Integer i = 1; i <= luaL_len(L, -1); ++i) {
    lua_geti(L, -1, i);
    Initial p;
    lua_getfield(L, -1, "name");
    p.name = lua_tostring(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "shape");
    for (lua_Integer d = 1; d <= luaL_len(L, -1); ++d) {
      lua_geti(L, -1, d);
      p.shape.push_back(lua_tointeger(L, -1));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "values");
    for (lua_Integer k = 1; k <= luaL_len(L, -1); ++k) {
      lua_geti(L, -1, k);
      p.values.push_back(static_cast<float>(lua_tonumber(L, -1)));
      lua_pop(L, 1);
    }
    lua_pop(L, 2);
    out.push_back(std::move(p));
  }
  lua_pop(L, 1);
  return out;
}

void require_same(const std::vector<Initial>& node, const std::vector<Initial>& lua) {
  REQUIRE(node.size() == lua.size());
  for (size_t i = 0; i < node.size(); ++i) {
    INFO("parameter " << node[i].name);
    CHECK(node[i].name == lua[i].name);
    CHECK(node[i].shape == lua[i].shape);
    REQUIRE(node[i].values.size() == lua[i].values.size());
    CHECK(node[i].values == lua[i].values);  // bit for bit: one declaration, one generator
  }
}

}  // namespace

TEST_CASE("a Conv2d node and nn.Conv2d with one seed and config get the same parameters and values",
          "[scripting][layers]") {
  lua::LuaHost h(cpu::backend());
  const auto node = node_params(
      "mls.conv2d", {{"out_channels", 6}, {"kernel_size", 3}, {"padding", 1}, {"groups", 2}},
      {2, 4, 9, 9}, 31);
  const auto lua = lua_params(h, "mls.nn.Conv2d(4, 6, 3, {padding = 1, groups = 2})", 31);
  REQUIRE(node.size() == 2);
  CHECK(node[0].shape == Shape{6, 2, 3, 3});
  CHECK(node[1].shape == Shape{6});
  require_same(node, lua);
  // Not all equal: the values are drawn, and weight and bias from different streams.
  CHECK(node[0].values[0] != node[0].values[1]);
  CHECK(node[1].values[0] != node[0].values[0]);
  // Another seed, other values.
  CHECK(lua_params(h, "mls.nn.Conv2d(4, 6, 3, {padding = 1, groups = 2})", 32)[0].values !=
        node[0].values);
}

TEST_CASE("Linear, BatchNorm and LayerNorm nodes and their mls.nn layers share one declaration",
          "[scripting][layers]") {
  lua::LuaHost h(cpu::backend());
  require_same(
      node_params("mls.linear", {{"out_features", 5}, {"init", "xavier_uniform"}}, {3, 7}, 5),
      lua_params(h, "mls.nn.Linear(7, 5, {init = 'xavier_uniform'})", 5));
  require_same(node_params("mls.linear", {{"out_features", 5}, {"bias", false}}, {3, 7}, 5),
               lua_params(h, "mls.nn.Linear(7, 5, {bias = false})", 5));
  // Trainable scale and shift first, then the running statistics (buffers in Lua).
  require_same(node_params("mls.batch_norm", nlohmann::json::object(), {2, 3, 4, 4}, 9),
               lua_params(h, "mls.nn.BatchNorm2d(3)", 9));
  require_same(node_params("mls.layer_norm", nlohmann::json::object(), {2, 6}, 9),
               lua_params(h, "mls.nn.LayerNorm(6)", 9));
}

TEST_CASE("mls.layer_params gives the declaration, a bad layer or group count is named",
          "[scripting][layers]") {
  lua::LuaHost h(cpu::backend());
  test::run_ok(h, R"(
    local ps = mls.layer_params("conv2d", {n_in = 3, n_out = 16, kernel = 5})
    n, w, b = #ps, ps[1], ps[2]
    shape = table.concat(w.shape, ",")
  )");
  CHECK(test::global_number(h, "n") == 2);
  CHECK(test::global_string(h, "shape") == "16,3,5,5");
  test::run_ok(h, "fan_in, fan_out, scheme, bias_scheme = w.fan_in, w.fan_out, w.init, b.init");
  CHECK(test::global_number(h, "fan_in") == 75);
  CHECK(test::global_number(h, "fan_out") == 400);
  CHECK(test::global_string(h, "scheme") == "kaiming_uniform");
  CHECK(test::global_string(h, "bias_scheme") == "uniform_fan_in");
  CHECK(test::run_err(h, "mls.layer_params('lstm2d', {})").find("no layer 'lstm2d'") !=
        std::string::npos);
  CHECK(
      test::run_err(h, "mls.layer_params('conv2d', {n_in = 4, n_out = 6, kernel = 3, groups = 4})")
          .find("groups 4 must divide") != std::string::npos);
  // The node types' weight shapes come from the same place.
  auto ps = layer_params("conv_transpose2d", {.in = 4, .out = 6, .kernel = 3, .groups = 2});
  REQUIRE(ps.ok());
  CHECK(ps->at(0).shape == Shape{4, 3, 3, 3});
  CHECK(ps->at(0).init.fan_in == 27);
  CHECK(ps->at(0).init.fan_out == 36);
}
