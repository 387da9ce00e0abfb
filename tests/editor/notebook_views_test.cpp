// Live views in the notebook, driven as a person would (keys typed into cells, clicks on the
// toolbar and its "+ View" menu): the dashboard under a cell that trains, the run's id under
// it and in P.outputs.json, the view cells (graph, step, dashboard, memory), and moving cells
// with Alt+Up / Alt+Down, undone with Ctrl+Z.
#include <QGraphicsView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <filesystem>

#include "editor/cell_widget.h"
#include "editor/memory_view.h"
#include "editor/notebook_view.h"
#include "editor/run_dashboard.h"
#include "editor/step_view.h"
#include "scripting/notebook/outputs.h"
#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

namespace Catch {
template <>
struct StringMaker<QString> {
  static std::string convert(const QString& s) { return '"' + s.toStdString() + '"'; }
};
template <>
struct StringMaker<QStringList> {
  static std::string convert(const QStringList& l) {
    return "{" + l.join(", ").toStdString() + "}";
  }
};
}  // namespace Catch

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;
using test::add_lua;
using test::click_action;
using test::run_cell;
using test::wait_run;

namespace {

// Picks `item` ("Step", ...) from the "+ View" button's menu: a click on the button's arrow
// opens it, a click on the item chooses it.
void add_view(NotebookView* nb, const QString& item) {
  auto* button = qobject_cast<QToolButton*>(nb->toolbar()->widgetForAction(nb->action("add-view")));
  REQUIRE(button);
  QMenu* menu = button->menu();
  REQUIRE(menu);
  QAction* chosen = nullptr;
  for (QAction* a : menu->actions())
    if (a->text().remove('&') == item) chosen = a;
  REQUIRE(chosen);
  bool clicked = false;
  QTimer poll;
  QObject::connect(&poll, &QTimer::timeout, [&] {
    if (!menu->isVisible() || clicked) return;
    clicked = true;
    QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(chosen).center());
  });
  poll.start(20);
  // The arrow: the button's right edge (QToolButton::MenuButtonPopup).
  QTest::mouseClick(button, Qt::LeftButton, {}, QPoint(button->width() - 4, button->height() / 2));
  for (int i = 0; i < 100 && !clicked; ++i) QTest::qWait(20);
  REQUIRE(clicked);
  QApplication::processEvents();
}

// A tiny classification run: 180 training samples of 2 features, 60 held out, batches of 30.
const QString kTrainCell =
    "mls.manual_seed(1)\n"
    "data = mls.data.open{source = \"synthetic\", validation = 0.25, "
    "synthetic = {kind = \"blobs\", samples = 240}}\n"
    "net = mls.nn.Sequential(mls.nn.Linear(2, 16), mls.nn.ReLU(), mls.nn.Linear(16, 3))\n"
    "r = mls.train{model = net, data = data, epochs = EPOCHS, batch_size = 30, quiet = true}\n"
    "print(string.format(\"final %.17g run %d steps %d\", r.final_loss, r.run_id, r.steps))";

QString train_cell(int epochs) {
  return QString(kTrainCell).replace("EPOCHS", QString::number(epochs));
}

}  // namespace

