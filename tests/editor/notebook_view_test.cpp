// The notebook in the editor, driven as a person would: keys typed into the cells, clicks on
// the toolbar and on the widgets under a cell (QTest events, never values set from code).
#include <QCheckBox>
#include <filesystem>
#include <QComboBox>
#include <QDockWidget>
#include <QGraphicsView>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSvgRenderer>
#include <QSvgWidget>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextLayout>
#include <QTimer>
#include <QToolBar>
#include <QWheelEvent>

#include "editor/cell_widget.h"
#include "editor/lua_highlighter.h"
#include "editor/notebook_view.h"
#include "scripting/notebook/outputs.h"
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
using test::add_lua;
using test::click_action;
using test::run_cell;
using test::type;
using test::wait_run;

namespace {

// The highlighter's format at a position of a line of the document.
QTextCharFormat format_at(QTextDocument* doc, int line, int col) {
  const QTextBlock b = doc->findBlockByNumber(line);
  for (const auto& r : b.layout()->formats())
    if (col >= r.start && col < r.start + r.length) return r.format;
  return {};
}

bool is(QTextDocument* doc, LuaHighlighter* h, int line, int col, LuaHighlighter::Kind k) {
  return format_at(doc, line, col).foreground() == h->format_of(k).foreground();
}

}  // namespace

TEST_CASE(
    "the Lua highlighter marks keywords, strings, long brackets, comments, numbers and mls names",
    "[editor][notebook]") {
  test::qt_app();
  CodeEdit edit;
  edit.show();
  edit.setFocus();
  type(&edit,
       "local x = mls.plot.line{y = 1.5e3} -- note\n"
       "s = [==[ open\n"
       "still ]==] y = 'q' 0x1F\n"
       "--[[ a\n"
       "b ]] while");
  QTextDocument* doc = edit.document();
  LuaHighlighter* h = edit.highlighter();
  using K = LuaHighlighter::Kind;
  CHECK(is(doc, h, 0, 0, K::Keyword));        // local
  CHECK_FALSE(is(doc, h, 0, 6, K::Keyword));  // x
  CHECK(is(doc, h, 0, 10, K::MlsName));       // mls
  CHECK(is(doc, h, 0, 18, K::MlsName));       // line (mls.plot.line)
  CHECK(is(doc, h, 0, 29, K::Number));        // 1.5e3
  CHECK(is(doc, h, 0, 36, K::Comment));       // -- note
  CHECK(is(doc, h, 1, 6, K::String));         // [==[ opens
  CHECK(is(doc, h, 2, 0, K::String));         // still inside it
  CHECK_FALSE(is(doc, h, 2, 11, K::String));  // y after ]==]
  CHECK(is(doc, h, 2, 15, K::String));        // 'q'
  CHECK(is(doc, h, 2, 19, K::Number));        // 0x1F
  CHECK(is(doc, h, 3, 0, K::Comment));        // --[[
  CHECK(is(doc, h, 4, 0, K::Comment));        // b, still in the comment
  CHECK(is(doc, h, 4, 5, K::Keyword));        // while after ]]
}

