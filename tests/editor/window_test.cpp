// The main window around the canvas: autosave and recovery after a crash, icons that
// follow the theme and stay sharp at any scale, a first size that fits a small or
// scaled-up screen.
#include <QComboBox>
#include <QFile>
#include <QStandardItemModel>
#include <QImage>
#include <QToolBar>
#include <QTreeWidget>

#include "editor/theme.h"
#include "engine/core/backend_registry.h"
#include "nodes/document.h"
#include "nodes/edit.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

// The mean colour of the opaque pixels (an icon's stroke), and how many there are.
std::pair<QColor, int> ink(const QImage& img) {
  double r = 0, g = 0, b = 0;
  int n = 0;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x) {
      const QColor c = img.pixelColor(x, y);
      if (c.alpha() < 200) continue;
      r += c.red(), g += c.green(), b += c.blue(), ++n;
    }
  if (n == 0) return {QColor(), 0};
  return {QColor(int(r / n), int(g / n), int(b / n)), n};
}

}  // namespace

TEST_CASE("autosave keeps unsaved work in a file of its own", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  fx.window->autosave();
  CHECK_FALSE(QFile::exists(fx.window->autosavePath()));  // nothing unsaved yet
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 7}})).ok());
  fx.window->autosave();
  REQUIRE(QFile::exists(fx.window->autosavePath()));
  auto saved =
      nodes::load_document(fx.window->autosavePath().toStdString(), nodes::GraphCheck::Draft);
  REQUIRE(saved.ok());
  CHECK(saved->training.epochs == 7);
  // Saving the project removes the autosave.
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("p.mls"))).ok());
  CHECK_FALSE(QFile::exists(fx.window->autosavePath()));
}

