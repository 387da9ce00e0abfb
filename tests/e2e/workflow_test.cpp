// End to end: what a user does after training — resume a run, evaluate it, predict with
// it — the bundled examples, and bad data files named in the error.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "cli_util.h"
#include "datasets/mnist.h"
#include "store/run_store.h"

using namespace mls::e2e;

namespace {

std::string examples() {
  return std::string(MLS_SOURCE_DIR) + "/resources/examples/";
}

// An NPY (version 1) file of uint8 values.
void write_npy_u8(const fs::path& path, const std::vector<int64_t>& shape,
                  const std::vector<uint8_t>& data) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  f.put(static_cast<char>(len & 0xff));
  f.put(static_cast<char>(len >> 8));
  f << header;
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

}  // namespace

TEST_CASE("resume continues a run exactly: 2 epochs + 1 resumed == 3 uninterrupted, bit for bit",
          "[e2e][resume]") {
  fs::path db = temp_dir() / "resume.db";
  fs::remove(db);
  // A 3-epoch run (its cosine schedule spans 3 epochs) stopped after 2, then resumed.
  const std::string common = " --limit 3000 --test-limit 500 --json -q --db " + db.string();
  Output a = run("--run " + example() + " --epochs 3 --stop-after-epochs 2" + common);
  INFO(a.err);
  REQUIRE(a.code == 0);
  CHECK(fs::exists(temp_dir() / "resume.checkpoints" / "run-1" / "last.ckpt"));
  CHECK(json_number(last_line(a.out), "epochs") == 2);
  Output b = run("--run " + example() + " --resume 1" + common);
  INFO(b.err);
  REQUIRE(b.code == 0);
  Output c = run("--run " + example() + " --epochs 3" + common);
  REQUIRE(c.code == 0);
  std::vector<double> la = json_array(last_line(a.out), "step_losses");
  std::vector<double> lb = json_array(last_line(b.out), "step_losses");
  std::vector<double> lc = json_array(last_line(c.out), "step_losses");
  REQUIRE(la.size() == 48);  // 3000 / 128 rounded up, twice
  REQUIRE(lb.size() == 24);
  la.insert(la.end(), lb.begin(), lb.end());
  CHECK(la == lc);  // the printed decimals of every step's loss
  CHECK(json_number(last_line(b.out), "first_epoch") == 3);
  CHECK(json_number(last_line(b.out), "test_accuracy") ==
        json_number(last_line(c.out), "test_accuracy"));

  // Asking for no more epochs than were trained is refused.
  Output d = run("--run " + example() + " --resume 1" + common);
  CHECK(d.code == 1);
  CHECK(d.err.find("run 1 has already trained 3 epochs") != std::string::npos);

  // eval reloads the checkpoint and gets the same test accuracy; the text form has the
  // confusion matrix with the class names.
  Output e = run("eval " + example() + " --run 1 --test-limit 500 --json --db " + db.string());
  INFO(e.err);
  REQUIRE(e.code == 0);
  CHECK(json_number(last_line(e.out), "accuracy") ==
        json_number(last_line(b.out), "test_accuracy"));
  Output t = run("eval " + example() + " --run 1 --test-limit 500 --db " + db.string());
  REQUIRE(t.code == 0);
  CHECK(t.out.find("truth\\pred") != std::string::npos);
  CHECK(t.out.find("Ankle boot") != std::string::npos);

  // predict: 20 test images as an NPY batch; the trained run (~0.8 accuracy) gets most right.
  auto images = mls::data::load_mnist_split(mls::data::kFashionMnistDir, "t10k");
  REQUIRE(images.ok());
  const int64_t n = 20;
  std::vector<uint8_t> px(images->pixels.begin(), images->pixels.begin() + n * 28 * 28);
  fs::path npy = temp_dir() / "twenty.npy";
  write_npy_u8(npy, {n, 28, 28}, px);
  Output p = run("predict " + example() + " --run 1 --json --input " + npy.string() + " --db " +
                 db.string());
  INFO(p.err);
  REQUIRE(p.code == 0);
  int64_t right = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto at = p.out.find("\"sample\":" + std::to_string(i) + ",");
    REQUIRE(at != std::string::npos);
    auto cls = p.out.rfind("\"class\":", at);
    int64_t k = std::stoll(p.out.substr(cls + 8));
    right += k == images->labels[static_cast<size_t>(i)];
  }
  CHECK(right >= 14);

  // Errors: no such run, a run without checkpoints.
  Output missing = run("eval " + example() + " --run 9 --db " + db.string());
  CHECK(missing.code == 1);
  CHECK(missing.err.find("no run 9") != std::string::npos);
}

