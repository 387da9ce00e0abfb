// The editor as a person uses it: palette drops, wires drawn with the mouse, refusals,
// undo/redo, save and open, the Lua console on the open project.
#include <QDropEvent>
#include <QFile>
#include <QMimeData>
#include <QTimer>
#include <QToolButton>
#include <cmath>
#include <fstream>
#include <sstream>

#include "store/run_store.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;
using mls::test::read_file;

namespace {


// Presses on one port, moves, and releases on another, as a mouse does.
void drag_wire(EditorFixture& fx, const PortRef& from, const PortRef& to) {
  CanvasScene* scene = fx.window->scene();
  const QPointF a = scene->nodeItem(from.node)->portScenePos(from.output, from.port);
  const QPointF b = scene->nodeItem(to.node)->portScenePos(to.output, to.port);
  fx.window->view()->centerOn((a + b) / 2);
  QWidget* vp = fx.window->view()->viewport();
  QTest::mousePress(vp, Qt::LeftButton, {}, fx.view_point(a));
  QTest::mouseMove(vp, fx.view_point((a + b) / 2));
  QTest::mouseMove(vp, fx.view_point(b));
  QTest::mouseRelease(vp, Qt::LeftButton, {}, fx.view_point(b));
}

bool has_link(const nodes::Document& d, const std::string& from, const std::string& to) {
  for (const auto& l : d.links)
    if (l.from_node + ":" + l.from_port == from && l.to_node + ":" + l.to_port == to) return true;
  return false;
}

}  // namespace

TEST_CASE("dropping a palette entry on the canvas creates the node there", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  const size_t before = fx.window->model()->doc().nodes.size();
  // Searching the palette finds the type, and its drag carries the type id.
  fx.window->palette()->search()->setText("relu");
  CHECK(fx.window->palette()->visibleTypes().contains("mls.relu"));
  CHECK_FALSE(fx.window->palette()->visibleTypes().contains("mls.linear"));
  QWidget* vp = fx.window->view()->viewport();
  const QPoint at(300, 420);
  std::unique_ptr<QMimeData> mime(fx.window->palette()->mimeFor("mls.relu"));
  QDragEnterEvent enter(at, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(vp, &enter);
  CHECK(enter.isAccepted());
  QDropEvent drop(at, Qt::CopyAction, mime.get(), Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(vp, &drop);
  const nodes::Document& d = fx.window->model()->doc();
  REQUIRE(d.nodes.size() == before + 1);
  CHECK(d.nodes.back().id == "relu3");  // relu1 and relu2 are taken
  CHECK(d.nodes.back().type == "mls.relu");
  // Placed under the cursor (the node's centre there, snapped to the grid).
  const QPointF scene_at = fx.window->view()->mapToScene(at);
  const auto& pos = d.layout[d.nodes.back().id];
  CHECK(std::abs(pos["x"].get<double>() + NodeItem::kWidth / 2 - scene_at.x()) <=
        CanvasScene::kGrid);
  CHECK(std::abs(pos["y"].get<double>() + NodeItem::kHeader / 2 - scene_at.y()) <=
        CanvasScene::kGrid);
  CHECK(fx.window->scene()->nodeItem(d.nodes.back().id) != nullptr);
  // A required parameter gets a starting value, so the node is valid at once.
  REQUIRE(fx.window->view()->dropNodeType("mls.linear", QPointF(0, 600)).ok());
  CHECK(fx.window->model()->doc().nodes.back().params["out_features"] == 64);
}

TEST_CASE("a wire drawn from an output to an input links them and shows the shape on the wire",
          "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "fc1:out", "relu1:in")).ok());
  CHECK(m->analysis().nodes.at("relu1").waiting == "input 'in' is not linked");
  drag_wire(fx, {"fc1", "out", true}, {"relu1", "in", false});
  CHECK(has_link(m->doc(), "fc1:out", "relu1:in"));
  CHECK(m->analysis().complete());
  bool labelled = false;
  for (WireItem* w : fx.window->scene()->wires())
    if (w->link().from_node == "fc1" && w->link().to_node == "relu1")
      labelled = w->label() == "[N,256]";
  CHECK(labelled);
  // Every wire carries the shape that flows along it.
  for (WireItem* w : fx.window->scene()->wires()) CHECK_FALSE(w->label().isEmpty());
  // Drawn backwards, from the input to the output, works too.
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "relu2:out", "fc3:in")).ok());
  drag_wire(fx, {"fc3", "in", false}, {"relu2", "out", true});
  CHECK(has_link(m->doc(), "relu2:out", "fc3:in"));
}

