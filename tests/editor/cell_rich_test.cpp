// Rich outputs under a notebook cell in the editor, driven as a person would: the code typed
// with keys, run with Shift+Enter; a returned tensor shows as a read-only table and a heatmap
// that keeps its aspect ratio, a model as its summary.
#include <QDockWidget>
#include <QHeaderView>
#include <QLabel>
#include <QScrollBar>
#include <QSvgRenderer>
#include <QTableWidget>
#include <QToolBar>

#include "editor/cell_widget.h"
#include "editor/notebook_view.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using test::type;
using test::wait_run;

namespace {

// "+ Lua" clicked, the code typed into the new cell and run with Shift+Enter; its widget
// once the run ended.
CellWidget* run_typed(NotebookView* nb, const QString& code) {
  QWidget* b = nb->buttonFor("add-lua");
  REQUIRE(b);
  QTest::mouseClick(b, Qt::LeftButton);
  CellWidget* w = nb->cellWidget(nb->selected());
  REQUIRE(w);
  type(w->editor(), code);
  QTest::keyClick(w->editor(), Qt::Key_Return, Qt::ShiftModifier);
  wait_run(nb);
  QApplication::processEvents();
  return w;
}

QString cell_text(QTableWidget* t, int r, int c) {
  QTableWidgetItem* item = t->item(r, c);
  return item ? item->text() : QString("(none)");
}

}  // namespace

TEST_CASE(
    "a typed cell returning a tensor shows its values in a table and a heatmap that keeps "
    "its shape",
    "[editor][rich]") {
  test::EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  // The Notebook dock in front and wide: the figure at its own size.
  auto* dock = fx.window->findChild<QDockWidget*>("dock.notebook");
  REQUIRE(dock);
  dock->raise();
  fx.window->resizeDocks({dock}, {900}, Qt::Horizontal);
  QApplication::processEvents();
  CellWidget* w = run_typed(nb, "return mls.tensor{{1, 2.5, -3}, {4, 5, 6.25}}");
  INFO(w->errorLabel()->text().toStdString());
  const auto tables = w->findChildren<QTableWidget*>("cell.table");
  REQUIRE(tables.size() == 1);
  QTableWidget* t = tables[0];
  CHECK(t->isVisible());
  CHECK(t->rowCount() == 2);
  CHECK(t->columnCount() == 3);
  CHECK(cell_text(t, 0, 0) == "1.0000");
  CHECK(cell_text(t, 0, 2) == "-3.0000");
  CHECK(cell_text(t, 1, 2) == "6.2500");
  CHECK(t->horizontalHeaderItem(1)->text() == "1");
  CHECK(t->verticalHeaderItem(1)->text() == "1");
  CHECK(t->editTriggers() == QAbstractItemView::NoEditTriggers);
  // Read-only: typing on a cell changes nothing.
  t->setFocus();
  QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, t->visualItemRect(t->item(0, 0)).center());
  QTest::keyClicks(t->viewport(), "9");
  QTest::keyClick(t->viewport(), Qt::Key_Return);
  CHECK(cell_text(t, 0, 0) == "1.0000");
  CHECK(w->findChild<QLabel*>("cell.table_note") == nullptr);  // nothing left out

  const auto figures = w->findChildren<FigureWidget*>("cell.figure");
  REQUIRE(figures.size() == 1);
  FigureWidget* f = figures[0];
  CHECK(f->renderer()->isValid());
  const QSize svg = f->renderer()->defaultSize();
  REQUIRE(svg.width() > 0);
  const double ratio = double(svg.height()) / svg.width();
  CHECK(f->aspectRatio() == Approx(ratio));
  REQUIRE(f->width() > 0);
  CHECK(double(f->height()) / f->width() == Approx(ratio).epsilon(0.02));
  // Narrower than the SVG (the dock made small): the height follows, the ratio stays.
  CHECK(f->width() == svg.width());
  CHECK(f->height() == svg.height());
  fx.window->resizeDocks({dock}, {300}, Qt::Horizontal);
  QApplication::processEvents();
  REQUIRE(f->width() < svg.width() * 2 / 3);
  CHECK(double(f->height()) / f->width() == Approx(ratio).epsilon(0.02));
}

TEST_CASE("a long tensor's table scrolls, at most 12 rows high, and says what it leaves out",
          "[editor][rich]") {
  test::EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  CellWidget* w = run_typed(nb, "return mls.arange(0, 30000):float():reshape{300, 100}");
  auto* t = w->findChild<QTableWidget*>("cell.table");
  REQUIRE(t);
  CHECK(t->rowCount() == 100);
  CHECK(t->columnCount() == 64);
  CHECK(cell_text(t, 99, 63) == "9963.0000");
  CHECK(t->height() < 14 * t->rowHeight(0) + t->horizontalHeader()->height() + 40);
  CHECK(t->verticalScrollBar()->maximum() > 0);
  auto* note = w->findChild<QLabel*>("cell.table_note");
  REQUIRE(note);
  CHECK(note->text() == "showing 100 of 300 rows, 64 of 100 columns");
}

TEST_CASE("a typed cell returning a model shows its summary", "[editor][rich]") {
  test::EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  CellWidget* w = run_typed(nb, "return mls.nn.Sequential(mls.nn.Linear(784, 128), mls.nn.ReLU())");
  auto* t = w->findChild<QTableWidget*>("cell.table");
  REQUIRE(t);
  REQUIRE(t->rowCount() == 3);
  CHECK(cell_text(t, 0, 1) == "Linear");
  CHECK(cell_text(t, 0, 3) == "100480");  // 784 * 128 + 128
  CHECK(cell_text(t, 2, 0) == "total");
  CHECK(cell_text(t, 2, 3) == "100480");

  // Typing elsewhere refreshes the notebook: the table shown is kept, not built again; an
  // edit of the cell itself marks it stale, the table still there.
  const QString id = QString::fromStdString(w->cell().id);
  CellWidget* other = run_typed(nb, "y = 1");
  w = nb->cellWidget(id);
  REQUIRE(w);
  REQUIRE(other != w);
  t = w->findChild<QTableWidget*>("cell.table");
  REQUIRE(t);
  other->editor()->setFocus();
  QTest::keyClicks(other->editor(), "0");
  QApplication::processEvents();
  CHECK(nb->cellWidget(id) == w);
  // One table, the same one (a rebuilt one would sit beside the old until it is deleted).
  CHECK(w->findChildren<QTableWidget*>("cell.table") == QList<QTableWidget*>{t});
  CHECK_FALSE(w->stale());
  w->editor()->setFocus();
  QTest::keyClick(w->editor(), Qt::Key_End, Qt::ControlModifier);
  QTest::keyClicks(w->editor(), " ");
  QApplication::processEvents();
  CHECK(w->stale());
  CHECK(w->findChildren<QTableWidget*>("cell.table") == QList<QTableWidget*>{t});
}
