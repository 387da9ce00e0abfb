// The project's .lua files in tabs beside the canvas: typed into, saved with Ctrl+S, run with
// F5 (print output, the error's line marked), sandboxed unless trusted, stopped, and a
// change on disk by another program offered for reload, never silently overwritten.
#include <QAbstractButton>
#include <QElapsedTimer>
#include <QLabel>
#include <QMenu>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTabBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <chrono>
#include <filesystem>

#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;
using mls::test::read_file;
using mls::test::TempDir;

namespace {

// Serves the event loop until `done` holds (true) or `ms` passed (false). (QTRY_VERIFY would
// only return from the test case: Catch would not see its failure.)
template <class F>
bool wait_until(F done, int ms = 10'000) {
  QElapsedTimer t;
  t.start();
  while (!done()) {
    if (t.elapsed() > ms) return false;
    QTest::qWait(10);
  }
  return true;
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;  // in place, as many programs write
}

QTabWidget* centre(EditorFixture& fx) {
  return qobject_cast<QTabWidget*>(fx.window->centralWidget());
}

// The window active and the script's editor focused, its cursor at the end, as after a click.
void focus_editor(EditorFixture& fx, ScriptEditor* s) {
  fx.window->activateWindow();
  REQUIRE(QTest::qWaitForWindowActive(fx.window.get()));
  centre(fx)->setCurrentWidget(s);
  QTest::mouseClick(s->editor()->viewport(), Qt::LeftButton, {}, QPoint(5, 5));
  QTest::keyClick(s->editor(), Qt::Key_End, Qt::ControlModifier);
  REQUIRE(s->editor()->hasFocus());
}

// Presses F5 in the editor and waits for the run to end; true when it succeeded.
bool run_f5(ScriptEditor* s) {
  QSignalSpy done(s, &ScriptEditor::runFinished);
  QTest::keyClick(s->editor(), Qt::Key_F5);
  if (done.isEmpty()) REQUIRE(done.wait(30'000));
  return done.at(0).at(0).toBool();
}

// Clicks the button `text` of the message box named `name` once it is shown (it is modal:
// the click comes from a timer inside its event loop). `seen` says whether it came.
std::shared_ptr<bool> answer_box(const QString& name, const QString& text) {
  auto seen = std::make_shared<bool>(false);
  auto* t = new QTimer;
  t->setInterval(20);
  QObject::connect(t, &QTimer::timeout, [t, name, text, seen] {
    auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
    if (!box || box->objectName() != name) return;
    for (QAbstractButton* b : box->buttons())
      if (b->text().remove('&') == text) {
        *seen = true;
        t->stop();
        t->deleteLater();
        QTest::mouseClick(b, Qt::LeftButton);
        return;
      }
  });
  t->start();
  return seen;
}

QAction* window_action(EditorFixture& fx, const QString& text) {
  for (QAction* a : fx.window->findChildren<QAction*>())
    if (a->text() == text) return a;
  return nullptr;
}

void click_action(ScriptEditor* s, QAction* a) {
  auto* bar = s->findChild<QToolBar*>("script.toolbar");
  REQUIRE(bar);
  QWidget* b = bar->widgetForAction(a);
  REQUIRE(b);
  QTest::mouseClick(b, Qt::LeftButton);
}

}  // namespace

TEST_CASE("a Lua file opens in a tab beside the canvas: Ctrl+S saves what was typed, F5 runs it",
          "[editor][scripts]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("proj/hello.lua");
  write(file, "print(\"hi\")");
  QTabWidget* tabs = centre(fx);
  const int before = tabs->count();
  // Through File > Open's path: a .lua file becomes a tab, not a project.
  REQUIRE(fx.window->openFile(QString::fromStdString(file)).ok());
  REQUIRE(fx.window->scripts().size() == 1);
  ScriptEditor* s = fx.window->scripts()[0];
  CHECK(tabs->count() == before + 1);
  CHECK(tabs->currentWidget() == s);
  CHECK(tabs->tabText(tabs->indexOf(s)) == "hello.lua");
  CHECK(tabs->widget(0) == fx.window->view());  // the canvas stays first
  // The canvas's tab has no close button, the script's has.
  CHECK(tabs->tabBar()->tabButton(0, QTabBar::RightSide) == nullptr);
  CHECK(tabs->tabBar()->tabButton(tabs->indexOf(s), QTabBar::RightSide) != nullptr);
  // Opening it again brings the same tab forward.
  tabs->setCurrentIndex(0);
  REQUIRE(fx.window->openScript(QString::fromStdString(file)).ok());
  CHECK(fx.window->scripts().size() == 1);
  CHECK(tabs->currentWidget() == s);
  // The code fills the tab (not one line's height, as a notebook cell's editor).
  CHECK(s->editor()->height() > 5 * s->editor()->fontMetrics().lineSpacing());

  focus_editor(fx, s);
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "print(6*7)");
  CHECK(s->isModified());
  CHECK(tabs->tabText(tabs->indexOf(s)) == "hello.lua •");
  // Completion of mls names, as in the notebook's cells.
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "print(mls.zer");
  QTest::keyClick(s->editor(), Qt::Key_Tab);
  QTest::keyClicks(s->editor(), "{2}:sum():item())");