TEST_CASE("after a crash, the next editor offers the autosave back as unsaved work on its file",
          "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 13}})).ok());
  REQUIRE(m->push(nodes::make_rename_node(m->doc(), "relu2", "act2")).ok());
  fx.window->autosave();
  const std::string edited = m->text();
  // A crashed editor leaves its autosave under its own process id (here one no process has).
  const QString dir = QFileInfo(fx.window->autosavePath()).path();
  const QString crashed = dir + "/autosave-999999999.mls";
  REQUIRE(QFile::copy(fx.window->autosavePath(), crashed));
  QSettings().setValue("autosave/autosave-999999999.mls",
                       QString(MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls"));
  // A live editor's autosave (this process's) is not a crash: only the other one is offered.
  const QStringList left = fx.window->leftoverAutosaves();
  REQUIRE(left.size() == 1);
  CHECK(left[0] == crashed);

  fx.window->newFromTemplate("");
  REQUIRE(fx.window->recoverAutosave(left[0]).ok());
  CHECK(m->text() == edited);  // exactly the work that was autosaved
  CHECK(m->isModified());      // not saved yet: Save writes it to its file
  CHECK(m->path() == MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls");
  CHECK(m->doc().training.epochs == 13);
  CHECK_FALSE(QFile::exists(crashed));  // offered once
  CHECK(fx.window->leftoverAutosaves().isEmpty());
}

TEST_CASE("an unreadable autosave is kept aside with a message, not lost and not offered again",
          "[editor]") {
  EditorFixture fx;
  const QString dir = QFileInfo(fx.window->autosavePath()).path();
  QDir().mkpath(dir);
  const QString broken = dir + "/autosave-999999998.mls";
  {
    QFile f(broken);
    REQUIRE(f.open(QIODevice::WriteOnly));
    f.write("{\"format_version\": 1, \"nodes\": [");  // cut off mid-write
  }
  const std::string before = fx.window->model()->text();
  auto r = fx.window->recoverAutosave(broken);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("autosave-999999998.mls") != std::string::npos);
  CHECK(fx.window->model()->text() == before);  // the open document is untouched
  CHECK(QFile::exists(broken + ".unreadable"));
  CHECK(fx.window->leftoverAutosaves().isEmpty());
}

TEST_CASE("icons are drawn from SVG at the screen's scale and in the theme's text colour",
          "[editor]") {
  EditorFixture fx;
  for (const char* name :
       {"new",         "open",  "save",     "undo",   "redo",    "fit",      "layout",
        "frame",       "step",  "train",    "pause",  "stop",    "data",     "layers",
        "activations", "merge", "sequence", "losses", "zoom-in", "zoom-out", "theme"}) {
    INFO(name);
    const QIcon i = icon(name);
    REQUIRE_FALSE(i.isNull());
    // At a device pixel ratio of 2 the pixmap has twice the pixels, not a scaled copy.
    const QPixmap pm = i.pixmap(QSize(16, 16), 2.0);
    CHECK(pm.size() == QSize(32, 32));
    CHECK(pm.devicePixelRatio() == 2.0);
    CHECK(ink(pm.toImage()).second > 20);
  }
  CHECK(icon("no-such-icon").isNull());
  CHECK_FALSE(app_icon().isNull());
  CHECK_FALSE(fx.window->windowIcon().isNull());

  // The toolbar's Train button follows the theme: light strokes on dark, dark on light.
  auto train_ink = [&] {
    QAction* train = nullptr;
    for (QToolBar* tb : fx.window->findChildren<QToolBar*>())
      for (QAction* a : tb->actions())
        if (a->text() == "&Train") train = a;
    REQUIRE(train);
    return ink(train->icon().pixmap(QSize(24, 24), 1.0).toImage()).first;
  };
  fx.window->setDark(true);
  const QColor dark = train_ink();
  fx.window->setDark(false);
  const QColor light = train_ink();
  CHECK(dark.lightness() > 150);
  CHECK(light.lightness() < 100);
  fx.window->setDark(true);

  // Every node type in the palette shows its category's icon.
  QTreeWidget* tree = fx.window->palette()->tree();
  int with_icon = 0, types = 0;
  for (int i = 0; i < tree->topLevelItemCount(); ++i)
    for (int k = 0; k < tree->topLevelItem(i)->childCount(); ++k) {
      ++types;
      with_icon += !tree->topLevelItem(i)->child(k)->icon(0).isNull();
    }
  CHECK(types > 20);
  CHECK(with_icon == types);
}

TEST_CASE("the first window size fits the screen, also when a high-DPI scale shrinks it",
          "[editor]") {
  CHECK(initial_window_size(QSize(2560, 1400)) == QSize(1440, 900));
  // 1600x1000 pixels at a scale of 1.5 is 1066x666 device-independent pixels.
  const QSize s = initial_window_size(QSize(1066, 666));
  CHECK(s.width() <= 1066);
  CHECK(s.height() <= 666);
  CHECK(s.width() >= 1000);  // and still uses most of it
  CHECK(initial_window_size(QSize()) == QSize(1440, 900));
}

TEST_CASE("the inspector places the selected node on the cpu, as an undoable edit", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  fx.window->scene()->selectNode("fc2");
  QTest::qWait(20);
  auto* device = fx.window->findChild<QComboBox*>("inspector.device");
  REQUIRE(device);
  CHECK(device->currentText() == "project's device");
  device->setCurrentIndex(1);
  const nodes::Document& doc = fx.window->model()->doc();
  CHECK(doc.nodes[*nodes::find_node(doc, "fc2")].device == "cpu");
  fx.window->model()->undoStack()->undo();
  CHECK(fx.window->model()->doc().nodes[*nodes::find_node(fx.window->model()->doc(), "fc2")].device.empty());
}

TEST_CASE("the device picker offers the backends this build registered", "[editor]") {
  EditorFixture fx;
  auto* device = fx.window->findChild<QComboBox*>("run.device");
  REQUIRE(device);
  const auto names = backend_registry().names();
  REQUIRE(device->count() >= static_cast<int>(names.size()));
  auto* model = static_cast<QStandardItemModel*>(device->model());
  for (size_t i = 0; i < names.size(); ++i) {
    CHECK(device->itemText(static_cast<int>(i)).toStdString() == names[i]);
    CHECK(model->item(static_cast<int>(i))->isEnabled());
  }
  CHECK(device->itemText(0) == "cpu");
  // Kinds this build lacks are listed, greyed out, so a user learns they exist.
  for (int i = static_cast<int>(names.size()); i < device->count(); ++i) {
    CHECK(device->itemText(i).endsWith("(not in this build)"));
    CHECK_FALSE(model->item(i)->isEnabled());
  }
}
