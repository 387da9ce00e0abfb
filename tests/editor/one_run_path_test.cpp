// One path for every run: the Fashion-MNIST MLP trained by `mlstudio --run`, by the
// editor's Train key (from an unsaved edit of the document) and by a Lua script writes the
// same step losses, the same result-deciding params and the same checkpoint bytes.
#include <QTest>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "runner/checkpoints.h"
#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;
using mls::test::read_file;

namespace {

int run_exe(const std::string& args, const std::string& log) {
  const std::string cmd = std::string(MLS_EXE) + " " + args + " >" + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(cmd << "\n" << read_file(log));
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The example's MLP in Lua, its layers named as the document's nodes (fc1, fc2, fc3), so
// the parameter names (and so the checkpoint bytes) are the same too.
constexpr const char* kLuaMlp = R"lua(
local nn = mls.nn
mls.manual_seed(42)
local MLP = nn.Module:extend("MLP")
function MLP:init()
  self.fc1 = nn.Linear(784, 256)
  self.fc2 = nn.Linear(256, 128)
  self.fc3 = nn.Linear(128, 10)
end
function MLP:forward(x)
  return self.fc3(self.fc2(self.fc1(x:flatten(2)):relu()):relu())
end
local model = MLP()
local data = mls.data.fashion_mnist{limit = 2000, test_limit = 500}
local r = mls.train{model = model, data = data, loss = "cross_entropy",
  optimizer = mls.optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9}),
  schedule = {type = "cosine"}, epochs = 2, batch_size = 128, seed = 42, name = "mlp-lua"}
print("run", r.run_id)
)lua";

}  // namespace

TEST_CASE("the MLP trained by --run, by the editor from an unsaved edit, and by Lua is the same run",
          "[editor][train][run-path]") {
  EditorFixture fx;
  const std::string example = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls";
  const std::string example_before = read_file(example);
  const std::string db = fx.dir.file("runs.db");  // the editor's database (EditorFixture)

  // 1. The editor: the example, edited (not saved), trained with the Train key.
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_dataset(m->doc(), {{"limit", 2000}, {"test_limit", 500}})).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 2}})).ok());
  REQUIRE(m->isModified());
  fx.window->show();
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy failed(fx.window->trainer(), &TrainController::failed);
  // Analysis of the edited graph (shapes on every edge) comes first, as for a person.
  for (int i = 0; i < 500 && !m->analysis().complete(); ++i) QTest::qWait(20);
  REQUIRE(m->analysis().complete());
  QTest::keySequence(fx.window.get(), train_key());
  for (int i = 0; i < 6000 && finished.isEmpty() && failed.isEmpty(); ++i) QTest::qWait(20);
  INFO((failed.isEmpty() ? QString() : failed.at(0).at(0).toString()).toStdString());
  INFO(fx.window->statusText().toStdString());
  REQUIRE(finished.count() == 1);
  const auto editor_run = finished.at(0).at(0).value<runner::RunOutcome>();
  CHECK(editor_run.status == "finished");
  // Nothing was saved: the user's file is as it was, the edit still unsaved.
  CHECK(read_file(example) == example_before);
  CHECK(m->isModified());

  // 2. The command line, on the same file with the same settings as flags.
  REQUIRE(run_exe("--run " + example + " --epochs 2 --limit 2000 --test-limit 500 --db " + db,
                  fx.dir.file("run.log")) == 0);
  // 3. A Lua script (sandboxed, as `mlstudio lua` runs a stranger's script).
  const std::string script = fx.dir.file("mlp.lua");
  std::ofstream(script) << kLuaMlp;
  REQUIRE(run_exe("lua " + script + " --db " + db, fx.dir.file("lua.log")) == 0);

  auto store = store::RunStore::open_read_only(db);
  REQUIRE(store.ok());
  auto runs = (*store)->list_runs();
  REQUIRE(runs.ok());
  REQUIRE(runs->size() == 3);
  std::vector<std::vector<store::MetricPoint>> losses;
  std::vector<std::map<std::string, std::string>> params;
  std::vector<std::string> checkpoints;
  for (const store::RunInfo& r : *runs) {
    INFO("run " << r.id << " " << r.name);
    CHECK(r.status == "finished");
    CHECK(r.seed == 42);
    auto l = (*store)->metrics(r.id, "train/loss");
    REQUIRE(l.ok());
    losses.push_back(*l);
    auto p = (*store)->params(r.id);
    REQUIRE(p.ok());
    params.emplace_back(p->begin(), p->end());
    checkpoints.push_back(read_file(runner::checkpoint_path(db, r.id, "last")));
    // Each run keeps what it trained: the editor's and the CLI's the document, Lua's its script.
    auto snap = (*store)->snapshot(r.id);
    REQUIRE(snap.ok());
    REQUIRE(snap->has_value());
    CHECK((*snap)->kind == (r.id == 3 ? "lua" : "mls"));
  }
  REQUIRE(losses[0].size() == 32);  // 2 epochs of 16 steps (2000 samples, batch 128)
  for (size_t k = 1; k < 3; ++k) {
    INFO("run " << k + 1 << " against the editor's run");
    REQUIRE(losses[k].size() == losses[0].size());
    for (size_t i = 0; i < losses[0].size(); ++i) {
      CHECK(losses[k][i].step == losses[0][i].step);
      CHECK(losses[k][i].value == losses[0][i].value);  // bit for bit
    }
    for (const char* key : {"epochs", "batch_size", "lr", "optimizer", "momentum", "weight_decay",
                            "schedule", "precision", "mode", "train_samples", "test_samples"}) {
      INFO(key);
      CHECK(params[k][key] == params[0][key]);
    }
    CHECK(checkpoints[k].size() > 1'000'000);
    CHECK(checkpoints[k] == checkpoints[0]);
  }
  // The editor's snapshot is the edited document (2 epochs), not the file (10).
  auto snap = (*store)->snapshot(1);
  REQUIRE(snap.ok());
  CHECK((*snap)->text.find("\"epochs\": 2") != std::string::npos);
  CHECK((*snap)->text.find("\"limit\": 2000") != std::string::npos);
}