TEST_CASE(
    "a resumed run keeps its recorded settings: data limits apply by themselves, a changed "
    "setting is refused by name",
    "[e2e][resume]") {
  fs::path db = temp_dir() / "resume_settings.db";
  fs::remove(db);
  const std::string at = " -q --json --db " + db.string();
  Output a = run("--run " + example() +
                 " --epochs 2 --stop-after-epochs 1 --limit 1000 --test-limit 200" + at);
  INFO(a.err);
  REQUIRE(a.code == 0);
  // Changing what decides the result is refused, naming the setting and both values.
  Output lr = run("--run " + example() + " --resume 1 --lr 0.2" + at);
  CHECK(lr.code == 1);
  CHECK(lr.err.find("run 1 was recorded with lr 0.050000, but resuming with --lr 0.200000") !=
        std::string::npos);
  Output bs = run("--run " + example() + " --resume 1 --batch-size 64" + at);
  CHECK(bs.code == 1);
  CHECK(bs.err.find("batch_size 128") != std::string::npos);
  Output lim = run("--run " + example() + " --resume 1 --limit 2000" + at);
  CHECK(lim.code == 1);
  CHECK(lim.err.find("run 1 was started with --limit 1000; resuming it with --limit 2000 would "
                     "train on different data") != std::string::npos);
  // An edit of the project file that changes training is refused the same way.
  fs::path edited = temp_dir() / "resume_settings_edited.mls";
  {
    std::string text = read_file(example());
    const auto pos = text.find("\"momentum\"");
    REQUIRE(pos != std::string::npos);
    const auto colon = text.find(':', pos), end = text.find_first_of(",}", colon);
    text.replace(colon + 1, end - colon - 1, " 0.5");
    std::ofstream(edited) << text;
  }
  Output ed = run("--run " + edited.string() + " --resume 1" + at);
  CHECK(ed.code == 1);
  CHECK(ed.err.find("now has momentum 0.500000") != std::string::npos);
  // Nothing above touched the run: resumed as recorded (no --limit), it trains the rest on
  // the same 1000 samples (8 steps of 128) and tests on the same 200.
  Output b = run("--run " + example() + " --resume 1" + at);
  INFO(b.err);
  REQUIRE(b.code == 0);
  CHECK(json_array(last_line(b.out), "step_losses").size() == 8);
  Output c = run("--run " + example() + " --epochs 2 --limit 1000 --test-limit 200" + at);
  REQUIRE(c.code == 0);
  CHECK(json_number(last_line(b.out), "test_accuracy") ==
        json_number(last_line(c.out), "test_accuracy"));
}

