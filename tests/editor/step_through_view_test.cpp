// The step-through panel driven as a person drives it (a batch typed in, Step clicked): the
// statistics it shows for a wire equal the engine's values for that batch, computed apart
// (a compiled forward of the model cut at that node; the trainer's compiled training step for
// the gradients), and the canvas selects the node the step is at.
#include <QCheckBox>
#include <QComboBox>
#include <QDockWidget>
#include <QLabel>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QTableWidget>
#include <cmath>

#include "editor/canvas.h"
#include "editor/memory_view.h"
#include "editor/step_through_view.h"
#include "engine/core/backend_registry.h"
#include "engine/exec/compiled_plan.h"
#include "runner/step_through.h"
#include "tests/editor/editor_test_util.h"

using namespace mls;
using namespace mls::editor;

namespace {

const std::string kMlp = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls";

struct Shown {
  double mean = 0, std = 0, min = 0, max = 0;
};

// The figures as the pane's label shows them.
Shown read_stats(StepThroughView* v) {
  const QString text = v->findChild<QLabel*>("step.stats")->text();
  INFO(text.toStdString());
  QRegularExpression re("mean (\\S+) · std (\\S+)<br>min (\\S+) · max (\\S+) ·");
  auto m = re.match(text);
  REQUIRE(m.hasMatch());
  return {m.captured(1).toDouble(), m.captured(2).toDouble(), m.captured(3).toDouble(),
          m.captured(4).toDouble()};
}

// The figures of the engine's values, computed in double.
Shown stats_of(const std::vector<double>& x) {
  const runner::TensorStats s = runner::tensor_stats(x, {});
  return {s.mean, s.std, s.min, s.max};
}

void check_equal(const Shown& got, const Shown& want) {
  const double scale = std::max({std::abs(want.min), std::abs(want.max), 1e-30});
  CHECK(std::abs(got.mean - want.mean) <= 1e-5 * std::max(std::abs(want.mean), want.std));
  CHECK(got.std == Approx(want.std).epsilon(1e-5));
  CHECK(std::abs(got.min - want.min) <= 1e-5 * scale);
  CHECK(std::abs(got.max - want.max) <= 1e-5 * scale);
}

void click_and_wait(StepThroughView* v, const char* button) {
  QTest::mouseClick(v->findChild<QPushButton*>(button), Qt::LeftButton);
  for (int i = 0; i < 3000 && v->busy(); ++i) QTest::qWait(10);
  REQUIRE_FALSE(v->busy());
}

runner::Project open_mlp() {
  runner::ProjectOptions o;
  o.path = kMlp;
  auto p = runner::open_project(o);
  REQUIRE(p.ok());
  return std::move(*p);
}

HostBatch batch_of(runner::Project& p, int64_t index) {
  p.train->start_epoch(0);
  HostBatch b;
  for (int64_t i = 0; i <= index; ++i) REQUIRE(p.train->next(p.doc.training.batch_size, b));
  return b;
}

}  // namespace

