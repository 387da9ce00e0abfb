// Optimizer steps against PyTorch's formulas worked through in double, gradient clipping,
// and learning-rate schedules at chosen steps against closed-form values.
#include <cmath>
#include <numbers>

#include "engine/cpu/cpu_backend.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

// Three steps of `config` on p = [1, -2, 0.5] with the gradients below; returns the
// parameter and the single state tensor.
std::pair<std::vector<double>, std::vector<double>> three_steps(const OptimizerConfig& config) {
  auto opt = Optimizer::create(host(), config);
  REQUIRE(opt.ok());
  std::vector<Tensor> params{Tensor::from_f32(host(), {3}, {1.0f, -2.0f, 0.5f})};
  std::vector<Tensor> grads{Tensor::zeros(host(), DType::F32, {3}, AllocTag::Other)};
  opt->attach(params);
  REQUIRE(opt->state().size() == 1);
  REQUIRE(opt->state()[0].size() == 1);
  const std::vector<std::vector<float>> g{
      {0.1f, -0.3f, 0.2f}, {0.4f, 0.1f, -0.2f}, {-0.2f, 0.5f, 0.3f}};
  for (const auto& gk : g) {
    grads[0].fill_from_host(gk);
    opt->step(params, grads);
  }
  CHECK(opt->steps() == 3);
  return {params[0].to_f64(), opt->state()[0][0].to_f64()};
}

void check_values(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-7));
}

double norm_of(const std::vector<Tensor>& ts) {
  double s = 0;
  for (const Tensor& t : ts)
    for (double x : t.to_f64()) s += x * x;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("RMSprop follows PyTorch's formula over three steps", "[optimizer]") {
  // Expected values: a double-precision loop over the three gradients, per element,
  // g += 0.1 p; s = 0.9 s + 0.1 g^2; p -= 0.01 g / (sqrt(s) + 1e-8)  (torch.optim.RMSprop,
  // centered=False, momentum=0). Step 1, element 0 by hand: g = 0.1 + 0.1 = 0.2,
  // s = 0.004, p = 1 - 0.01 * 0.2 / 0.0632456 = 0.9683772.
  auto [p, s] =
      three_steps({.type = "rmsprop", .lr = 0.01, .weight_decay = 0.1, .eps = 1e-8, .alpha = 0.9});
  check_values(p, {0.9453439194173036, -1.9794977505270102, 0.46045789561530387});
  check_values(s, {0.026582365482315306, 0.030323107988357856, 0.01932271865937342});
}

TEST_CASE("Adagrad follows PyTorch's formula over three steps, with lr decay", "[optimizer]") {
  // Expected values: a double-precision loop, per step t = 1..3 and element,
  // clr = 0.1 / (1 + (t - 1) 0.5); g += 0.05 p; s += g^2; p -= clr g / (sqrt(s) + 1e-10)
  // (torch.optim.Adagrad, initial_accumulator_value=0). Step 1, element 0 by hand:
  // g = 0.15, s = 0.0225, p = 1 - 0.1 * 0.15 / 0.15 = 0.9.
  auto [p, s] = three_steps(
      {.type = "adagrad", .lr = 0.1, .weight_decay = 0.05, .eps = 1e-10, .lr_decay = 0.5});
  check_values(p, {0.8527846791085034, -1.936404339923999, 0.404382067564319});
  check_values(s, {0.24553917774742354, 0.3240162543712417, 0.1867620188116324});
}

TEST_CASE("an update cut into pieces across threads matches the formula on every element",
          "[optimizer]") {
  // A backend with 3 threads cuts the parameters into pieces (of whole cache lines, several
  // per parameter here, the last ones short): every element must still follow the formula.
  // SGD with momentum, Nesterov and weight decay, three steps, against a double loop:
  // g += wd p; v = m v + g; p -= lr (g + m v).
  cpu::CpuBackend pool(3);
  auto opt = Optimizer::create(
      pool, {.type = "sgd", .lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
  REQUIRE(opt.ok());
  const std::vector<int64_t> sizes{5003, 3, 2500, 1, 700};
  std::vector<Tensor> params, grads;
  std::vector<std::vector<double>> p, v;
  for (int64_t n : sizes) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i + n));
    params.push_back(Tensor::from_f32(pool, {n}, x));
    grads.push_back(Tensor::zeros(pool, DType::F32, {n}, AllocTag::Other));
    p.emplace_back(x.begin(), x.end());
    v.emplace_back(static_cast<size_t>(n), 0.0);
  }
  opt->attach(params);
  for (int step = 0; step < 3; ++step) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> g(static_cast<size_t>(sizes[k]));
      for (size_t i = 0; i < g.size(); ++i)
        g[i] = std::cos(0.11f * static_cast<float>(i) + static_cast<float>(step + k));
      grads[k].fill_from_host(g);
      for (size_t i = 0; i < g.size(); ++i) {
        const double gi = g[i] + 0.01 * p[k][i];
        v[k][i] = 0.9 * v[k][i] + gi;
        p[k][i] -= 0.1 * (gi + 0.9 * v[k][i]);
      }
    }
    opt->step(params, grads);
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    INFO("parameter " << k << " of " << sizes[k] << " values");
    check_values(params[k].to_f64(), p[k]);
    check_values(opt->state()[k][0].to_f64(), v[k]);
  }
}

