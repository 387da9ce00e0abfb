// An mlstudio project exported to ONNX and imported back keeps its training settings (the
// optimizer, learning rate, schedule, epochs, batch size, seed): the export writes them to
// the file's metadata and the import reads them, checked like a project's own section.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/onnx/onnx_file.h"
#include "nodes/document.h"
#include "nodes/onnx_import.h"
#include "runner/model_export.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

fs::path scratch(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("mls-onnx-settings-" + std::to_string(::getpid())) / name;
  // Fresh: a process of an earlier run may have had this pid and left its files here
  // (an import refuses to overwrite its output).
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

runner::Say quiet = [](const std::string&) {};

}  // namespace

TEST_CASE("export then import keeps the project's training settings", "[onnx][training]") {
  const fs::path dir = scratch("roundtrip");
  auto doc = nodes::load_document(std::string(MLS_SOURCE_DIR) +
                                  "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc);
  // Settings unlike every default, so a dropped one shows.
  nodes::TrainingSpec& t = doc->training;
  t.epochs = 7;
  t.batch_size = 32;
  t.seed = 1234;
  t.optimizer = nodes::OptimizerSpec{};
  t.optimizer.type = nodes::OptimizerType::AdamW;
  t.optimizer.lr = 0.003;
  t.optimizer.beta2 = 0.98;
  t.optimizer.weight_decay = 0.01;
  t.schedule.type = "step";
  t.schedule.step_size = 3;
  t.schedule.gamma = 0.5;
  t.clip_grad_norm = 1.5;
  const std::string project = (dir / "mlp.mls").string();
  REQUIRE(nodes::save_document(*doc, project));

  runner::ExportOptions o;
  o.project.path = project;
  o.project.limit = 64;
  o.project.test_limit = 64;
  o.check_samples = 16;
  o.out = (dir / "mlp.onnx").string();
  REQUIRE(runner::export_project(o, cpu::backend(), quiet));

  runner::ImportOptions io;
  io.model = o.out;
  io.out = (dir / "back.mls").string();
  io.check_samples = 16;
  REQUIRE(runner::import_model(io, cpu::backend(), quiet));
  auto back = nodes::load_document(io.out);
  REQUIRE(back);
  CHECK(back->training.epochs == 7);
  CHECK(back->training.batch_size == 32);
  CHECK(back->training.seed == 1234);
  CHECK(back->training.optimizer.type == nodes::OptimizerType::AdamW);
  CHECK(back->training.optimizer.lr == 0.003);
  CHECK(back->training.schedule.type == "step");
  CHECK(back->training.clip_grad_norm == 1.5);
  CHECK(back->training == doc->training);
}

TEST_CASE("training settings in an ONNX file's metadata are checked like a project's",
          "[onnx][training]") {
  onnx::Model m;
  m.inputs.push_back({"x", DType::F32, {onnx::Dim::named("N"), 4}});
  m.add_initializer("w", onnx::make_f32("w", {4, 3}, std::vector<float>(12, 0.5f)));
  m.add("MatMul", {"x", "w"}, {}, "y");
  m.outputs.push_back({"y", DType::F32, {onnx::Dim::named("N"), 3}});
  SECTION("absent: the defaults") {
    auto im = nodes::import_onnx(m, "plain.onnx");
    REQUIRE(im);
    CHECK(im->doc.training == nodes::TrainingSpec{});
  }
  SECTION("present: read") {
    m.metadata.emplace_back("mlstudio.training",
                            R"({"epochs": 3, "optimizer": {"type": "adam", "lr": 0.02}})");
    auto im = nodes::import_onnx(m, "set.onnx");
    REQUIRE(im);
    CHECK(im->doc.training.epochs == 3);
    CHECK(im->doc.training.optimizer.type == nodes::OptimizerType::Adam);
    CHECK(im->doc.training.optimizer.lr == 0.02);
  }
  SECTION("out of range: refused, naming the file and the field") {
    m.metadata.emplace_back("mlstudio.training", R"({"epochs": 0})");
    auto im = nodes::import_onnx(m, "bad.onnx");
    REQUIRE(!im);
    CHECK(im.error().message.find("bad.onnx") != std::string::npos);
    CHECK(im.error().message.find("/training/epochs") != std::string::npos);
  }
  SECTION("not JSON: refused") {
    m.metadata.emplace_back("mlstudio.training", "{epochs");
    auto im = nodes::import_onnx(m, "junk.onnx");
    REQUIRE(!im);
    CHECK(im.error().message.find("junk.onnx") != std::string::npos);
    CHECK(im.error().message.find("mlstudio.training") != std::string::npos);
  }
}
