// The debugger in the trainer (engine/train/breakpoints.h, step_watch.h, trainer_debug.cpp):
// the breakpoints' grammar; the watch's spike, gradient-norm and dead-unit rules on made-up
// steps; and whole runs: a NaN injected at a chosen node in forward or in backward at a chosen
// step stops training before that step's update, naming the node and the step; the paused
// state resumes at that very batch and ends where an uninterrupted run ends; a model built to
// kill its ReLUs trips dead-relu; health samples agree with the SGD update they measure.
#include <cmath>
#include <limits>

#include "blobs_source.h"
#include "fault_test_ops.h"
#include "engine/core/op.h"
#include "engine/train/step_watch.h"
#include "engine/train/trainer.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

// test_spoil_marked(x, key; index, above): x, with element `index` made NaN when some element
// of `key` exceeds `above` (a marked batch). test_grad_spoil_marked(x, key; ...): the identity,
// whose gradient is test_spoil_marked(gradient, key): a NaN written in backward, on marked
// batches only. Test-only ops: a run's data chooses the step they fire at.
bool marked(const std::vector<double>& key, double above) {
  for (double k : key)
    if (k > above) return true;
  return false;
}

void register_marked_probes() {
  static const bool done = [] {
    auto infer = [](std::span<const ValueType> in, const Attrs&) -> Result<std::vector<ValueType>> {
      if (in.size() != 2 || in[0].dtype != DType::F32 || in[1].dtype != DType::F32)
        return make_error("the marked probes take two f32 tensors");
      return std::vector<ValueType>{in[0]};
    };
    auto spoil_ref = [](std::span<const RefArray> in, const Attrs& a) {
      RefArray out = in[0];
      const auto k = a.get_int("index");
      if (marked(in[1].v, a.get_float("above")) && k < static_cast<int64_t>(out.v.size()))
        out.v[static_cast<size_t>(k)] = std::numeric_limits<double>::quiet_NaN();
      return std::vector<RefArray>{out};
    };
    auto samples = [] {
      OpSample s;
      s.inputs = {{DType::F32, {2, 3}}, {DType::F32, {2, 3}}};
      s.attrs = {{"index", int64_t{0}}, {"above", 1e9}};
      s.note = "no marked key: the identity (the debugger's test probe)";
      return std::vector<OpSample>{s};
    };
    auto jvp = [](const JvpContext& c) { return Refs{c.tan(0)}; };
    OpRegistry& reg = op_registry();
    reg.define({.name = "test_spoil_marked",
                .num_inputs = 2,
                .attrs = {{"index", AttrKind::Int}, {"above", AttrKind::Float}},
                .infer = infer,
                .vjp = [](const GradContext& c) { return Refs{c.gout(0), Ref{}}; },
                .jvp = jvp,
                .reference = spoil_ref,
                .samples = samples,
                .doc = "test only: a NaN at `index` when the key is marked"});
    reg.define({.name = "test_grad_spoil_marked",
                .num_inputs = 2,
                .attrs = {{"index", AttrKind::Int}, {"above", AttrKind::Float}},
                .infer = infer,
                .vjp =
                    [](const GradContext& c) {
                      return Refs{c.e.emit1("test_spoil_marked", {c.gout(0), c.in(1)}, c.attrs), Ref{}};
                    },
                .jvp = jvp,
                .reference = [](std::span<const RefArray> in,
                                const Attrs&) { return std::vector<RefArray>{in[0]}; },
                .samples = samples,
                .doc = "test only: the identity, whose gradient is spoilt on marked batches"});
    reg.register_kernel("test_spoil_marked", DeviceKind::CPU, DType::F32, [](const KernelCall& c) {
      std::vector<float> v = c.inputs[0]->to_f32();
      const auto k = c.attrs.get_int("index");
      if (marked(c.inputs[1]->to_f64(), c.attrs.get_float("above")) && k < static_cast<int64_t>(v.size()))
        v[static_cast<size_t>(k)] = std::numeric_limits<float>::quiet_NaN();
      c.outputs[0]->fill_from_host(v);
    });
    reg.register_kernel("test_grad_spoil_marked", DeviceKind::CPU, DType::F32, [](const KernelCall& c) {
      c.outputs[0]->fill_from_host(c.inputs[0]->to_f32());
    });
    return true;
  }();
  (void)done;
}