TEST_CASE("on resume, what a lost attempt logged past the checkpoint is dropped: every step once",
          "[e2e][resume]") {
  fs::path db = temp_dir() / "resume_metrics.db";
  fs::remove(db);
  const std::string at = " -q --json --limit 1000 --test-limit 200 --db " + db.string();
  Output a = run("--run " + example() + " --epochs 3 --stop-after-epochs 1" + at);
  INFO(a.err);
  REQUIRE(a.code == 0);
  {
    // A second attempt, in a process of its own, that diverged and was killed in epoch 3
    // after logging epoch 2: its points past the checkpoint (step 8, epoch 1) are what a
    // kill leaves behind.
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto store = mls::store::RunStore::open(db.string());
      if (!store || !(*store)->resume_run(1, {8, 1})) std::_Exit(2);
      for (int64_t step = 9; step <= 20; ++step) (*store)->log_metric("train/loss", step, 5.77e35);
      (*store)->log_metric("epoch/train_loss", 2, 5.77e35);
      if (!(*store)->flush()) std::_Exit(3);
      std::_Exit(0);  // dies without closing the run
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WEXITSTATUS(status) == 0);
  }
  Output b = run("--run " + example() + " --resume 1" + at);
  INFO(b.err);
  REQUIRE(b.code == 0);
  auto store = mls::store::RunStore::open(db.string());
  REQUIRE(store.ok());
  auto loss = (*store)->metrics(1, "train/loss");
  REQUIRE(loss.ok());
  REQUIRE(loss->size() == 24);  // 3 epochs of 8 steps, each once
  for (size_t i = 0; i < loss->size(); ++i) {
    CHECK(loss->at(i).step == static_cast<int64_t>(i) + 1);
    CHECK(loss->at(i).value < 10);
  }
  auto epoch = (*store)->metrics(1, "epoch/train_loss");
  REQUIRE(epoch.ok());
  REQUIRE(epoch->size() == 3);
  CHECK(epoch->at(1).step == 2);
  CHECK(epoch->at(1).value < 10);
  CHECK((*store)->get_run(1)->status == "finished");
}

TEST_CASE("an early-stopped run says which weights its test score is of, and eval names the best",
          "[e2e][errors]") {
  fs::path db = temp_dir() / "early_stop.db";
  fs::remove(db);
  const std::string project = examples() + "house-prices-csv.mls";
  Output a = run("--run " + project + " --json --db " + db.string());
  INFO(a.err);
  REQUIRE(a.code == 0);
  const std::string j = last_line(a.out);
  REQUIRE(j.find("\"stopped_early\":true") != std::string::npos);  // it stops early on validation
  const auto best = static_cast<int64_t>(json_number(j, "best_epoch"));
  const auto last = static_cast<int64_t>(json_number(j, "epochs"));
  REQUIRE(best < last);
  CHECK(a.err.find("test (last epoch's weights, epoch " + std::to_string(last) + ")") !=
        std::string::npos);
  CHECK(a.err.find("the best checkpoint is epoch " + std::to_string(best)) != std::string::npos);
  CHECK(j.find("\"test_weights\":\"last epoch\"") != std::string::npos);
  Output e = run("eval " + project + " --run 1 --db " + db.string());
  INFO(e.err);
  REQUIRE(e.code == 0);
  CHECK(e.out.find("best.ckpt (epoch " + std::to_string(best) + ")") != std::string::npos);
}

TEST_CASE("the teaching examples train to their stated accuracy", "[e2e][examples]") {
  fs::path db = temp_dir() / "examples.db";
  SECTION("two spirals: an MLP reaches >= 0.99") {
    Output o = run("--run " + examples() + "two-spirals-mlp.mls --json -q --db " + db.string());
    INFO(o.err);
    REQUIRE(o.code == 0);
    CHECK(json_number(last_line(o.out), "test_accuracy") >= 0.99);
  }
  SECTION("two blobs: logistic regression") {
    Output o = run("--run " + examples() + "two-blobs-logistic.mls --json -q --db " + db.string());
    INFO(o.err);
    REQUIRE(o.code == 0);
    CHECK(json_number(last_line(o.out), "test_accuracy") >= 0.95);
  }
  SECTION("the residual CNN and the batch-norm CNN train on a subset") {
    for (const char* name : {"fashion-mnist-resnet.mls", "fashion-mnist-cnn.mls"}) {
      Output o = run("--run " + examples() + name +
                     " --epochs 2 --limit 4000 --test-limit 1000 --json -q --db " + db.string());
      INFO(name << "\n" << o.err);
      REQUIRE(o.code == 0);
      CHECK(json_number(last_line(o.out), "test_accuracy") >= 0.6);
    }
  }
  SECTION("house prices from a CSV: regression scored by R²") {
    Output o = run("--run " + examples() + "house-prices-csv.mls --json -q --db " + db.string());
    INFO(o.err);
    REQUIRE(o.code == 0);
    const std::string j = last_line(o.out);
    // The data's noise (sd 10 on prices of 100-600) bounds R² near 0.99.
    CHECK(json_number(j, "test_r2") >= 0.9);
    CHECK(json_number(j, "test_mae") < 20);
  }
}

