// What a newcomer sees on the canvas, as geometry: an opened example fits the view, no wire runs
// behind a node it does not connect (a skip connection goes around the block it skips), and the
// shapes written on the nodes are not clipped. MLS_SHOT_DIR=DIR saves each example's window
// there as a PNG, to look at.
#include <QDir>
#include <QFontMetricsF>
#include <QPainterPathStroker>

#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

const char* const kExamples[] = {"fashion-mnist-mlp.mls",  "fashion-mnist-resnet.mls",
                                 "fashion-mnist-cnn.mls",  "fashion-mnist-lenet.mls",
                                 "two-blobs-logistic.mls", "two-spirals-mlp.mls",
                                 "house-prices-csv.mls"};

QRectF visible_scene_rect(CanvasView* view) {
  return view->mapToScene(view->viewport()->rect()).boundingRect();
}

// The nodes a wire crosses, other than the two it connects.
std::vector<std::string> nodes_crossed(CanvasScene* scene, const nodes::Document& doc,
                                       const WireItem* w) {
  QPainterPathStroker s;
  s.setWidth(2);
  const QPainterPath stroke = s.createStroke(w->path());
  std::vector<std::string> crossed;
  for (const auto& n : doc.nodes) {
    if (n.id == w->link().from_node || n.id == w->link().to_node) continue;
    if (NodeItem* item = scene->nodeItem(n.id); item && stroke.intersects(item->bodySceneRect()))
      crossed.push_back(n.id);
  }
  return crossed;
}

void save_shot(EditorFixture& fx, const std::string& name) {
  const char* dir = std::getenv("MLS_SHOT_DIR");
  if (!dir) return;
  QDir().mkpath(dir);
  fx.window->grab().save(QString(dir) + "/" + QString::fromStdString(name) + ".png");
}

}  // namespace

TEST_CASE("an opened example fits the view, whole", "[editor][canvas_layout]") {
  EditorFixture fx;
  for (const char* name : kExamples) {
    INFO(name);
    fx.open_example(name);
    QTest::qWait(20);
    save_shot(fx, name);
    const QRectF shown = visible_scene_rect(fx.window->view());
    for (const auto& n : fx.window->model()->doc().nodes) {
      INFO(n.id);
      NodeItem* item = fx.window->scene()->nodeItem(n.id);
      REQUIRE(item);
      CHECK(shown.contains(item->sceneBoundingRect()));
    }
  }
}

TEST_CASE("Fit zooms out as far as a large graph needs", "[editor][canvas_layout]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  // Spread the nodes far apart: Fit must still show all of them.
  DocumentModel* m = fx.window->model();
  double x = 0;
  for (const auto& n : std::vector<nodes::NodeDoc>(m->doc().nodes)) {
    REQUIRE(m->push(nodes::make_move_node(m->doc(), n.id, {x, x / 3})).ok());
    x += 900;
  }
  fx.window->view()->fitAll();
  const QRectF shown = visible_scene_rect(fx.window->view());
  for (const auto& n : m->doc().nodes) {
    INFO(n.id);
    CHECK(shown.contains(fx.window->scene()->nodeItem(n.id)->sceneBoundingRect()));
  }
  CHECK(fx.window->view()->transform().m11() < 0.3);
  // A small graph is not blown up past 100 %.
  fx.open_example("two-blobs-logistic.mls");
  CHECK(fx.window->view()->transform().m11() <= 1.0);
}

TEST_CASE("wires go around the nodes they do not connect", "[editor][canvas_layout]") {
  EditorFixture fx;
  for (const char* name : kExamples) {
    INFO(name);
    fx.open_example(name);
    const nodes::Document& doc = fx.window->model()->doc();
    REQUIRE(fx.window->scene()->wires().size() == doc.links.size());
    for (const WireItem* w : fx.window->scene()->wires()) {
      INFO(w->link().from_node << ":" << w->link().from_port << " -> " << w->link().to_node << ":"
                               << w->link().to_port);
      CHECK(nodes_crossed(fx.window->scene(), doc, w).empty());
    }
  }
}

