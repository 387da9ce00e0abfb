// Every layer type with an ONNX form exports through the graph exporter: its badge is clean
// (the ops it lowers to all have a mapping), and a small model made of it is written (libonnx's
// checker and strict shape inference pass), read back and run to mlstudio's own values, by the
// engine and, where onnxruntime-node is installed under build/ort, by ONNX Runtime.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/onnx/graph_export.h"
#include "engine/onnx/onnx_file.h"
#include "engine/onnx/onnx_graph.h"
#include "engine/train/init.h"
#include "engine/train/rng.h"
#include "nodes/catalogue.h"
#include "nodes/lower.h"
#include "nodes/onnx_export.h"
#include "tests/common/ort_compare.h"
#include "tests/common/temp_dir.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

struct LayerCase {
  std::string type;
  nlohmann::json params;
  Shape sample;  // one input sample
};

// input -> layer (both inputs from the input for two-input layers) -> flatten -> linear(3) -> loss.
nodes::Document model_of(const LayerCase& c) {
  nodes::Document doc;
  doc.name = "layer";
  const nodes::NodeTypeDef* t = nodes::builtin_catalogue().find(c.type);
  REQUIRE(t);
  doc.nodes.push_back({"x", "mls.input", 1, nlohmann::json::object()});
  doc.nodes.push_back({"layer", c.type, 1, c.params});
  doc.nodes.push_back({"flat", "mls.flatten", 1, nlohmann::json::object()});
  doc.nodes.push_back({"fc", "mls.linear", 1, {{"out_features", 3}}});
  doc.nodes.push_back({"y", "mls.labels", 1, nlohmann::json::object()});
  doc.nodes.push_back({"loss", "mls.cross_entropy", 1, nlohmann::json::object()});
  for (const nodes::PortDef& p : t->inputs) doc.links.push_back({"x", "out", "layer", p.name});
  doc.links.push_back({"layer", "out", "flat", "in"});
  doc.links.push_back({"flat", "out", "fc", "in"});
  doc.links.push_back({"fc", "out", "loss", "logits"});
  doc.links.push_back({"y", "out", "loss", "labels"});
  return doc;
}

}  // namespace

