// Hostile ONNX files, written by tests/onnx/make_hostile_models.py without libonnx's checker:
// attributes that crash libonnx's shape inference, metadata that names files outside the
// model's folder and the datasets folder, an operator set newer than mlstudio knows, and an
// import told to write over its own input. Each is refused with a message naming the file,
// and nothing is written.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/onnx/onnx_file.h"
#include "runner/model_export.h"

namespace fs = std::filesystem;
using namespace mls;

namespace {

runner::Say quiet = [](const std::string&) {};

// The hostile models, made once per test process.
fs::path hostile_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mls-onnx-hostile-" + std::to_string(::getpid()));
    fs::remove_all(d);  // fresh: an earlier run's process may have had this pid
    fs::create_directories(d);
    const std::string cmd = "/usr/bin/python3 " + std::string(MLS_SOURCE_DIR) +
                            "/tests/onnx/make_hostile_models.py " + d.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
    return d;
  }();
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// A small CSV the linear models (4 features, 3 classes) can be checked on.
void write_ok_csv(const fs::path& path) {
  std::ofstream f(path);
  f << "a,b,c,d,label\n";
  for (int i = 0; i < 20; ++i)
    f << i << "," << i % 3 << "," << i * 2 << "," << 1 - i << "," << i % 3 << "\n";
}

}  // namespace

TEST_CASE("ONNX attributes that libonnx's shape inference divides by are refused, not a crash",
          "[onnx][hostile]") {
  const fs::path dir = hostile_dir();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"conv_strides0.onnx", "node 'bad_conv' (Conv): strides"},
      {"maxpool_strides0.onnx", "node 'bad_maxpool' (MaxPool): strides"},
      {"conv_dilations0.onnx", "node 'bad_conv' (Conv): dilations"},
      {"conv_group0.onnx", "node 'bad_conv' (Conv): group"},
      {"pool_kernel0.onnx", "node 'bad_maxpool' (MaxPool): kernel_shape"},
      {"conv_pads_negative.onnx", "node 'bad_conv' (Conv): pads"},
  };
  for (const auto& [file, want] : cases) {
    INFO(file);
    auto r = onnx::read_model((dir / file).string());
    REQUIRE(!r);
    CHECK(r.error().message.find(file) != std::string::npos);
    CHECK(r.error().message.find(want) != std::string::npos);
  }
  // The writer runs the same check: a model built in code with strides 0 is refused too.
  onnx::Model m;
  m.inputs.push_back({"x", DType::F32, {onnx::Dim::named("N"), 1, 8, 8}});
  m.add("MaxPool", {"x"},
        {onnx::Attribute::list("kernel_shape", {2, 2}), onnx::Attribute::list("strides", {1, 0})},
        "p");
  m.outputs.push_back({"p", DType::F32, {onnx::Dim::named("N"), 1, 7, 7}});
  auto s = onnx::serialize(m);
  REQUIRE(!s);
  CHECK(s.error().message.find("strides") != std::string::npos);
}

TEST_CASE("an ONNX operator set newer than mlstudio knows is refused, naming both",
          "[onnx][hostile]") {
  auto r = onnx::read_model((hostile_dir() / "opset18.onnx").string());
  REQUIRE(!r);
  CHECK(r.error().message.find("opset18.onnx") != std::string::npos);
  CHECK(r.error().message.find("operator set 18") != std::string::npos);
  CHECK(r.error().message.find("newest mlstudio supports is 17") != std::string::npos);
}

TEST_CASE(
    "dataset paths in an ONNX file's metadata stay in the model's folder or the datasets folder",
    "[onnx][hostile]") {
  const fs::path dir = hostile_dir() / "meta";
  fs::create_directories(dir);
  for (const char* name : {"abs", "dotdot", "link", "labels", "ok"})
    fs::copy_file(hostile_dir() / ("linear_" + std::string(name) + ".onnx"),
                  dir / ("linear_" + std::string(name) + ".onnx"),
                  fs::copy_options::overwrite_existing);
  std::error_code ec;
  fs::remove(dir / "link.csv", ec);
  fs::create_symlink("/etc/passwd", dir / "link.csv");
  write_ok_csv(dir / "ok.csv");
  for (const char* name : {"abs", "dotdot", "link", "labels"}) {
    INFO(name);
    runner::ImportOptions io;
    io.model = (dir / ("linear_" + std::string(name) + ".onnx")).string();
    io.out = (dir / (std::string(name) + ".mls")).string();
    std::vector<std::string> said;
    auto r =
        runner::import_model(io, cpu::backend(), [&](const std::string& s) { said.push_back(s); });
    REQUIRE(!r);
    CHECK(r.error().message.find(io.model) != std::string::npos);
    CHECK(r.error().message.find("outside the model's folder") != std::string::npos);
    CHECK(r.error().message.find("root") == std::string::npos);  // nothing of /etc/passwd
    for (const std::string& s : said) CHECK(s.find("root") == std::string::npos);
    CHECK(!fs::exists(io.out));
    CHECK(!fs::exists(dir / (std::string(name) + ".weights")));
  }
  // A path inside the model's folder is what an export next to its data writes: it imports.
  runner::ImportOptions io;
  io.model = (dir / "linear_ok.onnx").string();
  io.out = (dir / "ok.mls").string();
  auto r = runner::import_model(io, cpu::backend(), quiet);
  REQUIRE(r);
  CHECK(r->checked_samples > 0);
}

TEST_CASE("an import never writes over its own input", "[onnx][hostile]") {
  const fs::path dir = hostile_dir() / "self";
  fs::create_directories(dir);
  write_ok_csv(dir / "ok.csv");
  fs::copy_file(hostile_dir() / "linear_ok.onnx", dir / "m.onnx",
                fs::copy_options::overwrite_existing);
  const std::string before = read_text(dir / "m.onnx");
  runner::ImportOptions io;
  io.model = (dir / "m.onnx").string();
  io.force = true;
  SECTION("-o the model itself, or a path that resolves to it") {
    std::error_code ec;
    fs::remove(dir / "alias.mls", ec);
    fs::create_symlink(dir / "m.onnx", dir / "alias.mls");
    for (const fs::path& out : {dir / "m.onnx", dir / "." / "m.onnx", dir / "alias.mls"}) {
      INFO(out);
      io.out = out.string();
      auto r = runner::import_model(io, cpu::backend(), quiet);
      REQUIRE(!r);
      CHECK(r.error().message.find("the model being imported") != std::string::npos);
      CHECK(read_text(dir / "m.onnx") == before);
    }
  }
  SECTION("the weights file beside the project would be the model") {
    fs::copy_file(dir / "m.onnx", dir / "m.weights", fs::copy_options::overwrite_existing);
    io.model = (dir / "m.weights").string();
    io.out = (dir / "m.mls").string();
    auto r = runner::import_model(io, cpu::backend(), quiet);
    REQUIRE(!r);
    CHECK(r.error().message.find("the model being imported") != std::string::npos);
    CHECK(read_text(dir / "m.weights") == before);
    CHECK(!fs::exists(dir / "m.mls"));
  }
}
