// The training debugger in the editor (issue 29): the Debug menu arms the run, a run that goes
// wrong pauses with its faulty node marked on the canvas, the Health panel gets samples, and
// Compare devices paints the graph. Driven with keys and clicks on the real widgets.
#include <QApplication>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QSettings>
#include <QTabBar>
#include <QTabWidget>
#include <QToolBar>
#include <QToolButton>

#include "editor/debugger.h"
#include "editor/device_diff_view.h"
#include "editor/health_panel.h"
#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

void activate(EditorFixture& fx) {
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
}

// A click on "Debug" in the menu bar opens the menu; `key` is the mnemonic of one of its
// entries.
void debug_menu_key(EditorFixture& fx, Qt::Key key) {
  QMenuBar* bar = fx.window->menuBar();
  QAction* title = nullptr;
  for (QAction* a : bar->actions())
    if (a->menu() && a->menu()->objectName() == "menu.debug") title = a;
  REQUIRE(title);
  QTest::mouseClick(bar, Qt::LeftButton, {}, bar->actionGeometry(title).center());
  QMenu* popup = nullptr;
  for (int i = 0; i < 100 && !popup; ++i) {
    popup = qobject_cast<QMenu*>(QApplication::activePopupWidget());
    if (!popup) QTest::qWait(10);
  }
  REQUIRE(popup);
  CHECK(popup->objectName() == "menu.debug");
  QTest::keyClick(popup, key);
  QTest::qWait(20);
}

// Clicks into a spin box's text, selects all, types `text` and presses `key`.
void type_into(QAbstractSpinBox* s, const QString& text, Qt::Key key) {
  auto* line = s->findChild<QLineEdit*>();
  REQUIRE(line);
  QTest::mouseClick(line, Qt::LeftButton, {}, QPoint(8, line->height() / 2));
  QTest::keyClick(line, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(line, text);
  QTest::keyClick(line, key);
  QTest::qWait(10);
}

// The MLP example on a slice of Fashion-MNIST, saved in the test's folder.
void small_mlp(EditorFixture& fx, int64_t epochs) {
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_dataset(m->doc(), {{"limit", 2000}, {"test_limit", 500}})).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", epochs}})).ok());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("mlp.mls"))).ok());
  fx.wait_for_data();
}

runner::RunOutcome train_by_key(EditorFixture& fx) {
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  QSignalSpy failed(fx.window->trainer(), &TrainController::failed);
  activate(fx);
  QTest::keyClick(fx.window.get(), Qt::Key_F5);
  for (int i = 0; i < 1200 && finished.isEmpty() && failed.isEmpty(); ++i) QTest::qWait(50);
  INFO((failed.isEmpty() ? QString() : failed.at(0).at(0).toString()).toStdString());
  REQUIRE(finished.size() == 1);
  QTest::qWait(20);
  return finished.at(0).at(0).value<runner::RunOutcome>();
}

}  // namespace

TEST_CASE("the Debug menu arms breakpoints by key and keeps them in the settings",
          "[editor][debugger]") {
  EditorFixture fx;
  activate(fx);
  DebugMenu* dm = fx.window->debugger()->menu();
  CHECK_FALSE(dm->settings().nan);
  debug_menu_key(fx, Qt::Key_N);
  CHECK(dm->settings().nan);
  CHECK(dm->nanAction()->isChecked());
  debug_menu_key(fx, Qt::Key_S);
  CHECK(dm->settings().spike);
  CHECK(dm->settings().breakText() == "nan,spike:10");
  // The thresholds: typed into the dialog, OK clicked.
  debug_menu_key(fx, Qt::Key_T);
  DebugThresholdsDialog* d = dm->thresholdsDialog();
  REQUIRE(d);
  auto* spike = d->findChild<QDoubleSpinBox*>("debug.spike_factor");
  REQUIRE(spike);
  type_into(spike, "3", Qt::Key_Tab);
  QPushButton* ok = nullptr;
  for (QPushButton* b : d->findChildren<QPushButton*>())
    if (b->text().remove('&') == "OK") ok = b;
  REQUIRE(ok);
  QTest::mouseClick(ok, Qt::LeftButton);
  QTest::qWait(20);
  CHECK(dm->settings().spike_factor == 3.0);
  CHECK(dm->settings().breakText() == "nan,spike:3");
  CHECK(dm->settings().breakpoints().spike == 3.0);
  // The window's settings hold them, not the document; a new window reads them back.
  CHECK(QSettings().value("debug/nan").toBool());
  CHECK(QSettings().value("debug/spike_factor").toDouble() == 3.0);
  // Off again by key: the NaN toggle.
  debug_menu_key(fx, Qt::Key_N);
  CHECK_FALSE(dm->settings().nan);
  CHECK(DebugSettings::load().breakText() == "spike:3");
}

