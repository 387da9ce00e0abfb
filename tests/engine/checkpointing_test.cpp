// Gradient checkpointing (engine/exec/checkpointing.cpp): the planned arena drops, the
// loss, every gradient and the running statistics stay bit-identical (the clones run the same
// kernels on the same inputs), the pass adds exactly the clones it reports, and a byte budget
// is met or refused.
#include <cstring>

#include "blobs_source.h"
#include "engine/autodiff/autodiff.h"
#include "engine/exec/checkpointing.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/default_passes.h"
#include "engine/ops/layout.h"
#include "engine/ops/nn.h"
#include "engine/train/trainer.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

constexpr int64_t kBatch = 64, kWidth = 256, kClasses = 10, kLayers = 20;

struct Net {
  Graph g;
  Ref x, y, seed;  // seed: the dropout step seed (invalid without dropout)
  Ref logits, loss;
};

// `layers` linear layers of `width` (relu between them, labelled fc1, fc2, ...), then
// cross-entropy (labelled loss). Optional: dropout after each relu, BatchNorm with running
// statistics before each relu, a reshape round trip (a view) inside each layer.
struct NetOptions {
  int64_t layers = kLayers, width = kWidth, batch = kBatch;
  double dropout = 0;
  bool batch_norm = false, reshape = false, training = true;
};

Net build_net(const NetOptions& o) {
  Net n{Graph("deep"), {}, {}, {}, {}, {}};
  Graph& g = n.g;
  n.x = g.add_input("x", {DType::F32, {o.batch, o.width}});
  n.y = g.add_input("y", {DType::I64, {o.batch}});
  if (o.dropout > 0) n.seed = g.add_input("step_seed", {DType::I64, {1}});
  Ref h = n.x;
  for (int64_t l = 1; l <= o.layers; ++l) {
    const std::string name = "fc" + std::to_string(l);
    const bool last = l == o.layers;
    const int64_t out = last ? kClasses : o.width;
    g.set_label(name);
    Ref w = g.add_param(name + ".weight", {DType::F32, {o.width, out}}, {"kaiming_uniform", o.width, out});
    Ref b = g.add_param(name + ".bias", {DType::F32, {out}}, {"uniform_fan_in", o.width, out});
    h = linear(g, h, w, b);
    if (last) break;
    if (o.batch_norm) {
      Ref gamma = g.add_param(name + ".gamma", {DType::F32, {out}}, {"ones", 0, 0});
      Ref beta = g.add_param(name + ".beta", {DType::F32, {out}}, {"zeros", 0, 0});
      Ref rm = g.add_param(name + ".running_mean", {DType::F32, {out}}, {"zeros", 0, 0}, false);
      Ref rv = g.add_param(name + ".running_var", {DType::F32, {out}}, {"ones", 0, 0}, false);
      BatchNormOut bn = batch_norm_train(g, h, gamma, beta);
      ema_update(g, rm, bn.mean, 0.1);
      ema_update(g, rv, scale(g, bn.var, batch_norm_unbiased_factor(g.shape_of(h))), 0.1);
      h = bn.y;
    }
    if (o.reshape) h = reshape(g, relu(g, reshape(g, h, {o.batch, 16, o.width / 16})), {o.batch, o.width});
    else h = relu(g, h);
    if (o.dropout > 0) h = dropout(g, h, o.dropout, static_cast<uint64_t>(l), n.seed, o.training);
  }
  n.logits = h;
  g.set_label("loss");
  n.loss = cross_entropy(g, h, n.y);
  g.set_label("");
  return n;
}