TEST_CASE("an invalid wire is refused with the reason and the document is unchanged", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  const std::string before = m->text();
  // fc1's input is already fed by flat.
  drag_wire(fx, {"relu2", "out", true}, {"fc1", "in", false});
  CHECK(m->text() == before);
  CHECK(fx.window->statusText().contains("already linked"));
  // A cycle: fc3 back into fc2 (after freeing fc2's input).
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "relu1:out", "fc2:in")).ok());
  const std::string freed = m->text();
  drag_wire(fx, {"fc3", "out", true}, {"fc2", "in", false});
  CHECK(m->text() == freed);
  CHECK(fx.window->statusText().contains("cycle"));
  // Labels into a tensor input: different kinds.
  drag_wire(fx, {"label", "out", true}, {"fc2", "in", false});
  CHECK(m->text() == freed);
  // Output to output.
  drag_wire(fx, {"fc1", "out", true}, {"fc2", "out", true});
  CHECK(m->text() == freed);
  CHECK(fx.window->statusText().contains("from an output to an input"));
}

TEST_CASE("a shape error is drawn on the node that caused it", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  m->beginMacro("skip flatten");
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "flat:out", "fc1:in")).ok());
  REQUIRE(m->push(nodes::make_connect(m->doc(), "image:out", "fc1:in")).ok());
  m->endMacro();
  CHECK_THAT(m->analysis().nodes.at("fc1").error, Catch::Contains("[N,1,28,28]"));
  CHECK(fx.window->scene()->nodeItem("fc1")->toolTip().contains("Error"));
  CHECK(m->analysis().nodes.at("relu1").waiting == "waits for 'fc1'");
  // Train refuses, naming the node, and selects it.
  CHECK_FALSE(fx.window->train());
  CHECK(fx.window->statusText().contains("fc1"));
  CHECK(fx.window->scene()->selectedNodeIds() == std::vector<std::string>{"fc1"});
}

TEST_CASE("undo and redo restore the document exactly", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-cnn.mls");
  DocumentModel* m = fx.window->model();
  const std::string original = m->text();
  CanvasScene* scene = fx.window->scene();
  REQUIRE(scene->addNode("mls.dropout", QPointF(100, 500)).ok());
  REQUIRE(m->push(nodes::make_set_params(m->doc(), "dropout1", {{"p", 0.3}})).ok());
  REQUIRE(m->push(nodes::make_rename_node(m->doc(), "dropout1", "drop")).ok());
  REQUIRE(m->push(nodes::make_set_training(m->doc(), {{"epochs", 3}})).ok());
  scene->autoLayout();
  scene->selectNode(m->doc().nodes[1].id);
  scene->deleteSelection();
  const std::string edited = m->text();
  CHECK(edited != original);
  CHECK(m->isModified());
  while (m->undoStack()->canUndo()) m->undoStack()->undo();
  CHECK(m->text() == original);
  CHECK_FALSE(m->isModified());
  while (m->undoStack()->canRedo()) m->undoStack()->redo();
  CHECK(m->text() == edited);
  // The canvas mirrors the document after each step.
  CHECK(scene->nodeItem("drop") != nullptr);
  CHECK(scene->nodeItem(std::string(m->doc().nodes[0].id)) != nullptr);
  CHECK(scene->wires().size() == m->doc().links.size());
}

