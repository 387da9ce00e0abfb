// ONNX export and import through the same functions `mlstudio export` and `import` call:
// every export is re-read and matched node by node, a round trip gives the same outputs,
// a model written by python3-onnx imports and matches numpy, int8 files are small, and
// bad input gets messages that name the file and node.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "datasets/npy.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/onnx/onnx_file.h"
#include "nodes/onnx_export.h"
#include "runner/model_export.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mls-onnx-test-" + std::to_string(::getpid())) / name;
  // Fresh: a process of an earlier run may have had this pid and left its files here
  // (an import refuses to overwrite its output).
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string example(const std::string& name) { return std::string(MLS_SOURCE_DIR) + "/resources/examples/" + name; }

runner::Say quiet = [](const std::string&) {};

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A project with little data loaded: the tests need a batch, not an epoch.
runner::Project open_small(const std::string& project, int64_t test_limit) {
  runner::ProjectOptions po;
  po.path = project;
  po.limit = 64;
  po.test_limit = test_limit;
  auto p = runner::open_project(po);
  REQUIRE(p);
  return std::move(*p);
}

// The model's outputs for `batch` with the project's weights (its "weights" file, if any).
std::vector<float> outputs_of(const std::string& project, const HostBatch& batch) {
  runner::Project p = open_small(project, 64);
  Trainer t(cpu::backend(), p.builder(), p.train_config());
  REQUIRE(t.init());
  REQUIRE(runner::apply_initial_weights(t, p));
  auto out = t.predict(batch);
  REQUIRE(out);
  return *out;
}

double max_abs(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

HostBatch test_batch(const std::string& project, int64_t n) {
  runner::Project p = open_small(project, n);
  HostBatch b;
  p.test->start_epoch(0);
  REQUIRE(p.test->next(n, b));
  return b;
}

}  // namespace

TEST_CASE("an exported CNN is re-read and matches node by node, and imports back to the same outputs", "[onnx]") {
  fs::path dir = scratch("roundtrip");
  runner::ExportOptions o;
  o.project.path = example("fashion-mnist-cnn.mls");
  o.project.limit = 256;
  o.project.test_limit = 128;
  o.out = (dir / "cnn.onnx").string();
  auto r = runner::export_project(o, cpu::backend(), quiet);
  REQUIRE(r);
  CHECK(r->checked_samples == 128);
  // image, conv1, bn1, relu1, pool1, conv2, bn2, relu2, pool2, flat, fc1, relu3, fc2, relu4, fc3
  REQUIRE(r->checks.size() == 15);
  for (const auto& c : r->checks) {
    INFO(c.node << " differs by " << c.max_abs);
    CHECK(c.max_abs <= 1e-4 * c.scale);
  }
  CHECK(r->parameters == 61772);
  auto back = onnx::read_model(o.out);
  REQUIRE(back);
  CHECK(back->inputs.at(0).dtype == DType::U8);  // raw pixels: the scaling is in the graph
  CHECK(back->metadata_value("mlstudio.classes").find("Ankle boot") != std::string::npos);
  // The dataset as the project has it: --limit and --test-limit only cut the export's check.
  const auto dataset = nlohmann::json::parse(back->metadata_value("mlstudio.dataset"));
  CHECK(dataset.value("limit", 0) == 0);
  CHECK(dataset.value("test_limit", 0) == 0);
  CHECK(dataset.value("source", "") == "fashion-mnist");

  runner::ImportOptions io;
  io.model = o.out;
  io.out = (dir / "cnn-imported.mls").string();
  auto im = runner::import_model(io, cpu::backend(), quiet);
  INFO((im ? std::string() : im.error().message));
  REQUIRE(im);
  CHECK(im->parameters == 61772);
  CHECK(im->checked_samples == 64);  // the import ran the project against the ONNX model
  CHECK(im->max_abs_diff <= 1e-4);
  HostBatch b = test_batch(example("fashion-mnist-cnn.mls"), 32);
  const double d = max_abs(outputs_of(example("fashion-mnist-cnn.mls"), b), outputs_of(io.out, b));
  INFO("round trip max abs " << d);
  CHECK(d <= 1e-6);

  // Importing over an existing project is refused unless asked for.
  auto again = runner::import_model(io, cpu::backend(), quiet);
  REQUIRE(!again);
  CHECK(again.error().message.find("exists") != std::string::npos);

  // An import whose check fails (here: a tolerance nothing meets) replaces nothing, even with
  // --force, and leaves no half-written files.
  const std::string before = read_text(io.out);
  io.force = true;
  io.tolerance = -1;
  auto failed = runner::import_model(io, cpu::backend(), quiet);
  REQUIRE(!failed);
  CHECK(failed.error().message.find("does not compute what the ONNX model does") != std::string::npos);
  CHECK(read_text(io.out) == before);
  for (const auto& e : fs::directory_iterator(dir)) CHECK(e.path().string().find(".importing") == std::string::npos);
}