TEST_CASE("the residual example's skip connection is drawn around the block it skips",
          "[editor][canvas_layout]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-resnet.mls");
  const nodes::Document& doc = fx.window->model()->doc();
  const WireItem* skip = nullptr;
  for (const WireItem* w : fx.window->scene()->wires())
    if (w->link().from_node == "pool1" && w->link().to_node == "skip") skip = w;
  REQUIRE(skip);
  CHECK(nodes_crossed(fx.window->scene(), doc, skip).empty());
  // Visible: it leaves the row of the block (above or below every node it passes).
  const QRectF block = fx.window->scene()
                           ->nodeItem("res_conv1")
                           ->bodySceneRect()
                           .united(fx.window->scene()->nodeItem("res_bn2")->bodySceneRect());
  const QPointF mid = skip->path().pointAtPercent(0.5);
  CHECK((mid.y() < block.top() || mid.y() > block.bottom()));
  // Moving a node into a wire's way re-routes the wire around it.
  REQUIRE(fx.window->model()
              ->push(nodes::make_move_node(doc, "label",
                                           {mid.x() - NodeItem::kWidth / 2, mid.y() - 20}))
              .ok());
  for (const WireItem* w : fx.window->scene()->wires()) {
    INFO(w->link().from_node << " -> " << w->link().to_node);
    CHECK(nodes_crossed(fx.window->scene(), doc, w).empty());
  }
}

TEST_CASE("a node's shape and parameter count fit the node", "[editor][canvas_layout]") {
  EditorFixture fx;
  for (const char* name : kExamples) {
    INFO(name);
    fx.open_example(name);
    for (const auto& n : fx.window->model()->doc().nodes) {
      NodeItem* item = fx.window->scene()->nodeItem(n.id);
      REQUIRE(item);
      const QString text = item->footerText();
      INFO(n.id << ": " << text.toStdString());
      CHECK_FALSE(text.isEmpty());
      const QFontMetricsF fm(NodeItem::footerFont());
      // Every line fits, and together they say all of the text.
      CHECK(item->footerLines().join("  ·  ") == text);
      for (const QString& line : item->footerLines())
        CHECK(fm.horizontalAdvance(line) <= item->footerRect().width());
      CHECK(item->footerRect().bottom() <= item->bodySceneRect().height());
      const QFontMetricsF tm(NodeItem::titleFont());
      CHECK(tm.horizontalAdvance(QString::fromStdString(n.id)) <= item->titleRect().width());
    }
  }
}

TEST_CASE("a wire's shape label is not hidden under a node, even between close nodes",
          "[editor][canvas_layout]") {
  EditorFixture fx;
  for (const char* name : kExamples) {
    INFO(name);
    fx.open_example(name);
    // Cramped: every node 10 px after the one before, in one row.
    DocumentModel* m = fx.window->model();
    double x = 0;
    m->beginMacro("cramp");
    for (const auto& n : std::vector<nodes::NodeDoc>(m->doc().nodes)) {
      REQUIRE(m->push(nodes::make_move_node(m->doc(), n.id, {x, 0})).ok());
      x += fx.window->scene()->nodeItem(n.id)->bodySceneRect().width() + 10;
    }
    m->endMacro();
    int labelled = 0;
    for (const WireItem* w : fx.window->scene()->wires()) {
      if (w->label().isEmpty()) continue;
      ++labelled;
      INFO(w->link().from_node << " -> " << w->link().to_node << ": " << w->label().toStdString());
      const QRectF r = w->labelRect();
      CHECK(r.width() >= QFontMetricsF(WireItem::labelFont()).horizontalAdvance(w->label()));
      for (const auto& n : m->doc().nodes) {
        INFO("under " << n.id);
        CHECK_FALSE(r.intersects(fx.window->scene()->nodeItem(n.id)->bodySceneRect()));
      }
    }
    CHECK(labelled > 0);
  }
}
