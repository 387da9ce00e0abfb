// What the editor says about a run and its settings: a paused run says "paused" (status bar
// and dashboard), a run whose loss became infinite says "diverged" with a readable loss (not
// "done" with 31 digits), the dashboard's hint names the key that really trains, a small
// constant learning rate fills its chart, and the export dialog names an imported model's
// weights as what they are.
#include <QComboBox>
#include <QDialog>
#include <QTimer>

#include "editor/imgui_plot.h"
#include "nodes/edit.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

QAction* action(EditorFixture& fx, const QString& text) {
  for (QAction* a : fx.window->findChildren<QAction*>())
    if (a->text() == text) return a;
  FAIL("no action " << text.toStdString());
  return nullptr;
}

// An example saved into the test's folder (its data path made absolute) with `training`.
void example_project(EditorFixture& fx, const char* example, const nlohmann::json& training) {
  fx.open_example(example);
  DocumentModel* m = fx.window->model();
  if (!m->doc().dataset.path.empty() && m->doc().dataset.path[0] != '/')
    REQUIRE(m->push(nodes::make_set_dataset(
                        m->doc(), {{"path", std::string(MLS_SOURCE_DIR "/resources/examples/") +
                                                m->doc().dataset.path}}))
                .ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), training)).ok());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("project.mls"))).ok());
  fx.wait_for_data();
}

}  // namespace