// The training step as the trainer builds it: loss and the trainable params' gradients,
// after the default passes (fusion included) unless `raw`.
Graph training_graph(const NetOptions& o, bool raw = false) {
  Net n = build_net(o);
  Refs wrt;
  for (Ref p : n.g.params())
    if (n.g.value(p).trainable) wrt.push_back(p);
  auto grads = append_backward(n.g, n.loss, wrt);
  REQUIRE(grads.ok());
  Refs outs{n.loss};
  outs.insert(outs.end(), grads->begin(), grads->end());
  n.g.set_outputs(outs);
  if (raw) return n.g;
  auto stages = run_passes(n.g, host(), default_passes());
  REQUIRE(stages.ok());
  return stages->back().graph;
}

// As the trainer compiles its step: gradients (outputs 1..) in their own buffers.
// The trainer's options, less the kernels' workspace: the tests below compare how two
// graphs place their activations, and GEMM scratch (the same in both) would blur that.
PlanOptions trainer_options(const Graph& g) {
  PlanOptions po;
  po.kernel_workspace = false;
  for (size_t i = 1; i < g.outputs().size(); ++i)
    if (g.value(g.outputs()[i]).kind == ValueKind::Node)
      po.own_buffers.emplace_back(g.outputs()[i], AllocTag::Gradient);
  return po;
}

size_t arena(const Graph& g) {
  auto p = CompiledPlan::compile(g, host(), trainer_options(g));
  REQUIRE(p.ok());
  return p->stats().arena_bytes;
}

// Runs the step once on fixed data; returns every output, then every parameter after the
// step (running statistics are updated in place), as raw f32 bit patterns.
std::vector<std::vector<uint32_t>> run_step(const Graph& g) {
  auto plan = CompiledPlan::compile(g, host(), trainer_options(g));
  REQUIRE(plan.ok());
  std::vector<Tensor> keep;
  Rng rng(42);
  for (Ref r : g.inputs()) {
    ValueType t = g.type_of(r);
    Tensor x = Tensor::empty(host(), t.dtype, t.shape, AllocTag::Input);
    if (t.dtype == DType::I64) {
      std::vector<int64_t> v(static_cast<size_t>(numel(t.shape)));
      for (int64_t& e : v) e = static_cast<int64_t>(rng.below(t.shape == Shape{1} ? 1000000 : kClasses));
      x.fill_from_host_i64(v);
    } else {
      std::vector<float> v(static_cast<size_t>(numel(t.shape)));
      for (float& e : v) e = static_cast<float>(rng.uniform(-1, 1));
      x.fill_from_host(v);
    }
    REQUIRE(plan->bind(r, x).ok());
    keep.push_back(x);
  }
  for (Ref r : g.params()) {
    ValueType t = g.type_of(r);
    const std::string& name = g.value(r).name;
    std::vector<float> v(static_cast<size_t>(numel(t.shape)));
    const bool var = name.find("running_var") != std::string::npos || name.find("gamma") != std::string::npos;
    for (float& e : v) e = static_cast<float>(var ? rng.uniform(0.5, 1.5) : rng.uniform(-0.12, 0.12));
    Tensor p = Tensor::from_f32(host(), t.shape, v, AllocTag::Parameter);
    REQUIRE(plan->bind(r, p).ok());
    keep.push_back(p);
  }
  plan->run();
  auto bits = [](const Tensor& t) {
    std::vector<double> d = t.to_f64();
    std::vector<uint32_t> b(d.size());
    for (size_t i = 0; i < d.size(); ++i) {
      auto f = static_cast<float>(d[i]);  // f32 -> f64 -> f32 is exact
      std::memcpy(&b[i], &f, 4);
    }
    return b;
  };
  std::vector<std::vector<uint32_t>> out;
  for (Ref r : g.outputs()) out.push_back(bits(plan->tensor(r)));
  for (size_t i = g.inputs().size(); i < keep.size(); ++i) out.push_back(bits(keep[i]));
  return out;
}

void require_bit_identical(const Graph& a, const Graph& b) {
  auto x = run_step(a), y = run_step(b);
  REQUIRE(x.size() == y.size());
  for (size_t k = 0; k < x.size(); ++k) {
    INFO("output or parameter " << k);
    REQUIRE(x[k].size() == y[k].size());
    size_t differing = 0;
    for (size_t i = 0; i < x[k].size(); ++i) differing += x[k][i] != y[k][i];
    CHECK(differing == 0);
  }
}

