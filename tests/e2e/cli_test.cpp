// End to end: the mlstudio executable as a user runs it.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <vector>

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
  // One rank of a data-parallel job: the same kernels with the gradients' all-reduce between
  // them (the MLP's 0.9 MiB of gradients make one bucket, below DDP's 1 MiB first bucket).
  Output d = run("graph " + example() + " --plan --ranks 4");
  INFO(d.err);
  REQUIRE(d.code == 0);
  CHECK(d.out.find("// one rank of 4: batch 128 per rank, 512 in all") != std::string::npos);
  CHECK(d.out.find("all_reduce_start [bucket 0: fc3.bias, fc3.weight, fc2.bias, fc2.weight, fc1.bias, fc1.weight]") !=
        std::string::npos);
  CHECK(d.out.find("all_reduce_wait [1 bucket]") != std::string::npos);
  CHECK(d.out.find("linear_act [fc1]") != std::string::npos);
}

TEST_CASE("mlstudio graph --passes shows each pass shrinking the step, --profile times every kernel", "[e2e]") {
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

TEST_CASE("graph --profile works on every bundled example, and flags a view would not use are refused",
          "[e2e]") {
  for (const char* name : {"fashion-mnist-resnet.mls", "house-prices-csv.mls", "two-spirals-mlp.mls"}) {
    INFO(name);
    // The ResNet and house-prices examples stop early on validation and use a schedule: the
    // profile times steps, and must not ask for either.
    Output o = run("graph " + std::string(MLS_SOURCE_DIR) + "/resources/examples/" + name +
                   " --profile 2 --limit 300");
    INFO(o.err);
    CHECK(o.code == 0);
    CHECK(o.out.find("training steps of batch") != std::string::npos);
  }
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--plan --passes", "--passes prints every stage"},
           {"--ir --plan", "--ir is the forward alone"},
           {"--ranks 2", "--ranks shows the data-parallel training step: use it with --plan"},
           {"--profile 2 --plan", "--profile trains and times the step"},
           {"--ir --limit 100", "--limit only applies to --profile"},
           {"--activation-checkpointing auto", "use it with --backward, --plan or --passes"}}) {
    INFO(args);
    Output o = run("graph " + example() + " " + args);
    CHECK(o.code == 1);
    CHECK(o.err.find(says) != std::string::npos);
  }
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
    Output o = run("--run " + example() + " --device tpu --db " + (temp_dir() / "bad.db").string());
    CHECK(o.code == 1);
    CHECK(o.err.find("device 'tpu' is not available in this build (available: cpu") != std::string::npos);
    // CUDA: not in this build (Debian has no nvcc), or built but without a GPU here.
    Output cuda = run("--run " + example() + " --device cuda --db " + (temp_dir() / "bad.db").string());
    if (cuda.code != 0) {
      CHECK(cuda.code == 1);
      CHECK(cuda.err.find("device 'cuda'") != std::string::npos);
    }
    Output bad = run("--run " + example() + " --device cpu:x --db " + (temp_dir() / "bad.db").string());
    CHECK(bad.code == 1);
    CHECK(bad.err.find("the index after ':' must be a number") != std::string::npos);
  }
  SECTION("a missing project file") {
    Output o = run("--run /nonexistent/p.mls");
    CHECK(o.code == 1);  // a usage error exits 1, as the README says (not CLI11's 105)
    CHECK(o.err.find("/nonexistent/p.mls") != std::string::npos);
  }
  SECTION("numbers out of range are refused before anything runs, naming the option") {
    const std::string db = " --db " + (temp_dir() / "bad.db").string();
    for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
             {"--threads 0", "--threads: must be a whole number in 1..65536, got '0'"},
             {"--threads -3", "--threads"},
             {"--epochs 0", "--epochs: must be a whole number in 1..10000000, got '0'"},
             {"--epochs 99999999999999999999999", "--epochs"},
             {"--batch-size 0", "--batch-size"},
             {"--lr nan", "--lr: must be a finite number, got 'nan'"},
             {"--lr inf", "--lr: must be a finite number, got 'inf'"},
             {"--lr -0.1", "--lr: must be > 0"},
             {"--limit -5", "--limit"},
             {"--resume 0", "--resume"},
             {"--seed -1", "--seed: must be a whole number in 0..18446744073709551615, got '-1'"}}) {
      INFO(args);
      Output o = run("--run " + example() + " " + args + db);
      CHECK(o.code == 1);
      CHECK(o.err.find(says) != std::string::npos);
    }
    Output g = run("graph " + example() + " --plan --batch 0");
    CHECK(g.code == 1);
    CHECK(g.err.find("--batch") != std::string::npos);
  }
  SECTION("a huge --threads is capped with a warning") {
    Output o = run("--run " + example() + " --threads 5000 --epochs 1 --limit 200 --test-limit 50 -q --db " +
                   (temp_dir() / "threads.db").string());
    CHECK(o.code == 0);
    CHECK(o.err.find("--threads 5000 is more than 4 per core; using") != std::string::npos);
  }
  SECTION("a step too large for memory says so with the figure") {
    // 65536 hidden units at the largest batch: an 8.8 TB arena, more than any machine's RAM
    // and swap, so the CPU backend refuses it even where Linux would overcommit it.
    std::string p = variant("wide.mls", "\"out_features\": 256,", "\"out_features\": 65536,");
    Output o = run("graph " + p + " --plan --batch 16777216");
    CHECK(o.code == 1);
    CHECK(o.err.find("not enough memory for the compiled step: its planned arena is 8.8 TB") !=
          std::string::npos);
    CHECK(o.err.find("use a smaller batch size") != std::string::npos);
  }
  SECTION("absurdly deep JSON is refused with the line, not a crash") {
    fs::path p = temp_dir() / "deep.mls";
    std::string text = read_file(example());
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    text.replace(text.find("\"bias\": true"), 12, "\"deep\": " + deep);
    std::ofstream(p) << text;
    Output o = run("graph " + p.string());
    CHECK(o.code == 1);
    CHECK(o.err.find("deep.mls:13: JSON nested deeper than 128 levels") != std::string::npos);
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


TEST_CASE("Ctrl-C and SIGTERM stop a run after its step, keep what it logged, record it as interrupted",
          "[e2e]") {
  for (const auto& [sig, code] : {std::pair{SIGINT, 130}, std::pair{SIGTERM, 143}}) {
    DYNAMIC_SECTION("signal " << sig) {
      fs::path db = temp_dir() / ("interrupt" + std::to_string(sig) + ".db");
      fs::remove(db);
      fs::path err = temp_dir() / ("interrupt" + std::to_string(sig) + ".err");
      fs::remove(err);
      pid_t pid = start_run(db, err, "1000", "2000");
      wait_for(err, "epoch 1/1000");  // (epoch lines then come every 50 epochs)
      ::usleep(300 * 1000);           // an epoch of 16 steps takes ~30 ms
      ::kill(pid, sig);
      int status = 0;
      REQUIRE(::waitpid(pid, &status, 0) == pid);
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == code);
      INFO(read_file(err.string()));
      CHECK(read_file(err.string()).find("--resume 1)") != std::string::npos);
      auto store = mls::store::RunStore::open(db.string());
      REQUIRE(store.ok());
      auto runs = (*store)->list_runs();
      REQUIRE(runs.ok());
      REQUIRE(runs->size() == 1);
      CHECK(runs->at(0).status == "interrupted");
      // Every step it took is logged, once.
      const std::string text = read_file(err.string());
      const auto at = text.find("interrupted after ");
      REQUIRE(at != std::string::npos);
      const int64_t steps = std::stoll(text.substr(at + 18));
      CHECK(steps >= 16);  // ceil(2000 / 128) = 16 steps per epoch; past the first
      auto loss = (*store)->metrics(runs->at(0).id, "train/loss");
      REQUIRE(loss.ok());
      CHECK(static_cast<int64_t>(loss->size()) == steps);
    }
  }
}