TEST_CASE("copy and paste duplicates nodes with their inner links under fresh ids", "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  CanvasScene* scene = fx.window->scene();
  scene->clearSelection();
  scene->nodeItem("fc2")->setSelected(true);
  scene->nodeItem("relu2")->setSelected(true);
  scene->copySelection();
  const size_t nodes = m->doc().nodes.size(), links = m->doc().links.size();
  scene->paste();
  CHECK(m->doc().nodes.size() == nodes + 2);
  CHECK(m->doc().links.size() == links + 1);
  CHECK(has_link(m->doc(), "linear1:out", "relu3:in"));
  CHECK(m->doc().nodes[nodes].params == m->doc().nodes[*nodes::find_node(m->doc(), "fc2")].params);
  // One undo step takes the whole paste back.
  m->undoStack()->undo();
  CHECK(m->doc().nodes.size() == nodes);
}

TEST_CASE("save then open round-trips the document byte for byte", "[editor]") {
  EditorFixture fx;
  for (const char* name :
       {"fashion-mnist-mlp.mls", "fashion-mnist-resnet.mls", "two-spirals-mlp.mls"}) {
    INFO(name);
    fx.open_example(name);
    const auto original =
        nodes::load_document(std::string(MLS_SOURCE_DIR "/resources/examples/") + name);
    REQUIRE(original.ok());
    // The examples are formatted by hand; a save writes the canonical form of the same document.
    const std::string out = fx.dir.file(std::string("copy-") + name);
    REQUIRE(fx.window->saveTo(QString::fromStdString(out)).ok());
    const std::string saved = read_file(out);
    CHECK(saved == fx.window->model()->text());
    CHECK_FALSE(fx.window->model()->isModified());
    REQUIRE(fx.window->openFile(QString::fromStdString(out)).ok());
    CHECK(fx.window->model()->doc() == *original);
    // Open -> save again: byte for byte the file that was opened.
    const std::string again = fx.dir.file(std::string("again-") + name);
    REQUIRE(fx.window->saveTo(QString::fromStdString(again)).ok());
    CHECK(read_file(again) == saved);
  }
  // A broken file is not opened: the message names the file and the line, the open document stays.
  const std::string bad = fx.dir.file("broken.mls");
  std::ofstream(bad) << "{\n  \"format_version\": 1,\n  \"model\": {\"nodes\": [}\n}\n";
  const std::string before = fx.window->model()->text();
  auto r = fx.window->openFile(QString::fromStdString(bad));
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("broken.mls:3"));
  CHECK(fx.window->statusText().contains("broken.mls"));
  CHECK(fx.window->model()->text() == before);
  // A draft (an unlinked input) opens, with the problem shown.
  auto draft =
      nodes::load_document(std::string(MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls"));
  REQUIRE(draft.ok());
  nodes::OwnedHistory h(*draft);
  REQUIRE(h.push(nodes::make_disconnect(h.doc(), "fc3:out", "loss:logits")).ok());
  REQUIRE(nodes::save_document(h.doc(), fx.dir.file("draft.mls")).ok());
  REQUIRE(fx.window->openFile(QString::fromStdString(fx.dir.file("draft.mls"))).ok());
  CHECK(fx.window->statusText().contains("draft"));

  // A file from a newer mlstudio with a node type this one lacks opens in part: the rest is
  // on the canvas, what was left out is listed, and the original cannot be overwritten by Save.
  std::string text = read_file(MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls");
  text.replace(text.find("\"format_version\": 1"), 19, "\"format_version\": 7");
  text.replace(text.find("\"mls.relu\""), 10, "\"mls.quantum_relu\"");
  const std::string future = fx.dir.file("future.mls");
  std::ofstream(future) << text;
  REQUIRE(fx.window->openFile(QString::fromStdString(future)).ok());
  DocumentModel* m = fx.window->model();
  CHECK(m->path().empty());
  CHECK(m->isModified());
  CHECK(m->salvagedFrom() == future);
  CHECK(m->salvaged().size() >= 3);  // the version, the node, its two links
  CHECK(fx.window->scene()->nodeItem("relu1") == nullptr);
  CHECK(fx.window->scene()->nodeItem("fc1") != nullptr);
  CHECK(fx.window->scene()->nodeItem("relu2") != nullptr);
  CHECK(fx.window->statusText().contains("in part"));
  CHECK(fx.window->runLog()->toPlainText().contains("unknown node type 'mls.quantum_relu'"));
  CHECK(read_file(future) == text);  // untouched
}

TEST_CASE("the Lua console edits the open project through the editor's undo stack",
          "[editor][lua]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  ConsoleWidget* c = fx.window->console();
  DocumentModel* m = fx.window->model();
  const std::string before = m->text();
  c->submit("p = mls.project.current()");
  c->submit("p:add_node('extra', 'mls.dropout', {p = 0.5})");
  CHECK(fx.window->scene()->nodeItem("extra") != nullptr);
  CHECK(m->undoStack()->count() == 1);
  CHECK(c->submit("#p:nodes()") == "10");
  CHECK(c->submit("print('hello', 1 + 1)") == "hello\t2");
  // An error names the line and is shown in the console; the document is unchanged.
  const QString err = c->submit("p:connect('extra:out', 'fc1:in')");
  CHECK(err.contains("already linked"));
  CHECK(err.contains("stdin:1"));
  // A multi-line entry waits for its end.
  CHECK(c->submit("for i = 1, 3 do").isEmpty());
  CHECK(c->submit("  x = (x or 0) + i").isEmpty());
  c->submit("end");
  CHECK(c->submit("x") == "6");
  CHECK(c->history().size() >= 6);
  // Undo in the editor takes the script's edit back.
  m->undoStack()->undo();
  CHECK(m->text() == before);
  CHECK(fx.window->scene()->nodeItem("extra") == nullptr);
}

TEST_CASE("a long Lua entry runs off the GUI thread: the window keeps serving, and Stop ends it",
          "[editor][lua]") {
  EditorFixture fx;
  ConsoleWidget* c = fx.window->console();
  auto* stop = c->findChild<QToolButton*>("console.stop");
  REQUIRE(stop);
  CHECK_FALSE(stop->isEnabled());
  REQUIRE(c->run("n = 0; while true do n = n + 1 end"));
  CHECK(c->busy());
  CHECK(stop->isEnabled());
  // The event loop serves timers while the loop spins on the worker.
  int ticks = 0;
  QTimer timer;
  QObject::connect(&timer, &QTimer::timeout, [&] { ++ticks; });
  timer.start(10);
  QTest::qWait(300);
  CHECK(ticks >= 10);
  CHECK(c->busy());
  // A second entry waits its turn: refused with a message, nothing lost.
  CHECK_FALSE(c->run("1 + 1"));
  QSignalSpy done(c, &ConsoleWidget::entryFinished);
  QTest::mouseClick(stop, Qt::LeftButton);
  REQUIRE(done.wait(5000));
  CHECK_FALSE(c->busy());
  CHECK(done.at(0).at(0).toString().contains("interrupted (stopped by the user)"));
  // The interpreter is fine afterwards: the loop's global is there and counts on.
  CHECK(c->submit("n > 0").contains("true"));
  CHECK(c->submit("1 + 1") == "2");
}

TEST_CASE("mls.train from the console reports its epochs there, lands in the editor's run store "
          "and can be stopped",
          "[editor][lua]") {
  EditorFixture fx;
  ConsoleWidget* c = fx.window->console();
  QSignalSpy done(c, &ConsoleWidget::entryFinished);
  REQUIRE(c->run(
      "data = mls.data.open{source = 'synthetic', synthetic = {kind = 'spirals', samples = 512}}; "
      "net = mls.nn.Sequential(mls.nn.Linear(2, 16), mls.nn.Tanh(), mls.nn.Linear(16, 2)); "
      "r = mls.train{model = net, data = data, epochs = 100000, batch_size = 64}"));
  // Wait for a few epochs to show up in the output, then stop.
  for (int i = 0; i < 500 && !c->output()->toPlainText().contains("epoch 3/100000"); ++i)
    QTest::qWait(20);
  REQUIRE(c->output()->toPlainText().contains("epoch 3/100000: train loss"));
  c->interrupt();
  REQUIRE(done.wait(10000));
  const QString shown = done.at(0).at(0).toString();
  CHECK(shown.contains("mlstudio: run 1:"));
  CHECK(shown.contains("interrupted after"));
  auto db = store::RunStore::open(fx.dir.file("runs.db"));
  REQUIRE(db);
  auto info = (*db)->get_run(1);
  REQUIRE(info);
  CHECK(info->status == "interrupted");
}

TEST_CASE("dragging a node moves it on the grid as one undo step, and its wires follow",
          "[editor]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  NodeItem* fc2 = fx.window->scene()->nodeItem("fc2");
  const QPointF grab = fc2->scenePos() + QPointF(60, 10);  // the header, away from the ports
  fx.window->view()->centerOn(grab);
  QWidget* vp = fx.window->view()->viewport();
  const QPoint a = fx.view_point(grab), b = fx.view_point(grab + QPointF(47, 93));
  QTest::mousePress(vp, Qt::LeftButton, {}, a);
  QTest::mouseMove(vp, (a + b) / 2);
  QTest::mouseMove(vp, b);
  // While the button is down the wire into fc2 already ends at its moved port.
  WireItem* in = nullptr;
  for (WireItem* w : fx.window->scene()->wires())
    if (w->link().to_node == "fc2") in = w;
  REQUIRE(in != nullptr);
  CHECK(in->shape().contains(fc2->portScenePos(false, "in") - QPointF(1, 0)));
  QTest::mouseRelease(vp, Qt::LeftButton, {}, b);
  const auto& pos = m->doc().layout["fc2"];
  CHECK(pos["x"].get<double>() == 760 + 40);  // 47 snapped to the 20 px grid
  CHECK(pos["y"].get<double>() == 80 + 100);  // 93 snapped
  CHECK(m->undoStack()->count() == 1);
  m->undoStack()->undo();
  CHECK(m->doc().layout["fc2"]["x"].get<double>() == 760);
}

TEST_CASE("comment frames group nodes, move with the mouse, save, and undo exactly",
          "[editor][frames]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  CanvasScene* scene = fx.window->scene();
  scene->selectNode("fc1");
  scene->nodeItem("relu1")->setSelected(true);
  scene->addFrame("Hidden layer 1", {});
  REQUIRE(scene->frameItems().size() == 1);
  auto frames = nodes::comment_frames(m->doc());
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].title == "Hidden layer 1");
  const QRectF box(frames[0].x, frames[0].y, frames[0].w, frames[0].h);
  CHECK(box.contains(scene->nodeItem("fc1")->sceneBoundingRect()));
  CHECK(box.contains(scene->nodeItem("relu1")->sceneBoundingRect()));
  CHECK_FALSE(box.contains(scene->nodeItem("fc2")->sceneBoundingRect()));

  // Dragged by its body with the mouse: one edit, snapped to the grid, and the nodes inside
  // come along.
  const QPointF fc1_before = scene->nodeItem("fc1")->pos(), fc2_before = scene->nodeItem("fc2")->pos();
  const std::string before_drag = m->text();
  const int undo_count = m->undoStack()->count();
  FrameItem* f = scene->frameItems()[0];
  const QPointF grab =
      f->scenePos() + QPointF(f->frameRect().width() / 2, f->frameRect().height() - 30);
  QTest::mousePress(fx.window->view()->viewport(), Qt::LeftButton, {}, fx.view_point(grab));
  QTest::mouseMove(fx.window->view()->viewport(), fx.view_point(grab + QPointF(30, 45)));
  QTest::mouseMove(fx.window->view()->viewport(), fx.view_point(grab + QPointF(60, 90)));
  QTest::mouseRelease(fx.window->view()->viewport(), Qt::LeftButton, {},
                      fx.view_point(grab + QPointF(60, 90)));
  QTest::qWait(20);  // the commit is queued
  auto moved = nodes::comment_frames(m->doc());
  REQUIRE(moved.size() == 1);
  CHECK(moved[0].x > frames[0].x + 20);  // moved right and down, on the 20 px grid
  CHECK(moved[0].y > frames[0].y + 40);
  CHECK(std::fmod(moved[0].x, 20.0) == 0);
  CHECK(std::fmod(moved[0].y, 20.0) == 0);
  CHECK(moved[0].w == frames[0].w);  // a move keeps the size
  const QPointF frame_delta(moved[0].x - frames[0].x, moved[0].y - frames[0].y);
  CHECK(scene->nodeItem("fc1")->pos() == fc1_before + frame_delta);
  CHECK(m->doc().layout["fc1"]["x"].get<double>() == fc1_before.x() + frame_delta.x());
  CHECK(m->doc().layout["fc1"]["y"].get<double>() == fc1_before.y() + frame_delta.y());
  CHECK(scene->nodeItem("fc2")->pos() == fc2_before);  // outside: stays
  CHECK(m->undoStack()->count() == undo_count + 1);    // frame and nodes: one step
  m->undoStack()->undo();
  CHECK(m->text() == before_drag);
  m->undoStack()->redo();

  // Renamed, saved and opened again: the same frame, byte for byte.
  REQUIRE(scene->renameFrame(0, "Encoder").ok());
  if (const char* dir = std::getenv("MLS_SCREENSHOT_DIR")) fx.window->grab().save(QString(dir) + "/frame.png");
  const std::string path = fx.dir.file("framed.mls");
  REQUIRE(fx.window->saveTo(QString::fromStdString(path)).ok());
  const std::string saved = m->text();
  REQUIRE(fx.window->openFile(QString::fromStdString(path)).ok());
  CHECK(m->text() == saved);
  REQUIRE(scene->frameItems().size() == 1);
  CHECK(scene->frameItems()[0]->title() == "Encoder");
  // The loader and the training path ignore it: the project still trains headless.
  CHECK(nodes::load_document(path).ok());

  // Deleted with the selection, then undone: back exactly.
  scene->clearSelection();
  scene->frameItems()[0]->setSelected(true);
  scene->deleteSelection();
  CHECK(scene->frameItems().empty());
  m->undoStack()->undo();
  CHECK(m->text() == saved);
  // A frame without a size is refused.
  CHECK_FALSE(nodes::make_set_frames(m->doc(), {{"x", 0, 0, 0, 10}}, "Add comment frame").ok());
}