TEST_CASE("a paused run says paused in the status bar and on the dashboard",
          "[editor][run-feedback]") {
  EditorFixture fx;
  example_project(fx, "two-spirals-mlp.mls", {{"epochs", 5000}});
  QSignalSpy progress(fx.window->trainer(), &TrainController::progress);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  REQUIRE(fx.window->train());
  REQUIRE(progress.wait(60'000));
  CHECK(fx.window->instruments()->statusLine().rfind("training", 0) == 0);
  QAction* pause = action(fx, "&Pause");
  pause->trigger();
  REQUIRE(pause->isChecked());
  // Steps reported just before the pause arrive after it.
  QTest::qWait(400);
  INFO(fx.window->statusText().toStdString());
  CHECK(fx.window->statusText().startsWith("paused"));
  CHECK(fx.window->instruments()->statusLine().rfind("paused", 0) == 0);
  // A step the worker reported just before it stopped, delivered now (as a queued signal
  // arrives after the pause): the status bar still says paused, with a readable loss.
  ProgressInfo late;
  late.epoch = 1, late.epochs = 5000, late.batch = 3, late.batches = 50, late.loss = 1e30;
  Q_EMIT fx.window->trainer()->progress(late);
  INFO(fx.window->statusText().toStdString());
  CHECK(fx.window->statusText().startsWith("paused: epoch 1/5000, step 3/50, loss 1e+30"));
  pause->trigger();  // go on
  CHECK(fx.window->instruments()->statusLine().rfind("training", 0) == 0);
  action(fx, "&Stop")->trigger();
  REQUIRE(finished.wait(60'000));
  CHECK(fx.window->instruments()->statusLine().rfind("stopped", 0) == 0);
}

TEST_CASE("a run whose loss became infinite says diverged with a readable loss",
          "[editor][run-feedback]") {
  EditorFixture fx;
  example_project(fx, "house-prices-csv.mls",
                  {{"epochs", 3}, {"optimizer", {{"type", "adam"}, {"lr", 1e20}}}});
  QSignalSpy failed(fx.window->trainer(), &TrainController::failed);
  REQUIRE(fx.window->train());
  REQUIRE(failed.wait(60'000));
  const std::string line = fx.window->instruments()->statusLine();
  INFO(line);
  CHECK(line.rfind("diverged", 0) == 0);
  // Numbers to four significant digits: no run of ten digits anywhere.
  int run = 0, longest = 0;
  for (char c : line) longest = std::max(longest, run = std::isdigit(c) ? run + 1 : 0);
  CHECK(longest < 10);
  CHECK(fx.window->statusText().contains("the loss became inf"));

  // The same line, built from a step whose loss is huge, then from one that is NaN.
  StepPoint p;
  p.step = 40, p.epoch = 2, p.loss = 1e30f, p.lr = 0.5f;
  const std::string huge = dashboard_status(RunPhase::Diverged, &p, 3, 1 << 20, "F5");
  CHECK(huge.find("diverged  epoch 2/3  step 40  loss 1e+30") == 0);
  p.loss = NAN;
  CHECK(dashboard_status(RunPhase::Done, &p, 3, 0, "F5").rfind("diverged", 0) == 0);
  p.loss = 0.123456f;
  CHECK(dashboard_status(RunPhase::Done, &p, 3, 0, "F5")
            .find("done  epoch 2/3  step 40  loss 0.1235") == 0);
}

TEST_CASE("the dashboard's hint names the key the Train action has", "[editor][run-feedback]") {
  EditorFixture fx;
  const QString key = action(fx, "&Train")->shortcut().toString(QKeySequence::NativeText);
  CHECK(key == "F5");
  const std::string hint = fx.window->instruments()->statusLine();
  INFO(hint);
  CHECK(hint.find("press Train (" + key.toStdString() + ")") != std::string::npos);
  CHECK(hint.find("Ctrl+R") == std::string::npos);
}

TEST_CASE("a small constant learning rate fills its chart", "[editor][run-feedback]") {
  for (double lr : {1e-3, 1e-5, 0.05, 250.0}) {
    INFO(lr);
    const auto [lo, hi] = linear_y_range(lr, lr);
    CHECK(lo < lr);
    CHECK(hi > lr);
    CHECK(lo > 0);            // not from -1
    CHECK(hi - lo < lr * 1);  // the band is of the value's size, not 2
  }
  const auto [lo0, hi0] = linear_y_range(0, 0);
  CHECK(lo0 == -1);
  CHECK(hi0 == 1);
  const auto [lo, hi] = linear_y_range(0.0, 0.05);  // a decay to 0: as before
  CHECK(lo == 0);
  CHECK(hi == Approx(0.05));
}

TEST_CASE("the export dialog names an imported model's weights as the project's, not untrained",
          "[editor][run-feedback]") {
  EditorFixture fx;
  example_project(fx, "two-blobs-logistic.mls", {{"epochs", 1}});
  // An ONNX model (with the initial weights), imported back: the project now starts from the
  // model's weights file.
  QSignalSpy exported(fx.window.get(), &MainWindow::exportFinished);
  const QString onnx = QString::fromStdString(fx.dir.file("blobs.onnx"));
  REQUIRE(fx.window->exportOnnx({.out = onnx}));
  REQUIRE(exported.wait(120'000));
  REQUIRE(exported.at(0).at(0).toBool());
  REQUIRE(fx.window->importOnnx(onnx, QString::fromStdString(fx.dir.file("imported.mls"))).ok());
  REQUIRE(fx.window->model()->doc().weights == "imported.weights");

  // File > Export to ONNX…: read the weights choices off the dialog, then cancel it.
  QStringList items;
  QTimer::singleShot(200, [&] {
    auto* d = qobject_cast<QDialog*>(QApplication::activeModalWidget());
    REQUIRE(d);
    auto* weights = d->findChild<QComboBox*>();
    REQUIRE(weights);
    for (int i = 0; i < weights->count(); ++i) items << weights->itemText(i);
    d->reject();
  });
  action(fx, "&Export to ONNX…")->trigger();
  INFO(items.join(" | ").toStdString());
  REQUIRE_FALSE(items.isEmpty());
  CHECK(items.last() == "the project's weights (imported.weights)");
  CHECK_FALSE(items.join("|").contains("not trained"));
  CHECK(project_weights_label("") == "initial weights (not trained)");
}