TEST_CASE("a code cell matches brackets, completes mls names with Tab and runs with Shift+Enter",
          "[editor][notebook]") {
  test::qt_app();
  CellWidget w({.id = "a", .source = ""});
  w.setCompletions([](const std::string& prefix) {
    std::vector<std::string> all = {"mls.plot.line", "mls.plot.hist", "mls.randn"}, hits;
    for (auto& s : all)
      if (s.rfind(prefix, 0) == 0) hits.push_back(s);
    return hits;
  });
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  CodeEdit* e = w.editor();
  e->setFocus();
  QSignalSpy edited(&w, &CellWidget::sourceEdited), run(&w, &CellWidget::runRequested);
  QTest::keyClicks(e, "x = mls.ra");
  QTest::keyClick(e, Qt::Key_Tab);
  CHECK(e->toPlainText() == "x = mls.randn");
  QTest::keyClicks(e, "{2, (3)}");
  // The cursor sits after the closing brace: it and the opening one are matched.
  CHECK(e->matchedBrackets() == std::pair<int, int>{20, 13});
  QTest::keyClick(e, Qt::Key_Home);
  CHECK(e->matchedBrackets() == std::pair<int, int>{-1, -1});
  CHECK(!edited.isEmpty());
  CHECK(edited.back().at(1).toString() == "x = mls.randn{2, (3)}");
  CHECK(w.cell().source == "x = mls.randn{2, (3)}");
  QTest::keyClick(e, Qt::Key_Return, Qt::ShiftModifier);
  REQUIRE(run.size() == 1);
  CHECK(run[0].at(0).toString() == "a");
  CHECK(e->toPlainText() == "x = mls.randn{2, (3)}");  // Shift+Enter adds no line
}

TEST_CASE(
    "a cell shows its text, figures, widgets and its error with the line marked, greyed when stale",
    "[editor][notebook]") {
  test::qt_app();
  CellWidget w({.id = "plot", .source = "lr = mls.ui.slider('lr')\nerror('boom')"});
  w.resize(700, 500);
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  lua::CellOutput out;
  out.cell_id = "plot";
  out.text = "hello\n";
  out.figures.push_back({.svg = "<svg xmlns='http://www.w3.org/2000/svg' width='64' height='32'>"
                                "<rect width='64' height='32' fill='red'/></svg>",
                         .title = "loss",
                         .width = 64,
                         .height = 32});
  out.widgets.push_back({.kind = "slider",
                         .name = "lr",
                         .label = "rate",
                         .min = 0,
                         .max = 1,
                         .step = 0.25,
                         .value = 0.5});
  out.widgets.push_back({.kind = "checkbox", .name = "flag", .value = false});
  out.widgets.push_back({.kind = "button", .name = "go", .label = "Go", .value = 2});
  out.ok = false;
  out.error = "boom";
  out.error_line = 2;
  w.setOutput(&out, false);
  QApplication::processEvents();
  CHECK(w.outputText()->text() == "hello");
  CHECK(w.outputText()->isVisible());
  const auto figures = w.findChildren<QSvgWidget*>("cell.figure");
  REQUIRE(figures.size() == 1);
  CHECK(figures[0]->renderer()->isValid());
  CHECK(w.errorLabel()->text() == "line 2: boom");
  CHECK(w.editor()->errorLine() == 2);
  CHECK_FALSE(w.staleLabel()->isVisible());

  QSignalSpy changed(&w, &CellWidget::widgetChanged);
  auto* slider = w.findChild<QSlider*>("widget.lr");
  REQUIRE(slider);
  CHECK(slider->value() == 2);  // 0.5 in steps of 0.25
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Right);
  // (QTRY_* cannot fail a Catch test: it only returns from the function.)
  for (int i = 0; i < 200 && changed.size() < 1; ++i) QTest::qWait(10);
  REQUIRE(changed.size() == 1);
  CHECK(changed[0].at(0).toString() == "lr");
  CHECK(changed[0].at(1).value<nlohmann::json>() == 0.75);
  auto* check = w.findChild<QCheckBox*>("widget.flag");
  REQUIRE(check);
  QTest::mouseClick(check, Qt::LeftButton, {}, QPoint(8, check->height() / 2));
  REQUIRE(changed.size() == 2);
  CHECK(changed[1].at(1).value<nlohmann::json>() == true);
  auto* button = w.findChild<QPushButton*>("widget.go");
  REQUIRE(button);
  QTest::mouseClick(button, Qt::LeftButton);
  REQUIRE(changed.size() == 3);
  CHECK(changed[2].at(1).value<nlohmann::json>() == 3);

  // An edit clears the error's mark; the old output is stale.
  w.editor()->setFocus();
  QTest::keyClick(w.editor(), Qt::Key_End, Qt::ControlModifier);
  QTest::keyClicks(w.editor(), " -- fixed");
  CHECK(w.editor()->errorLine() == 0);
  w.setStale(true);
  CHECK(w.staleLabel()->isVisible());
  CHECK(w.stale());
}