TEST_CASE("a click on the empty canvas records nothing, a drag places every node for good",
          "[editor][canvas]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-cnn.mls");  // no layout saved: laid out automatically
  DocumentModel* m = fx.window->model();
  CanvasView* view = fx.window->view();
  const QRectF items = fx.window->scene()->itemsBoundingRect();
  const QPoint empty = fx.view_point(items.bottomRight() + QPointF(60, 60));
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, empty);
  QApplication::processEvents();
  CHECK(m->undoStack()->count() == 0);
  CHECK(m->undoStack()->isClean());
  // A node dragged: it moves, and the others keep the places they are drawn at (one step).
  NodeItem* fc1 = fx.window->scene()->nodeItem("conv1");
  REQUIRE(fc1);
  const QPointF before = fc1->pos();
  const QPoint at = fx.view_point(fc1->sceneBoundingRect().center());
  QTest::mousePress(view->viewport(), Qt::LeftButton, {}, at);
  QTest::mouseMove(view->viewport(), at + QPoint(40, 20));
  QTest::mouseMove(view->viewport(), at + QPoint(80, 40));
  QTest::mouseRelease(view->viewport(), Qt::LeftButton, {}, at + QPoint(80, 40));
  QApplication::processEvents();
  CHECK(fc1->pos() != before);
  CHECK(m->undoStack()->count() == 1);
  CHECK(m->doc().layout.size() == m->doc().nodes.size());
}
