// What the trainer keeps beyond parameters: BatchNorm's running statistics (updated in the
// same step, used in evaluation), a fresh dropout mask every step (one compiled plan),
// frozen parameters, and a state that restores exactly.
#include <cmath>

#include "blobs_source.h"
#include "engine/ops/nn.h"
#include "engine/train/trainer.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

struct Options {
  bool batch_norm = false;
  double dropout = 0.0;
  bool freeze_first = false;
};

// features -> linear(16) -> [batch norm] -> relu -> [dropout] -> linear(classes).
ModelBuilder builder(int64_t features, int64_t classes, Options o) {
  return [=](int64_t batch, bool training) -> Result<ModelGraph> {
    ModelGraph m{Graph("net"), {}, {}, {}, {}, {}};
    Graph& g = m.graph;
    m.input = g.add_input("x", {DType::F32, {batch, features}});
    m.labels = g.add_input("y", {DType::I64, {batch}});
    Ref w1 = g.add_param("fc1.weight", {DType::F32, {features, 16}}, {"kaiming_uniform", features, 16}, !o.freeze_first);
    Ref b1 = g.add_param("fc1.bias", {DType::F32, {16}}, {"uniform_fan_in", features, 16}, !o.freeze_first);
    Ref h = linear(g, m.input, w1, b1);
    if (o.batch_norm) {
      Ref gamma = g.add_param("bn.weight", {DType::F32, {16}}, {"ones", 16, 16});
      Ref beta = g.add_param("bn.bias", {DType::F32, {16}}, {"zeros", 16, 16});
      Ref rm = g.add_param("bn.running_mean", {DType::F32, {16}}, {"zeros", 16, 16}, false);
      Ref rv = g.add_param("bn.running_var", {DType::F32, {16}}, {"ones", 16, 16}, false);
      if (training) {
        BatchNormOut bn = batch_norm_train(g, h, gamma, beta);
        ema_update(g, rm, bn.mean, 0.1);
        ema_update(g, rv, scale(g, bn.var, batch_norm_unbiased_factor(g.shape_of(h))), 0.1);
        h = bn.y;
      } else {
        h = batch_norm_eval(g, h, gamma, beta, rm, rv);
      }
    }
    h = relu(g, h);
    if (o.dropout > 0 && training) {
      m.step_seed = g.add_input("step_seed", {DType::I64, {1}});
      h = dropout(g, h, o.dropout, 17, m.step_seed, true);
    }
    Ref w2 = g.add_param("fc2.weight", {DType::F32, {16, classes}}, {"kaiming_uniform", 16, classes});
    Ref b2 = g.add_param("fc2.bias", {DType::F32, {classes}}, {"uniform_fan_in", 16, classes});
    m.logits = linear(g, h, w2, b2);
    m.loss = cross_entropy(g, m.logits, m.labels);
    return m;
  };
}

size_t index_of(const Trainer& t, const std::string& name) {
  const auto& names = t.param_names();
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

}  // namespace

TEST_CASE("batch norm keeps PyTorch's running statistics and evaluation uses them", "[trainer][state]") {
  Blobs data(64, 6, 3, 5);
  Trainer t(host(), builder(6, 3, {.batch_norm = true}), {.epochs = 1, .batch_size = 64, .seed = 2, .opt = {.lr = 0.0}});
  REQUIRE(t.init().ok());
  // The pre-activations of the one batch, in double, from the initial weights.
  HostBatch b;
  data.start_epoch(0);
  REQUIRE(data.next(64, b));
  auto w = t.params()[index_of(t, "fc1.weight")].to_f64(), bias = t.params()[index_of(t, "fc1.bias")].to_f64();
  std::vector<double> mean(16, 0), sq(16, 0);
  for (int64_t i = 0; i < 64; ++i)
    for (int64_t j = 0; j < 16; ++j) {
      double h = bias[static_cast<size_t>(j)];
      for (int64_t k = 0; k < 6; ++k) h += b.x[static_cast<size_t>(i * 6 + k)] * w[static_cast<size_t>(k * 16 + j)];
      mean[static_cast<size_t>(j)] += h / 64;
      sq[static_cast<size_t>(j)] += h * h;
    }
  REQUIRE(t.train_step(b).ok());
  auto rm = t.params()[index_of(t, "bn.running_mean")].to_f64();
  auto rv = t.params()[index_of(t, "bn.running_var")].to_f64();
  for (size_t j = 0; j < 16; ++j) {
    const double unbiased = (sq[j] - 64 * mean[j] * mean[j]) / 63;
    CHECK(rm[j] == Approx(0.1 * mean[j]).margin(1e-5));
    CHECK(rv[j] == Approx(0.9 + 0.1 * unbiased).epsilon(1e-4));
  }
  // Evaluation normalises with the running statistics, so its loss differs from training's
  // batch-statistics loss on the same batch (lr 0: the weights did not move).
  auto ev = t.evaluate(data);
  REQUIRE(ev.ok());
  auto again = t.train_step(b);
  REQUIRE(again.ok());
  CHECK(std::abs(ev->loss - *again) > 1e-3);
}