TEST_CASE("a Markdown cell is rendered, edited on double-click and rendered again on Shift+Enter",
          "[editor][notebook]") {
  test::qt_app();
  CellWidget w(
      {.id = "intro", .kind = nodes::CellKind::Markdown, .source = "# Tour\n\n- one\n- two"});
  w.resize(600, 300);
  w.show();
  REQUIRE(QTest::qWaitForWindowExposed(&w));
  QTextBrowser* md = w.markdown();
  CHECK(md->isVisible());
  CHECK_FALSE(w.editor()->isVisible());
  CHECK(md->document()->findBlockByNumber(0).text() == "Tour");
  CHECK(md->document()->findBlockByNumber(0).blockFormat().headingLevel() == 1);
  CHECK(md->document()->findBlockByNumber(1).textList() != nullptr);
  QTest::mouseDClick(md->viewport(), Qt::LeftButton, {}, QPoint(20, 10));
  REQUIRE(w.editingMarkdown());
  QTest::keyClick(w.editor(), Qt::Key_End, Qt::ControlModifier);
  type(w.editor(), "\n\n**bold**");
  QTest::keyClick(w.editor(), Qt::Key_Return, Qt::ShiftModifier);
  CHECK_FALSE(w.editingMarkdown());
  CHECK(w.cell().source == "# Tour\n\n- one\n- two\n\n**bold**");
  CHECK(md->toPlainText().contains("bold"));
  CHECK_FALSE(md->toPlainText().contains("**"));
}

// [SECTION] the notebook view in the main window

namespace {

using test::EditorFixture;

QString text_of(NotebookView* nb, const QString& id) {
  return nb->cellWidget(id)->outputText()->text();
}

}  // namespace

TEST_CASE("cells are added, typed and run through the notebook's GUI", "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "x = 6 * 7");
  const QString b = add_lua(nb, "print(x + 1)");
  CHECK(nb->notebook().cells.size() == 2);
  CHECK(nb->notebook().cells[0].source == "x = 6 * 7");
  click_action(nb, "run-all");
  CHECK(wait_run(nb) == QStringList{a, b});
  CHECK(text_of(nb, b) == "43");
  CHECK_FALSE(nb->cellWidget(b)->stale());

  // A failing cell: its message under it and its line marked in the editor.
  const QString c = add_lua(nb, "local k = 1\nerror('boom at two')");
  run_cell(nb, c);
  CHECK(wait_run(nb) == QStringList{c});
  CellWidget* wc = nb->cellWidget(c);
  CHECK(wc->editor()->errorLine() == 2);
  CHECK(wc->errorLabel()->isVisible());
  CHECK(wc->errorLabel()->text().startsWith("line 2: "));
  CHECK(wc->errorLabel()->text().contains("boom at two"));
}

TEST_CASE("editing a cell re-runs exactly its dependents, in order, lazy mode marks them stale",
          "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString d = add_lua(nb, "print(y * 10)");  // reads y, defined below
  const QString a = add_lua(nb, "x = 1");
  const QString b = add_lua(nb, "y = x + 1");
  const QString c = add_lua(nb, "z = 5");
  click_action(nb, "run-all");
  CHECK(wait_run(nb) == QStringList{a, b, d, c});  // d as soon as y is there
  CHECK(text_of(nb, d) == "20");
  CellWidget* wa = nb->cellWidget(a);
  wa->editor()->setFocus();
  QTest::keyClick(wa->editor(), Qt::Key_End);
  QTest::keyClick(wa->editor(), Qt::Key_Backspace);
  type(wa->editor(), "4");
  run_cell(nb, a);
  CHECK(wait_run(nb) == QStringList{a, b, d});  // not c
  CHECK(text_of(nb, d) == "50");

  click_action(nb, "lazy");
  CHECK(nb->notebook().lazy);
  QTest::keyClick(wa->editor(), Qt::Key_Backspace);
  type(wa->editor(), "2");
  run_cell(nb, a);
  CHECK(wait_run(nb) == QStringList{a});
  CHECK(nb->cellWidget(b)->stale());
  CHECK(nb->cellWidget(d)->stale());
  CHECK(nb->cellWidget(d)->staleLabel()->isVisible());
  CHECK(text_of(nb, d) == "50");  // the old output, greyed
  CHECK_FALSE(nb->cellWidget(c)->stale());
}

