// Recovering an autosave must not consume it: until a new autosave or a save replaces it, the
// recovered work stays on disk as this editor's autosave, so a second crash (within the next
// 30 s, before the timer writes again) still leaves it to recover.
#include <QFile>
#include <QFileInfo>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

const char* kOrigin = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls";

// Leaves an autosave as a crashed editor (a process id no process has) would.
QString crashed_autosave(EditorFixture& fx, const char* pid, int epochs, std::string* text) {
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", epochs}})).ok());
  fx.window->autosave();
  *text = m->text();
  const QString crashed = QFileInfo(fx.window->autosavePath()).path() + "/autosave-" + pid + ".mls";
  REQUIRE(QFile::rename(fx.window->autosavePath(), crashed));
  QSettings().setValue(QString("autosave/autosave-") + pid + ".mls", QString(kOrigin));
  fx.window->newFromTemplate("");
  return crashed;
}

}  // namespace

TEST_CASE("a recovered autosave stays on disk until a new autosave or a save replaces it",
          "[editor][autosave]") {
  EditorFixture fx;
  std::string edited;
  const QString crashed = crashed_autosave(fx, "999999997", 17, &edited);
  REQUIRE(fx.window->recoverAutosave(crashed).ok());
  CHECK(fx.window->model()->text() == edited);

  // Crashing again right now: the recovered work is still on disk, as this editor's autosave,
  // with the file it belongs to.
  const QString mine = fx.window->autosavePath();
  REQUIRE(QFile::exists(mine));
  auto kept = nodes::load_document(mine.toStdString(), nodes::GraphCheck::Draft);
  REQUIRE(kept.ok());
  CHECK(kept->training.epochs == 17);
  CHECK(QSettings().value("autosave/" + QFileInfo(mine).fileName()).toString() == kOrigin);
  // Not offered twice while this editor lives (it is its own autosave now).
  CHECK(fx.window->leftoverAutosaves().isEmpty());

  // The next autosave replaces it with the newer work.
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 19}})).ok());
  fx.window->autosave();
  auto newer = nodes::load_document(mine.toStdString(), nodes::GraphCheck::Draft);
  REQUIRE(newer.ok());
  CHECK(newer->training.epochs == 19);

  // Saving makes it unneeded.
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("recovered.mls"))).ok());
  CHECK_FALSE(QFile::exists(mine));
}