constexpr int64_t kFeatures = 6, kClasses = 3;
constexpr float kMark = 100;  // a marked sample's first feature (the data lie in [-3, 3])

// 6 -> 16 (fc1, act1) -> 16 (fc2, act2) -> 3 (fc3) (tests/engine/fault_test_ops.h); `probe`
// (one of the ops above) after the layer `after`, keyed on the model's input.
ModelBuilder mlp(std::string probe = "", std::string after = "") {
  if (probe.empty()) return probed_mlp(kFeatures, {16, 16}, kClasses);
  return probed_mlp(kFeatures, {16, 16}, kClasses, Probe{probe, after, 3, double{kMark / 2}});
}

TrainConfig config(Breakpoints b = {}) {
  TrainConfig c;
  c.epochs = 2;
  c.batch_size = 32;
  c.seed = 5;
  c.opt = {.type = "sgd", .lr = 0.05};
  c.breaks = b;
  return c;
}

std::vector<std::vector<float>> values(const Trainer& t) {
  std::vector<std::vector<float>> v;
  for (const Tensor& p : t.params()) v.push_back(p.to_f32());
  return v;
}

}  // namespace

TEST_CASE("breakpoints parse, with defaults, and bad parts are named", "[break]") {
  auto b = parse_breakpoints("nan, spike:3,dead-relu:0.8,grad-norm:1e3:1e-7,window:20");
  REQUIRE(b.ok());
  CHECK(b->nan);
  CHECK(b->spike == 3);
  CHECK(b->dead_relu == Approx(0.8));
  CHECK(b->grad_norm_max == 1e3);
  CHECK(b->grad_norm_min == 1e-7);
  CHECK(b->window == 20);
  CHECK(breakpoints_text(*b) == "nan,spike:3,dead-relu:0.8,grad-norm:1000:1e-07,window:20");
  auto d = parse_breakpoints("spike,dead-relu,grad-norm");
  REQUIRE(d.ok());
  CHECK(d->spike == 10);
  CHECK(d->dead_relu == Approx(0.9));
  CHECK(d->grad_norm_max == 1e3);
  CHECK_FALSE(d->nan);
  auto none = parse_breakpoints("none");
  REQUIRE(none.ok());
  CHECK_FALSE(none->any());
  for (const char* bad : {"nan:1", "spike:0.5", "spike:x", "dead-relu:1.5", "grad-norm:1:2",
                          "window:1", "window:2.5", "loss", "none,nan"}) {
    auto r = parse_breakpoints(bad);
    INFO(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("breakpoint") != std::string::npos);
  }
  CHECK(parse_breakpoints("spike:x").error().message.find("'spike:x'") != std::string::npos);
}