TEST_CASE("a name defined twice and a cycle show their message on the cells involved",
          "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "x = 1");
  const QString b = add_lua(nb, "x = 2");
  const QString c = add_lua(nb, "p = q");
  const QString d = add_lua(nb, "q = p");
  const QString e = add_lua(nb, "w = 3");
  QApplication::processEvents();
  for (const QString& id : {a, b}) {
    CHECK(nb->cellWidget(id)->problemLabel()->isVisible());
    CHECK(nb->cellWidget(id)->problemLabel()->text().contains("'x'"));
  }
  for (const QString& id : {c, d}) {
    CHECK(nb->cellWidget(id)->problemLabel()->isVisible());
    CHECK(nb->cellWidget(id)->problemLabel()->text().contains("cycle"));
  }
  CHECK_FALSE(nb->cellWidget(e)->problemLabel()->isVisible());
}

TEST_CASE("an edit on the canvas marks the cells that read the project stale",
          "[editor][notebook]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  // A run writes the outputs beside the project (P.outputs.json): here, not in the sources.
  REQUIRE(fx.window->model()->saveAs(fx.dir.file("canvas-edit.mls")).ok());
  NotebookView* nb = fx.window->notebook();
  const QString r = add_lua(nb, "n = #mls.project.current():nodes()");
  const QString o = add_lua(nb, "k = 3");
  click_action(nb, "run-all");
  CHECK(wait_run(nb) == QStringList{r, o});
  click_action(nb, "lazy");
  // A node dropped on the canvas from the palette, as a person would.
  REQUIRE(fx.window->view()->dropNodeType("mls.relu", QPointF(40, 40)).ok());
  QApplication::processEvents();
  wait_run(nb);
  CHECK(nb->cellWidget(r)->stale());
  CHECK_FALSE(nb->cellWidget(o)->stale());
}