TEST_CASE("a run killed with -9 is marked interrupted at the next open and resumes", "[e2e][resume]") {
  fs::path db = temp_dir() / "kill9.db";
  fs::remove(db);
  fs::path err = temp_dir() / "kill9.err";
  fs::remove(err);
  pid_t pid = start_run(db, err, "1000", "2000");
  wait_for(err, "epoch 1/1000");
  ::usleep(300 * 1000);
  // While it trains, nobody else may resume it.
  Output twice = run("--run " + example() + " --resume 1 --epochs 2000 --db " + db.string());
  CHECK(twice.code == 1);
  CHECK(twice.err.find("run 1 is being trained right now by process") != std::string::npos);
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  // As if the kill had landed inside a checkpoint write: its temporary file stays behind.
  const fs::path orphan = temp_dir() / "kill9.checkpoints" / "run-1" / ".last.ckpt.tmp-0123456789abcdef";
  std::ofstream(orphan) << "half a checkpoint";
  REQUIRE(fs::exists(orphan));
  // A reader shows it for what it is and changes nothing.
  Output list = run("runs list --db " + db.string());
  CHECK(list.code == 0);
  CHECK(list.out.find("interrupted") != std::string::npos);
  // The next run that opens the database records it, says so, and it resumes: one epoch
  // past those the killed process finished.
  int64_t done = 0;
  {
    auto ro = mls::store::RunStore::open_read_only(db.string());
    REQUIRE(ro.ok());
    done = static_cast<int64_t>((*ro)->metrics(1, "epoch/train_loss")->size());
  }
  REQUIRE(done >= 1);
  const std::string epochs = std::to_string(done + 1);
  Output r = run("--run " + example() + " --resume 1 --epochs " + epochs + " --json --db " + db.string());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("run 1 in " + db.string() + " was left running by a process that is gone") !=
        std::string::npos);
  // (1, or 2 when the kill itself landed inside a checkpoint write.)
  CHECK(r.err.find(" unfinished checkpoint file(s) of run 1") != std::string::npos);
  CHECK_FALSE(fs::exists(orphan));
  // It resumed from the last checkpoint the killed process wrote, and every step of the
  // finished run is recorded once.
  const auto from = r.err.find("(epoch ");
  REQUIRE(from != std::string::npos);
  const int64_t ckpt_epoch = std::stoll(r.err.substr(from + 7));
  CHECK(ckpt_epoch >= done - 1);
  CHECK(json_number(last_line(r.out), "first_epoch") == static_cast<double>(ckpt_epoch + 1));
  CHECK(json_number(last_line(r.out), "epochs") == static_cast<double>(done + 1));
  auto store = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(store.ok());
  auto loss = (*store)->metrics(1, "train/loss");
  REQUIRE(loss.ok());
  REQUIRE(static_cast<int64_t>(loss->size()) == (done + 1) * 16);
  for (size_t i = 0; i < loss->size(); ++i) CHECK(loss->at(i).step == static_cast<int64_t>(i) + 1);
  CHECK((*store)->get_run(1)->status == "finished");
}

