// Hostile files at the paths mlstudio writes and reads, as a user would meet them on the
// command line: a FIFO where a trace, an ONNX file, saved outputs or imported weights go is
// refused by name and stays a FIFO; a FIFO where weights or a checkpoint are read is
// refused at once instead of blocking forever.
#include <sys/stat.h>

#include "../common/deadline.h"
#include "cli_util.h"

using namespace mls::e2e;

namespace {

bool still_a_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

fs::path make_fifo(const std::string& name) {
  fs::path p = temp_dir() / name;
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  return p;
}

}  // namespace

TEST_CASE("--profile into a FIFO is refused by name and the FIFO stays", "[e2e][hostile]") {
  const fs::path fifo = make_fifo("trace.fifo");
  Output o = run("--run " + example() + " --epochs 1 --limit 64 --test-limit 32 --db " +
                 (temp_dir() / "hostile.db").string() + " --profile " + fifo.string());
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(fifo.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(fifo));
}

TEST_CASE("export --onnx and --save-outputs into a FIFO are refused by name and the FIFO stays",
          "[e2e][hostile]") {
  const fs::path fifo = make_fifo("model.fifo");
  Output o = run("export " + example() + " --onnx " + fifo.string() +
                 " --limit 64 --test-limit 32 --check-samples 8");
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(fifo.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(fifo));

  const fs::path outputs = make_fifo("outputs.fifo");
  const fs::path onnx = temp_dir() / "hostile.onnx";
  Output s = run("export " + example() + " --onnx " + onnx.string() + " --save-outputs " +
                 outputs.string() + " --limit 64 --test-limit 32 --check-samples 8");
  INFO(s.err);
  CHECK(s.code != 0);
  CHECK(s.err.find(outputs.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(outputs));
}

TEST_CASE("import -o --force whose weights path is a FIFO is refused and replaces nothing",
          "[e2e][hostile]") {
  const fs::path onnx = temp_dir() / "import-src.onnx";
  Output e = run("export " + example() + " --onnx " + onnx.string() +
                 " --limit 64 --test-limit 32 --check-samples 8");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const fs::path project = temp_dir() / "imported.mls";
  std::ofstream(project) << "old project";
  const fs::path weights = make_fifo("imported.weights");
  Output o = run("import " + onnx.string() + " -o " + project.string() + " --force");
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(weights.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(weights));
  CHECK(read_file(project.string()) == "old project");
}