TEST_CASE("a slider moved with the keys re-runs only its readers", "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString s =
      add_lua(nb, "lr = mls.ui.slider('lr', {min = 0, max = 1, step = 0.1, value = 0.5})");
  const QString r = add_lua(nb, "print(lr * 10)");
  const QString o = add_lua(nb, "other = 1");
  click_action(nb, "run-all");
  CHECK(wait_run(nb).first() == s);
  if (!nb->session().output(s.toStdString())->ok) {
    WARN("mls.ui.slider is not there yet: " << nb->session().output(s.toStdString())->error);
    return;
  }
  CHECK(nb->lastRun() == QStringList{s, r, o});
  CHECK(text_of(nb, r) == "5.0");
  auto* slider = nb->cellWidget(s)->findChild<QSlider*>("widget.lr");
  REQUIRE(slider);
  slider->setFocus();
  QTest::keyClick(slider, Qt::Key_Right);
  QApplication::processEvents();  // the key's value is sent queued
  CHECK(wait_run(nb) == QStringList{s, r});
  CHECK(text_of(nb, r) == "6.0");

  // The wheel over the slider, the focus elsewhere: the notebook scrolls past it, the value
  // stays and nothing runs. With the focus on it, the wheel moves it.
  slider = nb->cellWidget(s)->findChild<QSlider*>("widget.lr");
  REQUIRE(slider);
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  nb->cellWidget(o)->editor()->setFocus();
  QApplication::processEvents();
  REQUIRE_FALSE(slider->hasFocus());
  auto wheel = [&](int dy) {
    const QPointF at(slider->width() / 2.0, slider->height() / 2.0);
    QWheelEvent e(at, slider->mapToGlobal(at), QPoint(), QPoint(0, dy), Qt::NoButton,
                  Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(slider, &e);
    QApplication::processEvents();
  };
  const int value = slider->value();
  wheel(-120);
  wheel(-120);
  CHECK(slider->value() == value);
  CHECK_FALSE(nb->busy());
  slider->setFocus();
  QApplication::processEvents();
  REQUIRE(slider->hasFocus());
  wheel(-120);
  CHECK(slider->value() != value);
  CHECK(wait_run(nb) == QStringList{s, r});
}

TEST_CASE("a long cell is stopped with Stop while a timer keeps firing", "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "while true do end");
  int ticks = 0;
  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, [&] { ++ticks; });
  timer.start(10);
  run_cell(nb, a);
  REQUIRE(nb->busy());
  QTest::qWait(300);
  CHECK(ticks >= 5);  // the GUI thread served the timer while the cell ran
  click_action(nb, "stop");
  wait_run(nb);
  CellWidget* w = nb->cellWidget(a);
  const lua::CellOutput* out = nb->session().output(a.toStdString());
  REQUIRE(out);
  INFO(out->error);
  CHECK_FALSE(out->ok);
  CHECK(w->errorLabel()->isVisible());
  CHECK(w->errorLabel()->text().contains("interrupt"));
}

TEST_CASE("a deleted cell comes back with Ctrl+Z", "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "x = 1");
  const QString b = add_lua(nb, "y = 2");
  nb->cellWidget(a)->editor()->setFocus();
  QTest::mouseClick(nb->cellWidget(a)->editor()->viewport(), Qt::LeftButton);
  REQUIRE(nb->selected() == a);
  click_action(nb, "delete");
  CHECK(nb->cellIds() == QStringList{b});
  // Out of the cells (a click on the notebook's background), Ctrl+Z is the document's undo;
  // inside a cell it undoes typing, as in a text editor.
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  QWidget* background = nb->findChild<QWidget*>("notebook.cells");
  REQUIRE(background);
  QTest::mouseClick(background, Qt::LeftButton, {},
                    QPoint(background->width() / 2, background->height() - 5));
  REQUIRE(QApplication::focusWidget() == background);
  QTest::keySequence(QApplication::focusWidget(), QKeySequence::Undo);
  QApplication::processEvents();
  REQUIRE(nb->cellIds() == QStringList{a, b});
  CHECK(nb->cellWidget(a)->editor()->toPlainText() == "x = 1");
}

TEST_CASE("a graph view cell shows the canvas's scene, live", "[editor][notebook]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  NotebookView* nb = fx.window->notebook();
  click_action(nb, "add-view");
  REQUIRE(nb->cellIds().size() == 1);
  CellWidget* w = nb->cellWidget(nb->cellIds()[0]);
  auto* view = qobject_cast<QGraphicsView*>(w->viewWidget());
  REQUIRE(view);
  CHECK(view->scene() == fx.window->view()->scene());
  CHECK_FALSE(view->isInteractive());
  CHECK(nb->notebook().cells[0].view == "graph");
}

TEST_CASE("an opened notebook shows its saved outputs, stale where the code changed since",
          "[editor][notebook]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  const QString a = add_lua(nb, "x = 2");
  const QString b = add_lua(nb, "print(x * 21)");
  const std::string path = fx.dir.file("saved.mls");
  REQUIRE(fx.window->model()->saveAs(path).ok());
  lua::SavedOutputs saved;
  saved[b.toStdString()] = {.cell_id = b.toStdString(),
                            .text = "42\n",
                            .hash = nb->session().current_hash(b.toStdString())};
  saved[a.toStdString()] = {.cell_id = a.toStdString(), .text = "old\n", .hash = "not its hash"};
  REQUIRE(lua::save_outputs(path, saved).ok());
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  QApplication::processEvents();
  REQUIRE(nb->cellIds() == QStringList{a, b});
  CHECK(text_of(nb, b) == "42");
  CHECK(text_of(nb, a) == "old");
  CHECK(nb->cellWidget(a)->stale());
}