TEST_CASE(
    "step through panel: Step shows each wire's engine values, in backward the reverse-mode "
    "gradients",
    "[editor][step_through]") {
  test::EditorFixture f;
  f.open_example("fashion-mnist-mlp.mls");
  f.window->findChild<QDockWidget*>("dock.step_through")->raise();
  auto* v = f.window->findChild<StepThroughView*>();
  REQUIRE(v);
  auto* batch = v->findChild<QSpinBox*>("step.batch");
  auto* position = v->findChild<QLabel*>("step.position");
  // Batch 2, typed.
  QTest::mouseDClick(batch->findChild<QLineEdit*>(), Qt::LeftButton);
  QTest::keyClick(batch, Qt::Key_A, Qt::ControlModifier);
  QTest::keyClicks(batch, "2");
  CHECK(batch->value() == 2);
  click_and_wait(v, "step.step");
  REQUIRE(v->stepThrough());
  CHECK(position->text() == "forward 1/9: image (mls.input)");
  for (int i = 0; i < 4; ++i) click_and_wait(v, "step.step");
  CHECK(position->text() == "forward 5/9: relu1 (mls.relu)");
  CHECK(f.window->scene()->selectedNodeIds() == std::vector<std::string>{"relu1"});

  // The engine apart: the run's initial parameters, batch 2, the forward compiled and cut at
  // relu1.
  runner::Project p = open_mlp();
  Backend& cpu = **backend_registry().open("cpu");
  Trainer t(cpu, p.builder(), p.train_config());
  REQUIRE(t.init().ok());
  const HostBatch b = batch_of(p, 2);
  {
    auto mg = p.builder()(b.size, true);
    REQUIRE(mg.ok());
    Graph& g = mg->graph;
    Ref out;
    for (const Node& n : g.nodes())
      if (n.label == "relu1") out = n.outputs.front();
    g.set_outputs({out});
    auto plan = CompiledPlan::compile(g, cpu, {});
    REQUIRE(plan.ok());
    Tensor x = Tensor::empty(cpu, DType::F32, g.type_of(mg->input).shape, AllocTag::Input);
    x.fill_raw(b.x.data(), x.nbytes());
    REQUIRE(plan->bind(mg->input, x).ok());
    REQUIRE(plan->bind(mg->labels, Tensor::from_i64(cpu, {b.size}, b.y, AllocTag::Input)).ok());
    for (size_t i = 0; i < t.params().size(); ++i)
      REQUIRE(plan->bind(g.params()[i], t.params()[i]).ok());
    plan->run();
    check_equal(read_stats(v), stats_of(plan->tensor(out).to_f64()));
  }
  // Placement on the canvas: a halo behind every node with kernels; on the CPU, all blue.
  auto* placement = v->findChild<QCheckBox*>("step.placement");
  const qsizetype items_before = f.window->scene()->items().size();
  QTest::mouseClick(placement, Qt::LeftButton, {}, QPoint(8, placement->height() / 2));
  REQUIRE(placement->isChecked());
  const auto shown = v->placementShown();
  CHECK(shown.size() == 7);  // every node but the inputs (the batch itself: no kernel)
  for (const char* node : {"flat", "fc1", "relu1", "fc2", "relu2", "fc3", "loss"})
    CHECK((shown.count(node) && shown.at(node) == "cpu"));
  CHECK(f.window->scene()->items().size() == items_before + 7);
  QTest::mouseClick(placement, Qt::LeftButton, {}, QPoint(8, placement->height() / 2));
  CHECK(f.window->scene()->items().size() == items_before);

  // Step back, and on again.
  click_and_wait(v, "step.back");
  CHECK(position->text() == "forward 4/9: fc1 (mls.linear)");
  CHECK(f.window->scene()->selectedNodeIds() == std::vector<std::string>{"fc1"});

  // Backward: to the end of the forward, then on to fc1's backward (the last).
  click_and_wait(v, "step.phase_end");
  CHECK(position->text() == "forward 9/9: loss (mls.cross_entropy)");
  for (int i = 0; i < 6; ++i) click_and_wait(v, "step.step");
  CHECK(position->text() == "backward 6/6: fc1 (mls.linear)");
  auto* values = v->findChild<QComboBox*>("step.values");
  CHECK(values->currentText() == "∂loss/∂fc1.weight");
  // The trainer's compiled step on the same batch: reverse mode appended by build_step.
  REQUIRE(t.train_step(b).ok());
  auto plan = t.training_plan(b.size);
  REQUIRE(plan.ok());
  const Graph& pg = (*plan)->graph();
  check_equal(read_stats(v), stats_of((*plan)->tensor(pg.outputs()[1]).to_f64()));
  QTest::keyClick(values, Qt::Key_Down);
  CHECK(values->currentText() == "∂loss/∂fc1.bias");
  check_equal(read_stats(v), stats_of((*plan)->tensor(pg.outputs()[2]).to_f64()));

  // The update: a table of every parameter's change.
  click_and_wait(v, "step.phase_end");
  CHECK(position->text() == "update 3/3: fc3 (mls.linear)");
  auto* table = v->findChild<QTableWidget*>("step.changes");
  CHECK(table->isVisible());
  REQUIRE(table->rowCount() == 6);
  CHECK(table->item(0, 0)->text() == "fc1.weight");
  CHECK(table->item(0, 2)->text().toDouble() > 0);
  // The parameters after it equal the trainer's after its step (SGD with momentum).
  const runner::StepThrough* st = v->stepThrough();
  for (size_t k = 0; k < 6; ++k) {
    const std::vector<double> a = st->params()[k].to_f64(), e = t.params()[k].to_f64();
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - e[i]));
    CHECK(d < 1e-6);
  }

  // The step's memory by category: the parameters' bar holds the MLP's 235,146 f32 weights.
  REQUIRE(v->memoryEstimate());
  const MemoryBars bars = memory_bars(nullptr, v->memoryEstimate().get());
  bool params_bar = false;
  for (const MemoryBars::Bar& bar : bars.bars)
    if (bar.name == "parameters") params_bar = bar.bytes == 235146 * 4;
  CHECK(params_bar);

  // Next batch: batch 3 from the updated parameters.
  click_and_wait(v, "step.next");
  CHECK(batch->value() == 3);
  CHECK(position->text() == "forward 1/9: image (mls.input)");
  CHECK(v->stepThrough()->step_index() == 1);
}
