// End to end: the mlstudio executable as a user runs it.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "store/run_store.h"
#include "cli_util.h"

using namespace mls::e2e;

TEST_CASE("mlstudio --run trains on a Fashion-MNIST subset, reaches the stated accuracy and records the run", "[e2e]") {
  fs::path db = temp_dir() / "runs.db";
  fs::remove(db);
  Output o = run("--run " + example() + " --epochs 2 --limit 12000 --test-limit 2000 --json --db " + db.string());
  INFO(o.err);
  REQUIRE(o.code == 0);
  std::string j = last_line(o.out);
  for (const char* key : {"run_id", "epochs", "final_loss", "test_accuracy", "seconds", "epoch_seconds",
                          "samples_per_s", "peak_bytes", "device"})
    CHECK(j.find(std::string("\"") + key + "\"") != std::string::npos);
  double acc = json_number(j, "test_accuracy");
  CHECK(acc >= 0.80);  // 2 epochs on 12k samples; the full 5-epoch run reaches >= 0.86
  CHECK(json_number(j, "epochs") == 2);
  CHECK(o.err.find("epoch 2/2") != std::string::npos);

  auto store = mls::store::RunStore::open(db.string());
  REQUIRE(store.ok());
  auto runs = (*store)->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK(runs->at(0).status == "finished");
  CHECK(runs->at(0).seed == 42);
  auto loss = (*store)->metrics(runs->at(0).id, "train/loss");
  REQUIRE(loss.ok());
  CHECK(loss->size() == 2 * 94);  // ceil(12000 / 128) steps per epoch
  auto stored_acc = (*store)->metrics(runs->at(0).id, "test/accuracy");
  REQUIRE(stored_acc.ok());
  REQUIRE(stored_acc->size() == 1);
  CHECK(stored_acc->at(0).value == Approx(acc));

  Output list = run("runs list --db " + db.string());
  CHECK(list.code == 0);
  CHECK(list.out.find("finished") != std::string::npos);
  Output show = run("runs show 1 --db " + db.string());
  CHECK(show.code == 0);
  CHECK(show.out.find("test/accuracy") != std::string::npos);
  CHECK(show.out.find("batch_size") != std::string::npos);
  Output missing = run("runs show 99 --db " + db.string());
  CHECK(missing.code == 1);
  CHECK(missing.err.find("no run 99") != std::string::npos);
}

TEST_CASE("mlstudio --run trains the LeNet-5 example on a subset", "[e2e][cnn]") {
  fs::path db = temp_dir() / "lenet.db";
  fs::remove(db);
  std::string lenet = std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-lenet.mls";
  Output o = run("--run " + lenet + " --epochs 1 --limit 6000 --test-limit 1000 --json --db " + db.string());
  INFO(o.err);
  REQUIRE(o.code == 0);
  std::string j = last_line(o.out);
  CHECK(json_number(j, "test_accuracy") >= 0.70);  // 47 steps; the full 5-epoch run reaches ~0.88
  CHECK(json_number(j, "steps") == 47);
}

TEST_CASE("mlstudio graph --ir prints the SSA form labelled with the document's node ids", "[e2e]") {
  Output o = run("graph " + example() + " --ir");
  REQUIRE(o.code == 0);
  CHECK(o.out.find("%image: f32[128,1,28,28]") != std::string::npos);
  CHECK(o.out.find("matmul(") != std::string::npos);
  CHECK(o.out.find("# fc1") != std::string::npos);
  Output b = run("graph " + example() + " --backward --batch 4");
  REQUIRE(b.code == 0);
  CHECK(b.out.find("// backward") != std::string::npos);
  CHECK(b.out.find("relu_backward") != std::string::npos);
  Output p = run("graph " + example() + " --plan");
  REQUIRE(p.code == 0);
  CHECK(p.out.find("@arena+") != std::string::npos);
  // The plan is the optimised step the trainer runs: the dense layers' bias and ReLU are
  // fused into their products.
  CHECK(p.out.find("linear_act [fc1]") != std::string::npos);
}