TEST_CASE("bad data files: the error names the file and the row or record", "[e2e][errors]") {
  fs::path dir = temp_dir() / "bad-data";
  fs::create_directories(dir);
  fs::path db = dir / "runs.db";
  auto project = [&](const std::string& name, const std::string& dataset, const std::string& loss) {
    fs::path p = dir / name;
    std::ofstream(p) << R"({"format_version": 1, "name": "bad", "dataset": )" << dataset
                     << R"(, "model": {"nodes": [
      {"id": "x", "type": "mls.input", "version": 1, "params": {}},
      {"id": "flat", "type": "mls.flatten", "version": 1, "params": {}},
      {"id": "fc", "type": "mls.linear", "version": 1, "params": {"out_features": 3}},
      {"id": "y", "type": "mls.labels", "version": 1, "params": {}},
      {"id": "loss", "type": ")"
                     << loss << R"(", "version": 1, "params": {}}],
      "links": [{"from": "x:out", "to": "flat:in"}, {"from": "flat:out", "to": "fc:in"},
                {"from": "fc:out", "to": "loss:logits"}, {"from": "y:out", "to": "loss:labels"}]},
      "training": {"epochs": 1}})";
    return p.string();
  };
  SECTION("a text cell in a numeric CSV column") {
    std::ofstream(dir / "flowers.csv")
        << "width,height,kind\n1.0,2.0,a\n1.5,2.5,b\n1.2,abc,c\n2.0,1.0,a\n";
    Output o = run("--run " +
                   project("csv.mls",
                           R"({"source": "csv", "path": "flowers.csv", "csv": {"target": "kind"}})",
                           "mls.cross_entropy") +
                   " --db " + db.string());
    CHECK(o.code == 1);
    INFO(o.err);
    CHECK(o.err.find("flowers.csv:4") != std::string::npos);
    CHECK(o.err.find("height") != std::string::npos);
    CHECK(o.err.find("abc") != std::string::npos);
  }
  SECTION("a corrupt PNG in an image folder") {
    fs::create_directories(dir / "images" / "cats");
    fs::create_directories(dir / "images" / "dogs");
    std::ofstream(dir / "images" / "cats" / "tom.png", std::ios::binary)
        << "\x89PNG\r\n\x1a\n this is not an image";
    std::ofstream(dir / "images" / "dogs" / "rex.png", std::ios::binary)
        << "\x89PNG\r\n\x1a\n nor this";
    Output o = run(
        "--run " +
        project(
            "img.mls",
            R"({"source": "image-folder", "path": "images", "image": {"size": [8, 8], "channels": 1}})",
            "mls.cross_entropy") +
        " --db " + db.string());
    CHECK(o.code == 1);
    INFO(o.err);
    CHECK(
        (o.err.find("tom.png") != std::string::npos || o.err.find("rex.png") != std::string::npos));
  }
  SECTION("labels outside the class range") {
    std::vector<uint8_t> x(6 * 4, 1);
    write_npy_u8(dir / "x.npy", {6, 4}, x);
    write_npy_u8(dir / "y.npy", {6}, {0, 1, 2, 1, 7, 0});
    Output o = run(
        "--run " +
        project(
            "npy.mls",
            R"({"source": "npy", "path": "x.npy", "npy": {"labels": "y.npy", "num_classes": 3}})",
            "mls.cross_entropy") +
        " --db " + db.string());
    CHECK(o.code == 1);
    INFO(o.err);
    CHECK(o.err.find("y.npy") != std::string::npos);
    CHECK(o.err.find("7") != std::string::npos);
  }
}