  // Ctrl+S in the tab saves the file, not the project (which has no file: it would ask).
  QTest::keyClick(s->editor(), Qt::Key_S, Qt::ControlModifier);
  CHECK(read_file(file) == "print(\"hi\")\nprint(6*7)\nprint(mls.zeros{2}:sum():item())");
  CHECK_FALSE(s->isModified());
  CHECK(tabs->tabText(tabs->indexOf(s)) == "hello.lua");
  CHECK(fx.window->model()->path().empty());

  // F5 in the tab runs the script; the window's F5 (Train) is not triggered.
  QAction* train = window_action(fx, "&Train");
  REQUIRE(train);
  QSignalSpy trained(train, &QAction::triggered);
  REQUIRE(run_f5(s));
  CHECK(trained.isEmpty());
  const QString out = s->output()->toPlainText();
  INFO(out.toStdString());
  CHECK(out.contains("\nhi\n42\n0.0\n"));
  CHECK(out.contains("finished in"));
  CHECK(s->editor()->errorLine() == 0);
  // Our own save offered nothing to reload.
  QTest::qWait(300);
  CHECK_FALSE(s->diskBar()->isVisible());

  // Elsewhere (the canvas) F5 still trains.
  tabs->setCurrentIndex(0);
  fx.window->view()->setFocus();
  QTest::keyClick(fx.window->view(), Qt::Key_F5);
  CHECK(trained.size() == 1);
}

TEST_CASE("a script's error is shown under it with its line marked in the editor",
          "[editor][scripts]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("err.lua");
  write(file, "x = 1\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  focus_editor(fx, s);
  QTest::keyClicks(s->editor(), "print(x)");
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "local t = nil");
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "print(t.field)");
  CHECK_FALSE(run_f5(s));
  const QString out = s->output()->toPlainText();
  INFO(out.toStdString());
  CHECK(out.contains("\n1\n"));  // what ran before the error
  CHECK(out.contains("err.lua:4: attempt to index a nil value (local 't')"));
  CHECK(s->editor()->errorLine() == 4);
  CHECK(s->editor()->textCursor().blockNumber() == 3);  // the error's line in view
  // Fixed and run again: the mark goes.
  QTest::keyClick(s->editor(), Qt::Key_End);
  for (int i = 0; i < 8; ++i) QTest::keyClick(s->editor(), Qt::Key_Backspace);
  QTest::keyClicks(s->editor(), "t)");
  CHECK(s->editor()->toPlainText().endsWith("print(t)"));
  CHECK(run_f5(s));
  CHECK(s->editor()->errorLine() == 0);
  CHECK(s->output()->toPlainText().contains("\nnil\n"));
}

