// The Runs dock (editor/run_browser.h) over a generated database of 3,000 runs, driven as a
// person drives it: typing a filter and Enter, clicking a header, Ctrl+End and the wheel in
// the table, clicks on rows and buttons. The rows read stay a page or two; the filter and the
// sort give the rows a hand count gives; a bad filter names its column and keeps the rows.
// With MLS_SCREENSHOT_DIR set, the browser is saved there as PNGs.
#include <QComboBox>
#include <QDialog>
#include <QDockWidget>
#include <QHeaderView>
#include <QInputDialog>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QScrollBar>
#include <QTabWidget>
#include <QTableView>
#include <QTreeWidget>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

#include "editor/graph_diff_view.h"
#include "editor/parallel_coords.h"
#include "editor/run_browser.h"
#include "editor/run_table_model.h"
#include "nodes/document.h"
#include "store/run_store.h"
#include "store/sqlite.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;

namespace {

// Run i (1-based): lr 0.1, 0.01 or 0.001 (i % 3), batch 32, 64, 128, 256 (i % 4), every
// tenth failed, val/loss's best 0.5 + ((i * 7919) % 3000) / 1000 (no two alike), runs 11..18
// sweep 1's trials 0..7. Runs 1 and 2 keep snapshots of the MLP example; run 2's first layer
// is wider.
constexpr int kRuns = 3000;
double lr_of(int i) {
  return i % 3 == 0 ? 0.1 : i % 3 == 1 ? 0.01 : 0.001;
}
int batch_of(int i) {
  return 32 << (i % 4);
}
bool failed(int i) {
  return i % 10 == 0;
}
double best_of(int i) {
  return 0.5 + static_cast<double>((i * 7919) % 3000) / 1000.0;
}

std::string make_db(const test::TempDir& dir) {
  const std::string path = dir.file("runs.db");
  {
    auto st = store::RunStore::open(path);  // the schema, as training creates it
    REQUIRE(st.ok());
  }
  auto db = store::Db::open(path);
  REQUIRE(db.ok());
  REQUIRE(db->exec("BEGIN").ok());
  REQUIRE(db->exec("INSERT INTO sweeps(id, experiment_id, name, project_path, spec, status, "
                   "created) VALUES (1, 1, 'lr sweep', 'p.mls', '{}', 'finished', "
                   "'2026-11-27T00:00:00Z')")
              .ok());
  auto run = db->prepare(
      "INSERT INTO runs(id, name, project_path, project_hash, started, ended, status, device, "
      "seed, sweep_id, trial) VALUES (?1, ?2, 'p.mls', 'h', ?3, ?3, ?4, 'cpu', ?1, ?5, ?6)");
  auto param = db->prepare("INSERT INTO params(run_id, key, value) VALUES (?1, ?2, ?3)");
  auto summary = db->prepare(
      "INSERT INTO metric_summary(run_id, key, latest, latest_step, min, max, best, best_step, "
      "count) VALUES (?1, ?2, ?3, 100, ?3, ?3, ?3, 100, 10)");
  auto metric = db->prepare(
      "INSERT INTO metrics(run_id, key, step, value, wall_time) VALUES (?1, ?2, ?3, ?4, 0)");
  REQUIRE((run.ok() && param.ok() && summary.ok() && metric.ok()));
  for (int i = 1; i <= kRuns; ++i) {
    const bool sweep = i >= 11 && i <= 18;
    run->bind_int(1, i)
        .bind_text(2, "run-" + std::to_string(i))
        .bind_text(3, "2026-11-27T00:00:00Z")
        .bind_text(4, failed(i) ? "failed" : "finished");
    if (sweep) {
      run->bind_int(5, 1).bind_int(6, i - 11);
    } else {
      run->bind_null(5).bind_null(6);
    }
    REQUIRE(run->run().ok());
    const std::pair<std::string, std::string> params[] = {
        {"lr", QString::number(lr_of(i)).toStdString()},
        {"batch_size", std::to_string(batch_of(i))},
        {"optimizer", i % 2 ? "adam" : "sgd"}};
    for (const auto& [k, v] : params) {
      param->bind_int(1, i).bind_text(2, k).bind_text(3, v);
      REQUIRE(param->run().ok());
    }
    summary->bind_int(1, i).bind_text(2, "val/loss").bind_double(3, best_of(i));
    REQUIRE(summary->run().ok());
    if (i <= 20)  // curves for the overlay: a loss falling to the run's best
      for (int s = 1; s <= 50; ++s) {
        metric->bind_int(1, i)
            .bind_text(2, "train/loss")
            .bind_int(3, s)
            .bind_double(4, best_of(i) + 2.0 / s);
        REQUIRE(metric->run().ok());
      }
  }
  // Two snapshots for the graph diff.
  auto doc = nodes::load_document(MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  nodes::Document wider = *doc;
  std::string changed;
  for (auto& n : wider.nodes)
    if (n.params.contains("out_features")) {
      n.params["out_features"] = n.params["out_features"].get<int64_t>() * 2;
      changed = n.id;
      break;
    }
  REQUIRE(!changed.empty());
  auto snap = db->prepare("INSERT INTO snapshots(run_id, kind, text) VALUES (?1, 'mls', ?2)");
  REQUIRE(snap.ok());
  snap->bind_int(1, 1).bind_text(2, nodes::serialize_document(*doc));
  REQUIRE(snap->run().ok());
  snap->bind_int(1, 2).bind_text(2, nodes::serialize_document(wider));
  REQUIRE(snap->run().ok());
  REQUIRE(db->exec("COMMIT").ok());
  return path;
}

void settle(RunTableModel* m) {
  for (int i = 0; i < 1000 && (m->busy() || !m->isOpen()); ++i) QTest::qWait(10);
  QTest::qWait(30);  // the view's requests after the last answer
  for (int i = 0; i < 1000 && m->busy(); ++i) QTest::qWait(10);
  REQUIRE_FALSE(m->busy());
}

int column_of(RunTableModel* m, const std::string& field) {
  const auto& c = m->columns();
  auto it = std::find(c.begin(), c.end(), field);
  return it == c.end() ? -1 : static_cast<int>(it - c.begin());
}

void filter(RunBrowser& b, const QString& text) {
  QLineEdit* f = b.filterEdit();
  f->setFocus();
  QTest::keyClick(f, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClick(f, Qt::Key_Delete);
  QTest::keyClicks(f, text);
  QTest::keyClick(f, Qt::Key_Return);
  settle(b.model());
}

// A click on a row's first cell (with `mod` held: Ctrl adds to the selection).
void click_row(RunBrowser& b, int row, Qt::KeyboardModifiers mod = Qt::NoModifier) {
  QTableView* t = b.table();
  t->scrollTo(b.model()->index(row, 0));
  settle(b.model());
  const QRect r = t->visualRect(b.model()->index(row, 0));
  REQUIRE(r.isValid());
  QTest::mouseClick(t->viewport(), Qt::LeftButton, mod, r.center());
}

int row_of(RunBrowser& b, int64_t id) {
  for (int r = 0; r < b.model()->rowCount(); ++r)
    if (b.model()->runId(r) == id) return r;
  return -1;
}

void shot(QWidget* w, const char* name) {
  if (const char* dir = std::getenv("MLS_SCREENSHOT_DIR"))
    CHECK(w->grab().save(QString(dir) + "/" + name + ".png"));
}

struct BrowserFixture {
  test::TempDir dir{"mls_runs_gui"};
  std::string db;
  RunBrowser browser;
  BrowserFixture() : db((test::qt_app(), make_db(dir))) {
    browser.setDatabase(db);
    browser.resize(1200, 800);
    browser.show();
    REQUIRE(QTest::qWaitForWindowExposed(&browser));
    settle(browser.model());
  }
};

}  // namespace

TEST_CASE(
    "run browser: 3,000 runs read a page at a time, filter and sort in SQL match a hand count",
    "[editor][runs]") {
  BrowserFixture fx;
  RunBrowser& b = fx.browser;
  RunTableModel* m = b.model();
  REQUIRE(m->total() == kRuns);
  // Newest first; after the first paint only the first page or two are held.
  CHECK(m->runId(0) == kRuns);
  CHECK(m->rowsHeld() <= 2 * RunTableModel::kPage);
  CHECK(m->pagesRead() <= 2);

  // A click in the table, then Ctrl+End: the last rows' page is read, not the ones between.
  click_row(b, 0);
  QTest::keyClick(b.table(), Qt::Key_End, Qt::ControlModifier);
  settle(m);
  CHECK(m->runId(kRuns - 1) == 1);
  CHECK(m->rowsHeld() <= 3 * RunTableModel::kPage);
  // The wheel, back up a little: rows above come in their own page.
  const int before = b.table()->verticalScrollBar()->value();
  for (int i = 0; i < 30; ++i) {
    QWheelEvent up(QPointF(50, 50), b.table()->viewport()->mapToGlobal(QPointF(50, 50)), QPoint(),
                   QPoint(0, 120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(b.table()->viewport(), &up);
  }
  settle(m);
  CHECK(b.table()->verticalScrollBar()->value() < before);
  const int top = b.table()->rowAt(5);
  REQUIRE(top >= 0);
  CHECK(m->runId(top) == kRuns - top);
  CHECK(m->rowsHeld() <= 4 * RunTableModel::kPage);

  // A filter, typed: the count is the hand count, and every row read satisfies it.
  filter(b, "params.lr < 0.05 AND status = 'finished' AND params.batch_size >= 128");
  int64_t expected = 0;
  for (int i = 1; i <= kRuns; ++i) expected += lr_of(i) < 0.05 && !failed(i) && batch_of(i) >= 128;
  REQUIRE(m->total() == expected);
  CHECK_FALSE(b.filterInError());
  for (int r = 0; r < std::min<int>(m->rowCount(), RunTableModel::kPage); ++r) {
    const int64_t id = m->runId(r);
    REQUIRE(id > 0);
    CHECK(lr_of(static_cast<int>(id)) < 0.05);
    CHECK(batch_of(static_cast<int>(id)) >= 128);
    CHECK_FALSE(failed(static_cast<int>(id)));
  }
  // OR and NOT.
  filter(b, "NOT status = 'finished' OR params.optimizer = 'sgd'");
  expected = 0;
  for (int i = 1; i <= kRuns; ++i) expected += failed(i) || i % 2 == 0;
  CHECK(m->total() == expected);

  // A bad filter: its column in the message, the line red, the rows as they were.
  const int64_t rows_before = m->total();
  filter(b, "params.lr <");
  CHECK(b.filterInError());
  CHECK(b.messageText().contains("column"));
  CHECK(b.messageText().contains("params.lr <"));
  CHECK(m->total() == rows_before);
  CHECK(b.filterEdit()->styleSheet().contains("border"));
  shot(&b, "run-browser-bad-filter");
  filter(b, "");
  CHECK_FALSE(b.filterInError());
  CHECK(m->total() == kRuns);

  // A header click sorts by val/loss's best, in SQL: the first row is the smallest, the
  // last (Ctrl+End) the largest.
  const int col = column_of(m, "metrics.val/loss.best");
  REQUIRE(col >= 0);
  QHeaderView* h = b.table()->horizontalHeader();
  QTest::mouseClick(
      h->viewport(), Qt::LeftButton, Qt::NoModifier,
      QPoint(h->sectionViewportPosition(col) + h->sectionSize(col) / 2, h->height() / 2));
  settle(m);
  const bool ascending = h->sortIndicatorOrder() == Qt::AscendingOrder;
  REQUIRE(h->sortIndicatorSection() == col);
  std::vector<std::pair<double, int>> by_best;
  for (int i = 1; i <= kRuns; ++i) by_best.push_back({best_of(i), i});
  std::sort(by_best.begin(), by_best.end());
  if (!ascending) std::reverse(by_best.begin(), by_best.end());
  CHECK(m->runId(0) == by_best.front().second);
  const store::Cell* first = m->cell(0, col);
  REQUIRE(first);
  CHECK(first->number == Approx(by_best.front().first));
  click_row(b, 0);
  QTest::keyClick(b.table(), Qt::Key_End, Qt::ControlModifier);
  settle(m);
  CHECK(m->runId(kRuns - 1) == by_best.back().second);
  CHECK(m->rowsHeld() <= 3 * RunTableModel::kPage);
  // Clicked again: the other way.
  QTest::mouseClick(
      h->viewport(), Qt::LeftButton, Qt::NoModifier,
      QPoint(h->sectionViewportPosition(col) + h->sectionSize(col) / 2, h->height() / 2));
  settle(m);
  CHECK(m->runId(0) == by_best.back().second);
}

TEST_CASE(
    "run browser: the selected runs' curves coloured by a param, a sweep's parallel "
    "coordinates, two runs' graphs side by side",
    "[editor][runs]") {
  BrowserFixture fx;
  RunBrowser& b = fx.browser;
  RunTableModel* m = b.model();
  filter(b, "id <= 20");
  REQUIRE(m->total() == 20);

  // Colour by lr, chosen with the keyboard in the combo.
  QComboBox* colour = b.colourBy();
  for (int i = 0; i < 100 && colour->count() < 2; ++i) QTest::qWait(10);
  const int lr_index = colour->findData("lr");
  REQUIRE(lr_index > 0);
  colour->setFocus();
  for (int i = 0; i < lr_index; ++i) QTest::keyClick(colour, Qt::Key_Down);
  REQUIRE(colour->currentData().toString() == "lr");

  // Runs 20, 19 and 18 (the first three rows): three lrs, three colours, a legend.
  QSignalSpy curves(&b, &RunBrowser::curvesChanged);
  click_row(b, 0);
  click_row(b, 1, Qt::ControlModifier);
  click_row(b, 2, Qt::ControlModifier);
  for (int i = 0; i < 300 && b.curves().size() < 3; ++i) QTest::qWait(10);
  REQUIRE(b.curves().size() == 3);
  std::set<uint32_t> colours;
  for (const RunCurves& c : b.curves()) {
    CHECK(c.shown);
    CHECK(c.steps.size() == 50);
    CHECK(c.loss.back() == Approx(best_of(static_cast<int>(c.run_id)) + 2.0 / 50));
    colours.insert(c.colour);
  }
  CHECK(colours.size() == 3);
  CHECK(b.legend().contains("lr"));
  CHECK(b.legend().contains("log"));  // 0.001 .. 0.1 spans two decades
  // The lowest lr is the scale's blue end, the highest its red end.
  for (const RunCurves& c : b.curves()) {
    const double lr = lr_of(static_cast<int>(c.run_id));
    const uint32_t rgb = c.colour;
    if (lr == 0.001) CHECK((rgb & 0xff) > (rgb >> 16));
    if (lr == 0.1) CHECK((rgb >> 16) > (rgb & 0xff));
  }

  // A sweep's run selected, then Parallel coordinates: the sweep's 8 trials over the axes
  // that vary (lr on a log axis; batch_size; optimizer), the objective last.
  click_row(b, row_of(b, 14));
  QTest::mouseClick(b.button("parallel"), Qt::LeftButton);
  ParallelCoords* pc = b.parallel();
  for (int i = 0; i < 300 && pc->lineCount() != 8; ++i) QTest::qWait(10);
  REQUIRE(pc->lineCount() == 8);
  REQUIRE(pc->axes().size() == 4);
  CHECK(pc->axes()[0].label == "batch_size");
  CHECK(pc->axes()[1].label == "lr");
  CHECK(pc->axes()[1].log);
  CHECK(pc->axes()[2].words);
  CHECK(pc->axes().back().field == "metrics.val/loss.best");
  shot(&b, "sweep-parallel");
  // Hovering run 16's line names it; clicking selects its row.
  QTest::qWait(50);
  const QPointF on = (pc->pointOf(16, 0) + pc->pointOf(16, 1)) / 2;
  QTest::mouseMove(pc, on.toPoint() + QPoint(0, 10));
  QTest::qWait(50);
  QTest::mouseMove(pc, on.toPoint());
  QTest::qWait(50);
  CHECK(pc->hovered() == 16);
  QTest::mouseClick(pc, Qt::LeftButton, Qt::NoModifier, on.toPoint());
  QTest::qWait(200);
  CHECK(b.selectedRuns() == std::vector<int64_t>{16});

  // Runs 1 and 2 side by side: run 2's widened layer is amber on both.
  filter(b, "id <= 2");
  click_row(b, 0);
  click_row(b, 1, Qt::ControlModifier);
  QTest::qWait(200);
  REQUIRE(b.selectedRuns() == std::vector<int64_t>{1, 2});
  REQUIRE(b.button("diff")->isEnabled());
  QSignalSpy loaded(b.diffView(), &GraphDiffView::loaded);
  QTest::mouseClick(b.button("diff"), Qt::LeftButton);
  REQUIRE(loaded.wait(5000));
  GraphDiffView* d = b.diffView();
  REQUIRE(d->diff().changed_nodes().size() == 1);
  const std::string changed = d->diff().changed_nodes()[0];
  CHECK(d->markOf(0, changed) == "changed");
  CHECK(d->markOf(1, changed) == "changed");
  REQUIRE(d->lines()->count() >= 1);
  CHECK(d->lines()->item(0)->text().contains("out_features"));
  shot(&b, "run-diff");
}

TEST_CASE(
    "run browser: the Runs dock (View > Runs browser, Ctrl+Shift+R) puts the selected runs' "
    "curves on the dashboard, coloured by a param",
    "[editor][runs]") {
  test::EditorFixture fx;
  make_db(fx.dir);
  auto* dock = fx.window->findChild<QDockWidget*>("dock.runs");
  REQUIRE(dock);
  auto* b = dock->findChild<RunBrowser*>();
  REQUIRE(b);
  CHECK_FALSE(b->model()->isOpen());  // behind the console's tab: not read until shown
  QAction* show = nullptr;
  for (QAction* menu : fx.window->menuBar()->actions())
    if (menu->text() == "&View")
      for (QAction* a : menu->menu()->actions())
        if (a->text() == "Runs &browser") show = a;
  REQUIRE(show);
  CHECK(show->shortcut() == QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  QTest::keyClick(fx.window.get(), Qt::Key_R, Qt::ControlModifier | Qt::ShiftModifier);
  settle(b->model());
  REQUIRE(b->isVisible());
  INFO(b->messageText().toStdString());
  REQUIRE(b->model()->total() == kRuns);
  CHECK(dock->height() >= 300);

  filter(*b, "id <= 20");
  QComboBox* colour = b->colourBy();
  const int lr_index = colour->findData("lr");
  REQUIRE(lr_index > 0);
  colour->setFocus();
  for (int i = 0; i < lr_index; ++i) QTest::keyClick(colour, Qt::Key_Down);
  for (int row = 0; row < 6; ++row) click_row(*b, row, row ? Qt::ControlModifier : Qt::NoModifier);
  InstrumentsPanel* panel = fx.window->instruments();
  for (int i = 0; i < 300 && panel->runs().size() != 6; ++i) QTest::qWait(10);
  REQUIRE(panel->runs().size() == 6);
  for (const RunCurves& c : panel->runs()) {
    CHECK(c.shown);
    CHECK(c.colour != 0);
    CHECK(c.label.find("lr=") != std::string::npos);
  }
  CHECK(panel->overlayLegend().find("lr") != std::string::npos);
  if (ImGuiHost::isSupported()) {
    auto* tabs = fx.window->findChild<QTabWidget*>();
    REQUIRE(tabs);
    CHECK(tabs->currentWidget() == panel);
    const std::string csv = panel->dashboardCsv();
    CHECK(csv.find("run 20") != std::string::npos);
    QTest::qWait(300);  // a few frames
  }
  shot(fx.window.get(), "run-browser");
  // A sweep's parallel coordinates in the dock.
  filter(*b, "sweep = 1");
  REQUIRE(b->model()->total() == 8);
  click_row(*b, 0);
  QTest::mouseClick(b->button("parallel"), Qt::LeftButton);
  for (int i = 0; i < 300 && b->parallel()->lineCount() != 8; ++i) QTest::qWait(10);
  CHECK(b->parallel()->lineCount() == 8);
  QTest::qWait(300);
  shot(fx.window.get(), "sweep-parallel-window");
}

TEST_CASE(
    "run browser: Tag, Note and Delete run `mlstudio runs` in the background, the log shows "
    "its output and the table is read again",
    "[editor][runs]") {
  BrowserFixture fx;
  RunBrowser& b = fx.browser;
  RunTableModel* m = b.model();
  b.setExecutable(MLS_EXE);
  filter(b, "id <= 20");
  REQUIRE(m->total() == 20);
  QSignalSpy done(&b, &RunBrowser::actionFinished);

  // Tag... on run 5: a dialog, the tags typed, Enter.
  click_row(b, row_of(b, 5));
  QTest::qWait(200);
  REQUIRE(b.selectedRuns() == std::vector<int64_t>{5});
  QTest::mouseClick(b.button("tag"), Qt::LeftButton);
  auto* tag = b.findChild<QInputDialog*>("runs.tag.dialog");
  REQUIRE(tag);
  auto* line = tag->findChild<QLineEdit*>();
  REQUIRE(line);
  QTest::keyClicks(line, "keep best=yes");
  QTest::keyClick(line, Qt::Key_Return);
  CHECK(b.processRunning());  // the window goes on meanwhile
  REQUIRE(done.wait(20000));
  CHECK(done.takeFirst().at(0).toInt() == 0);
  CHECK(b.log()->toPlainText().contains("runs tag 5 keep best=yes --db"));
  settle(m);
  filter(b, "tags.keep AND tags.best = 'yes'");
  REQUIRE(m->total() == 1);
  CHECK(m->runId(0) == 5);

  // Note... on it.
  click_row(b, 0);
  QTest::qWait(200);
  QTest::mouseClick(b.button("note"), Qt::LeftButton);
  auto* note = b.findChild<QInputDialog*>("runs.note.dialog");
  REQUIRE(note);
  QTest::keyClicks(note->findChild<QLineEdit*>(), "the one to keep");
  QTest::keyClick(note->findChild<QLineEdit*>(), Qt::Key_Return);
  REQUIRE(done.wait(20000));
  CHECK(done.takeFirst().at(0).toInt() == 0);
  settle(m);
  filter(b, "note LIKE '%to keep%'");
  CHECK(m->total() == 1);

  // Delete runs 7 and 8, confirmed: 2,998 runs left; Cancel deletes nothing.
  filter(b, "id <= 20");
  click_row(b, row_of(b, 7));
  click_row(b, row_of(b, 8), Qt::ControlModifier);
  QTest::qWait(200);
  REQUIRE(b.selectedRuns() == std::vector<int64_t>{7, 8});
  QTest::mouseClick(b.button("delete"), Qt::LeftButton);
  auto* confirm = b.findChild<QMessageBox*>("runs.delete.confirm");
  REQUIRE(confirm);
  QTest::mouseClick(confirm->button(QMessageBox::Cancel), Qt::LeftButton);
  QTest::qWait(100);
  CHECK_FALSE(b.processRunning());
  QTest::mouseClick(b.button("delete"), Qt::LeftButton);
  confirm = b.findChild<QMessageBox*>("runs.delete.confirm");
  REQUIRE(confirm);
  QTest::mouseClick(confirm->button(QMessageBox::Yes), Qt::LeftButton);
  REQUIRE(done.wait(20000));
  CHECK(done.takeFirst().at(0).toInt() == 0);
  settle(m);
  CHECK(m->total() == 18);
  filter(b, "");
  CHECK(m->total() == kRuns - 2);
}

TEST_CASE(
    "run browser: Fork (step, settings, epochs) and Reproduce of a real run, through the "
    "dialogs, as child processes",
    "[editor][runs]") {
  test::qt_app();
  test::TempDir dir("mls_runs_fork");
  const std::string db = dir.file("runs.db");
  // A run trained as the command line trains it: 2 epochs of the two-blobs example.
  QProcess train;
  train.start(MLS_EXE, {"--run", MLS_SOURCE_DIR "/resources/examples/two-blobs-logistic.mls",
                        "--epochs", "2", "--db", QString::fromStdString(db)});
  REQUIRE(train.waitForFinished(60000));
  INFO(train.readAllStandardError().toStdString());
  REQUIRE(train.exitCode() == 0);

  RunBrowser b;
  b.setExecutable(MLS_EXE);
  b.setDatabase(db);
  b.resize(1200, 800);
  b.show();
  REQUIRE(QTest::qWaitForWindowExposed(&b));
  RunTableModel* m = b.model();
  settle(m);
  REQUIRE(m->total() == 1);
  QSignalSpy done(&b, &RunBrowser::actionFinished);

  // Fork... run 1 with a higher learning rate, to 4 epochs.
  click_row(b, 0);
  QTest::qWait(200);
  REQUIRE(b.button("fork")->isEnabled());
  QTest::mouseClick(b.button("fork"), Qt::LeftButton);
  auto* fork = b.findChild<QDialog*>("runs.fork.dialog");
  REQUIRE(fork);
  QTest::keyClicks(fork->findChild<QLineEdit*>("runs.fork.set"), "lr=0.05");
  QTest::keyClicks(fork->findChild<QLineEdit*>("runs.fork.epochs"), "4");
  QTest::keyClick(fork->findChild<QLineEdit*>("runs.fork.epochs"), Qt::Key_Return);
  REQUIRE(done.wait(60000));
  INFO(b.log()->toPlainText().toStdString());
  REQUIRE(done.takeFirst().at(0).toInt() == 0);
  CHECK(b.log()->toPlainText().contains("runs fork 1 --epochs 4 --set lr=0.05 --db"));
  settle(m);
  filter(b, "parent = 1");
  REQUIRE(m->total() == 1);
  CHECK(m->runId(0) == 2);
  // Its lineage: run 1 at the root, run 2 under it with the step it forked at.
  click_row(b, 0);
  QTreeWidget* tree = b.lineage();
  for (int i = 0; i < 300 && tree->topLevelItemCount() == 0; ++i) QTest::qWait(10);
  REQUIRE(tree->topLevelItemCount() == 1);
  QTreeWidgetItem* root = tree->topLevelItem(0);
  CHECK(root->text(0) == "run 1");
  REQUIRE(root->childCount() == 1);
  CHECK(root->child(0)->text(0) == "run 2");
  CHECK_FALSE(root->child(0)->text(1).isEmpty());
  CHECK(root->child(0)->text(2) == "finished");

  // Reproduce run 1: the same metrics, step by step.
  filter(b, "id = 1");
  click_row(b, 0);
  QTest::qWait(200);
  QTest::mouseClick(b.button("reproduce"), Qt::LeftButton);
  REQUIRE(done.wait(60000));
  CHECK(done.takeFirst().at(0).toInt() == 0);
  CHECK(b.log()->toPlainText().contains("identical"));
}

TEST_CASE("run browser: a run's family for the Lineage tab, from the oldest ancestor down",
          "[editor][runs]") {
  // 2 and 3 fork 1; 4 forks 3; 5 stands alone.
  const std::map<int64_t, std::pair<int64_t, std::optional<int64_t>>> parents = {
      {2, {1, 100}}, {3, {1, 200}}, {4, {3, std::nullopt}}};
  const LineageNode f = run_family(4, parents);
  CHECK(f.id == 1);
  CHECK_FALSE(f.fork_step);
  REQUIRE(f.children.size() == 2);
  CHECK(f.children[0].id == 2);
  CHECK(f.children[0].fork_step == 100);
  CHECK(f.children[1].id == 3);
  REQUIRE(f.children[1].children.size() == 1);
  CHECK(f.children[1].children[0].id == 4);
  CHECK_FALSE(f.children[1].children[0].fork_step);
  const LineageNode alone = run_family(5, parents);
  CHECK(alone.id == 5);
  CHECK(alone.children.empty());
}

TEST_CASE(
    "run browser: runs a training process adds meanwhile (WAL) appear on Refresh, and a "
    "live run's end is read without one",
    "[editor][runs]") {
  BrowserFixture fx;
  RunBrowser& b = fx.browser;
  RunTableModel* m = b.model();
  REQUIRE(m->total() == kRuns);
  // Another connection writes, as a training process does.
  auto writer = store::RunStore::open(fx.db);
  REQUIRE(writer.ok());
  auto run = (*writer)->begin_run({.name = "live", .device = "cpu"});
  REQUIRE(run.ok());
  (*writer)->log_metric("val/loss", 1, 0.25);
  REQUIRE((*writer)->flush().ok());
  QTest::mouseClick(b.button("refresh"), Qt::LeftButton);
  settle(m);
  REQUIRE(m->total() == kRuns + 1);
  REQUIRE(m->runId(0) == *run);  // newest first
  const int status = column_of(m, "status");
  REQUIRE(status >= 0);
  REQUIRE(m->cell(0, status));
  CHECK(m->cell(0, status)->text == "running");
  // The run ends: the next live look reads it (every 3 s in the dock; sooner here).
  m->setLive(true, 100);
  QTest::qWait(350);  // a few looks while it runs
  CHECK(m->cell(0, status)->text == "running");
  REQUIRE((*writer)->end_run(*run, "finished").ok());
  for (int i = 0; i < 300 && !(m->cell(0, status) && m->cell(0, status)->text == "finished"); ++i)
    QTest::qWait(10);
  REQUIRE(m->cell(0, status));
  CHECK(m->cell(0, status)->text == "finished");
  const int best = column_of(m, "metrics.val/loss.best");
  REQUIRE(best >= 0);
  REQUIRE(m->cell(0, best));
  CHECK(m->cell(0, best)->number == Approx(0.25));
}

TEST_CASE(
    "run browser: colours by a param: a blue-to-red scale, logarithmic from a decade, "
    "one colour per word",
    "[editor][runs]") {
  const ParamColours lr = param_colours("lr", {"0.001", "0.01", "0.1", ""});
  CHECK(lr.log);
  CHECK_FALSE(lr.words);
  CHECK(lr.min == Approx(0.001));
  CHECK(lr.max == Approx(0.1));
  CHECK(lr.colour("0.001") == 0x4285f4);  // the scale's blue end
  CHECK(lr.colour("0.1") == 0xe8413c);    // its red end
  // 0.01 is the middle of a log scale: between the teal and amber stops.
  const uint32_t mid = lr.colour("0.01");
  CHECK(mid != lr.colour("0.001"));
  CHECK((mid >> 8 & 0xff) > 150);  // green-ish, not an end
  CHECK(lr.colour("") == 0x909090);
  CHECK(lr.legend() == "lr: blue 0.001 .. red 0.1 (log scale)");
  const ParamColours batch = param_colours("batch_size", {"32", "64"});
  CHECK_FALSE(batch.log);  // 2x: a linear scale
  const ParamColours opt = param_colours("optimizer", {"sgd", "adam", "sgd"});
  REQUIRE(opt.words);
  CHECK(opt.values == std::vector<std::string>{"adam", "sgd"});
  CHECK(opt.colour("adam") != opt.colour("sgd"));
  CHECK(opt.colour("rmsprop") == 0x909090);
}