TEST_CASE("optimizer configurations with bad parameters are errors", "[optimizer]") {
  auto m = Optimizer::create(host(), {.type = "rmsprop", .momentum = 0.9});
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().message.find("momentum") != std::string::npos);
  auto a = Optimizer::create(host(), {.type = "rmsprop", .alpha = 1.5});
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message.find("alpha") != std::string::npos);
  auto d = Optimizer::create(host(), {.type = "adagrad", .lr_decay = -1});
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().message.find("lr_decay") != std::string::npos);
  auto u = Optimizer::create(host(), {.type = "lion"});
  REQUIRE_FALSE(u.ok());
  CHECK(u.error().message.find("'lion'") != std::string::npos);
}

TEST_CASE("clip_grad_norm returns the total norm and scales to max_norm", "[optimizer][clip]") {
  // Total norm sqrt(3^2 + 4^2 + 12^2) = 13 across both tensors.
  std::vector<Tensor> g{Tensor::from_f32(host(), {2}, {3.0f, 4.0f}),
                        Tensor::from_f32(host(), {1}, {12.0f})};
  CHECK(Optimizer::clip_grad_norm(g, 100.0) == Approx(13.0));
  check_values(g[0].to_f64(), {3.0, 4.0});  // below max_norm: untouched
  CHECK(Optimizer::clip_grad_norm(g, 6.5) == Approx(13.0));
  // Scaled by 6.5 / (13 + 1e-6), as PyTorch: halved.
  check_values(g[0].to_f64(), {1.5, 2.0});
  check_values(g[1].to_f64(), {6.0});
  CHECK(norm_of(g) == Approx(6.5).epsilon(1e-6));
  CHECK(Optimizer::clip_grad_norm(g, 6.5) == Approx(6.5).epsilon(1e-6));
}

TEST_CASE("clip_grad_value clamps every element", "[optimizer][clip]") {
  std::vector<Tensor> g{Tensor::from_f32(host(), {4}, {-2.0f, 0.5f, 3.0f, -0.25f})};
  Optimizer::clip_grad_value(g, 1.0);
  check_values(g[0].to_f64(), {-1.0, 0.5, 1.0, -0.25});
}

TEST_CASE("step and exponential schedules decay per epoch", "[schedule]") {
  auto s = make_schedule({.type = "step", .lr = 0.1, .step_size = 2, .gamma = 0.5});
  REQUIRE(s.ok());
  // 10 steps per epoch: epochs 0-1 at 0.1, 2-3 at 0.05, 4 at 0.025.
  CHECK((*s)->lr_at(0, 10) == Approx(0.1));
  CHECK((*s)->lr_at(19, 10) == Approx(0.1));
  CHECK((*s)->lr_at(20, 10) == Approx(0.05));
  CHECK((*s)->lr_at(39, 10) == Approx(0.05));
  CHECK((*s)->lr_at(40, 10) == Approx(0.025));
  auto e = make_schedule({.type = "exponential", .lr = 0.1, .gamma = 0.9});
  REQUIRE(e.ok());
  CHECK((*e)->lr_at(9, 10) == Approx(0.1));
  CHECK((*e)->lr_at(30, 10) == Approx(0.1 * 0.729));  // epoch 3: 0.9^3
}

TEST_CASE("cosine schedule anneals to eta_min", "[schedule]") {
  auto s = make_schedule({.type = "cosine", .lr = 0.1, .total_epochs = 10, .eta_min = 0.01});
  REQUIRE(s.ok());
  CHECK((*s)->lr_at(0, 5) == Approx(0.1));
  CHECK((*s)->lr_at(25, 5) == Approx((0.1 + 0.01) / 2));  // epoch 5 of 10: the midpoint
  // Epoch 2: 0.01 + 0.09 (1 + cos(0.2 pi)) / 2 = 0.0914057647.
  CHECK((*s)->lr_at(10, 5) == Approx(0.09140576474687263));
  CHECK((*s)->lr_at(50, 5) == Approx(0.01));
  CHECK((*s)->lr_at(500, 5) == Approx(0.01));  // held after the last epoch
}