size_t count_nodes(const Graph& g, const std::string& op, bool clones_only) {
  size_t n = 0;
  for (const Node& node : g.nodes()) {
    bool clone = node.label.ends_with(" (recompute)");
    if ((op.empty() || node.op->name == op) && (!clones_only || clone)) ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("checkpointing a 20-layer MLP halves the planned activations with bit-identical gradients",
          "[checkpointing]") {
  Graph g = training_graph({});
  auto r = checkpoint_activations(g, host(), 0, trainer_options);  // the sqrt(n) scheme
  REQUIRE(r.ok());
  INFO(r->report.summary());
  // 21 layers (fc1..fc20, loss): 6 + 5 + 4 + 3 + 2 + 1.
  CHECK(r->report.layers == 21);
  CHECK(r->report.segments == std::vector<size_t>{6, 5, 4, 3, 2, 1});
  const size_t before = arena(g), after = arena(r->graph);
  CHECK(r->report.peak_before == before);  // measured without allocating, yet the same plan
  CHECK(r->report.peak_after == after);
  CHECK(after * 2 <= before);
  // With the kernels' workspace in the arena too (as the trainer plans): still smaller.
  auto with_ws = [](const Graph& graph) {
    PlanOptions po = trainer_options(graph);
    po.kernel_workspace = true;
    auto p = CompiledPlan::compile(graph, host(), po);
    REQUIRE(p.ok());
    return p->stats().arena_bytes;
  };
  CHECK(with_ws(r->graph) < with_ws(g));
  require_bit_identical(g, r->graph);
  // The same as a pass in a pipeline (`mlstudio graph --passes`).
  auto stages = run_passes(g, host(), {checkpoint_pass()});
  REQUIRE(stages.ok());
  CHECK(stages->back().graph.nodes().size() == g.nodes().size() + r->report.recomputed_nodes);
  CHECK(count_nodes(stages->back().graph, "", true) == r->report.recomputed_nodes);
}

TEST_CASE("checkpointing adds exactly the recomputed nodes and leaves inference graphs alone", "[checkpointing]") {
  Graph g = training_graph({}, true);  // unfused: matmul, add, relu per layer
  auto r = checkpoint_every(g, 5);
  REQUIRE(r.ok());
  REQUIRE(r->graph.verify().ok());
  // Segments fc1-5, fc6-10, fc11-15, fc16-20, loss. The backward reads each relu output;
  // the last relu of a segment (fc5, fc10, fc15) is a checkpoint, and so are the logits
  // (fc20). Each of the first four segments recomputes the matmul, add and relu of its four
  // other layers: 4 x 4 x 3 = 48 clones. The loss segment is never recomputed.
  CHECK(r->report.recomputed_nodes == 48);
  CHECK(r->report.checkpoints == 4);
  CHECK(r->graph.nodes().size() == g.nodes().size() + 48);
  CHECK(count_nodes(r->graph, "", true) == 48);
  CHECK(count_nodes(r->graph, "matmul", true) == 16);
  CHECK(count_nodes(r->graph, "relu", true) == 16);
  // fc5's relu is a checkpoint: no clone of it; fc4's is recomputed once.
  size_t fc4 = 0, fc5 = 0;
  for (const Node& n : r->graph.nodes()) {
    fc4 += n.label == "fc4 (recompute)";
    fc5 += n.label == "fc5 (recompute)";
    if (n.label.ends_with(" (recompute)")) CHECK(n.backward);
  }
  CHECK(fc4 == 3);
  CHECK(fc5 == 0);
  require_bit_identical(g, r->graph);

  // After the default passes (fused layers): each recomputed layer is cloned whole, once.
  Graph fused = training_graph({});
  auto rf = checkpoint_every(fused, 5);
  REQUIRE(rf.ok());
  REQUIRE(rf->graph.verify().ok());
  size_t expected = 0;
  for (const Node& n : fused.nodes())
    for (int l : {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 16, 17, 18, 19})
      expected += !n.backward && n.label == "fc" + std::to_string(l);
  CHECK(expected >= 16);
  CHECK(rf->report.recomputed_nodes == expected);
  CHECK(rf->graph.nodes().size() == fused.nodes().size() + expected);
  CHECK(count_nodes(rf->graph, "", true) == expected);
  require_bit_identical(fused, rf->graph);

  // One layer per segment: every backward read is a checkpoint, nothing to recompute.
  auto one = checkpoint_every(g, 1);
  REQUIRE(one.ok());
  CHECK(one->report.recomputed_nodes == 0);
  REQUIRE(one->graph.nodes().size() == g.nodes().size());
  for (size_t k = 0; k < g.nodes().size(); ++k) CHECK(one->graph.nodes()[k].op == g.nodes()[k].op);

  NetOptions eval;
  eval.training = false;
  Net inference = build_net(eval);
  inference.g.set_outputs({inference.logits, inference.loss});
  auto same = checkpoint_activations(inference.g, host());
  REQUIRE(same.ok());
  CHECK(same->report.recomputed_nodes == 0);
  CHECK(same->report.scheme == "none (no backward nodes)");
  CHECK(same->graph.to_text() == inference.g.to_text());
  auto same_every = checkpoint_every(inference.g, 3);
  REQUIRE(same_every.ok());
  CHECK(same_every->graph.to_text() == inference.g.to_text());
}

TEST_CASE("a checkpointing budget is met with the fewest recomputations, or refused below the floor",
          "[checkpointing]") {
  Graph g = training_graph({});
  const size_t full = arena(g);
  auto sqrt_scheme = checkpoint_activations(g, host());
  REQUIRE(sqrt_scheme.ok());
  const size_t low = sqrt_scheme->report.peak_after;
  const size_t budget = (full + low) / 2;
  const uint64_t allocs = host().memory().stats().alloc_count;
  auto r = checkpoint_activations(g, host(), static_cast<int64_t>(budget), trainer_options);
  REQUIRE(r.ok());
  CHECK(host().memory().stats().alloc_count == allocs);  // dozens of candidate plans measured, none allocated
  INFO(r->report.summary());
  CHECK(arena(r->graph) <= budget);
  CHECK(arena(r->graph) == r->report.peak_after);
  CHECK(r->report.recomputed_nodes > 0);
  // No uniform segmentation that fits recomputes fewer nodes.
  for (size_t k = 1; k < 21; ++k) {
    auto e = checkpoint_every(g, k);
    REQUIRE(e.ok());
    INFO("every " << k << ": " << e->report.recomputed_nodes << " clones, arena " << arena(e->graph));
    if (arena(e->graph) <= budget) CHECK(e->report.recomputed_nodes >= r->report.recomputed_nodes);
  }
  require_bit_identical(g, r->graph);

  // A budget the plan already fits: unchanged.
  auto roomy = checkpoint_activations(g, host(), static_cast<int64_t>(full), trainer_options);
  REQUIRE(roomy.ok());
  CHECK(roomy->report.recomputed_nodes == 0);
  CHECK(roomy->graph.to_text() == g.to_text());

  // Below the floor (the weights' gradients alone need more): an error naming the smallest arena.
  auto tight = checkpoint_activations(g, host(), 4096, trainer_options);
  REQUIRE_FALSE(tight.ok());
  INFO(tight.error().message);
  const std::string& msg = tight.error().message;
  CHECK(msg.find("no segmentation of the 21 layers fits a budget of 4096 bytes") != std::string::npos);
  CHECK(msg.find("the smallest planned arena is") != std::string::npos);
  CHECK_FALSE(checkpoint_activations(g, host(), -5).ok());
}

TEST_CASE("checkpointing keeps dropout masks and views: identical gradients", "[checkpointing]") {
  NetOptions o;
  o.layers = 8;
  o.dropout = 0.3;
  o.reshape = true;
  Graph g = training_graph(o);
  auto r = checkpoint_every(g, 3);
  REQUIRE(r.ok());
  INFO(r->report.summary());
  // Recomputed dropout draws its mask from the same seeds: the gradients cannot differ.
  CHECK(count_nodes(r->graph, "dropout", true) > 0);
  CHECK(count_nodes(r->graph, "reshape", true) > 0);
  CHECK(r->graph.nodes().size() == g.nodes().size() + r->report.recomputed_nodes);
  CHECK(arena(r->graph) < arena(g));
  require_bit_identical(g, r->graph);
  // The dropout is live: without it the loss differs.
  NetOptions plain = o;
  plain.dropout = 0;
  CHECK(run_step(training_graph(plain))[0] != run_step(g)[0]);
}

TEST_CASE("checkpointing recomputes BatchNorm but never re-runs its running-stat updates", "[checkpointing]") {
  NetOptions o;
  o.layers = 8;
  o.batch_norm = true;
  Graph g = training_graph(o);
  auto r = checkpoint_every(g, 3);
  REQUIRE(r.ok());
  INFO(r->report.summary());
  CHECK(count_nodes(r->graph, "batch_norm_train", true) > 0);
  CHECK(count_nodes(r->graph, "ema_update", false) == count_nodes(g, "ema_update", false));
  CHECK(count_nodes(r->graph, "ema_update", false) == 14);
  CHECK(count_nodes(r->graph, "ema_update", true) == 0);
  CHECK(arena(r->graph) < arena(g));
  // Loss, gradients, and every parameter after the step: running statistics updated once.
  require_bit_identical(g, r->graph);
}

namespace {

ModelBuilder deep_mlp_builder() {
  return [](int64_t batch, bool training) -> Result<ModelGraph> {
    NetOptions o;
    o.batch = batch;
    o.training = training;
    Net n = build_net(o);
    return ModelGraph{std::move(n.g), n.x, n.y, n.logits, n.loss, {}};
  };
}

}  // namespace

TEST_CASE("the trainer checkpoints on request: same losses and weights, recomputed segments", "[checkpointing][trainer]") {
  TrainConfig cfg{.epochs = 1, .batch_size = kBatch, .seed = 5, .opt = {.type = "sgd", .lr = 0.05, .momentum = 0.9}};
  Trainer plain(host(), deep_mlp_builder(), cfg);
  cfg.checkpoint_budget_bytes = 0;
  Trainer ck(host(), deep_mlp_builder(), cfg);
  auto pa = plain.training_plan(kBatch), pb = ck.training_plan(kBatch);
  REQUIRE(pa.ok());
  REQUIRE(pb.ok());
  // The trainer plans its gradients in the arena too; all 20 layers' weight gradients (written
  // last) set this net's peak, so recomputation cannot lower it here, only never raise it. The
  // activation memory it saves is asserted above, with the gradients set aside.
  CHECK((*pb)->stats().arena_bytes <= (*pa)->stats().arena_bytes);
  CHECK((*pb)->stats().scheduled_nodes > (*pa)->stats().scheduled_nodes);
  Blobs data(kBatch * 4, kWidth, kClasses, 9);
  data.start_epoch(0);
  HostBatch b;
  while (data.next(kBatch, b)) {
    auto la = plain.train_step(b), lb = ck.train_step(b);
    REQUIRE(la.ok());
    REQUIRE(lb.ok());
    CHECK(*la == *lb);
  }
  for (size_t i = 0; i < plain.params().size(); ++i) CHECK(plain.params()[i].to_f64() == ck.params()[i].to_f64());
}