TEST_CASE("the watch: a spike against the running median, gradient norms, dead units", "[break]") {
  SECTION("spike") {
    StepWatch w({.spike = 3, .window = 20}, {}, {}, {});
    for (int s = 1; s <= 9; ++s) CHECK_FALSE(w.check({.step = s, .loss = s == 5 ? 100.0 : 1.0}));
    // Ten losses seen (the outlier among them): the median is 1.
    CHECK_FALSE(w.check({.step = 10, .loss = 2.9}));
    auto hit = w.check({.step = 11, .epoch = 1, .batch = 10, .loss = 3.5});
    REQUIRE(hit);
    CHECK(hit->kind == BreakHit::Kind::Spike);
    CHECK(hit->threshold == Approx(3.0));
    CHECK(hit->observed == 3.5);
    CHECK(hit->message.find("step 11") != std::string::npos);
  }
  SECTION("gradient norms: exploding at once, vanishing over the window") {
    StepWatch w({.grad_norm_max = 10, .grad_norm_min = 1e-3, .window = 3}, {"fc1.weight", "fc2.weight"},
                {"fc1", "fc2"}, {});
    const std::vector<float> fine{1, 4}, tiny{1e-8f, 4}, big{1, 121};
    CHECK_FALSE(w.check({.step = 1, .grad_sq = fine}));
    CHECK_FALSE(w.check({.step = 2, .grad_sq = tiny}));
    CHECK_FALSE(w.check({.step = 3, .grad_sq = tiny}));
    auto low = w.check({.step = 4, .grad_sq = tiny});
    REQUIRE(low);
    CHECK(low->kind == BreakHit::Kind::GradNormLow);
    CHECK(low->label == "fc1");
    CHECK(low->observed == Approx(1e-4));
    auto high = w.check({.step = 5, .grad_sq = big});
    REQUIRE(high);
    CHECK(high->kind == BreakHit::Kind::GradNormHigh);
    CHECK(high->label == "fc2");
    CHECK(high->observed == Approx(11));
    CHECK(high->message.find("fc2.weight") != std::string::npos);
  }
  SECTION("non-finite: the loss or a gradient, unless a loss scaler owns the gradients") {
    StepWatch w({.nan = true}, {"w"}, {"fc"}, {});
    const std::vector<float> inf{std::numeric_limits<float>::infinity()};
    CHECK(w.check({.loss = std::nan(""), .grad_sq = {}})->kind == BreakHit::Kind::NonFinite);
    CHECK(w.check({.loss = 1, .grad_sq = inf}));
    CHECK_FALSE(w.check({.loss = 1, .grad_sq = inf, .scaled_gradients = true}));
  }
  SECTION("dead units: never positive over the window") {
    StepWatch w({.dead_relu = 0.5, .window = 4}, {}, {}, {{"act1", 4}, {"act2", 2}});
    // act1's units 0 and 1 fire once each; 2 and 3 never: half dead. act2 lives.
    const std::vector<std::vector<float>> a{{0, 0, 0, 0}, {1, 1}}, b{{2, 0, 0, 0}, {0, 1}},
        c{{0, 3, 0, -1}, {1, 0}};
    CHECK_FALSE(w.check({.step = 1, .activity = &a}));
    CHECK_FALSE(w.check({.step = 2, .activity = &b}));
    CHECK_FALSE(w.check({.step = 3, .activity = &c}));
    auto hit = w.check({.step = 4, .activity = &a});
    REQUIRE(hit);
    CHECK(hit->kind == BreakHit::Kind::DeadRelu);
    CHECK(hit->label == "act1");
    CHECK(hit->observed == 0.5);
    const std::vector<UnitHealth> u = w.take_unit_health();
    REQUIRE(u.size() == 2);
    CHECK(u[0].dead == 2);
    CHECK(u[1].dead == 0);
    CHECK(u[0].window_steps == 4);
  }
}

TEST_CASE("a NaN injected at a chosen node and step stops the run there, before the update",
          "[break]") {
  register_marked_probes();
  auto [probe, phase] = GENERATE(std::pair{"test_spoil_marked", FaultSite::Phase::Forward},
                                 std::pair{"test_grad_spoil_marked", FaultSite::Phase::Backward});
  INFO(probe);
  Blobs data(320, kFeatures, kClasses, 7);  // 10 batches of 32 an epoch
  data.set(7 * 32 + 5, 0, kMark);           // epoch 1, batch 7: the 8th step
  Trainer t(host(), mlp(probe, "fc2"), config({.nan = true}));
  auto r = t.fit({.train = data});
  if (!r) FAIL(r.error().message);
  REQUIRE(r->breakpoint);
  const BreakHit& hit = *r->breakpoint;
  CHECK(hit.kind == BreakHit::Kind::NonFinite);
  CHECK(hit.step == 8);
  CHECK(hit.epoch == 1);
  CHECK(hit.batch == 7);
  REQUIRE(hit.fault);
  CHECK(hit.fault->label == "probe");
  CHECK(hit.fault->phase == phase);
  CHECK(hit.fault->op == "test_spoil_marked");
  CHECK(hit.fault->stats.first_non_finite == 3);
  CHECK(hit.message.find("step 8") != std::string::npos);
  CHECK(hit.message.find("'probe'") != std::string::npos);
  CHECK(r->step_losses.size() == 7);
  CHECK(t.steps_done() == 7);  // the 8th step made no update
  for (const auto& p : values(t))
    for (float v : p) REQUIRE(std::isfinite(v));

  // Its state resumes at that very batch: with the mark gone, the run ends where one that
  // never had it ends.
  auto state = t.state();
  REQUIRE(state.ok());
  CHECK(state->ints.at("batch_in_epoch") == 7);
  Blobs clean(320, kFeatures, kClasses, 7);
  Trainer resumed(host(), mlp(probe, "fc2"), config());
  REQUIRE(resumed.restore(*state).ok());
  auto rr = resumed.fit({.train = clean});
  REQUIRE(rr.ok());
  CHECK_FALSE(rr->breakpoint);
  Trainer whole(host(), mlp(probe, "fc2"), config({.nan = true}));
  auto rw = whole.fit({.train = clean});
  REQUIRE(rw.ok());
  CHECK_FALSE(rw->breakpoint);
  CHECK(resumed.steps_done() == 20);
  CHECK(whole.steps_done() == 20);
  CHECK(values(resumed) == values(whole));
}