TEST_CASE("a model written with python3-onnx's helper API imports and matches numpy", "[onnx]") {
  fs::path dir = scratch("foreign");
  const std::string cmd = "/usr/bin/python3 " + std::string(MLS_SOURCE_DIR) + "/tools/onnx/make_foreign_model.py " +
                          dir.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  runner::ImportOptions io;
  io.model = (dir / "foreign.onnx").string();
  io.out = (dir / "foreign.mls").string();
  io.dataset = "fashion-mnist";
  std::vector<std::string> said;
  auto im = runner::import_model(io, cpu::backend(), [&](const std::string& s) { said.push_back(s); });
  REQUIRE(im);
  REQUIRE(said.size() == 2);  // checked against the file; the final Softmax left out, said
  CHECK(said[0].find("checked: the project and the ONNX model agree on 64 test samples") != std::string::npos);
  CHECK(said[1].find("Softmax") != std::string::npos);
  CHECK(im->checked_samples == 64);
  auto x = data::read_npy((dir / "input.npy").string());
  auto want = data::read_npy((dir / "logits.npy").string());
  REQUIRE(x);
  REQUIRE(want);
  HostBatch b;
  b.size = 8;
  b.x.resize(static_cast<size_t>(x->numel()));
  std::memcpy(b.x.data(), x->raw.data(), x->raw.size());
  std::vector<float> expected(static_cast<size_t>(want->numel()));
  std::memcpy(expected.data(), want->raw.data(), want->raw.size());
  const double d = max_abs(outputs_of(io.out, b), expected);
  INFO("imported vs numpy max abs " << d);
  CHECK(d <= 1e-4);
}

TEST_CASE("int8 export: weights as int8, the file under 30% of f32, the engine runs it", "[onnx]") {
  fs::path dir = scratch("int8");
  runner::ExportOptions o;
  o.project.path = example("fashion-mnist-mlp.mls");
  o.project.limit = 1024;
  o.project.test_limit = 500;
  o.out = (dir / "mlp-int8.onnx").string();
  o.int8 = true;
  o.calibration_batches = 4;
  auto r = runner::export_project(o, cpu::backend(), quiet);
  REQUIRE(r);
  const double ratio = static_cast<double>(r->bytes) / static_cast<double>(r->f32_bytes);
  INFO("int8 " << r->bytes << " B of f32 " << r->f32_bytes << " B; agreement " << r->agreement);
  CHECK(ratio <= 0.30);
  CHECK(r->accuracy_samples == 500);
  CHECK(r->agreement >= 0.9);  // the same class for nine in ten samples, even untrained
  auto back = onnx::read_model(o.out);
  REQUIRE(back);
  int dq = 0;
  for (const auto& n : back->nodes) dq += n.op_type == "DequantizeLinear";
  CHECK(dq == 6);  // three weights, three activations
}

TEST_CASE("ONNX errors name the file and the node", "[onnx]") {
  fs::path dir = scratch("errors");
  {  // not an ONNX file
    std::ofstream(dir / "junk.onnx") << "this is not protobuf";
    auto r = onnx::read_model((dir / "junk.onnx").string());
    REQUIRE(!r);
    CHECK(r.error().message.find("junk.onnx") != std::string::npos);
  }
  {  // an op no node type computes: listed with its node name
    onnx::Model m;
    m.inputs.push_back({"x", DType::F32, {onnx::Dim::named("N"), 4}});
    m.add("Relu", {"x"}, {}, "r");
    m.add("Hardmax", {"r"}, {}, "h");
    m.outputs.push_back({"h", DType::F32, {onnx::Dim::named("N"), 4}});
    REQUIRE(onnx::write_model(m, (dir / "hardmax.onnx").string()));
    runner::ImportOptions io;
    io.model = (dir / "hardmax.onnx").string();
    io.out = (dir / "hardmax.mls").string();
    io.dataset = "fashion-mnist";
    auto r = runner::import_model(io, cpu::backend(), quiet);
    REQUIRE(!r);
    CHECK(r.error().message.find("node 'h' (Hardmax)") != std::string::npos);
    CHECK(!fs::exists(io.out));
  }
  {  // the checker refuses a broken graph before anything is written
    onnx::Model m;
    m.inputs.push_back({"x", DType::F32, {onnx::Dim::named("N"), 4}});
    m.add("Relu", {"missing"}, {}, "r");
    m.outputs.push_back({"r", DType::F32, {onnx::Dim::named("N"), 4}});
    auto r = onnx::write_model(m, (dir / "broken.onnx").string());
    REQUIRE(!r);
    CHECK(r.error().message.find("checker") != std::string::npos);
    CHECK(!fs::exists(dir / "broken.onnx"));
  }
  {  // a node type without an exporter: the badge text and the export error agree
    nodes::NodeDoc lstm{"rnn", "mls.lstm", 1, nlohmann::json::object()};
    CHECK(nodes::onnx_export_problem(lstm).find("no ONNX export") != std::string::npos);
    nodes::NodeDoc relu{"act", "mls.relu", 1, nlohmann::json::object()};
    CHECK(nodes::onnx_export_problem(relu).empty());
  }
  {  // an unwritable path: refused, nothing else written
    runner::ExportOptions o;
    o.project.path = example("fashion-mnist-mlp.mls");
    o.project.limit = 64;
    o.project.test_limit = 64;
    o.out = (dir / "no-such-dir" / "mlp.onnx").string();
    auto r = runner::export_project(o, cpu::backend(), quiet);
    REQUIRE(!r);
    CHECK(r.error().message.find("no-such-dir") != std::string::npos);
  }
}