TEST_CASE("a script runs in the sandbox unless trusted: files outside its folder are refused",
          "[editor][scripts][sandbox]") {
  EditorFixture fx;
  TempDir outside("mls_outside");
  write(outside.file("secret.txt"), "the secret");
  const std::string file = fx.dir.file("lab/reader.lua");
  write(fx.dir.file("lab/mine.txt"), "my data");
  write(file, "local f = assert(io.open(\"" + outside.file("secret.txt") +
                  "\"))\nprint(f:read(\"a\"))\nf:close()\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  CHECK(s->sandboxRoot() == QString::fromStdString(fx.dir.file("lab")));
  CHECK_FALSE(s->trusted());
  CHECK_FALSE(s->trustAction()->isChecked());
  CHECK(s->trustAction()->toolTip().contains("sandbox"));
  focus_editor(fx, s);
  CHECK_FALSE(run_f5(s));
  {
    const QString out = s->output()->toPlainText();
    INFO(out.toStdString());
    CHECK(out.contains("is outside the script's folder " +
                       QString::fromStdString(fx.dir.file("lab"))));
    CHECK_FALSE(out.contains("the secret"));
    CHECK(s->editor()->errorLine() == 1);
  }
  // Inside its folder it may read (and write).
  write(fx.dir.file("lab/reader2.lua"),
        "local f = assert(io.open(\"" + fx.dir.file("lab/mine.txt") +
            "\"))\nprint(f:read(\"a\"))\nf:close()\nlocal g = assert(io.open(\"" +
            fx.dir.file("lab/out.txt") + "\", \"w\"))\ng:write(\"written\")\ng:close()\n");
  auto inside = fx.window->openScript(QString::fromStdString(fx.dir.file("lab/reader2.lua")));
  REQUIRE(inside.ok());
  focus_editor(fx, *inside);
  CHECK(run_f5(*inside));
  CHECK((*inside)->output()->toPlainText().contains("my data"));
  CHECK(read_file(fx.dir.file("lab/out.txt")) == "written");

  // Trusted (the toolbar's check button), the same script reads the file.
  centre(fx)->setCurrentWidget(s);
  click_action(s, s->trustAction());
  CHECK(s->trusted());
  focus_editor(fx, s);
  CHECK(run_f5(s));
  CHECK(s->output()->toPlainText().contains("the secret"));
  CHECK(s->editor()->errorLine() == 0);
  // Trust is the file's: the other tab is still sandboxed.
  CHECK_FALSE((*inside)->trusted());

  // Kept for the session: the tab closed and opened again is still trusted.
  REQUIRE(fx.window->closeScript(s));
  auto again = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(again.ok());
  s = *again;
  CHECK(s->trusted());
  // Another program's version, reloaded, is not: it runs in the sandbox again.
  write(file, "print(assert(io.open(\"" + outside.file("secret.txt") + "\")):read(\"a\"))");
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  QTest::mouseClick(s->reloadButton(), Qt::LeftButton);
  CHECK_FALSE(s->trusted());
  CHECK_FALSE(s->trustAction()->isChecked());
  focus_editor(fx, s);
  CHECK_FALSE(run_f5(s));
  CHECK(s->output()->toPlainText().contains("is outside the script's folder"));
  CHECK_FALSE(s->output()->toPlainText().contains("the secret"));
}

TEST_CASE("a script inside the project's folder is sandboxed to the project's folder",
          "[editor][scripts][sandbox]") {
  EditorFixture fx;
  std::filesystem::create_directories(fx.dir.file("proj"));
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("proj/p.mls"))).ok());
  write(fx.dir.file("proj/data.txt"), "project data");
  write(fx.dir.file("proj/scripts/s.lua"),
        "print(assert(io.open(\"" + fx.dir.file("proj/data.txt") + "\")):read(\"a\"))");
  write(fx.dir.file("elsewhere/t.lua"), "print(1)");
  auto in = fx.window->openScript(QString::fromStdString(fx.dir.file("proj/scripts/s.lua")));
  auto out = fx.window->openScript(QString::fromStdString(fx.dir.file("elsewhere/t.lua")));
  REQUIRE(in.ok());
  REQUIRE(out.ok());
  CHECK((*in)->sandboxRoot() == QString::fromStdString(fx.dir.file("proj")));
  CHECK((*out)->sandboxRoot() == QString::fromStdString(fx.dir.file("elsewhere")));
  focus_editor(fx, *in);
  CHECK(run_f5(*in));
  CHECK((*in)->output()->toPlainText().contains("project data"));
}

