// The teaching views: the forward, the backward autodiff appended and the optimised step,
// drawn from the very step the trainer compiles.
#include <QDir>
#include <QGraphicsItem>
#include <set>

#include "engine/cpu/cpu_backend.h"
#include "engine/train/trainer.h"
#include "nodes/lower.h"
#include "runner/project.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;
using mls::test::EditorFixture;

namespace {

// Screenshots for docs/ and for a person to look at: MLS_SCREENSHOT_DIR=... editor_tests.
void maybe_grab(QWidget* w, const char* name) {
  if (const char* dir = std::getenv("MLS_SCREENSHOT_DIR")) {
    QTest::qWait(100);  // pending layouts (a combo box growing to its text) settle first
    w->grab().save(QDir(dir).filePath(name));
  }
}

}  // namespace

TEST_CASE("the step view draws the forward, the backward and the optimised step the trainer runs",
          "[editor][teaching]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  const std::string path =
      std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls";
  StepView* v = fx.window->stepView();

  // Forward: exactly the nodes the lowering emits.
  fx.window->showStepTab(StepView::kForward);
  REQUIRE(v->step().has_value());
  runner::ProjectOptions po;
  po.path = path;
  po.load_data = false;
  auto project = runner::open_project(po);
  REQUIRE(project.ok());
  const int64_t batch = project->doc.training.batch_size;
  auto model = project->builder()(batch, true);
  REQUIRE(model.ok());
  CHECK(v->drawnNodes() == static_cast<int>(model->graph.nodes().size()));
  maybe_grab(fx.window.get(), "step-forward.png");

  // Forward + backward: autodiff's nodes drawn too, relu's gradient among them.
  fx.window->showStepTab(StepView::kBackward);
  const Graph& autodiff = v->step()->stages.front().graph;
  CHECK(v->drawnNodes() == static_cast<int>(autodiff.nodes().size()));
  CHECK(v->drawnNodes() > 2 * static_cast<int>(model->graph.nodes().size()));
  std::set<std::string> ops;
  for (const Node& n : autodiff.nodes())
    if (n.backward) ops.insert(n.op->name);
  CHECK(ops.count("relu_backward") == 1);
  CHECK(v->summary().contains("backward that autodiff appended"));
  maybe_grab(fx.window.get(), "step-backward.png");

  // Optimised: the graph the trainer's plan compiles, node for node.
  fx.window->showStepTab(-1);
  CHECK(v->stage() == v->stageCount() - 1);
  CHECK(v->stageCount() >= 4);  // forward, autodiff, and the passes
  Trainer t(cpu::backend(), project->builder(), project->train_config());
  auto plan = t.training_plan(batch);
  REQUIRE(plan.ok());
  const PlanStats& st = (*plan)->stats();
  CHECK(v->drawnNodes() == static_cast<int>(st.scheduled_nodes + st.skipped_views));
  CHECK(v->drawnNodes() < static_cast<int>(autodiff.nodes().size()));
  bool fused = false;
  for (const Node& n : v->step()->graph().nodes()) fused |= n.op->name == "linear_act";
  CHECK(fused);
  CHECK(v->summary().contains("fused kernels"));
  maybe_grab(fx.window.get(), "step-optimised.png");

  // An edit rebuilds it: fc1 widened to 300 shows in the drawn types.
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_set_params(m->doc(), "fc1", {{"out_features", 300}})).ok());
  v->rebuild();
  bool widened = false;
  for (QGraphicsItem* it : v->graphScene()->items())
    widened |= it->toolTip().contains(QString("f32[%1,300]").arg(batch));
  CHECK(widened);

  // Clicking an IR node selects the document node it came from.
  for (QGraphicsItem* it : v->graphScene()->items())
    if (it->toolTip().startsWith("linear_act") && it->toolTip().contains("(fc2)")) {
      it->setSelected(true);
      break;
    }
  CHECK(fx.window->scene()->selectedNodeIds() == std::vector<std::string>{"fc2"});
}

TEST_CASE("the step view says why it cannot draw an unfinished graph", "[editor][teaching]") {
  EditorFixture fx;
  fx.open_example("fashion-mnist-mlp.mls");
  DocumentModel* m = fx.window->model();
  REQUIRE(m->push(nodes::make_disconnect(m->doc(), "relu1:out", "fc2:in")).ok());
  fx.window->showStepTab(StepView::kBackward);
  CHECK_FALSE(fx.window->stepView()->step().has_value());
  CHECK(fx.window->stepView()->message().contains("cannot be built yet"));
  CHECK(fx.window->stepView()->message().contains("fc2"));
}

TEST_CASE("layout_ir puts every node below the nodes and sources it reads", "[editor][teaching]") {
  test::qt_app();
  auto doc = nodes::load_document(std::string(MLS_SOURCE_DIR) +
                                  "/resources/examples/fashion-mnist-cnn.mls");
  REQUIRE(doc.ok());
  auto m = nodes::lower(*doc, nodes::InferContext{{1, 28, 28}, 10, {}}, 8, true, "cnn.mls");
  REQUIRE(m.ok());
  auto s = build_step(std::move(*m), cpu::backend(), {});
  REQUIRE(s.ok());
  const Graph& g = s->graph();
  IrLayout lay = layout_ir(g, false);
  int edges = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    REQUIRE(lay.drawn[i]);
    for (Ref in : g.nodes()[i].inputs) {
      const Value& v = g.value(in);
      if (v.kind == ValueKind::Node) {
        CHECK(lay.node_pos[static_cast<size_t>(v.node)].y() < lay.node_pos[i].y());
        ++edges;
      } else if (v.kind != ValueKind::Const) {
        REQUIRE(lay.value_pos[static_cast<size_t>(in.id)].has_value());
        CHECK(lay.value_pos[static_cast<size_t>(in.id)]->y() < lay.node_pos[i].y());
      }
    }
  }
  CHECK(edges > 20);
  // No two boxes of one row overlap.
  std::map<double, std::vector<double>> rows;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    rows[lay.node_pos[i].y()].push_back(lay.node_pos[i].x());
  for (auto& [y, xs] : rows) {
    std::sort(xs.begin(), xs.end());
    for (size_t k = 1; k < xs.size(); ++k) CHECK(xs[k] - xs[k - 1] >= 176);
  }
}
