// ONNX in the editor: each layer's "exports" badge, File > Export to ONNX (the checked export
// on a worker) and File > Open of a .onnx file (imported as a project on the canvas).
#include <QFile>
#include <QImage>

#include "editor/node_item.h"
#include "nodes/edit.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

// The MLP example on a slice of Fashion-MNIST, saved in the test's folder as mlp.mls.
void small_mlp(EditorFixture& fx) {
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_dataset(m->doc(), {{"limit", 2000}, {"test_limit", 500}})).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 1}})).ok());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("mlp.mls"))).ok());
  fx.wait_for_data();
}

// Puts an exact GELU (which does not export) between relu1 and fc2.
void insert_exact_gelu(DocumentModel* m) {
  REQUIRE(m->push(nodes::make_add_node(m->doc(), "g", "mls.gelu")).ok());
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "relu1:out", "fc2:in")).ok());
  REQUIRE(m->push(nodes::make_connect(m->doc(), "relu1:out", "g:in")).ok());
  REQUIRE(m->push(nodes::make_connect(m->doc(), "g:out", "fc2:in")).ok());
}

}  // namespace

TEST_CASE("every layer shows whether it exports to ONNX before anyone presses Export",
          "[editor][onnx]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-cnn.mls");
  CanvasScene* scene = fx.window->scene();
  int layers = 0;
  for (const nodes::NodeDoc& n : fx.window->model()->doc().nodes) {
    const std::string& id = n.id;
    NodeItem* item = scene->nodeItem(id);
    REQUIRE(item);
    INFO("node " << id);
    if (item->def()->role == nodes::NodeRole::Layer) {
      ++layers;
      CHECK(item->exportProblem() == std::optional<std::string>(""));
      CHECK(item->toolTip().contains("ONNX: exports"));
    } else {
      CHECK_FALSE(item->exportProblem().has_value());  // input, labels, loss: no badge
    }
  }
  CHECK(layers >= 8);

  // An exact GELU cannot be exported: its badge says so at once, and why.
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_add_node(m->doc(), "g", "mls.gelu", nlohmann::json::object(),
                                       nodes::LayoutPos{0, -400}))
              .ok());
  NodeItem* g = scene->nodeItem("g");
  REQUIRE(g);
  REQUIRE(g->exportProblem().has_value());
  CHECK(g->exportProblem()->find("Erf") != std::string::npos);
  CHECK(g->toolTip().contains("ONNX: does not export"));

  // The badge is drawn red in the node's header.
  fx.window->view()->setTransform(QTransform());  // at 100 % (an opened graph is fitted)
  fx.window->view()->centerOn(g);
  QTest::qWait(50);
  const QImage shot = fx.window->view()->viewport()->grab().toImage();
  const QPointF badge_centre = g->mapToScene(g->badgeRect().center());
  const QPoint at = fx.window->view()->mapFromScene(badge_centre);
  REQUIRE(shot.rect().contains(at));
  int red = 0;
  for (int dx = -12; dx <= 12; ++dx) {
    const QColor c = shot.pixelColor(at + QPoint(dx, -4));
    if (c.red() > 180 && c.green() < 100 && c.blue() < 100) ++red;
  }
  CHECK(red >= 3);

  // The tanh approximation exports: the badge follows the edit, and undo brings it back.
  REQUIRE(m->push(nodes::make_set_params(m->doc(), "g", {{"approximate", "tanh"}})).ok());
  CHECK(scene->nodeItem("g")->exportProblem() == std::optional<std::string>(""));
  m->undoStack()->undo();
  CHECK_FALSE(scene->nodeItem("g")->exportProblem()->empty());
}