TEST_CASE("mlstudio graph --passes shows each pass shrinking the step; --profile times every kernel", "[e2e]") {
  Output p = run("graph " + example() + " --passes --batch 8");
  REQUIRE(p.code == 0);
  for (const char* pass : {"dead-code elimination", "algebraic simplification", "constant folding",
                           "common-subexpression elimination"})
    CHECK(p.out.find(pass) != std::string::npos);
  // The summary's first and last lines: node counts before and after.
  auto summary = p.out.substr(p.out.find("// summary"));
  auto nodes_of = [&](const std::string& line_start) {
    auto at = summary.find(line_start);
    REQUIRE(at != std::string::npos);
    return std::stoi(summary.substr(summary.find_first_of("0123456789", at + line_start.size())));
  };
  CHECK(nodes_of("dead-code elimination") < nodes_of("input"));

  Output f = run("graph " + example() + " --profile 20 --limit 5000");
  INFO(f.err);
  REQUIRE(f.code == 0);
  CHECK(f.out.find("20 training steps of batch 128") != std::string::npos);
  CHECK(f.out.find("matmul") != std::string::npos);
  CHECK(f.out.find("fc1 (backward)") != std::string::npos);
}

TEST_CASE("mlstudio graph --precision bf16 shows the products training runs in 16 bits", "[e2e]") {
  Output f32 = run("graph " + example() + " --backward --batch 4");
  REQUIRE(f32.code == 0);
  CHECK(f32.out.find("matmul_lowp") == std::string::npos);
  Output bf = run("graph " + example() + " --backward --batch 4 --precision bf16");
  INFO(bf.err);
  REQUIRE(bf.code == 0);
  CHECK(bf.out.find("// mixed precision bf16") != std::string::npos);
  // Three dense layers: three forward products, each with its two casts, and the backward
  // differentiates the low-precision products (their gradients are products too).
  size_t lowp = 0;
  for (size_t at = bf.out.find("= matmul_lowp("); at != std::string::npos; at = bf.out.find("= matmul_lowp(", at + 1))
    ++lowp;
  CHECK(lowp >= 3);
  CHECK(bf.out.find("bf16[784,256] = cast(%fc1.weight)") != std::string::npos);
  // f16 trains the backward of loss * scale and unscales the gradients: drawn as it runs.
  Output f16 = run("graph " + example() + " --backward --batch 4 --precision f16");
  REQUIRE(f16.code == 0);
  CHECK(f16.out.find("%loss_scale: f32[]") != std::string::npos);
  CHECK(f16.out.find("= div(") != std::string::npos);
  Output bad = run("graph " + example() + " --precision f8");
  CHECK(bad.code != 0);
  CHECK(bad.err.find("--precision must be f32, bf16 or f16, got 'f8'") != std::string::npos);
}

TEST_CASE("f16 training shows its dynamic loss scale on the epoch lines, f32 training does not", "[e2e]") {
  const fs::path db = temp_dir() / "scale.db";
  fs::remove(db);
  Output f16 = run("--run " + example() + " --epochs 1 --limit 1024 --test-limit 128 --precision f16 --db " + db.string());
  INFO(f16.err);
  REQUIRE(f16.code == 0);
  // Dynamic scaling starts at 2^16 and only grows after 2000 clean steps: 8 steps keep it.
  CHECK(f16.err.find("loss scale 65536  skipped 0") != std::string::npos);
  Output f32 = run("--run " + example() + " --epochs 1 --limit 1024 --test-limit 128 --db " + db.string());
  REQUIRE(f32.code == 0);
  CHECK(f32.err.find("epoch 1/1") != std::string::npos);
  CHECK(f32.err.find("loss scale") == std::string::npos);
}