TEST_CASE("a learning rate of 1000 is stopped at the first non-finite value, named", "[break]") {
  Blobs data(320, kFeatures, kClasses, 7);
  TrainConfig c = config({.nan = true, .spike = 3});
  c.opt.lr = 1000;
  Trainer t(host(), mlp(), c);
  auto r = t.fit({.train = data});
  REQUIRE(r.ok());
  REQUIRE(r->breakpoint);
  const BreakHit& hit = *r->breakpoint;
  CHECK(hit.kind == BreakHit::Kind::NonFinite);
  REQUIRE(hit.fault);
  // Not the data: a parameter the last update spoilt, or a node that overflowed.
  CHECK(hit.fault->phase != FaultSite::Phase::Input);
  CHECK_FALSE(hit.label.empty());
  CHECK(hit.step == static_cast<int64_t>(r->step_losses.size()) + 1);
}

TEST_CASE("a model built to kill its ReLUs trips dead-relu, naming the layer", "[break]") {
  Blobs data(320, kFeatures, kClasses, 7);
  Trainer t(host(), mlp(), config({.dead_relu = 0.9, .window = 5}));
  REQUIRE(t.init().ok());
  // fc2's bias far below anything its inputs can reach: act2 never fires.
  std::vector<Tensor> v;
  for (size_t i = 0; i < t.params().size(); ++i) {
    std::vector<float> p = t.params()[i].to_f32();
    if (t.param_names()[i] == "fc2.bias")
      for (float& x : p) x = -1e4f;
    v.push_back(Tensor::from_f32(host(), t.params()[i].shape(), p, AllocTag::Parameter));
  }
  REQUIRE(t.set_param_values(v).ok());
  auto r = t.fit({.train = data});
  REQUIRE(r.ok());
  REQUIRE(r->breakpoint);
  CHECK(r->breakpoint->kind == BreakHit::Kind::DeadRelu);
  CHECK(r->breakpoint->label == "act2");
  CHECK(r->breakpoint->observed == 1.0);
  CHECK(r->breakpoint->step == 5);
}

TEST_CASE("health samples measure the update the optimizer made", "[break][health]") {
  Blobs data(320, kFeatures, kClasses, 7);
  TrainConfig c = config();
  c.epochs = 1;
  c.health.every = 4;
  Trainer t(host(), mlp(), c);
  std::vector<HealthSample> got;
  auto r = t.fit({.train = data, .health = [&](const HealthSample& h) { got.push_back(h); }});
  REQUIRE(r.ok());
  REQUIRE(got.size() == 2);  // after steps 4 and 8 of 10
  CHECK(got[0].step == 4);
  CHECK(got[1].step == 8);
  for (const HealthSample& h : got) {
    REQUIRE(h.params.size() == 6);
    CHECK(h.params[0].param == "fc1.weight");
    CHECK(h.params[0].label == "fc1");
    for (const ParamHealth& p : h.params) {
      // Plain SGD: the update is lr times the gradient.
      CHECK(p.update_norm == Approx(0.05 * p.grad_norm).epsilon(1e-4));
      CHECK(p.grad_norm > 0);
    }
    REQUIRE(h.relus.size() == 2);
    CHECK(h.relus[0].label == "act1");
    CHECK(h.relus[0].units == 16);
    CHECK(h.relus[0].window_steps == 4);
    CHECK(h.grad_snr >= 0);  // a small MLP without BatchNorm: measured
  }
  // Distance from the initialisation grows as the steps add up.
  CHECK(got[1].params[0].distance_from_init > got[0].params[0].distance_from_init);
}
