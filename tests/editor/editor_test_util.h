// A QApplication for the editor tests (under Xvfb in `make test`; offscreen when there is no
// display) and a main window that asks no questions and writes only into a temp folder.
#pragma once

#include <QApplication>
#include <QSettings>
#include <QSignalSpy>
#include <QTest>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>

#include "editor/cell_widget.h"
#include "editor/main_window.h"
#include "editor/notebook_view.h"
#include "engine/core/op.h"
#include "tests/common/temp_dir.h"
#include "engine/cpu/cpu_backend.h"
#include "runner/backends.h"

namespace mls::test {

// A file's bytes ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline QApplication& qt_app() {
  static int argc = 1;
  static char name[] = "editor_tests";
  static char* argv[] = {name, nullptr};
  static QApplication* app = [] {
    if (!std::getenv("DISPLAY")) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    QCoreApplication::setOrganizationName("mlstudio-tests");
    QSettings::setDefaultFormat(QSettings::IniFormat);
    runner::init_backends();  // as the app does: the device picker lists them
    return new QApplication(argc, argv);
  }();
  return *app;
}

struct EditorFixture {
  TempDir dir{"mls_editor"};
  std::unique_ptr<editor::MainWindow> window;
  EditorFixture() {
    qt_app();
    QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, QString::fromStdString(dir.str()));
    editor::MainWindowOptions o;
    o.interactive = false;
    o.db = dir.file("runs.db");
    o.autosave_dir = dir.file("autosave");
    window = std::make_unique<editor::MainWindow>(o);
    window->resize(1400, 900);
    window->show();
    REQUIRE(QTest::qWaitForWindowExposed(window.get()));
  }
  // Opens an example and waits until the dataset description arrived (shapes are known).
  void open_example(const char* name) {
    REQUIRE(window->openFile(QString(MLS_SOURCE_DIR "/resources/examples/") + name).ok());
    wait_for_data();
  }
  void wait_for_data() {
    for (int i = 0; i < 600 && !window->model()->dataContext(); ++i) QTest::qWait(20);
    REQUIRE(window->model()->dataContext().has_value());
  }
  QPoint view_point(QPointF scene_pos) const { return window->view()->mapFromScene(scene_pos); }
};

// [SECTION] driving widgets as a person does

// Types text as keys; a newline is the Return key (QTest::keyClicks has none for it).
inline void type(QWidget* w, const QString& text) {
  const QStringList lines = text.split('\n');
  for (int i = 0; i < lines.size(); ++i) {
    if (i > 0) QTest::keyClick(w, Qt::Key_Return);
    QTest::keyClicks(w, lines[i]);
  }
}

// A click on the notebook's toolbar button for the action `name` ("add-lua", "run-all", ...),
// which must be enabled.
inline void click_action(editor::NotebookView* nb, const QString& name) {
  QWidget* b = nb->buttonFor(name);
  REQUIRE(b);
  REQUIRE(b->isEnabled());
  QTest::mouseClick(b, Qt::LeftButton);
}

// Waits for the notebook's run in flight to end (`seconds` at most); the ids it ran.
inline QStringList wait_run(editor::NotebookView* nb, int seconds = 60) {
  for (int i = 0; i < seconds * 100 && nb->busy(); ++i) QTest::qWait(10);
  REQUIRE_FALSE(nb->busy());
  return nb->lastRun();
}

// "+ Lua" clicked, the code typed into the new cell (which has the focus); its id.
inline QString add_lua(editor::NotebookView* nb, const QString& code) {
  const QStringList before = nb->cellIds();
  click_action(nb, "add-lua");
  REQUIRE(nb->cellIds().size() == before.size() + 1);
  const QString id = nb->selected();
  editor::CellWidget* w = nb->cellWidget(id);
  REQUIRE(w);
  type(w->editor(), code);
  return id;
}

// Shift+Enter in the cell's editor: runs the cell (without waiting for it).
inline void run_cell(editor::NotebookView* nb, const QString& id) {
  editor::CellWidget* w = nb->cellWidget(id);
  REQUIRE(w);
  w->editor()->setFocus();
  QTest::keyClick(w->editor(), Qt::Key_Return, Qt::ShiftModifier);
}

}  // namespace mls::test