TEST_CASE("a learning rate of 1000 pauses at a NaN breakpoint with the faulty node marked",
          "[editor][debugger]") {
  EditorFixture fx;
  small_mlp(fx, 2);
  activate(fx);
  // The learning rate typed into the toolbar, NaN armed with the toolbar's toggle.
  auto* lr = fx.window->findChild<QDoubleSpinBox*>("toolbar.lr");
  REQUIRE(lr);
  type_into(lr, "1000", Qt::Key_Tab);
  REQUIRE(fx.window->model()->doc().training.optimizer.lr == 1000.0);
  QToolBar* tb = fx.window->findChild<QToolBar*>("toolbar.run");
  REQUIRE(tb);
  QWidget* toggle = tb->widgetForAction(fx.window->debugger()->menu()->nanAction());
  REQUIRE(toggle);
  QTest::mouseClick(toggle, Qt::LeftButton);
  REQUIRE(fx.window->debugger()->menu()->settings().nan);

  const runner::RunOutcome o = train_by_key(fx);
  CHECK(o.config.breaks.nan);  // the menu's choice reached the trainer's config
  REQUIRE(o.result.breakpoint.has_value());
  const BreakHit& hit = *o.result.breakpoint;
  INFO(hit.message);
  CHECK(hit.kind == BreakHit::Kind::NonFinite);
  CHECK(hit.step >= 0);
  const std::string node = fault_node(hit);
  REQUIRE_FALSE(node.empty());
  // The node the break names is marked on the canvas and selected.
  FaultView* fv = fx.window->debugger()->faultView();
  CHECK(fv->markedNode() == node);
  REQUIRE(fv->marker());
  NodeItem* item = fx.window->scene()->nodeItem(node);
  REQUIRE(item);
  CHECK(fv->marker()->parentItem() == item);
  CHECK(item->isSelected());
  CHECK(fx.window->debugger()->faultDock()->isVisible());
  CHECK(fx.window->statusText().startsWith(QString("paused at step %1").arg(hit.step)));
  CHECK(fv->forkCommand().contains(
      QString("runs fork %1 --step 0 --set lr=100").arg(o.run_id)));  // from the run's start
  // Resume, clicked: the paused run goes on from its checkpoint with the NaN breakpoint off
  // (still at lr 1000 it diverges: the trainer's own check stops it, not the breakpoint).
  {
    QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
    QSignalSpy failed(fx.window->trainer(), &TrainController::failed);
    auto* resume = fv->findChild<QPushButton*>("debug.resume");
    REQUIRE(resume);
    REQUIRE(resume->isEnabled());
    QTest::mouseClick(resume, Qt::LeftButton);
    for (int i = 0; i < 1200 && finished.isEmpty() && failed.isEmpty(); ++i) QTest::qWait(50);
    CHECK(
        fx.window->runLog()->toPlainText().contains(QString("resuming run %1 of ").arg(o.run_id)));
    REQUIRE(finished.size() + failed.size() == 1);
    if (!finished.isEmpty()) {
      const auto r = finished.at(0).at(0).value<runner::RunOutcome>();
      CHECK(r.run_id == o.run_id);
      CHECK_FALSE(r.config.breaks.nan);
      CHECK_FALSE(r.result.breakpoint.has_value());
    } else {
      CHECK(is_divergence(failed.at(0).at(0).toString()));
    }
    CHECK(fv->markedNode().empty());  // the resumed run cleared the mark
  }
  // Paused again, the learning rate lowered on the toolbar, Fork here clicked: a child run from
  // the last checkpoint before the failing step (the run's start: at lr 1000 the state just
  // before it is already ruined, weights near 1e20 after three updates), at the new rate: it
  // trains without a fault.
  const runner::RunOutcome again = train_by_key(fx);
  REQUIRE(again.result.breakpoint.has_value());
  REQUIRE_FALSE(again.break_checkpoint.empty());
  CHECK(fv->markedNode() == fault_node(*again.result.breakpoint));
  type_into(lr, "0.05", Qt::Key_Tab);
  REQUIRE(fx.window->model()->doc().training.optimizer.lr == 0.05);
  QSignalSpy finished(fx.window->trainer(), &TrainController::finished);
  auto* fork = fv->findChild<QPushButton*>("debug.fork_here");
  REQUIRE(fork);
  REQUIRE(fork->isEnabled());
  QTest::mouseClick(fork, Qt::LeftButton);
  for (int i = 0; i < 1200 && finished.isEmpty() && fx.window->trainer()->running(); ++i)
    QTest::qWait(50);
  REQUIRE(finished.size() == 1);
  const auto child = finished.at(0).at(0).value<runner::RunOutcome>();
  CHECK(child.run_id != again.run_id);
  CHECK(child.config.opt.lr == 0.05);
  CHECK(fx.window->runLog()->toPlainText().contains(
      QString("forking run %1 from its last checkpoint before the breakpoint").arg(again.run_id)));
  auto store = store::RunStore::open(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  auto info = (*store)->get_run(child.run_id);
  REQUIRE(info.ok());
  CHECK(info->parent_run_id == again.run_id);
  CHECK_FALSE(child.result.breakpoint.has_value());
  CHECK(child.status == "finished");
  CHECK(fv->markedNode().empty());  // the child trained: nothing is paused
}

TEST_CASE("the paused run's dock and marker follow the BreakHit they are given",
          "[editor][debugger]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  BreakHit hit;
  hit.kind = BreakHit::Kind::NonFinite;
  hit.step = 7;
  hit.epoch = 1;
  hit.batch = 7;
  hit.loss = NAN;
  FaultSite f;
  f.phase = FaultSite::Phase::Forward;
  f.label = "fc2";
  f.op = "matmul";
  f.stats.count = 10;
  f.stats.non_finite = 3;
  f.stats.nan = 3;
  f.stats.histogram = {1, 2, 4};
  f.inputs = {"relu1: max |x| 3e+38", "fc2.weight: 2 inf"};
  hit.fault = f;
  hit.message = "step 7: the forward output of 'fc2' (matmul) holds 3 NaN";
  FaultView* fv = fx.window->debugger()->faultView();
  fv->showBreak(hit, {.run_id = 4, .db = "runs.db", .lr = 0.5, .project = "", .fork_step = 5});
  CHECK(fv->markedNode() == "fc2");
  REQUIRE(fv->marker());
  CHECK(fv->marker()->parentItem() == fx.window->scene()->nodeItem("fc2"));
  CHECK(fv->marker()->badge() == "step 7: nan");
  CHECK(paused_status(hit) == "paused at step 7: " + QString::fromStdString(hit.message));
  CHECK(fv->forkCommand() == "mlstudio runs fork 4 --step 5 --set lr=0.05 --db runs.db");
  // A layer breakpoint without a fault site names its layer.
  BreakHit dead;
  dead.kind = BreakHit::Kind::DeadRelu;
  dead.label = "relu1";
  CHECK(fault_node(dead) == "relu1");
  // The node renamed away: the mark goes with its item, nothing dangles.
  fv->clear();
  CHECK_FALSE(fv->marker());
}

TEST_CASE("health instruments armed by key reach the Health panel", "[editor][debugger]") {
  EditorFixture fx;
  small_mlp(fx, 1);
  activate(fx);
  debug_menu_key(fx, Qt::Key_H);
  REQUIRE(fx.window->debugger()->menu()->settings().health);
  const int64_t every = fx.window->debugger()->menu()->settings().health_every;
  const runner::RunOutcome o = train_by_key(fx);
  CHECK(o.config.health.every == every);
  REQUIRE(o.result.steps >= every);
  HealthPanel* hp = fx.window->debugger()->healthPanel();
  if (!ImGuiHost::isSupported()) {
    WARN("no OpenGL here: the Health panel is not in the window");
    return;
  }
  // The Health tab, clicked.
  auto* tabs = fx.window->findChild<QTabWidget*>();
  REQUIRE(tabs);
  const int index = tabs->indexOf(hp);
  REQUIRE(index >= 0);
  QTest::mouseClick(tabs->tabBar(), Qt::LeftButton, {}, tabs->tabBar()->tabRect(index).center());
  for (int i = 0; i < 100 && hp->samples().empty(); ++i) QTest::qWait(20);
  const size_t expect = static_cast<size_t>(o.result.steps / every);
  CHECK(hp->samples().size() == expect);
  REQUIRE_FALSE(hp->samples().empty());
  const HealthSample& s = hp->samples().front();
  CHECK(s.step == every);
  CHECK(s.params.size() == 6);  // fc1..fc3, weight and bias each
  for (const ParamHealth& p : s.params) {
    INFO(p.param);
    CHECK(p.grad_norm > 0);
    CHECK(p.weight_norm > 0);
  }
  CHECK(s.relus.size() == 2);
  CHECK(hp->statusLine().find("samples, the last at step") != std::string::npos);
}

TEST_CASE("the difference colour scale", "[editor][debugger]") {
  CHECK(diff_colour(2e-4, 1e-4) == QColor(220, 50, 47));                 // above: red
  CHECK(diff_colour(INFINITY, 1e-4) == QColor(220, 50, 47));             // non-finite: red
  CHECK(diff_colour(1e-8, 1e-4) == QColor(46, 204, 113));                // far below: green
  CHECK(diff_colour(1e-5, 1e-4).name() == QColor(241, 196, 15).name());  // a tenth: yellow
  const QColor mid = diff_colour(1e-6, 1e-4);                            // between green and yellow
  CHECK(mid.red() > 46);
  CHECK(mid.red() < 241);
}

TEST_CASE("Compare devices from the Debug menu paints each node by its difference",
          "[editor][debugger]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  // A small batch: one step on each device stays quick (lavapipe runs Vulkan on the CPU).
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"batch_size", 16}})).ok());
  activate(fx);
  DeviceDiffView* v = fx.window->debugger()->deviceDiff();
  QSignalSpy finished(v, &DeviceDiffView::finished);
  debug_menu_key(fx, Qt::Key_C);
  CHECK(v->isVisible());
  for (int i = 0; i < 2400 && finished.isEmpty(); ++i) QTest::qWait(50);
  REQUIRE(finished.size() == 1);
  INFO(finished.at(0).at(1).toString().toStdString());
  REQUIRE(finished.at(0).at(0).toBool());
  REQUIRE(v->report().has_value());
  CHECK(v->report()->batch_size == 16);
  for (const char* id : {"fc1", "relu1", "fc2", "relu2", "fc3", "loss"}) {
    INFO(id);
    REQUIRE(v->painted().count(id) == 1);
    const double value = v->painted().at(id);
    CHECK(value >= 0);
    CHECK(value < 1e-3);  // f32 kernels against float64: rounding, far below a bug's size
    NodeItem* item = fx.window->scene()->nodeItem(id);
    REQUIRE(item);
    DiffHalo* halo = nullptr;
    for (QGraphicsItem* c : item->childItems())
      if (auto* h = dynamic_cast<DiffHalo*>(c)) halo = h;
    REQUIRE(halo);
    CHECK(halo->colour() == diff_colour(value, v->threshold()));
    CHECK(item->toolTip().contains("Compared with the float64 reference"));
  }
  // A threshold typed below every difference: the nodes that differ at all turn red.
  auto* t = v->findChild<QDoubleSpinBox*>("compare.threshold");
  REQUIRE(t);
  type_into(t, "1e-9", Qt::Key_Tab);
  CHECK(v->threshold() == 1e-9);
  INFO("fc1 differs by " << v->painted().at("fc1"));
  CHECK(v->painted().at("fc1") > 0);
  CHECK(v->paintedColour("fc1") == QColor(220, 50, 47));
  // An edit makes the painting stale: it goes.
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"batch_size", 32}})).ok());
  CHECK(v->painted().empty());
  CHECK_FALSE(v->report().has_value());
}