TEST_CASE("a run stopped before its first checkpoint says it cannot be resumed", "[e2e]") {
  fs::path db = temp_dir() / "early.db";
  fs::remove(db);
  fs::path err = temp_dir() / "early.err";
  fs::remove(err);
  // All 60000 samples: the first epoch takes long enough to stop it inside.
  pid_t pid = start_run(db, err, "2", "0");
  wait_for(err, "run 1:");
  ::kill(pid, SIGINT);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const std::string text = read_file(err.string());
  INFO(text);
  CHECK(text.find("before the first epoch ended") != std::string::npos);
  CHECK(text.find("no checkpoint to resume from") != std::string::npos);
  CHECK(text.find("--resume") == std::string::npos);
}

TEST_CASE("a failing run still prints its JSON object, and readers never create a database",
          "[e2e]") {
  fs::path db = temp_dir() / "never-made.db";
  fs::remove(db);
  Output o = run("--run /nonexistent/p.mls --json --db " + db.string());
  CHECK(o.code == 1);
  CHECK(last_line(o.out).find("\"status\":\"failed\"") != std::string::npos);
  CHECK(last_line(o.out).find("/nonexistent/p.mls") != std::string::npos);
  Output e = run("eval " + example() + " --run 1 --db " + db.string());
  CHECK(e.code == 1);
  CHECK(e.err.find("no run database here") != std::string::npos);
  CHECK_FALSE(fs::exists(db));
  Output l = run("runs list --db " + db.string());
  CHECK(l.code == 1);
  CHECK_FALSE(fs::exists(db));
}
