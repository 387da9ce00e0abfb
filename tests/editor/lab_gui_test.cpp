// A student's copy of a lab in the editor, used as a student does: keys typed into a locked
// cell change nothing, the answer cell takes them, and "Check my work" (a click) shows each
// goal met or not.
#include <QLabel>
#include <QMenu>
#include <QTimer>
#include <QTextBrowser>
#include <filesystem>

#include "editor/cell_widget.h"
#include "editor/canvas.h"
#include "editor/main_window.h"
#include "editor/node_item.h"
#include "editor/notebook_view.h"
#include "nodes/document.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using test::click_action;
using test::wait_run;

namespace {

// The lab of tests/e2e/grade_test.cpp, packed: f(x) = x^3 and its derivative by autograd.
const char* kStudentLab = R"LAB({
  "format_version": 1,
  "name": "Derivatives",
  "model": {"nodes": [], "links": []},
  "lab": {"title": "Derivatives", "student": true,
          "goals": [{"id": "value", "text": "f(2) = 8"},
                    {"id": "deriv", "text": "f'(2) = 12 by autograd"}]},
  "notebook": {"cells": [
    {"id": "intro", "kind": "markdown", "role": "locked", "source": ["# Derivatives"]},
    {"id": "setup", "kind": "lua", "role": "locked", "source": ["x0 = 2"]},
    {"id": "answer", "kind": "lua", "role": "answer", "source": ["function f(x) return 0 end"],
     "starter": ["function f(x) return 0 end"]},
    {"id": "check1", "kind": "lua", "role": "check",
     "source": ["lab.near('value', f(x0), 8, 1e-9)",
                "local t = mls.tensor{x0}:requires_grad()",
                "local ok, y = pcall(function() return f(t):sum() end)",
                "if ok then y:backward() end",
                "lab.near('deriv', ok and t.grad:sum():item() or 0, 12, 1e-4)"]}
  ]}
})LAB";

}  // namespace

TEST_CASE("a student's lab copy: locked cells refuse keys, Check my work shows the goals",
          "[editor][notebook][lab]") {
  test::EditorFixture fx;
  const std::string path = fx.dir.file("student.mls");
  std::ofstream(path) << kStudentLab;
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  NotebookView* nb = fx.window->notebook();
  REQUIRE(nb->cellIds().size() == 4);

  // The locked setup cell: keys change neither the text nor the document.
  CellWidget* setup = nb->cellWidget("setup");
  REQUIRE(setup);
  CHECK(setup->locked());
  setup->editor()->setFocus();
  QTest::keyClick(setup->editor(), Qt::Key_End);
  QTest::keyClicks(setup->editor(), "0");
  QTest::keyClick(setup->editor(), Qt::Key_Backspace);
  QTest::keyClick(setup->editor(), Qt::Key_Backspace);
  CHECK(setup->editor()->toPlainText() == "x0 = 2");
  CHECK(nb->notebook().find("setup")->source == "x0 = 2");
  // A locked Markdown cell does not open for editing on a double-click.
  CellWidget* intro = nb->cellWidget("intro");
  QTest::mouseDClick(intro->markdown()->viewport(), Qt::LeftButton, {}, QPoint(20, 10));
  CHECK_FALSE(intro->editingMarkdown());
  CHECK(nb->cellWidget("check1")->locked());
  CHECK_FALSE(nb->cellWidget("answer")->locked());

  // Check my work on the starter: both goals unmet, with what the checks saw.
  REQUIRE((nb->buttonFor("check") && nb->buttonFor("check")->isVisible()));  // on show
  click_action(nb, "check");
  wait_run(nb);
  QLabel* goals = nb->labGoals();
  REQUIRE(goals->isVisible());
  CHECK(goals->text().contains("0 of 2 goals met"));
  CHECK(goals->text().contains("got 0, want 8"));

  // The answer, typed: then both are met.
  CellWidget* answer = nb->cellWidget("answer");
  answer->editor()->setFocus();
  QTest::keyClick(answer->editor(), Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(answer->editor(), "function f(x) return x * x * x end");
  CHECK(nb->notebook().find("answer")->source == "function f(x) return x * x * x end");
  REQUIRE((nb->buttonFor("check") && nb->buttonFor("check")->isVisible()));  // on show
  click_action(nb, "check");
  wait_run(nb);
  INFO(goals->text().toStdString());
  CHECK(goals->text().contains("2 of 2 goals met"));
  CHECK(goals->text().contains("got 12, want 12"));
}

TEST_CASE("a student's copy shows locked nodes with a lock and refuses their edits",
          "[editor][lab]") {
  test::EditorFixture fx;
  const std::string path = fx.dir.file("graphs.mls");
  auto lab = nodes::load_document(MLS_SOURCE_DIR "/resources/labs/computational-graphs.mls",
                                  nodes::GraphCheck::Draft);
  REQUIRE(lab);
  auto student = nodes::pack_student(*lab);
  REQUIRE(student);
  REQUIRE(nodes::save_document(*student, path));
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  int locked = 0;
  for (const auto& n : student->nodes) {
    NodeItem* item = fx.window->scene()->nodeItem(n.id);
    REQUIRE(item);
    CHECK(item->locked() == n.locked);
    locked += n.locked;
  }
  CHECK(locked >= 1);
}

TEST_CASE("Check my work is offered only for a lab", "[editor][notebook][lab]") {
  test::EditorFixture fx;
  fx.open_example("notebook-tour.mls");
  NotebookView* nb = fx.window->notebook();
  QWidget* b = nb->buttonFor("check");
  CHECK((b == nullptr || !b->isVisible()));
}

TEST_CASE("a lab's author sets a cell's role from the Lab role menu", "[editor][notebook][lab]") {
  test::EditorFixture fx;
  const std::string path = fx.dir.file("teacher.mls");
  std::string text = kStudentLab;
  text.replace(text.find("\"student\": true,"), std::string("\"student\": true,").size(), "");
  std::ofstream(path) << text;
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  NotebookView* nb = fx.window->notebook();
  QWidget* b = nb->buttonFor("role");
  REQUIRE(b);
  REQUIRE(b->isVisible());
  // Select the setup cell with a click, then pick "Answer" from the menu.
  CellWidget* setup = nb->cellWidget("setup");
  QTest::mouseClick(setup, Qt::LeftButton, {}, QPoint(5, 5));
  REQUIRE(nb->selected() == "setup");
  CHECK_FALSE(setup->locked());  // the teacher's file: every cell editable
  QTimer::singleShot(200, [] {
    auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
    REQUIRE(menu);
    for (QAction* a : menu->actions())
      if (a->objectName() == "notebook.role-answer") {
        QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(a).center());
        return;
      }
  });
  QTest::mouseClick(b, Qt::LeftButton);
  QTest::qWait(400);
  const nodes::Cell* c = nb->notebook().find("setup");
  REQUIRE(c);
  CHECK(c->role == nodes::CellRole::Answer);
  CHECK(c->starter == "-- your answer here");
  CHECK(nb->action("role-answer")->isChecked());
  // Undo puts the role back.
  fx.window->model()->undo();
  CHECK(nb->notebook().find("setup")->role == nodes::CellRole::Locked);
}