TEST_CASE("a project's cells run in the sandbox until the user trusts the notebook",
          "[editor][notebook][sandbox]") {
  EditorFixture fx;
  NotebookView* nb = fx.window->notebook();
  // A project in a folder of its own, with a file beside it; a secret outside it.
  std::filesystem::create_directories(fx.dir.file("proj"));
  const std::string path = fx.dir.file("proj/p.mls");
  REQUIRE(fx.window->model()->saveAs(path).ok());
  { std::ofstream(fx.dir.file("proj/inside.txt")) << "beside the project"; }
  test::TempDir outside{"mls_outside"};
  const std::string secret = outside.file("secret.txt");
  { std::ofstream(secret) << "the user's secret"; }
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  QApplication::processEvents();
  CHECK_FALSE(nb->trusted());
  CHECK_FALSE(nb->action("trust")->isChecked());
  auto* state = nb->findChild<QLabel*>("notebook.trust-state");
  REQUIRE(state);
  CHECK(state->text() == "sandboxed");
  CHECK(state->toolTip().contains(QString::fromStdString(fx.dir.file("proj"))));
  // In the dock as it opens, every command is in sight (none in a toolbar's overflow).
  auto* dock = fx.window->findChild<QDockWidget*>("dock.notebook");
  REQUIRE(dock);
  dock->raise();
  QApplication::processEvents();
  for (const char* name : {"add-lua", "add-markdown", "add-view", "delete", "move-up",
                           "move-down", "run", "run-all", "run-to", "restart", "stop", "lazy",
                           "on-demand", "trust"}) {
    INFO(name);
    QWidget* b = nb->buttonFor(name);
    REQUIRE(b);
    CHECK(b->isVisible());
  }

  const QString in = add_lua(nb, QString("local f = io.open('%1') print(f:read('a')) f:close()")
                                     .arg(QString::fromStdString(fx.dir.file("proj/inside.txt"))));
  const QString out = add_lua(nb, QString("local f = assert(io.open('%1')) print(f:read('a'))")
                                      .arg(QString::fromStdString(secret)));
  const QString ex = add_lua(nb, "print(os.execute())");
  click_action(nb, "run-all");
  wait_run(nb);
  INFO(nb->cellWidget(in)->errorLabel()->text().toStdString());
  CHECK(text_of(nb, in) == "beside the project");
  CellWidget* wo = nb->cellWidget(out);
  CHECK(wo->errorLabel()->isVisible());
  CHECK(wo->errorLabel()->text().contains("sandbox"));
  CHECK_FALSE(wo->outputText()->text().contains("secret"));
  CHECK(nb->cellWidget(ex)->errorLabel()->text().contains("sandbox"));

  // Trusted: the same cells run with the user's rights (a fresh state; outputs kept, stale).
  click_action(nb, "trust");
  CHECK(nb->trusted());
  CHECK(state->text() == "trusted: your rights");
  CHECK(nb->cellWidget(in)->stale());
  click_action(nb, "run-all");
  wait_run(nb);
  CHECK(text_of(nb, out) == "the user's secret");
  CHECK(text_of(nb, ex) == QString("true"));  // a shell is there

  // The project opened again: the trust given before does not carry over.
  REQUIRE(fx.window->model()->saveAs(path).ok());
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  QApplication::processEvents();
  CHECK_FALSE(nb->trusted());
  CHECK_FALSE(nb->action("trust")->isChecked());
  CHECK(state->text() == "sandboxed");
  click_action(nb, "run-all");
  wait_run(nb);
  CHECK(nb->cellWidget(out)->errorLabel()->text().contains("sandbox"));
}