TEST_CASE("File > Scripts lists the project folder's .lua files and opens one",
          "[editor][scripts]") {
  EditorFixture fx;
  auto* menu = fx.window->findChild<QMenu*>("file.scripts");
  REQUIRE(menu);
  auto texts = [menu] {
    QStringList t;
    for (QAction* a : menu->actions()) t << a->text();
    return t;
  };
  menu->popup(QPoint(50, 50));
  REQUIRE(wait_until([&] { return menu->isVisible(); }));
  CHECK(texts().size() == 1);
  CHECK_FALSE(menu->actions()[0]->isEnabled());  // no project file yet: nothing to list
  menu->close();
  std::filesystem::create_directories(fx.dir.file("proj"));
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("proj/p.mls"))).ok());
  write(fx.dir.file("proj/b.lua"), "print('b')");
  write(fx.dir.file("proj/sub/a.lua"), "print('a')");
  write(fx.dir.file("proj/.hidden/c.lua"), "print('c')");
  write(fx.dir.file("proj/notes.txt"), "not a script");
  // Listed afresh when the menu opens.
  menu->popup(QPoint(50, 50));
  REQUIRE(wait_until([&] { return menu->isVisible(); }));
  REQUIRE(texts() == QStringList({"b.lua", "sub/a.lua"}));
  QAction* a = menu->actions()[1];
  QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(a).center());
  REQUIRE(wait_until([&] { return fx.window->scripts().size() == 1; }));
  CHECK(fx.window->scripts()[0]->path() == QString::fromStdString(fx.dir.file("proj/sub/a.lua")));
  CHECK(fx.window->scripts()[0]->editor()->toPlainText() == "print('a')");
}