TEST_CASE("bad input: a clear message naming the file, node or line, and a non-zero exit", "[e2e]") {
  SECTION("broken JSON names the line") {
    std::string p = variant("broken.mls", "\"epochs\": 10,", "\"epochs\": 10,,");
    Output o = run("--run " + p + " --db " + (temp_dir() / "bad.db").string());
    CHECK(o.code == 1);
    CHECK(o.err.find("broken.mls:") != std::string::npos);
    CHECK(o.err.find("invalid JSON") != std::string::npos);
  }
  SECTION("a missing dataset names the directory and the package") {
    std::string p = variant("nodata.mls", "\"path\": \"/usr/share/datasets/fashion-mnist\"", "\"path\": \"/nonexistent/fmnist\"");
    Output o = run("--run " + p + " --db " + (temp_dir() / "bad.db").string());
    CHECK(o.code == 1);
    CHECK(o.err.find("/nonexistent/fmnist") != std::string::npos);
    CHECK(o.err.find("dataset-fashion-mnist") != std::string::npos);
  }
  SECTION("a shape mismatch names the node") {
    // Link the image straight into fc1, skipping the Flatten node.
    std::string p = variant("noflat.mls", "{\"from\": \"flat:out\", \"to\": \"fc1:in\"}", "{\"from\": \"image:out\", \"to\": \"fc1:in\"}");
    Output o = run("--run " + p + " --db " + (temp_dir() / "bad.db").string());
    CHECK(o.code == 1);
    CHECK(o.err.find("node 'fc1'") != std::string::npos);
  }
  SECTION("an unknown node type names its JSON path") {
    std::string p = variant("unknown.mls", "\"type\": \"mls.relu\"", "\"type\": \"mls.relux\"");
    Output o = run("graph " + p);
    CHECK(o.code == 1);
    CHECK(o.err.find("/model/nodes/3/type") != std::string::npos);
  }
  SECTION("an unavailable device") {
    Output o = run("--run " + example() + " --device cuda --db " + (temp_dir() / "bad.db").string());
    CHECK(o.code == 1);
    CHECK(o.err.find("device 'cuda'") != std::string::npos);
  }
  SECTION("a missing project file") {
    Output o = run("--run /nonexistent/p.mls");
    CHECK(o.code != 0);
    CHECK(o.err.find("/nonexistent/p.mls") != std::string::npos);
  }
}

TEST_CASE("mlstudio --version and --help", "[e2e]") {
  Output v = run("--version");
  CHECK(v.code == 0);
  CHECK(v.out.find("mlstudio 0.") != std::string::npos);
  Output h = run("--help");
  CHECK(h.code == 0);
  CHECK(h.out.find("--run") != std::string::npos);
  CHECK(h.out.find("graph") != std::string::npos);
}

TEST_CASE("Ctrl-C stops a run, keeps what it logged and records it as interrupted", "[e2e]") {
  fs::path db = temp_dir() / "interrupt.db";
  fs::remove(db);
  fs::path err = temp_dir() / "interrupt.err";
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::freopen(err.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    std::string ex = example(), d = db.string();
    ::execl(MLS_EXE, MLS_EXE, "--run", ex.c_str(), "--epochs", "1000", "--limit", "2000", "--test-limit", "100",
            "--db", d.c_str(), static_cast<char*>(nullptr));
    std::_Exit(127);
  }
  // Wait until training has logged a few epochs, then interrupt.
  for (int i = 0; i < 200 && read_file(err.string()).find("epoch 3/1000") == std::string::npos; ++i)
    ::usleep(50 * 1000);
  ::kill(pid, SIGINT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  INFO(read_file(err.string()));
  auto store = mls::store::RunStore::open(db.string());
  REQUIRE(store.ok());
  auto runs = (*store)->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 1);
  CHECK(runs->at(0).status == "interrupted");
  auto loss = (*store)->metrics(runs->at(0).id, "train/loss");
  REQUIRE(loss.ok());
  CHECK(loss->size() >= 3 * 16);  // ceil(2000 / 128) = 16 steps per epoch, >= 3 epochs logged
}
