// Training from the editor: the same run path as --run, on a worker thread, while the
// event loop keeps serving; Pause and Stop.
#include <QElapsedTimer>
#include <QTimer>
#include <algorithm>

#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

// The MLP example on a slice of Fashion-MNIST, saved in the test's folder.
void small_mlp(EditorFixture& fx, int64_t epochs) {
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_dataset(m->doc(), {{"limit", 6000}, {"test_limit", 1000}})).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", epochs}})).ok());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("mlp.mls"))).ok());
  fx.wait_for_data();
}

}  // namespace

TEST_CASE("training from the GUI records a run while the event loop stays responsive",
          "[editor][train]") {
  EditorFixture fx;
  small_mlp(fx, 3);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy progress(fx.window->trainer(), &TrainController::progress);
  // A timer every 10 ms: the gaps between its ticks show whether the loop was blocked.
  QElapsedTimer clock;
  clock.start();
  qint64 last = 0, worst_gap = 0;
  int ticks = 0;
  QTimer tick;
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.elapsed();
    if (ticks++ > 0) worst_gap = std::max(worst_gap, now - last);
    last = now;
  });
  tick.start(10);
  REQUIRE(fx.window->train());
  CHECK(fx.window->trainer()->running());
  CHECK_FALSE(fx.window->train());  // one run at a time
  REQUIRE(finished.wait(120'000));
  tick.stop();
  const qint64 took = clock.elapsed();
  INFO("run took " << took << " ms, " << ticks << " timer ticks, worst gap " << worst_gap << " ms");
  CHECK(progress.count() > 3);
  CHECK(worst_gap < 250);
  CHECK(ticks > took / 40);

  const auto outcome = finished.at(0).at(0).value<runner::RunOutcome>();
  CHECK(outcome.status == "finished");
  CHECK(outcome.epochs_done == 3);
  CHECK(outcome.result.has_test);
  CHECK(outcome.result.test.accuracy > 0.7);
  // The same store --run writes, with the run's params and per-step losses.
  auto store = store::RunStore::open(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  auto run = (*store)->get_run(outcome.run_id);
  REQUIRE(run.ok());
  CHECK(run->status == "finished");
  auto loss = (*store)->metrics(outcome.run_id, "train/loss");
  REQUIRE(loss.ok());
  CHECK(loss->size() == static_cast<size_t>(outcome.result.steps));
  CHECK(fx.window->runLog()->toPlainText().contains("finished"));

  // After the run every layer shows its share of the step's time and its output's figures.
  QTest::qWait(10);
  const auto& info = fx.window->scene()->runInsights();
  double shares = 0;
  for (const char* id : {"flat", "fc1", "relu1", "fc2", "relu2", "fc3", "loss"}) {
    INFO(id);
    REQUIRE(info.count(id) == 1);
    CHECK(info.at(id).time_share >= 0);
    shares += info.at(id).time_share;
  }
  CHECK(shares == Approx(1.0).margin(0.05));  // the rest: kernels no layer owns
  CHECK(info.at("flat").time_share == 0);     // a reshape is a view: no kernel runs
  CHECK(info.at("fc1").time_share > info.at("relu1").time_share);  // a GEMM outweighs a max
  CHECK(info.at("fc1").backward_ms > 0);
  const NodeRunInfo& relu = info.at("relu1");
  const NodeRunInfo& fc = info.at("fc1");
  REQUIRE(relu.output);
  REQUIRE(fc.output);
  CHECK(relu.output->min == 0);
  CHECK(fc.output->min < 0);
  CHECK(relu.output->mean > std::max(0.0, fc.output->mean));
  CHECK(relu.output->zero_fraction > 0.05);
  CHECK(relu.output->zero_fraction < 0.95);
  CHECK(fc.output->zero_fraction < 0.01);
  NodeItem* item = fx.window->scene()->nodeItem("relu1");
  CHECK(item->runText().contains("% zeros"));
  CHECK(item->runText().contains("% of step time"));
  CHECK(fx.window->scene()->nodeItem("fc1")->toolTip().contains("of the step's kernel time"));
  if (const char* dir = std::getenv("MLS_SCREENSHOT_DIR"))
    fx.window->grab().save(QString(dir) + "/after-run.png");
}

TEST_CASE("Pause holds the run between steps, Stop ends it as interrupted", "[editor][train]") {
  EditorFixture fx;
  small_mlp(fx, 50);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy progress(fx.window->trainer(), &TrainController::progress);
  REQUIRE(fx.window->train());
  REQUIRE(progress.wait(30'000));
  fx.window->trainer()->setPaused(true);
  QTest::qWait(150);  // let a step that was under way finish
  const int seen = progress.count();
  QTest::qWait(400);
  CHECK(progress.count() == seen);  // no step while paused
  CHECK(fx.window->trainer()->running());
  fx.window->trainer()->stop();
  REQUIRE(finished.wait(30'000));
  const auto outcome = finished.at(0).at(0).value<runner::RunOutcome>();
  CHECK(outcome.status == "interrupted");
  CHECK(outcome.epochs_done < 50);
  auto store = store::RunStore::open(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  CHECK((*store)->get_run(outcome.run_id)->status == "interrupted");
}