TEST_CASE("a file changed on disk is offered for reload in a bar, and Reload loads it",
          "[editor][scripts][disk]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("w.lua");
  write(file, "print('old')\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  CHECK_FALSE(s->diskBar()->isVisible());
  QSignalSpy shown(s, &ScriptEditor::diskChangeShown);
  write(file, "print('new')\n");  // another program
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  CHECK(shown.size() >= 1);
  CHECK(s->diskMessage()->text().startsWith("w.lua changed on disk"));
  CHECK(s->reloadButton()->isVisible());
  CHECK(s->editor()->toPlainText() == "print('old')\n");  // nothing replaced yet
  QTest::mouseClick(s->reloadButton(), Qt::LeftButton);
  CHECK(s->editor()->toPlainText() == "print('new')\n");
  CHECK_FALSE(s->isModified());
  CHECK_FALSE(s->diskBar()->isVisible());
  // Undo gives the editor's text from before the reload back.
  s->editor()->setFocus();
  QTest::keyClick(s->editor(), Qt::Key_Z, Qt::ControlModifier);
  CHECK(s->editor()->toPlainText() == "print('old')\n");
  QTest::keyClick(s->editor(), Qt::Key_Z, Qt::ControlModifier | Qt::ShiftModifier);
  CHECK(s->editor()->toPlainText() == "print('new')\n");

  // Replaced by a rename (as most editors and git write): seen too, the watch goes on.
  const std::string tmp = fx.dir.file(".w.lua.tmp");
  write(tmp, "print('renamed')\n");
  std::filesystem::rename(tmp, file);
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  QTest::mouseClick(s->reloadButton(), Qt::LeftButton);
  CHECK(s->editor()->toPlainText() == "print('renamed')\n");
  write(file, "print('third')\n");
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  // Keep mine: the bar goes, the editor's text stays and is unsaved.
  QTest::mouseClick(s->keepButton(), Qt::LeftButton);
  CHECK_FALSE(s->diskBar()->isVisible());
  CHECK(s->editor()->toPlainText() == "print('renamed')\n");
  CHECK(s->isModified());
}

TEST_CASE("unsaved edits and a change on disk: Save asks before overwriting",
          "[editor][scripts][disk]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("both.lua");
  write(file, "a = 1\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  focus_editor(fx, s);
  QTest::keyClicks(s->editor(), "b = 2");
  write(file, "theirs = true\n");
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  CHECK(s->diskMessage()->text().contains("unsaved edits"));
  CHECK(s->editor()->toPlainText() == "a = 1\nb = 2");  // the edits are kept

  // Ctrl+S asks; Cancel leaves their file as it is.
  auto seen = answer_box("script.overwrite", "Cancel");
  QTest::keyClick(s->editor(), Qt::Key_S, Qt::ControlModifier);
  CHECK(*seen);
  CHECK(read_file(file) == "theirs = true\n");
  CHECK(s->isModified());
  // Asked again; Overwrite writes the editor's text.
  seen = answer_box("script.overwrite", "Overwrite");
  QTest::keyClick(s->editor(), Qt::Key_S, Qt::ControlModifier);
  CHECK(*seen);
  CHECK(read_file(file) == "a = 1\nb = 2");
  CHECK_FALSE(s->isModified());
  QTest::qWait(300);
  CHECK_FALSE(s->diskBar()->isVisible());  // our own write offers nothing
  // From now on our version is the known one: a plain save does not ask.
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "c = 3");
  QTest::keyClick(s->editor(), Qt::Key_S, Qt::ControlModifier);
  CHECK(read_file(file) == "a = 1\nb = 2\nc = 3");
}

TEST_CASE("a file deleted on disk is said to be, and Save writes it again",
          "[editor][scripts][disk]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("gone.lua");
  write(file, "print(1)\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  std::filesystem::remove(file);
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  CHECK(s->diskMessage()->text().contains("deleted"));
  CHECK_FALSE(s->reloadButton()->isVisible());
  CHECK(s->isModified());  // the editor holds the only copy now
  focus_editor(fx, s);
  QTest::keyClick(s->editor(), Qt::Key_S, Qt::ControlModifier);
  CHECK(read_file(file) == "print(1)\n");
  CHECK_FALSE(s->diskBar()->isVisible());
  // Watched again once written: another program's change is seen.
  write(file, "print(2)\n");
  REQUIRE(wait_until([&] { return s->diskBar()->isVisible(); }));
  CHECK(s->diskMessage()->text().contains("changed on disk"));
}

TEST_CASE("Stop ends a script that loops forever", "[editor][scripts]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("loop.lua");
  write(file, "print('looping')\nwhile true do end\n");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  focus_editor(fx, s);
  QSignalSpy done(s, &ScriptEditor::runFinished);
  QTest::keyClick(s->editor(), Qt::Key_F5);
  REQUIRE(wait_until([&] { return s->output()->toPlainText().contains("looping"); }));
  CHECK(s->running());
  CHECK(s->stopAction()->isEnabled());
  CHECK_FALSE(s->runAction()->isEnabled());
  // F5 again while it runs starts nothing.
  CHECK_FALSE(s->run());
  QTest::qWait(200);
  CHECK(done.isEmpty());
  const auto t0 = std::chrono::steady_clock::now();
  click_action(s, s->stopAction());
  REQUIRE(done.wait(10'000));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("Stop to the end of the run: " << seconds << " s");
  CHECK_FALSE(done.at(0).at(0).toBool());
  CHECK(s->output()->toPlainText().contains("interrupted"));
  CHECK_FALSE(s->running());
  CHECK(s->runAction()->isEnabled());

  // Shift+F5 in the tab stops it too, and not the window's training (its Stop has that key).
  QAction* window_stop = window_action(fx, "&Stop");
  REQUIRE(window_stop);
  QSignalSpy window_stopped(window_stop, &QAction::triggered);
  done.clear();
  QTest::keyClick(s->editor(), Qt::Key_F5);
  REQUIRE(wait_until([&] { return s->running(); }));
  QTest::keyClick(s->editor(), Qt::Key_F5, Qt::ShiftModifier);
  REQUIRE(done.wait(10'000));
  CHECK_FALSE(done.at(0).at(0).toBool());
  CHECK(window_stopped.isEmpty());

  // Closing the tab while it runs stops it (no question: nothing unsaved).
  QTest::keyClick(s->editor(), Qt::Key_F5);
  REQUIRE(wait_until([&] { return s->output()->toPlainText().contains("looping"); }));
  QTabWidget* tabs = centre(fx);
  QTest::mouseClick(tabs->tabBar()->tabButton(tabs->indexOf(s), QTabBar::RightSide),
                    Qt::LeftButton);
  CHECK(fx.window->scripts().isEmpty());
}

TEST_CASE("closing a script's tab with unsaved edits asks", "[editor][scripts]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("close.lua");
  write(file, "x = 1");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  focus_editor(fx, s);
  QTest::keyClicks(s->editor(), "0");
  QTabWidget* tabs = centre(fx);
  auto close_button = [&] {
    QWidget* b = tabs->tabBar()->tabButton(tabs->indexOf(s), QTabBar::RightSide);
    REQUIRE(b);
    return b;
  };
  auto seen = answer_box("script.close", "Cancel");
  QTest::mouseClick(close_button(), Qt::LeftButton);
  CHECK(*seen);
  REQUIRE(fx.window->scripts().size() == 1);
  CHECK(s->editor()->toPlainText() == "x = 10");
  seen = answer_box("script.close", "Save");
  QTest::mouseClick(close_button(), Qt::LeftButton);
  CHECK(*seen);
  CHECK(fx.window->scripts().isEmpty());
  CHECK(read_file(file) == "x = 10");
  // Unmodified: closes without a question.
  auto again = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(again.ok());
  QTest::mouseClick(tabs->tabBar()->tabButton(tabs->indexOf(*again), QTabBar::RightSide),
                    Qt::LeftButton);
  CHECK(fx.window->scripts().isEmpty());
}

TEST_CASE("mls.train in a script is recorded as the script's run and fed to the Instruments tab",
          "[editor][scripts][train]") {
  EditorFixture fx;
  const std::string file = fx.dir.file("lab/train.lua");
  write(file,
        "mls.manual_seed(3)\n"
        "local net = mls.nn.Sequential(mls.nn.Flatten(), mls.nn.Linear(784, 10))\n"
        "local data = mls.data.fashion_mnist{limit = 256, test_limit = 64}\n"
        "local r = mls.train{model = net, data = data, epochs = 1, batch_size = 64}\n"
        "print('run', r.run_id)");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  ScriptEditor* s = *opened;
  focus_editor(fx, s);
  QSignalSpy live(s, &ScriptEditor::liveRunStarted);
  REQUIRE(run_f5(s));
  INFO(s->output()->toPlainText().toStdString());
  CHECK(s->output()->toPlainText().contains("run\t1"));
  CHECK(live.size() == 1);
  // Edited and not saved: what runs is not the file, so the run does not name it.
  QTest::keyClick(s->editor(), Qt::Key_Return);
  QTest::keyClicks(s->editor(), "print('edited')");
  REQUIRE(run_f5(s));
  CHECK(s->output()->toPlainText().contains("run\t2"));
  CHECK(s->output()->toPlainText().contains("edited"));
  auto store = store::RunStore::open_read_only(fx.dir.file("runs.db"));
  REQUIRE(store.ok());
  auto first = (*store)->get_run(1);
  REQUIRE(first.ok());
  CHECK(first->name == "train");
  CHECK(first->project_path == file);
  CHECK_FALSE(first->project_hash.empty());
  CHECK(first->status == "finished");
  auto second = (*store)->get_run(2);
  REQUIRE(second.ok());
  CHECK(second->project_path.empty());
  CHECK(second->status == "finished");
}

TEST_CASE("a script reads the open project with mls.project.current()", "[editor][scripts]") {
  EditorFixture fx;
  fx.open_example("two-blobs-logistic.mls");
  const size_t nodes = fx.window->model()->doc().nodes.size();
  REQUIRE(nodes > 0);
  const std::string file = fx.dir.file("p.lua");
  write(file, "print('nodes', #mls.project.current():nodes())");
  auto opened = fx.window->openScript(QString::fromStdString(file));
  REQUIRE(opened.ok());
  focus_editor(fx, *opened);
  REQUIRE(run_f5(*opened));
  INFO((*opened)->output()->toPlainText().toStdString());
  CHECK((*opened)->output()->toPlainText().contains(QString("nodes\t%1").arg(nodes)));
}
