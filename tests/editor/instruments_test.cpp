// The Instruments tab: fed live by a run started from the GUI, its series are the run's own
// (checked against the store), the memory view's plan adds up, clicking a node selects it on
// the canvas, the pre-flight estimate arrives from a worker, and the dashboard exports CSV.
// With MLS_SCREENSHOT_DIR set, each view is also saved there as a PNG (docs/instruments-*.png).
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QTabWidget>
#include <cstdlib>
#include <sstream>

#include "engine/cpu/cpu_backend.h"
#include "nodes/edit.h"
#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

void small_project(EditorFixture& fx, const char* example, int64_t epochs, int64_t limit) {
  fx.open_example(example);
  DocumentModel* m = fx.window->model();
  REQUIRE(
      m->push(nodes::make_set_dataset(m->doc(), {{"limit", limit}, {"test_limit", 1000}})).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", epochs}})).ok());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("project.mls"))).ok());
  fx.wait_for_data();
}

// Draws frames for `ms` milliseconds.
void frames(int ms) {
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < ms) QTest::qWait(15);
}

void maybe_screenshot(QWidget* w, const char* name) {
  const char* dir = std::getenv("MLS_SCREENSHOT_DIR");
  if (!dir) return;
  const QString path = QString(dir) + "/instruments-" + name + ".png";
  CHECK(w->grab().save(path));
}

}  // namespace

TEST_CASE(
    "the instruments follow a GUI run: the dashboard's points are the run's, memory adds up, CSV "
    "export",
    "[editor][instruments]") {
  EditorFixture fx;
  small_project(fx, "fashion-mnist-mlp.mls", 3, 6000);
  InstrumentsPanel* panel = fx.window->instruments();
  auto* tabs = fx.window->findChild<QTabWidget*>();
  REQUIRE(tabs);
  tabs->setCurrentWidget(panel);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy estimate(fx.window->trainer(), &TrainController::preflightReady);
  const int64_t frames_before = panel->frameCount();
  REQUIRE(fx.window->train());
  REQUIRE(finished.wait(120'000));
  frames(300);  // the last points reach the panel on its next frame
  CHECK(panel->frameCount() > frames_before + 5);  // it drew while the run went on
  const auto outcome = finished.at(0).at(0).value<runner::RunOutcome>();
  REQUIRE(outcome.status == "finished");
  CHECK(estimate.count() == 1);

  // Every step's loss arrived, equal to what the run recorded in the store.
  CHECK(panel->stepPoints() == static_cast<size_t>(outcome.result.steps));
  auto store = store::RunStore::open(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  auto loss = (*store)->metrics(outcome.run_id, "train/loss");
  REQUIRE(loss.ok());
  const std::string csv = panel->dashboardCsv();
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "run,series,x,value");
  size_t rows = 0;
  while (std::getline(in, line)) {
    if (line.rfind("live,train/loss,", 0) != 0) continue;
    const std::string rest = line.substr(16);
    const double step = std::stod(rest.substr(0, rest.find(','))),
                 v = std::stod(rest.substr(rest.find(',') + 1));
    REQUIRE(rows < loss->size());
    CHECK(step == static_cast<double>((*loss)[rows].step));
    CHECK(v == Approx((*loss)[rows].value).epsilon(1e-6));  // stored as f32 in the feed
    ++rows;
  }
  CHECK(rows == loss->size());
  CHECK(csv.find("live,epoch/train_loss,3,") != std::string::npos);
  const QString path = QString::fromStdString(fx.dir.file("dashboard.csv"));
  QString error;
  REQUIRE(panel->exportCsv(path, &error));
  QFile f(path);
  REQUIRE(f.open(QIODevice::ReadOnly));
  CHECK(f.readAll().toStdString() == csv);
  CHECK_FALSE(panel->exportCsv(QString::fromStdString(fx.dir.file("no/such/dir/d.csv")), &error));
  CHECK(error.contains("no/such/dir/d.csv"));

  // The run's runs are offered for the overlay once it ended.
  REQUIRE(panel->runs().size() == 1);
  CHECK(panel->runs()[0].run_id == outcome.run_id);
  CHECK(panel->runs()[0].loss.size() == loss->size());

  // The memory view: the published plan adds up to the run's estimate of the step.
  maybe_screenshot(panel, "dashboard");
  panel->showTab("Memory");
  frames(200);
  maybe_screenshot(panel, "memory");
  panel->showTab("Ops");
  frames(200);
  maybe_screenshot(panel, "ops");
  panel->showTab("Pre-flight");
  frames(200);
  maybe_screenshot(panel, "preflight");

  // A node picked in a profiler is selected on the canvas.
  Q_EMIT panel->nodeClicked("fc2");
  QTest::qWait(50);
  CHECK(tabs->currentWidget() == fx.window->view());
  bool selected = false;
  for (QGraphicsItem* it : fx.window->scene()->selectedItems())
    if (auto* n = dynamic_cast<NodeItem*>(it)) selected = selected || n->id() == "fc2";
  CHECK(selected);
}

TEST_CASE("the pre-flight estimate is computed on a worker for a chosen batch size and shown",
          "[editor][instruments]") {
  EditorFixture fx;
  small_project(fx, "fashion-mnist-cnn.mls", 1, 2000);
  InstrumentsPanel* panel = fx.window->instruments();
  fx.window->requestEstimate(64);
  // The estimate arrives through the event loop; the window keeps serving meanwhile.
  QElapsedTimer t;
  t.start();
  while (t.elapsed() < 60'000 && !panel->preflight()) QTest::qWait(20);
  REQUIRE(panel->preflight());
  const PreflightEstimate& e = *panel->preflight();
  CHECK(e.batch == 64);
  CHECK(e.fits);
  CHECK(e.max_batch > 64);
  CHECK(e.total_bytes > e.step_bytes);  // the evaluation plans come on top of the step
  CHECK(e.step_seconds > 0);
  // The same figure as the engine's own planning of this project at batch 64.
  runner::ProjectOptions po;
  po.path = fx.dir.file("project.mls");
  po.batch_size = 64;
  auto p = runner::open_project(po);
  REQUIRE(p.ok());
  auto step = planned_step_bytes(p->builder(), p->train_config(), cpu::backend(), 64);
  REQUIRE(step.ok());
  CHECK(*step == e.step_bytes);
}