TEST_CASE("dropout draws a new mask every step in one compiled plan, eager equal to static", "[trainer][state]") {
  Blobs data(32 * 20, 6, 3, 7);
  TrainConfig cfg{.epochs = 1, .batch_size = 32, .seed = 4, .opt = {.type = "sgd", .lr = 0.0}};
  Trainer st(host(), builder(6, 3, {.dropout = 0.5}), cfg);
  HostBatch b;
  data.start_epoch(0);
  REQUIRE(data.next(32, b));
  auto l1 = st.train_step(b), l2 = st.train_step(b);
  REQUIRE(l1.ok());
  REQUIRE(l2.ok());
  CHECK(*l1 != *l2);  // same weights (lr 0), same batch: only the mask changed
  // Training with dropout: the static plan and the eager replay draw the same masks.
  cfg.opt.lr = 0.1;
  Trainer a(host(), builder(6, 3, {.dropout = 0.3}), cfg);
  cfg.mode = ExecMode::Eager;
  Trainer e(host(), builder(6, 3, {.dropout = 0.3}), cfg);
  auto ra = a.fit(data, nullptr, nullptr), re = e.fit(data, nullptr, nullptr);
  REQUIRE(ra.ok());
  REQUIRE(re.ok());
  REQUIRE(ra->step_losses.size() == 20);
  for (size_t i = 0; i < 20; ++i) CHECK(ra->step_losses[i] == Approx(re->step_losses[i]).epsilon(1e-5));
}

TEST_CASE("frozen parameters stay as they were, the others train", "[trainer][state]") {
  Blobs data(256, 6, 3, 9);
  Trainer t(host(), builder(6, 3, {.freeze_first = true}), {.epochs = 2, .batch_size = 32, .seed = 1, .opt = {.lr = 0.1}});
  REQUIRE(t.init().ok());
  auto w1 = t.params()[index_of(t, "fc1.weight")].to_f64(), w2 = t.params()[index_of(t, "fc2.weight")].to_f64();
  REQUIRE(t.fit(data, nullptr, nullptr).ok());
  CHECK(t.params()[index_of(t, "fc1.weight")].to_f64() == w1);
  CHECK(t.params()[index_of(t, "fc2.weight")].to_f64() != w2);
}

TEST_CASE("a restored state continues exactly where it was taken", "[trainer][state]") {
  Blobs data(32 * 8, 6, 3, 11);
  TrainConfig cfg{.epochs = 4, .batch_size = 32, .seed = 3,
                  .opt = {.type = "adam", .lr = 0.01},
                  .schedule = {.type = "plateau", .factor = 0.5, .patience = 0}};
  cfg.stop_after_epochs = 2;
  Options o{.batch_norm = true, .dropout = 0.2};
  Trainer a(host(), builder(6, 3, o), cfg);
  REQUIRE(a.fit(data, nullptr, nullptr).ok());
  REQUIRE(a.epochs_done() == 2);
  auto state = a.state();
  REQUIRE(state.ok());
  cfg.stop_after_epochs = 0;
  Trainer b(host(), builder(6, 3, o), cfg);
  REQUIRE(b.restore(*state).ok());
  auto rb = b.fit(data, nullptr, nullptr);
  Trainer c(host(), builder(6, 3, o), cfg);
  auto rc = c.fit(data, nullptr, nullptr);
  REQUIRE(rb.ok());
  REQUIRE(rc.ok());
  REQUIRE(rb->step_losses.size() == 16);
  REQUIRE(rc->step_losses.size() == 32);
  for (size_t i = 0; i < 16; ++i) CHECK(rb->step_losses[i] == rc->step_losses[16 + i]);  // bit for bit
  // A state from another model is refused with the tensor's name.
  Trainer other(host(), builder(6, 3, {}), cfg);
  auto r = other.restore(*state);
  CHECK_FALSE(r.ok());
}

TEST_CASE("early stopping ends training when the validation metric stops improving", "[trainer][state]") {
  Blobs train(256, 6, 3, 13), val(128, 6, 3, 14);
  TrainConfig cfg{.epochs = 50, .batch_size = 32, .seed = 1, .opt = {.lr = 2.0}};  // far too large: no progress
  cfg.early_stop = {.patience = 3, .monitor = "accuracy"};
  Trainer t(host(), builder(6, 3, {}), cfg);
  int64_t reports = 0, improved = 0;
  FitInputs in{.train = train, .validation = &val};
  in.on_epoch_end = [&](const EpochReport& r) -> Result<void> {
    ++reports;
    improved += r.improved;
    return {};
  };
  auto r = t.fit(in);
  REQUIRE(r.ok());
  CHECK(r->stopped_early);
  CHECK(reports == r->best_epoch + 3);  // three epochs without a better accuracy after the best
  CHECK(improved >= 1);
  // Without a validation split, early stopping is refused.
  Trainer u(host(), builder(6, 3, {}), cfg);
  CHECK_FALSE(u.fit(train, nullptr, nullptr).ok());
}