TEST_CASE("a cell that trains shows a live dashboard under it, its run id, and saves both",
          "[editor][notebook][views]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const std::string path = fx.dir.file("lab.mls");
  REQUIRE(fx.window->model()->saveAs(path).ok());
  const QString a = add_lua(nb, train_cell(2));
  QSignalSpy live(nb, &NotebookView::liveRunStarted);
  run_cell(nb, a);
  CHECK(wait_run(nb) == QStringList{a});
  const lua::CellOutput* out = nb->session().output(a.toStdString());
  REQUIRE(out);
  INFO(out->error);
  REQUIRE(out->ok);
  CHECK(live.count() == 1);
  // The Instruments tab followed the same run, and knows it ended.
  CHECK(fx.window->instruments()->phase() == RunPhase::Done);

  // What the cell printed: the run's final loss (to 17 digits) and its id.
  double final_loss = 0;
  long long run_id = 0, steps = 0;
  REQUIRE(std::sscanf(out->text.c_str(), "final %lf run %lld steps %lld", &final_loss, &run_id,
                      &steps) == 3);
  CHECK(steps == 10);  // 144 training samples (48 held out as test, 48 for validation), 2 x 5
  CHECK(run_id >= 1);
  CHECK(out->run_id == run_id);
  auto store = store::RunStore::open_read_only(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  auto info = (*store)->get_run(run_id);
  REQUIRE(info.ok());
  CHECK(info->status == "finished");

  // The dashboard under the cell: both epochs, the last epoch's loss is the run's final loss.
  RunDashboard* d = nb->dashboard(a);
  REQUIRE(d);
  CHECK(d->isVisible());
  CHECK(nb->cellWidget(a)->isAncestorOf(d));
  CHECK_FALSE(d->live());  // the run ended: the timer stopped, the curves stay
  CHECK(d->epochCount() == 2);
  REQUIRE(d->epochTrainLoss().size() == 2);
  CHECK(d->epochTrainLoss().back() == final_loss);
  CHECK(static_cast<long long>(d->stepCount()) == steps);
  REQUIRE(d->epochValAccuracy().size() == 2);
  CHECK(d->epochValAccuracy().back() >= 0.0);
  CHECK(d->epochValAccuracy().back() <= 1.0);
  CHECK(d->runId() == run_id);
  const QString status = d->status();
  INFO(status.toStdString());
  CHECK(status.contains(QString("run #%1").arg(run_id)));
  CHECK(status.contains("done"));
  CHECK(status.contains("epoch 2 of 2"));
  CHECK(d->lossSvg().find("<polyline") != std::string::npos);
  CHECK(d->epochSvg().find("validation accuracy") != std::string::npos);
  QLabel* label = nb->runLabel(a);
  REQUIRE(label);
  CHECK(label->isVisible());
  CHECK(label->text().contains(QString("run #%1").arg(run_id)));

  // P.outputs.json was written after the run, with the run's id.
  const std::string saved_path = lua::outputs_path(path);
  REQUIRE(std::filesystem::exists(saved_path));
  CHECK(nb->outputsError().isEmpty());
  auto saved = lua::load_outputs(path);
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  REQUIRE((*saved)->count(a.toStdString()) == 1);
  CHECK((*saved)->at(a.toStdString()).run_id == run_id);
  CHECK((*saved)->at(a.toStdString()).text == out->text);

  // Reopened: the saved output and its run id are shown under the cell (no live run).
  REQUIRE(fx.window->model()->saveAs(path).ok());
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  QApplication::processEvents();
  REQUIRE(nb->cellIds() == QStringList{a});
  INFO(nb->cellWidget(a)->outputText()->text().toStdString());
  CHECK(nb->cellWidget(a)->outputText()->text().contains(QString("run %1 steps").arg(run_id)));
  QLabel* reopened = nb->runLabel(a);
  REQUIRE(reopened);
  CHECK(reopened->isVisible());
  CHECK(reopened->text().contains(QString("run #%1").arg(run_id)));
}

TEST_CASE("Stop stops a training cell, and its dashboard says stopped and keeps its curves",
          "[editor][notebook][views]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, train_cell(100000));
  run_cell(nb, a);
  RunDashboard* d = nullptr;
  for (int i = 0; i < 3000 && !(d && d->stepCount() > 0); ++i) {
    QTest::qWait(10);
    d = nb->dashboard(a);
  }
  REQUIRE(d);
  REQUIRE(d->stepCount() > 0);  // drawn while the run goes on
  CHECK(d->live());
  CHECK(d->status().contains("training"));
  REQUIRE(d->stopButton()->isVisible());
  SECTION("with the notebook's Stop") {
    click_action(nb, "stop");
  }
  SECTION("with the Stop beside the dashboard's status") {
    QTest::mouseClick(d->stopButton(), Qt::LeftButton);
  }
  wait_run(nb);
  const lua::CellOutput* out = nb->session().output(a.toStdString());
  REQUIRE(out);
  CHECK_FALSE(out->ok);
  CHECK(out->error.find("interrupted") != std::string::npos);
  CHECK(out->run_id >= 1);  // the run is in the store, recorded as interrupted
  CHECK_FALSE(d->live());
  CHECK_FALSE(d->stopButton()->isVisible());
  CHECK(d->status().contains("stopped"));
  CHECK(d->stepCount() > 0);
}

TEST_CASE("each view cell kind from the + View menu makes its live view",
          "[editor][notebook][views]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  // A run writes the outputs beside the project (P.outputs.json): here, not in the sources.
  REQUIRE(fx.window->model()->saveAs(fx.dir.file("views.mls")).ok());
  NotebookView* nb = fx.window->notebook();
  add_view(nb, "Graph");
  add_view(nb, "Training step");
  add_view(nb, "Dashboard");
  add_view(nb, "Memory");
  const QStringList ids = nb->cellIds();
  REQUIRE(ids.size() == 4);
  std::vector<std::string> views;
  for (const auto& c : nb->notebook().cells) views.push_back(c.view);
  CHECK(views == std::vector<std::string>{"graph", "step", "dashboard", "memory"});
  auto* graph = qobject_cast<QGraphicsView*>(nb->cellWidget(ids[0])->viewWidget());
  REQUIRE(graph);
  CHECK(graph->scene() == fx.window->view()->scene());
  auto* step = qobject_cast<StepView*>(nb->cellWidget(ids[1])->viewWidget());
  REQUIRE(step);
  auto* dash = qobject_cast<RunDashboard*>(nb->cellWidget(ids[2])->viewWidget());
  REQUIRE(dash);
  auto* memory = qobject_cast<MemoryView*>(nb->cellWidget(ids[3])->viewWidget());
  REQUIRE(memory);
  // The step view draws the project's training step.
  for (int i = 0; i < 500 && step->drawnNodes() == 0; ++i) QTest::qWait(10);
  INFO(step->message().toStdString());
  CHECK(step->drawnNodes() > 0);
  // No run yet: the dashboard says so, the memory view has nothing to show.
  CHECK(dash->telemetry() == nullptr);
  CHECK(dash->status().contains("No run yet"));
  CHECK(memory->bars().bars.empty());

  // A cell trains: the dashboard view follows that run, the memory view shows its bytes.
  const QString t = add_lua(nb, train_cell(2));
  run_cell(nb, t);
  wait_run(nb);
  const lua::CellOutput* out = nb->session().output(t.toStdString());
  REQUIRE(out);
  INFO(out->error);
  REQUIRE(out->ok);
  // The cells' widgets were made anew when the cell came: the views are new ones.
  REQUIRE(nb->cellIds().size() == 5);
  dash = qobject_cast<RunDashboard*>(nb->cellWidget(ids[2])->viewWidget());
  memory = qobject_cast<MemoryView*>(nb->cellWidget(ids[3])->viewWidget());
  REQUIRE(dash);
  REQUIRE(memory);
  for (int i = 0; i < 100 && dash->epochCount() < 2; ++i) QTest::qWait(10);
  CHECK(dash->telemetry() != nullptr);
  CHECK(dash->epochCount() == 2);
  CHECK(dash->stepCount() == 10);
  REQUIRE(nb->dashboard(t));
  CHECK(dash->epochTrainLoss() == nb->dashboard(t)->epochTrainLoss());
  for (int i = 0; i < 100 && memory->bars().bars.empty(); ++i) QTest::qWait(10);
  INFO(memory->bars().source);
  REQUIRE_FALSE(memory->bars().bars.empty());
  CHECK(memory->bars().source.rfind("latest run", 0) == 0);
  int64_t sum = 0;
  for (const auto& b : memory->bars().bars) {
    CHECK(b.bytes > 0);
    sum += b.bytes;
  }
  CHECK(sum == memory->bars().total);
}

TEST_CASE("memory_bars: a run's step at its peak first, else the allocator, else the estimate",
          "[editor][views]") {
  CHECK(memory_bars(nullptr, nullptr).bars.empty());
  PreflightEstimate est;
  MemoryTimeline::Sample s0, s1;
  s0.bytes[mem_cat_index(MemCat::Parameter)] = 400;
  s0.bytes[mem_cat_index(MemCat::Activation)] = 100;
  s1.bytes[mem_cat_index(MemCat::Parameter)] = 400;
  s1.bytes[mem_cat_index(MemCat::Activation)] = 1000;
  s1.bytes[mem_cat_index(MemCat::ArenaFree)] = 24;
  est.timeline.samples = {s0, s1};
  est.timeline.peak = 1;
  MemoryBars m = memory_bars(nullptr, &est);
  CHECK(m.source.rfind("pre-flight", 0) == 0);
  REQUIRE(m.bars.size() == 3);
  CHECK(m.bars[0].name == "parameters");
  CHECK(m.bars[0].bytes == 400);
  CHECK(m.bars[1].name == "activations");
  CHECK(m.bars[1].bytes == 1000);
  CHECK(m.total == 1424);
  // A run with no timeline yet: what its allocator holds, per tag, before the estimate.
  Telemetry tm;
  MemoryStats stats;
  stats.current[tag_index(AllocTag::Parameter)] = 64;
  stats.current[tag_index(AllocTag::Input)] = 32;
  tm.publish_allocator(stats);
  m = memory_bars(&tm, &est);
  CHECK(m.source.rfind("latest run", 0) == 0);
  REQUIRE(m.bars.size() == 2);
  CHECK(m.bars[0].name == "parameter");
  CHECK(m.bars[1].name == "input");
  CHECK(m.total == 96);
}

TEST_CASE("Alt+Down moves the selected cell down, Alt+Up up, and Ctrl+Z moves it back",
          "[editor][notebook][views]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "x = 1");
  const QString b = add_lua(nb, "y = 2");
  const QString c = add_lua(nb, "z = 3");
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  QTest::mouseClick(nb->cellWidget(a)->editor()->viewport(), Qt::LeftButton);
  REQUIRE(nb->selected() == a);
  QTest::keyClick(QApplication::focusWidget(), Qt::Key_Down, Qt::AltModifier);
  REQUIRE(nb->cellIds() == QStringList{b, a, c});
  CHECK(nb->selected() == a);  // the selection follows the cell
  QTest::keyClick(QApplication::focusWidget(), Qt::Key_Down, Qt::AltModifier);
  CHECK(nb->cellIds() == QStringList{b, c, a});
  QTest::keyClick(QApplication::focusWidget(), Qt::Key_Down, Qt::AltModifier);  // the last
  CHECK(nb->cellIds() == QStringList{b, c, a});
  QTest::keyClick(QApplication::focusWidget(), Qt::Key_Up, Qt::AltModifier);
  CHECK(nb->cellIds() == QStringList{b, a, c});
  CHECK(nb->notebook().cells[1].id == a.toStdString());
  CHECK(nb->cellWidget(a)->editor()->toPlainText() == "x = 1");
  // Ctrl+Z: the last move undone, then the one before.
  QTest::keySequence(QApplication::focusWidget(), QKeySequence::Undo);
  QApplication::processEvents();
  CHECK(nb->cellIds() == QStringList{b, c, a});
  QTest::keySequence(QApplication::focusWidget(), QKeySequence::Undo);
  QApplication::processEvents();
  CHECK(nb->cellIds() == QStringList{b, a, c});
  // The toolbar's buttons do the same.
  click_action(nb, "move-up");
  CHECK(nb->cellIds() == QStringList{a, b, c});
  CHECK(nb->action("move-up")->shortcut() == QKeySequence(Qt::ALT | Qt::Key_Up));
  CHECK(nb->action("move-down")->shortcut() == QKeySequence(Qt::ALT | Qt::Key_Down));
}

TEST_CASE("P.outputs.json is written after a run the user starts, not after a canvas edit's re-run",
          "[editor][notebook][views]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  const std::string path = fx.dir.file("canvas.mls");
  REQUIRE(fx.window->model()->saveAs(path).ok());
  NotebookView* nb = fx.window->notebook();
  const QString r = add_lua(nb, "print(#mls.project.current():nodes())");
  const size_t nodes = fx.window->model()->doc().nodes.size();
  run_cell(nb, r);
  CHECK(wait_run(nb) == QStringList{r});
  auto saved = lua::load_outputs(path);
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  CHECK((*saved)->at(r.toStdString()).text == std::to_string(nodes) + "\n");
  // A node dropped on the canvas: the cell re-runs (reactive) and shows the new count, but
  // the graph it read is not saved, so neither is its output.
  REQUIRE(fx.window->view()->dropNodeType("mls.relu", QPointF(40, 40)).ok());
  QApplication::processEvents();
  CHECK(wait_run(nb) == QStringList{r});
  REQUIRE(nb->session().output(r.toStdString()));
  CHECK(nb->session().output(r.toStdString())->text == std::to_string(nodes + 1) + "\n");
  saved = lua::load_outputs(path);
  REQUIRE(saved.ok());
  REQUIRE(saved->has_value());
  CHECK((*saved)->at(r.toStdString()).text == std::to_string(nodes) + "\n");
}

TEST_CASE(
    "P.outputs.json that cannot be written is said above the cells, and the run's output stays",
    "[editor][notebook][views]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const std::string path = fx.dir.file("blocked.mls");
  REQUIRE(fx.window->model()->saveAs(path).ok());
  // A folder where the file should go: the atomic rename onto it fails.
  std::filesystem::create_directory(lua::outputs_path(path));
  const QString a = add_lua(nb, "print(6 * 7)");
  run_cell(nb, a);
  CHECK(wait_run(nb) == QStringList{a});
  CHECK(nb->cellWidget(a)->outputText()->text() == "42");
  INFO(nb->outputsError().toStdString());
  CHECK(nb->outputsError().contains("blocked.outputs.json"));
  auto* notice = nb->findChild<QLabel*>("notebook.notice");
  REQUIRE(notice);
  CHECK(notice->isVisible());
  CHECK(notice->text().startsWith("The outputs were not saved: "));
  // Once the folder is gone, the next run writes the file and the notice goes.
  std::filesystem::remove(lua::outputs_path(path));
  run_cell(nb, a);
  wait_run(nb);
  CHECK(nb->outputsError().isEmpty());
  CHECK_FALSE(notice->isVisible());
  CHECK(std::filesystem::is_regular_file(lua::outputs_path(path)));
}