TEST_CASE("linear warm-up starts at lr / warmup and hands over to the inner schedule",
          "[schedule]") {
  auto s = make_schedule({.type = "constant", .lr = 0.1, .warmup_steps = 4});
  REQUIRE(s.ok());
  CHECK((*s)->lr_at(0, 100) == Approx(0.025));
  CHECK((*s)->lr_at(1, 100) == Approx(0.05));
  CHECK((*s)->lr_at(2, 100) == Approx(0.075));
  CHECK((*s)->lr_at(3, 100) == Approx(0.1));
  CHECK((*s)->lr_at(4, 100) == Approx(0.1));
  // The inner schedule sees the global step: step decay at epoch 1 (step 2) during warm-up.
  auto w =
      make_schedule({.type = "step", .lr = 0.1, .step_size = 1, .gamma = 0.5, .warmup_steps = 4});
  REQUIRE(w.ok());
  CHECK((*w)->lr_at(2, 2) == Approx(0.05 * 3 / 4));
  CHECK((*w)->lr_at(4, 2) == Approx(0.025));
}

TEST_CASE("one-cycle schedule follows OneCycleLR with cosine annealing", "[schedule]") {
  auto s = make_schedule({.type = "one_cycle", .max_lr = 1.0, .total_steps = 100});
  REQUIRE(s.ok());
  // Initial max_lr / 25 = 0.04; peak at step 0.3 * 100 - 1 = 29 (PyTorch's end of phase 1);
  // final 0.04 / 1e4 = 4e-6 at step 99.
  CHECK((*s)->lr_at(0, 1) == Approx(0.04));
  // Step 10: 1 + (0.04 - 1) / 2 (cos(pi 10 / 29) + 1) = 0.29516394846410077.
  CHECK((*s)->lr_at(10, 1) == Approx(0.29516394846410077));
  CHECK((*s)->lr_at(29, 1) == Approx(1.0));
  CHECK((*s)->lr_at(64, 1) == Approx((1.0 + 4e-6) / 2));  // halfway through phase 2 (29..99)
  CHECK((*s)->lr_at(99, 1) == Approx(4e-6));
  CHECK((*s)->lr_at(150, 1) == Approx(4e-6));
}

TEST_CASE("reduce-on-plateau cuts the rate after patience + 1 bad epochs", "[schedule]") {
  auto s = make_schedule({.type = "plateau", .lr = 0.1, .factor = 0.5, .patience = 2});
  REQUIRE(s.ok());
  Schedule& p = **s;
  p.on_metric(1.0);  // best
  p.on_metric(1.0);  // bad 1
  CHECK(p.lr_at(0, 1) == Approx(0.1));
  p.on_metric(0.99995);  // a relative gain of 5e-5 < threshold 1e-4: bad 2
  CHECK(p.lr_at(0, 1) == Approx(0.1));
  p.on_metric(1.0);  // bad 3 > patience: halved
  CHECK(p.lr_at(0, 1) == Approx(0.05));
  p.on_metric(0.5);  // a real improvement: unchanged
  CHECK(p.lr_at(0, 1) == Approx(0.05));
  // PyTorch's defaults: factor 0.1 after 11 bad epochs.
  auto d = make_schedule({.type = "plateau", .lr = 0.1});
  REQUIRE(d.ok());
  (*d)->on_metric(2.0);
  for (int i = 0; i < 10; ++i) (*d)->on_metric(2.0);
  CHECK((*d)->lr_at(0, 1) == Approx(0.1));
  (*d)->on_metric(2.0);
  CHECK((*d)->lr_at(0, 1) == Approx(0.01));
}

TEST_CASE("make_schedule rejects bad parameters with clear errors", "[schedule]") {
  auto expect_error = [](const ScheduleConfig& c, const std::string& word) {
    auto s = make_schedule(c);
    REQUIRE_FALSE(s.ok());
    INFO(s.error().message);
    CHECK(s.error().message.find(word) != std::string::npos);
  };
  expect_error({.type = "cosine", .total_epochs = 0}, "total_epochs");
  expect_error({.type = "step", .step_size = 0}, "step_size");
  expect_error({.type = "one_cycle", .total_steps = 100, .pct_start = 1.5}, "pct_start");
  expect_error({.type = "one_cycle", .total_steps = 0}, "total_steps");
  expect_error({.type = "plateau", .factor = 1.5}, "factor");
  expect_error({.type = "plateau", .mode = "up"}, "mode");
  expect_error({.type = "constant", .lr = -1}, "lr");
  expect_error({.type = "constant", .warmup_steps = -3}, "warmup_steps");
  expect_error({.type = "linear"}, "unknown type 'linear'");
}