TEST_CASE("Export to ONNX checks the file on a worker, and opening the .onnx imports it back",
          "[editor][onnx]") {
  EditorFixture fx;
  small_mlp(fx);
  QSignalSpy trained(fx.window->trainer(), &TrainController::finished);
  REQUIRE(fx.window->train());
  REQUIRE(trained.wait(120'000));
  const int64_t run = fx.window->lastRunId();
  REQUIRE(run > 0);
  // The dialog offers this project's recorded run first, then the initial weights.
  const auto choices = export_run_choices(fx.dir.file("runs.db"), fx.dir.file("mlp.mls"));
  REQUIRE(choices.size() == 1);
  CHECK(choices[0].id == run);
  CHECK(choices[0].label.startsWith(QString("run %1 · finished").arg(run)));
  CHECK(export_run_choices(fx.dir.file("runs.db"), fx.dir.file("other.mls")).empty());

  QSignalSpy exported(fx.window.get(), &MainWindow::exportFinished);
  const QString out = QString::fromStdString(fx.dir.file("mlp.onnx"));
  REQUIRE(fx.window->exportOnnx({.out = out, .run_id = run}));
  CHECK(fx.window->exporting());
  CHECK_FALSE(fx.window->exportOnnx({.out = out, .run_id = run}));  // one at a time
  REQUIRE(exported.wait(120'000));
  // The refusal above came first, then the export's own result.
  while (exported.count() < 2) REQUIRE(exported.wait(120'000));
  CHECK_FALSE(exported.at(0).at(0).toBool());
  INFO(exported.at(1).at(1).toString().toStdString());
  REQUIRE(exported.at(1).at(0).toBool());
  CHECK(exported.at(1).at(1).toString().contains("checked on 256 test samples"));
  CHECK_FALSE(fx.window->exporting());
  REQUIRE(QFile::exists(out));
  CHECK(fx.window->runLog()->toPlainText().contains("fc3: max |onnx − mlstudio|"));

  // File > Open of the model: a project beside it, opened on the canvas with its weights.
  const std::string before = fx.window->model()->text();
  REQUIRE(fx.window->importOnnx(out, QString::fromStdString(fx.dir.file("imported.mls"))).ok());
  // The data is read on a worker (the reset cleared the old context); when it is in, the
  // import's message stays (not "ready").
  fx.wait_for_data();
  CHECK(fx.window->statusText().startsWith("imported mlp.onnx as imported.mls"));  // not "ready"
  const nodes::Document& doc = fx.window->model()->doc();
  CHECK(fx.window->model()->path() == fx.dir.file("imported.mls"));
  CHECK(doc.weights == "imported.weights");
  CHECK(QFile::exists(QString::fromStdString(fx.dir.file("imported.weights"))));
  int linear = 0;
  for (const nodes::NodeDoc& n : doc.nodes) linear += n.type == "mls.linear";
  CHECK(linear == 3);
  for (const nodes::NodeDoc& n : doc.nodes)
    if (auto p = fx.window->scene()->nodeItem(n.id)->exportProblem()) CHECK(p->empty());
  // openFile of a .onnx (File > Open) imports beside it; an existing project is not replaced.
  const auto again = fx.window->openFile(out);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("mlp.mls exists") != std::string::npos);
  CHECK(fx.window->model()->path() == fx.dir.file("imported.mls"));  // still open, untouched
  CHECK(fx.window->model()->text() != before);
}

TEST_CASE("an export that cannot be made names the node and writes nothing", "[editor][onnx]") {
  EditorFixture fx;
  small_mlp(fx);
  insert_exact_gelu(fx.window->model());
  REQUIRE(fx.window->saveTo(QString::fromStdString(fx.dir.file("mlp.mls"))).ok());
  QSignalSpy exported(fx.window.get(), &MainWindow::exportFinished);
  const QString out = QString::fromStdString(fx.dir.file("gelu.onnx"));
  REQUIRE(fx.window->exportOnnx({.out = out}));
  REQUIRE(exported.wait(120'000));
  CHECK_FALSE(exported.at(0).at(0).toBool());
  const QString msg = exported.at(0).at(1).toString();
  CHECK(msg.contains("node 'g' (mls.gelu)"));
  CHECK(msg.contains("Erf"));
  CHECK_FALSE(QFile::exists(out));
  CHECK(fx.window->runLog()->toPlainText().contains("export failed"));
  CHECK(fx.window->statusText().contains("export failed"));
}
