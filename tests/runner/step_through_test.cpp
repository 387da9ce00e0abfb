// The step-through core (runner/step_through.h) against the engine's other paths: each
// forward value against a compiled plan of the model cut at that value, each parameter's
// gradient against the trainer's compiled training step (reverse mode appended by build_step
// and fused by the passes), and the update against the optimizer's formula.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>

#include "engine/core/backend_registry.h"
#include "engine/exec/compiled_plan.h"
#include "nodes/document.h"
#include "runner/backends.h"
#include "runner/step_through.h"

using namespace mls;
using namespace mls::runner;

namespace {

const std::string kMlp = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls";
const std::string kLenet = MLS_SOURCE_DIR "/resources/examples/fashion-mnist-lenet.mls";

Backend& cpu() {
  return **backend_registry().open("cpu");
}

Project open(const std::string& path, std::shared_ptr<const nodes::Document> doc = nullptr) {
  ProjectOptions o;
  o.path = path;
  o.document = std::move(doc);
  o.limit = 1000;  // 8 batches of 128: fast, and the last batch is short (104)
  o.test_limit = 100;
  auto p = open_project(o);
  REQUIRE(p.ok());
  return std::move(*p);
}

// The batch the run feeds at `index` of epoch 0, read from a fresh copy of the data.
HostBatch batch_of(const std::string& path, int64_t index,
                   std::shared_ptr<const nodes::Document> doc = nullptr) {
  Project p = open(path, std::move(doc));
  p.train->start_epoch(0);
  HostBatch b;
  for (int64_t i = 0; i <= index; ++i) REQUIRE(p.train->next(p.doc.training.batch_size, b));
  return b;
}

// max |a - b| relative to max |b| (1e-30 guards an all-zero reference).
double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0, m = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::abs(a[i] - b[i]));
    m = std::max(m, std::abs(b[i]));
  }
  return d / m;
}

// The forward of the project, compiled (the static executor), with its outputs cut at the
// last IR node labelled `label`, on the batch and the run's initial parameters.
std::vector<double> compiled_forward(const std::string& path, const std::string& label,
                                     const HostBatch& b) {
  Project p = open(path);
  Trainer t(cpu(), p.builder(), p.train_config());
  REQUIRE(t.init().ok());
  auto mg = p.builder()(b.size, true);
  REQUIRE(mg.ok());
  Graph& g = mg->graph;
  Ref out;
  for (const Node& n : g.nodes())
    if (n.label == label) out = n.outputs.front();
  REQUIRE(out.valid());
  g.set_outputs({out});
  auto plan = CompiledPlan::compile(g, cpu(), {});
  REQUIRE(plan.ok());
  Tensor x = Tensor::empty(cpu(), DType::F32, g.type_of(mg->input).shape, AllocTag::Input);
  x.fill_raw(b.x.data(), x.nbytes());
  REQUIRE(plan->bind(mg->input, x).ok());
  Tensor y = Tensor::from_i64(cpu(), {b.size}, b.y, AllocTag::Input);
  REQUIRE(plan->bind(mg->labels, y).ok());
  for (size_t i = 0; i < t.params().size(); ++i)
    REQUIRE(plan->bind(g.params()[i], t.params()[i]).ok());
  plan->run();
  return plan->tensor(out).to_f64();
}

const runner::StepPoint* find_point(const StepThrough& st, StepPhase phase, const std::string& node) {
  for (const runner::StepPoint& p : st.points())
    if (p.phase == phase && p.node == node) return &p;
  return nullptr;
}

// The MLP with plain SGD (no momentum, a constant rate): an update is exactly -lr * g.
std::shared_ptr<const nodes::Document> plain_sgd_mlp() {
  auto d = nodes::load_document(kMlp);
  REQUIRE(d.ok());
  d->training.optimizer.momentum = 0;
  d->training.schedule = ScheduleConfig{};
  return std::make_shared<const nodes::Document>(std::move(*d));
}

}  // namespace

