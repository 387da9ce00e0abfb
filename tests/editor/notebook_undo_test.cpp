// Undo per edit in the notebook, driven as a person does: keys typed into a cell, a click
// out of it, Ctrl+Z. Typing is one undo step until the focus leaves the cell (or a pause of
// nodes::kMergeIdle, or another edit), not one step per key.
#include <QApplication>
#include <QDockWidget>
#include <QToolBar>

#include "editor/cell_widget.h"
#include "editor/notebook_view.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using test::click_action;
using test::EditorFixture;

namespace {

// A click on the notebook's background, below the cells: out of every cell.
void click_background(NotebookView* nb) {
  QWidget* background = nb->findChild<QWidget*>("notebook.cells");
  REQUIRE(background);
  QTest::mouseClick(background, Qt::LeftButton, {},
                    QPoint(background->width() / 2, background->height() - 5));
  REQUIRE(QApplication::focusWidget() == background);
}

void ctrl_z() {
  QTest::keySequence(QApplication::focusWidget(), QKeySequence::Undo);
  QApplication::processEvents();
}

QString code_of(NotebookView* nb, const QString& id) {
  return nb->cellWidget(id)->editor()->toPlainText();
}

}  // namespace

// "+ Lua" clicked: a fresh cell with the focus; its id.
QString add_cell(EditorFixture& fx, NotebookView* nb) {
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  // The Notebook tab in front of the Inspector, as a click on its tab does.
  auto* dock = fx.window->findChild<QDockWidget*>("dock.notebook");
  REQUIRE(dock);
  dock->raise();
  QApplication::processEvents();
  REQUIRE(nb->isVisible());
  click_action(nb, "add-lua");
  REQUIRE(nb->cellIds().size() == 1);
  const QString id = nb->selected();
  REQUIRE(QApplication::focusWidget() == nb->cellWidget(id)->editor());
  for (int i = 0; i < 100 && !nb->cellWidget(id)->editor()->isVisible(); ++i) QTest::qWait(10);
  REQUIRE(nb->cellWidget(id)->editor()->isVisible());
  return id;
}

TEST_CASE("text typed into a cell comes off with one Ctrl+Z once the cell is left",
          "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString id = add_cell(fx, nb);
  QTest::keyClicks(nb->cellWidget(id)->editor(), "x = 1");
  REQUIRE(nb->notebook().cells[0].source == "x = 1");
  const size_t steps = fx.window->model()->history().size();
  CHECK(fx.window->model()->history().back() == "Edit cell " + id.toStdString());

  click_background(nb);
  ctrl_z();
  CHECK(nb->notebook().cells[0].source.empty());
  CHECK(code_of(nb, id).isEmpty());
  CHECK(fx.window->model()->history_index() == steps - 1);
  ctrl_z();  // the next Ctrl+Z takes the cell away: it was one step before the typing
  CHECK(nb->cellIds().isEmpty());
}

TEST_CASE("typing again after leaving a cell and coming back is an undo step of its own",
          "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString id = add_cell(fx, nb);
  CodeEdit* edit = nb->cellWidget(id)->editor();
  QTest::keyClicks(edit, "x = 1");
  click_background(nb);
  // Back into the cell at once (well within nodes::kMergeIdle): the focus moved, so this is
  // a new edit.
  QTest::mouseClick(edit->viewport(), Qt::LeftButton);
  REQUIRE(QApplication::focusWidget() == edit);
  QTest::keyClick(edit, Qt::Key_End, Qt::ControlModifier);
  QTest::keyClicks(edit, "0 + 2");
  REQUIRE(nb->notebook().cells[0].source == "x = 10 + 2");
  click_background(nb);
  ctrl_z();
  CHECK(nb->notebook().cells[0].source == "x = 1");
  CHECK(code_of(nb, id) == "x = 1");
  ctrl_z();
  CHECK(nb->notebook().cells[0].source.empty());
  // Ctrl+Shift+Z brings the typing back, a step at a time.
  QTest::keySequence(QApplication::focusWidget(), QKeySequence::Redo);
  QApplication::processEvents();
  CHECK(nb->notebook().cells[0].source == "x = 1");
}
