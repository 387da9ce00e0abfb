// `mlstudio import` on hostile ONNX files, as a user would run it: an attribute that crashed
// libonnx (SIGFPE), a newer operator set, metadata naming /etc/passwd, and -o the model
// itself each end with exit 1 and a message naming the file, never a signal or a write.
#include <cstdlib>

#include "cli_util.h"

using namespace mls::e2e;

namespace {

fs::path hostile_models() {
  static fs::path dir = [] {
    fs::path d = temp_dir() / "hostile-onnx";
    const std::string cmd = "/usr/bin/python3 " + std::string(MLS_SOURCE_DIR) +
                            "/tests/onnx/make_hostile_models.py " + d.string();
    REQUIRE(std::system(cmd.c_str()) == 0);
    return d;
  }();
  return dir;
}

}  // namespace

TEST_CASE("import refuses hostile ONNX files with a message and exit 1", "[cli][onnx]") {
  const fs::path dir = hostile_models();
  const std::string out = (temp_dir() / "hostile.mls").string();
  struct Case {
    std::string file, args, want;
  };
  const std::vector<Case> cases = {
      {"conv_strides0.onnx", "--dataset fashion-mnist", "strides must hold integers in [1, "},
      {"maxpool_strides0.onnx", "--dataset fashion-mnist", "strides must hold integers in [1, "},
      {"opset18.onnx", "--dataset fashion-mnist",
       "operator set 18; the newest mlstudio supports is 17"},
      {"linear_abs.onnx", "", "names '/etc/passwd', which is outside the model's folder"},
      {"linear_dotdot.onnx", "", "which is outside the model's folder"},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    const std::string model = (dir / c.file).string();
    Output o = run("import " + model + " -o " + out + " --force " + c.args);
    INFO(o.err);
    CHECK(o.code == 1);
    CHECK(o.err.find(model) != std::string::npos);
    CHECK(o.err.find(c.want) != std::string::npos);
    CHECK(o.err.find("root:") == std::string::npos);
    CHECK(o.out.find("root:") == std::string::npos);
    CHECK(!fs::exists(out));
  }
}

TEST_CASE("import -o its own input --force refuses and leaves the model as it was", "[cli][onnx]") {
  const fs::path model = temp_dir() / "self.onnx";
  fs::copy_file(hostile_models() / "linear_none.onnx", model, fs::copy_options::overwrite_existing);
  const std::string before = read_file(model.string());
  Output o = run("import " + model.string() + " -o " + model.string() +
                 " --force --dataset fashion-mnist");
  CHECK(o.code == 1);
  CHECK(o.err.find("it is the model being imported") != std::string::npos);
  CHECK(read_file(model.string()) == before);
}