TEST_CASE("step through: the MLP's points in order, forward then backward then update",
          "[step_through]") {
  auto st = StepThrough::open(open(kMlp), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  std::vector<std::string> fw, bw, up;
  for (const runner::StepPoint& p : s.points())
    (p.phase == StepPhase::Forward    ? fw
     : p.phase == StepPhase::Backward ? bw
                                      : up)
        .push_back(p.node);
  CHECK(fw == std::vector<std::string>{"image", "label", "flat", "fc1", "relu1", "fc2", "relu2",
                                       "fc3", "loss"});
  CHECK(bw == std::vector<std::string>{"loss", "fc3", "relu2", "fc2", "relu1", "fc1"});
  CHECK(up == std::vector<std::string>{"fc1", "fc2", "fc3"});
  const runner::StepPoint* fc1 = find_point(s, StepPhase::Forward, "fc1");
  REQUIRE(fc1);
  CHECK(fc1->type == "mls.linear");
  CHECK(fc1->ir_nodes.size() == 2);  // matmul, add
  REQUIRE(fc1->values.size() == 1);
  CHECK(fc1->values[0].caption == "fc1 → relu1");
  CHECK(s.tensor(fc1->values[0]).shape() == Shape{128, 256});
  // fc2's backward: the gradient on the wire into it and of both its parameters.
  const runner::StepPoint* fc2b = find_point(s, StepPhase::Backward, "fc2");
  REQUIRE(fc2b);
  std::vector<std::string> captions;
  for (const StepValue& v : fc2b->values) captions.push_back(v.caption);
  std::sort(captions.begin(), captions.end());
  CHECK(captions ==
        std::vector<std::string>{"∂loss/∂(relu1 → fc2)", "∂loss/∂fc2.bias", "∂loss/∂fc2.weight"});
  CHECK(s.loss() > 1.5);  // an untrained 10-class model: about ln 10
  CHECK(s.loss() < 3.5);
}

TEST_CASE("step through: each forward value equals the compiled forward on that batch",
          "[step_through]") {
  auto st = StepThrough::open(open(kMlp), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(2).ok());
  const HostBatch b = batch_of(kMlp, 2);
  CHECK(s.host_batch().x == b.x);
  for (const char* node : {"fc1", "relu1", "fc2", "relu2", "fc3"}) {
    INFO(node);
    const runner::StepPoint* p = find_point(s, StepPhase::Forward, node);
    REQUIRE(p);
    const std::vector<double> want = compiled_forward(kMlp, node, b);
    const std::vector<double> got = s.tensor(p->values.front()).to_f64();
    CHECK(rel_diff(got, want) < 1e-5);
    const TensorStats a = tensor_stats(s.tensor(p->values.front())), e = tensor_stats(want, {});
    CHECK(a.mean == Approx(e.mean).epsilon(1e-5).margin(1e-7));
    CHECK(a.std == Approx(e.std).epsilon(1e-5));
    CHECK(a.zero_fraction == Approx(e.zero_fraction).margin(1e-3));
  }
}

TEST_CASE("step through: each parameter's gradient equals the trainer's compiled reverse mode",
          "[step_through]") {
  auto st = StepThrough::open(open(kMlp), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(1).ok());
  // The trainer's static step on the same batch: its plan holds the gradients after run.
  Project p = open(kMlp);
  Trainer t(cpu(), p.builder(), p.train_config());
  REQUIRE(t.init().ok());
  const HostBatch b = batch_of(kMlp, 1);
  auto loss = t.train_step(b);
  REQUIRE(loss.ok());
  CHECK(s.loss() == Approx(*loss).epsilon(1e-6));
  auto plan = t.training_plan(b.size);
  REQUIRE(plan.ok());
  const Graph& pg = (*plan)->graph();
  REQUIRE(pg.outputs().size() == 1 + s.changes().size());
  for (size_t k = 0; k < s.changes().size(); ++k) {
    INFO(s.changes()[k].name);
    const std::vector<double> want = (*plan)->tensor(pg.outputs()[1 + k]).to_f64();
    const std::vector<double> got = s.value_tensor(s.gradient_value(k)).to_f64();
    CHECK(rel_diff(got, want) < 1e-5);
    // And the update is the trainer's (SGD with momentum, the cosine rate at step 0).
    CHECK(rel_diff(s.params()[k].to_f64(), t.params()[k].to_f64()) < 1e-6);
  }
  // The backward point shows that very gradient.
  const runner::StepPoint* fc1b = find_point(s, StepPhase::Backward, "fc1");
  REQUIRE(fc1b);
  bool shown = false;
  for (const StepValue& v : fc1b->values)
    if (v.role == StepValue::Role::ParamGradient && v.param == 0)
      shown = v.value == s.gradient_value(0);
  CHECK(shown);
}

TEST_CASE("step through: step back returns to the point before, with the same values",
          "[step_through]") {
  auto st = StepThrough::open(open(kMlp), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  CHECK(s.cursor() == -1);
  CHECK_FALSE(s.step_back());
  for (int i = 0; i < 4; ++i) REQUIRE(s.step());
  const std::string node = s.current().node;
  const std::vector<double> before = s.tensor(s.current().values.front()).to_f64();
  REQUIRE(s.step());
  CHECK(s.current().node != node);
  REQUIRE(s.step_back());
  CHECK(s.cursor() == 3);
  CHECK(s.current().node == node);
  CHECK(s.tensor(s.current().values.front()).to_f64() == before);
  // To the end of the forward, then of the backward, then of the update.
  REQUIRE(s.to_end_of_phase());
  CHECK(s.current().node == "loss");
  CHECK(s.current().phase == StepPhase::Forward);
  CHECK(s.position_in_phase() == s.phase_size(StepPhase::Forward));
  REQUIRE(s.to_end_of_phase());
  CHECK(s.current().phase == StepPhase::Backward);
  CHECK(s.current().node == "fc1");
  REQUIRE(s.to_end_of_phase());
  CHECK(s.current().phase == StepPhase::Optimizer);
  CHECK(s.cursor() == static_cast<int>(s.points().size()) - 1);
  CHECK_FALSE(s.to_end_of_phase());
  CHECK_FALSE(s.step());
}

TEST_CASE("step through: next batch changes every parameter by exactly -lr * g (plain SGD)",
          "[step_through]") {
  auto doc = plain_sgd_mlp();
  auto st = StepThrough::open(open(kMlp, doc), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  const std::vector<Tensor> first = s.params();
  REQUIRE(s.next_batch().ok());
  CHECK(s.batch() == 1);
  CHECK(s.step_index() == 1);
  CHECK(s.lr() == Approx(0.05));
  CHECK(s.host_batch().x == batch_of(kMlp, 1, doc).x);
  REQUIRE(s.changes().size() == 6);
  for (size_t k = 0; k < s.changes().size(); ++k) {
    const ParamChange& c = s.changes()[k];
    INFO(c.name);
    const std::vector<double> w0 = c.before.to_f64(), w1 = c.after.to_f64();
    const std::vector<double> g = s.value_tensor(s.gradient_value(k)).to_f64();
    // The step starts where the last one ended.
    CHECK(w0 == first[k].to_f64());
    double worst = 0, dn = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double want = w0[i] - 0.05 * g[i];
      // Exact up to the f32 rounding of the product and of the sum.
      const double ulps =
          std::abs(w1[i] - want) / ((std::abs(w0[i]) + std::abs(0.05 * g[i])) * 0x1p-24 + 1e-30);
      worst = std::max(worst, ulps);
      dn += (w1[i] - w0[i]) * (w1[i] - w0[i]);
    }
    CHECK(worst <= 2.0);
    CHECK(c.delta_norm == Approx(std::sqrt(dn)));
    CHECK(c.delta_norm > 0);
    CHECK(c.relative == Approx(c.delta_norm / c.weight_norm));
  }
  CHECK(s.changes()[0].node == "fc1");
  CHECK(s.changes()[5].node == "fc3");
}

TEST_CASE(
    "step through: momentum carries over to the next batch, re-evaluating restores the step's "
    "start",
    "[step_through]") {
  auto st = StepThrough::open(open(kMlp), cpu());  // SGD, momentum 0.9, cosine over 10 epochs
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(3).ok());
  REQUIRE(s.evaluate(0).ok());  // another batch for the same step: from the same start
  const std::vector<double> g1 = s.value_tensor(s.gradient_value(4)).to_f64();  // fc3.weight
  const double lr1 = s.lr();
  const std::vector<double> w0 = s.changes()[4].before.to_f64();
  const std::vector<double> w1 = s.changes()[4].after.to_f64();
  for (size_t i = 0; i < g1.size(); i += 97)
    CHECK(w1[i] == Approx(w0[i] - lr1 * g1[i]).epsilon(1e-6));
  REQUIRE(s.next_batch().ok());
  const std::vector<double> g2 = s.value_tensor(s.gradient_value(4)).to_f64();
  const double lr2 = s.lr();
  CHECK(lr2 == lr1);  // the cosine schedule moves once per epoch, as PyTorch's stepped per epoch
  const std::vector<double> w2 = s.changes()[4].after.to_f64();
  // PyTorch's SGD: v2 = 0.9 v1 + g2 with v1 = g1; w2 = w1 - lr2 v2.
  for (size_t i = 0; i < g2.size(); i += 97)
    CHECK(w2[i] == Approx(w1[i] - lr2 * (0.9 * g1[i] + g2[i])).epsilon(1e-5).margin(1e-7));
}

TEST_CASE("step through: LeNet's image batch and convolution values", "[step_through]") {
  auto st = StepThrough::open(open(kLenet), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  REQUIRE(s.step());
  CHECK(s.current().node == "image");
  CHECK(s.current().values.front().role == StepValue::Role::Input);
  CHECK(s.tensor(s.current().values.front()).shape() == Shape{128, 1, 28, 28});
  const runner::StepPoint* conv1 = find_point(s, StepPhase::Forward, "conv1");
  REQUIRE(conv1);
  const HostBatch b = batch_of(kLenet, 0);
  CHECK(rel_diff(s.tensor(conv1->values.front()).to_f64(), compiled_forward(kLenet, "conv1", b)) <
        1e-5);
  const runner::StepPoint* conv1b = find_point(s, StepPhase::Backward, "conv1");
  REQUIRE(conv1b);
  CHECK(conv1b->values.size() == 2);  // weight and bias; the image needs no gradient
}

TEST_CASE("step through: tensor statistics", "[step_through]") {
  const TensorStats s = tensor_stats({0, 0, 1, 3, -2, std::nan("")}, {6}, 5);
  CHECK(s.count == 6);
  CHECK(s.non_finite == 1);
  CHECK(s.mean == Approx(0.4));
  CHECK(s.std == Approx(std::sqrt((0.16 * 2 + 0.36 + 6.76 + 5.76) / 5)));
  CHECK(s.min == -2);
  CHECK(s.max == 3);
  CHECK(s.zero_fraction == Approx(0.4));
  CHECK(s.histogram == std::vector<int64_t>{1, 0, 2, 1, 1});
}

TEST_CASE("step through: every example project steps through, each gradient shown once",
          "[step_through]") {
  for (const char* name :
       {"fashion-mnist-cnn.mls", "fashion-mnist-resnet.mls", "house-prices-csv.mls",
        "two-blobs-logistic.mls", "two-spirals-mlp.mls", "notebook-train-mlp.mls"}) {
    INFO(name);
    ProjectOptions o;
    o.path = std::string(MLS_SOURCE_DIR "/resources/examples/") + name;
    o.limit = 64;
    o.test_limit = 16;
    o.batch_size = 16;
    auto p = open_project(o);
    REQUIRE(p.ok());
    auto st = StepThrough::open(std::move(*p), cpu());
    REQUIRE(st.ok());
    StepThrough& s = **st;
    auto r = s.evaluate(1);
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r.ok());
    CHECK(std::isfinite(s.loss()));
    // Every IR node runs in exactly one point.
    size_t ir = 0;
    for (const runner::StepPoint& pt : s.points()) ir += pt.ir_nodes.size();
    CHECK(ir == s.graph().nodes().size());
    // Each trainable parameter's gradient is shown at one backward point, and its update at
    // one update point.
    std::map<int32_t, int> grads, updates;
    for (const runner::StepPoint& pt : s.points())
      for (const StepValue& v : pt.values) {
        if (v.role == StepValue::Role::ParamGradient) grads[v.param]++;
        if (v.role == StepValue::Role::Parameter) updates[v.param]++;
        CHECK(s.tensor(v).defined());
      }
    CHECK(grads.size() == s.changes().size());
    CHECK(updates.size() == s.changes().size());
    for (const auto& [param, n] : grads) CHECK(n == 1);
    // Forward points name document nodes of the project.
    for (const runner::StepPoint& pt : s.points())
      if (pt.phase == StepPhase::Forward) CHECK_FALSE(pt.type.empty());
    REQUIRE(s.next_batch().ok());
    CHECK(s.batch() == 2);
  }
}

TEST_CASE("step through: placement on the CPU and on a Vulkan device", "[step_through]") {
  {
    auto st = StepThrough::open(open(kMlp), cpu());
    REQUIRE(st.ok());
    REQUIRE((*st)->evaluate(0).ok());
    for (const runner::StepPoint& p : (*st)->points()) {
      CHECK(p.device == "cpu");
      CHECK(p.host_ops.empty());
    }
  }
  init_backends();
  auto vk = backend_registry().open("vulkan");
  if (!vk) {
    WARN("no Vulkan device: " << vk.error().message);
    return;
  }
  auto doc = nodes::load_document(kMlp);
  REQUIRE(doc.ok());
  doc->training.device = "vulkan";
  doc->training.batch_size = 16;
  auto st =
      StepThrough::open(open(kMlp, std::make_shared<const nodes::Document>(std::move(*doc))), **vk);
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  for (const runner::StepPoint& p : s.points()) {
    INFO(p.node << " " << p.device);
    for (const std::string& h : p.host_ops) WARN(p.node << " falls back to the host: " << h);
    CHECK((p.device == "vulkan" || p.device == "vulkan + cpu" || p.device == "cpu"));
    CHECK(p.host_ops.empty() == (p.device == "vulkan"));
  }
  // The values computed there equal the CPU's (lavapipe's exp and log are within a few ulp).
  auto on_cpu =
      StepThrough::open(open(kMlp,
                             [] {
                               auto d = nodes::load_document(kMlp);
                               d->training.batch_size = 16;
                               return std::make_shared<const nodes::Document>(std::move(*d));
                             }()),
                        cpu());
  REQUIRE(on_cpu.ok());
  REQUIRE((*on_cpu)->evaluate(0).ok());
  CHECK(s.loss() == Approx((*on_cpu)->loss()).epsilon(1e-5));
  for (size_t k = 0; k < s.changes().size(); ++k)
    CHECK(rel_diff(s.value_tensor(s.gradient_value(k)).to_f64(),
                   (*on_cpu)->value_tensor((*on_cpu)->gradient_value(k)).to_f64()) < 1e-4);
}

TEST_CASE("step through: a mixed-precision project steps through its autocast graph",
          "[step_through]") {
  auto d = nodes::load_document(kMlp);
  REQUIRE(d.ok());
  d->training.precision = Precision::BF16;
  auto st =
      StepThrough::open(open(kMlp, std::make_shared<const nodes::Document>(std::move(*d))), cpu());
  REQUIRE(st.ok());
  StepThrough& s = **st;
  REQUIRE(s.evaluate(0).ok());
  bool lowp = false;
  for (const Node& n : s.graph().nodes()) lowp = lowp || n.op->name == "matmul_lowp";
  CHECK(lowp);
  auto f32 = StepThrough::open(open(kMlp), cpu());
  REQUIRE(f32.ok());
  REQUIRE((*f32)->evaluate(0).ok());
  CHECK(s.loss() == Approx((*f32)->loss()).epsilon(1e-2));
  // bf16 products: the gradients agree with f32's to a few per cent.
  for (size_t k = 0; k < s.changes().size(); ++k)
    CHECK(rel_diff(s.value_tensor(s.gradient_value(k)).to_f64(),
                   (*f32)->value_tensor((*f32)->gradient_value(k)).to_f64()) < 0.05);
}