TEST_CASE("every layer type with an ONNX form exports, and the file computes what mlstudio does",
          "[onnx][layers]") {
  const std::vector<LayerCase> cases = {
      {"mls.relu", {}, {6}},
      {"mls.tanh", {}, {6}},
      {"mls.sigmoid", {}, {6}},
      {"mls.dropout", {}, {6}},
      {"mls.leaky_relu", {{"negative_slope", 0.2}}, {6}},
      {"mls.elu", {}, {6}},
      {"mls.softplus", {}, {6}},
      {"mls.silu", {}, {6}},
      {"mls.gelu", {{"approximate", "tanh"}}, {6}},
      {"mls.softmax", {}, {6}},
      {"mls.log_softmax", {}, {6}},
      {"mls.reshape", {{"shape", "3,2"}}, {6}},
      {"mls.linear", {{"out_features", 4}, {"bias", false}}, {6}},
      {"mls.conv2d", {{"out_channels", 4}, {"padding", 1}, {"stride", 2}}, {2, 6, 6}},
      {"mls.conv2d", {{"out_channels", 4}, {"groups", 2}, {"bias", false}}, {2, 6, 6}},
      {"mls.conv_transpose2d",
       {{"out_channels", 3}, {"stride", 2}, {"output_padding", 1}},
       {2, 4, 4}},
      {"mls.max_pool2d", {}, {2, 6, 6}},
      {"mls.avg_pool2d", {{"kernel_size", 3}, {"stride", 1}, {"padding", 1}}, {2, 6, 6}},
      {"mls.global_avg_pool", {}, {2, 6, 6}},
      {"mls.batch_norm", {}, {2, 6, 6}},
      {"mls.batch_norm", {}, {6}},
      {"mls.layer_norm", {}, {6}},
      {"mls.add", {}, {6}},
      {"mls.concat", {{"axis", 1}}, {6}},
      {"mls.multi_head_attention", {{"num_heads", 2}}, {4, 8}},  // its composite's ops all map
  };
  test::TempDir dir("mls_onnx_layers");
  nlohmann::json manifest = nlohmann::json::array();
  Backend& be = cpu::backend();
  int k = 0;
  for (const LayerCase& c : cases) {
    INFO(c.type << " " << c.params.dump());
    ++k;
    nodes::NodeDoc node{"layer", c.type, 1,
                        c.params.is_null() ? nlohmann::json::object() : c.params};
    CHECK(nodes::onnx_export_problem(node) == "");
    nodes::Document doc = model_of({c.type, node.params, c.sample});
    nodes::InferContext data{c.sample, 3, {}};
    const int64_t batch = 3;  // not the exporter's own batch: the file must take any
    std::map<std::string, Refs> outs;
    auto mg = nodes::lower(doc, data, batch, false, "layer.mls", &outs);
    REQUIRE(mg.ok());
    // Random weights (running statistics too, so BatchNorm's do something) and input.
    std::map<std::string, CheckpointTensor> weights;
    std::vector<Tensor> keep;
    PlanOptions po;
    po.outputs = {outs.at("fc").at(0)};
    auto plan = CompiledPlan::compile(mg->graph, be, po);
    REQUIRE(plan.ok());
    for (size_t i = 0; i < mg->graph.params().size(); ++i) {
      const Ref r = mg->graph.params()[i];
      const Value& v = mg->graph.value(r);
      keep.push_back(Tensor::empty(be, DType::F32, v.type.shape, AllocTag::Parameter));
      REQUIRE(initialise(keep.back(), {"uniform_fan_in", 4, 4}, mix_seed(77, i)).ok());
      if (v.name.find("running_var") != std::string::npos) {  // variances must be positive
        std::vector<float> var = keep.back().to_f32();
        for (float& x : var) x = 0.5f + std::abs(x);
        keep.back().fill_from_host(var);
      }
      weights[v.name] = onnx::host_copy(v.name, keep.back());
      REQUIRE(plan->bind(r, keep.back()).ok());
    }
    Shape xs{batch};
    xs.insert(xs.end(), c.sample.begin(), c.sample.end());
    keep.push_back(Tensor::empty(be, DType::F32, xs, AllocTag::Input));
    REQUIRE(initialise(keep.back(), {"uniform_fan_in", 1, 1}, mix_seed(5, 0)).ok());
    const std::vector<float> x = keep.back().to_f32();
    for (Ref r : mg->graph.inputs()) {
      if (r == outs.at("x").at(0)) {
        REQUIRE(plan->bind(r, keep.back()).ok());
      } else {
        const ValueType& t = mg->graph.type_of(r);
        keep.push_back(Tensor::zeros(be, t.dtype, t.shape, AllocTag::Input));
        REQUIRE(plan->bind(r, keep.back()).ok());
      }
    }
    plan->run();
    const std::vector<float> mine = plan->tensor(po.outputs[0]).to_f32();

    auto ex = nodes::export_onnx(doc, data, weights, {}, "layer.mls");
    INFO((ex.ok() ? "" : ex.error().message));
    REQUIRE(ex.ok());
    auto bytes = onnx::serialize(ex->model);  // libonnx's checker and strict shape inference
    REQUIRE(bytes.ok());
    auto back = onnx::parse(*bytes, "layer.onnx");
    REQUIRE(back.ok());
    CHECK(back->inputs.at(0).dims.at(0).param == "N");
    auto g = onnx::to_graph(*back, batch);
    INFO((g.ok() ? "" : g.error().message));
    REQUIRE(g.ok());
    onnx::HostValue in{xs, DType::F32, {}};
    in.bytes.resize(x.size() * sizeof(float));
    std::memcpy(in.bytes.data(), x.data(), in.bytes.size());
    auto file = onnx::run(*g, be, {{back->inputs[0].name, in}}, {back->outputs[0].name});
    REQUIRE(file.ok());
    const std::vector<float> theirs = (*file)[0].floats();
    REQUIRE(theirs.size() == mine.size());
    float diff = 0;
    for (size_t i = 0; i < mine.size(); ++i) diff = std::max(diff, std::abs(theirs[i] - mine[i]));
    CHECK(diff <= 1e-5f);

    const std::string base = dir.file("case" + std::to_string(k));
    std::ofstream(base + ".onnx", std::ios::binary) << *bytes;
    test::write_f32(base + ".x", x);
    test::write_f32(base + ".y", mine);
    manifest.push_back(test::ort_case(base + ".onnx", {{base + ".x", xs}}, base + ".y", 1e-4));
  }
  // ONNX Runtime on every file at once.
  if (!test::ort_available()) {
    WARN("onnxruntime-node is not installed under " << test::ort_modules().string()
                                                    << ": the engine checks alone");
    return;
  }
  const test::OrtRun r = test::run_ort(manifest, dir.file("cases.json"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.results.size() == cases.size());
}

TEST_CASE("a layer whose ops have no ONNX mapping says which op, on its badge and in the export",
          "[onnx][layers]") {
  for (const auto& [type, params] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"mls.lstm", {{"hidden_size", 4}}},
           {"mls.gru", {{"hidden_size", 4}}},
           {"mls.multi_head_attention", {{"num_heads", 2}, {"causal", true}}},
           {"mls.embedding", {{"num_embeddings", 10}, {"embedding_dim", 4}}},
           {"mls.gelu", nlohmann::json::object()}}) {
    INFO(type);
    const std::string p = nodes::onnx_export_problem({"n", type, 1, params});
    CHECK(p.find("has no ONNX export yet: op '") != std::string::npos);
  }
  // The export lists the node and the op before anything is written.
  nodes::Document doc = model_of({"mls.gelu", nlohmann::json::object(), {6}});
  auto ex = nodes::export_onnx(doc, {{6}, 3, {}}, {}, {}, "gelu.mls");
  REQUIRE_FALSE(ex.ok());
  CHECK(ex.error().message.find("gelu.mls: cannot export to ONNX:") != std::string::npos);
  CHECK(ex.error().message.find("node 'layer' (mls.gelu)") != std::string::npos);
  CHECK(ex.error().message.find("op 'gelu'") != std::string::npos);
  CHECK(ex.error().message.find("Erf") != std::string::npos);
}
