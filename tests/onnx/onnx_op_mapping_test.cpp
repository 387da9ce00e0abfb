// The ONNX op mapping table (engine/onnx/onnx_ops.h), walked as the conformance suite walks
// the op registry: every engine op that the table writes is written from each of its own f32
// samples (engine/core/op.h), passes libonnx's checker and strict shape inference, is read
// back through the same table, and computes what the engine computes, in the engine and, where
// onnxruntime-node is installed under build/ort, in ONNX Runtime. An op added to the table
// cannot skip it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/onnx/graph_export.h"
#include "engine/onnx/onnx_file.h"
#include "engine/onnx/onnx_graph.h"
#include "engine/onnx/onnx_ops.h"
#include "tests/common/ort_compare.h"
#include "tests/common/temp_dir.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

std::vector<float> draw(const OpSample& s, int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double u = s.lo + (s.hi - s.lo) * static_cast<double>(x >> 11) / 9007199254740992.0;
    if (std::abs(u) < s.min_abs) u = u < 0 ? -s.min_abs : s.min_abs;
    f = static_cast<float>(u);
  }
  return v;
}

}  // namespace

TEST_CASE(
    "every engine op the ONNX table writes round-trips its samples through the file and ONNX "
    "Runtime",
    "[onnx][ops]") {
  test::TempDir dir("mls_onnx_ops");
  Backend& be = cpu::backend();
  std::set<std::string> written, refused;
  nlohmann::json manifest = nlohmann::json::array();
  int k = 0;
  for (const OpDef* def : op_registry().all()) {
    if (!onnx::mapping_for_engine(def->name) || !def->samples) continue;
    for (const OpSample& s : def->samples()) {
      bool f32 = !s.forward_only;
      for (const ValueType& t : s.inputs) f32 = f32 && t.dtype == DType::F32;
      if (!f32) continue;
      INFO("op " << def->name << " " << s.attrs.to_string() << " " << s.note);
      Graph g(def->name);
      Refs ins;
      for (size_t i = 0; i < s.inputs.size(); ++i)
        ins.push_back(g.add_input("in" + std::to_string(i), s.inputs[i]));
      auto outs = g.add_node(def->name, ins, s.attrs);
      REQUIRE(outs.ok());
      if (g.type_of(outs->at(0)).dtype != DType::F32) continue;
      g.set_outputs({outs->at(0)});
      if (std::string why = onnx::export_problems(g); !why.empty()) {
        // A mapped op may refuse some attributes (exact GELU, training dropout), saying why.
        CHECK(why.find("has no ONNX mapping") == std::string::npos);
        refused.insert(def->name);
        continue;
      }
      auto m = onnx::export_graph(g, {}, {});
      REQUIRE(m.ok());
      auto bytes = onnx::serialize(*m);
      INFO((bytes.ok() ? "" : bytes.error().message));
      REQUIRE(bytes.ok());
      auto back = onnx::parse(*bytes, def->name + ".onnx");
      REQUIRE(back.ok());
      auto read = onnx::to_graph(*back, 1);
      INFO((read.ok() ? "" : read.error().message));
      REQUIRE(read.ok());

      // The engine's own value of the op, and the file's.
      auto plan = CompiledPlan::compile(g, be, {});
      REQUIRE(plan.ok());
      std::vector<Tensor> keep;
      std::map<std::string, onnx::HostValue> feeds;
      ++k;
      nlohmann::json inputs = nlohmann::json::array();
      for (size_t i = 0; i < ins.size(); ++i) {
        const Shape& shape = s.inputs[i].shape;
        const std::vector<float> v = draw(s, numel(shape), static_cast<uint64_t>(k * 16 + i));
        keep.push_back(Tensor::from_f32(be, shape, v));
        REQUIRE(plan->bind(ins[i], keep.back()).ok());
        onnx::HostValue h{shape, DType::F32, {}};
        h.bytes.resize(v.size() * sizeof(float));
        std::memcpy(h.bytes.data(), v.data(), h.bytes.size());
        feeds[back->inputs.at(i).name] = h;
        const std::string file = dir.file("case" + std::to_string(k) + "_in" + std::to_string(i));
        test::write_f32(file, v);
        inputs.push_back({{"file", file}, {"shape", shape}});
      }
      plan->run();
      const std::vector<float> mine = plan->tensor(outs->at(0)).to_f32();
      auto file = onnx::run(*read, be, feeds, {back->outputs[0].name});
      REQUIRE(file.ok());
      const std::vector<float> theirs = (*file)[0].floats();
      REQUIRE(theirs.size() == mine.size());
      for (size_t i = 0; i < mine.size(); ++i)
        CHECK(std::abs(theirs[i] - mine[i]) <= 1e-5 * std::max(1.0f, std::abs(mine[i])));
      written.insert(def->name);

      const std::string base = dir.file("case" + std::to_string(k));
      std::ofstream(base + ".onnx", std::ios::binary) << *bytes;
      test::write_f32(base + ".ref", mine);
      manifest.push_back({{"model", base + ".onnx"},
                          {"inputs", inputs},
                          {"reference", base + ".ref"},
                          {"tolerance", 1e-5}});
    }
  }
  // Not vacuous: the table's ops are written, from elementwise to windows and norms.
  for (const char* op : {"add",        "mul",        "relu",
                         "tanh",       "softmax",    "log_softmax",
                         "matmul",     "conv2d",     "conv_transpose2d",
                         "max_pool2d", "avg_pool2d", "reshape",
                         "transpose",  "concat",     "mean",
                         "layer_norm", "scale",      "add_scalar",
                         "clamp",      "leaky_relu", "silu",
                         "expand",     "sin",        "cos"}) {
    INFO(op);
    CHECK(written.count(op));
  }
  // GELU's tanh sample is written; its exact one is refused, by name.
  CHECK(written.count("gelu"));
  CHECK(refused.count("gelu"));
  INFO("written: " << written.size() << " ops from " << k << " samples");
  CHECK(written.size() >= 25);

  if (!test::ort_available()) {
    WARN("onnxruntime-node is not installed under " << test::ort_modules().string()
                                                    << ": ONNX Runtime not run");
    return;
  }
  const test::OrtRun r = test::run_ort(manifest, dir.file("manifest.json"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.results.size() == manifest.size());
}

TEST_CASE("an ONNX Expand to a huge shape is refused by name, not allocated",
          "[onnx][ops][hostile]") {
  onnx::Model m;
  m.inputs.push_back({"x", DType::F32, {1, 4}});
  const std::string shape = m.add_ints("shape", {int64_t{1} << 20, int64_t{1} << 20, 4});
  m.add("Expand", {"x", shape}, {}, "y");
  m.outputs.push_back({"y", DType::F32, {int64_t{1} << 20, int64_t{1} << 20, 4}});
  auto g = onnx::to_graph(m, 1);
  REQUIRE_FALSE(g.ok());
  CHECK(g.error().message.find("node 'y' (Expand)") != std::string::npos);
  CHECK(g.error().message.find("2^31") != std::string::npos);
}
