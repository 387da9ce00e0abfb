// The composites of engine/ops/nn.h (losses, batch_norm_eval), which the registry walk does
// not see, against float64 hand computations and finite differences; the dropout mask
// against the splitmix64 stream; batch norm's second derivative against the classic
// backward formula; out-of-range embedding indices; and type errors that name the shapes.
#include <algorithm>
#include <cmath>
#include <functional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/nn.h"
#include "grad_check.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {





std::vector<double> uniform(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(r.uniform(lo, hi));  // representable in f32
  return v;
}

In f32_in(Shape s, std::vector<double> v) {
  return In{{DType::F32, std::move(s)}, std::move(v)};
}
In i64_in(Shape s, std::vector<double> v) {
  return In{{DType::I64, std::move(s)}, std::move(v)};
}

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace

TEST_CASE("mse_loss: value and gradients", "[norm][loss]") {
  std::vector<double> a = uniform(12, 1), b = uniform(12, 2);
  auto f = [](const std::vector<std::vector<double>>& in) {
    double s = 0;
    for (size_t i = 0; i < in[0].size(); ++i) s += (in[0][i] - in[1][i]) * (in[0][i] - in[1][i]);
    return s / static_cast<double>(in[0].size());
  };
  Evaluated r = evaluate({f32_in({3, 4}, a), f32_in({3, 4}, b)},
                         [](Graph& g, const Refs& x) { return mse_loss(g, x[0], x[1]); });
  CHECK(std::abs(r.value - f({a, b})) <= 1e-6 * std::abs(f({a, b})));
  require_close(r.grads[0], fd_grad(f, {a, b}, 0), 1e-4, 1e-7, "d/dprediction");
  require_close(r.grads[1], fd_grad(f, {a, b}, 1), 1e-4, 1e-7, "d/dtarget");
}

TEST_CASE("bce_with_logits: stable for large logits, right gradient at 0", "[norm][loss]") {
  // 30 and -25 overflow the textbook form in f32 (sigmoid(30) rounds to 1, log(1 - 1) = -inf).
  std::vector<double> x{0.0, 30.0, -25.0, 1.5, -0.75, 3.0, -2.0, 0.25};
  std::vector<double> t{1.0, 0.0, 1.0, 0.3, 1.0, 0.9, 0.0, 0.5};
  // The textbook form in float64, with 1 - sigmoid(x) written sigmoid(-x).
  auto f = [](const std::vector<std::vector<double>>& in) {
    double s = 0;
    for (size_t i = 0; i < in[0].size(); ++i)
      s -= in[1][i] * std::log(sigmoid(in[0][i])) + (1 - in[1][i]) * std::log(sigmoid(-in[0][i]));
    return s / static_cast<double>(in[0].size());
  };
  Evaluated r = evaluate({f32_in({2, 4}, x), f32_in({2, 4}, t)},
                         [](Graph& g, const Refs& v) { return bce_with_logits(g, v[0], v[1]); });
  REQUIRE(std::isfinite(r.value));
  CHECK(std::abs(r.value - f({x, t})) <= 1e-6 * std::abs(f({x, t})));
  require_close(r.grads[0], fd_grad(f, {x, t}, 0), 1e-4, 1e-7, "d/dlogits");
  require_close(r.grads[1], fd_grad(f, {x, t}, 1), 1e-4, 1e-7, "d/dtargets");
  // At a logit of exactly 0 (a zero-initialised head) the gradient is (sigmoid(0) - t) / n.
  CHECK(std::abs(r.grads[0][0] - (0.5 - 1.0) / 8) < 1e-7);
}

TEST_CASE("nll_loss: value, gradient, and nll_loss(log_softmax) == cross_entropy", "[norm][loss]") {
  const int64_t n = 4, c = 5;
  std::vector<double> lp = uniform(n * c, 3, -3, 0);
  std::vector<double> labels{2, 0, 4, 2};
  auto f = [&](const std::vector<std::vector<double>>& in) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i)
      s -= in[0][static_cast<size_t>(i * c + static_cast<int64_t>(labels[i]))];
    return s / n;
  };
  Evaluated r = evaluate({f32_in({n, c}, lp), i64_in({n}, labels)},
                         [](Graph& g, const Refs& v) { return nll_loss(g, v[0], v[1]); });
  CHECK(std::abs(r.value - f({lp})) <= 1e-6 * std::abs(f({lp})));
  require_close(r.grads[0], fd_grad(f, {lp}, 0), 1e-4, 1e-7, "d/dlog_probs");

  std::vector<double> logits = uniform(n * c, 4, -2, 2);
  Evaluated a =
      evaluate({f32_in({n, c}, logits), i64_in({n}, labels)},
               [](Graph& g, const Refs& v) { return nll_loss(g, log_softmax(g, v[0], 1), v[1]); });
  Evaluated b = evaluate({f32_in({n, c}, logits), i64_in({n}, labels)},
                         [](Graph& g, const Refs& v) { return cross_entropy(g, v[0], v[1]); });
  CHECK(std::abs(a.value - b.value) < 1e-6);
  require_close(a.grads[0], b.grads[0], 1e-5, 1e-7, "the same gradient as cross_entropy");
}

TEST_CASE("batch_norm_eval: the running statistics normalise, gradients of all five inputs",
          "[norm]") {
  const int64_t n = 2, ch = 3, s = 4;  // x [2, 3, 2, 2]
  std::vector<double> x = uniform(n * ch * s, 5, -2, 2), gamma = uniform(ch, 6),
                      beta = uniform(ch, 7);
  std::vector<double> rm = uniform(ch, 8), rv = uniform(ch, 9, 0.5, 2);
  const double eps = 1e-3;
  auto f = [&](const std::vector<std::vector<double>>& in) {  // sum(y * w), w = 1 + index / 10
    double total = 0;
    for (size_t i = 0; i < in[0].size(); ++i) {
      size_t k = (i / s) % ch;
      double y = in[1][k] * (in[0][i] - in[3][k]) / std::sqrt(in[4][k] + eps) + in[2][k];
      total += y * (1 + static_cast<double>(i) / 10);
    }
    return total;
  };
  std::vector<double> w(x.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = 1 + static_cast<double>(i) / 10;
  Evaluated r =
      evaluate({f32_in({n, ch, 2, 2}, x), f32_in({ch}, gamma), f32_in({ch}, beta), f32_in({ch}, rm),
                f32_in({ch}, rv), f32_in({n, ch, 2, 2}, w)},
               [&](Graph& g, const Refs& v) {
                 return sum(g, mul(g, batch_norm_eval(g, v[0], v[1], v[2], v[3], v[4], eps), v[5]),
                            {}, false);
               });
  std::vector<std::vector<double>> in{x, gamma, beta, rm, rv};
  CHECK(std::abs(r.value - f(in)) <= 1e-5 * std::abs(f(in)));
  const char* names[] = {"x", "gamma", "beta", "running_mean", "running_var"};
  for (size_t k = 0; k < 5; ++k) require_close(r.grads[k], fd_grad(f, in, k), 1e-4, 1e-5, names[k]);
}

TEST_CASE("batch_norm_train: biased var normalises, the unbiased factor gives running_var",
          "[norm]") {
  const Shape shape{4, 2, 3};
  std::vector<double> x = uniform(24, 10, -3, 3);
  EagerSession s(host());
  Ref xr = s.leaf(to_tensor(RefArray{shape, x}, DType::F32));
  Ref gamma = s.leaf(Tensor::from_f32(host(), {2}, {1.f, 1.f}));
  Ref beta = s.leaf(Tensor::from_f32(host(), {2}, {0.f, 0.f}));
  BatchNormOut bn = batch_norm_train(s, xr, gamma, beta);
  auto mean = s.value(bn.mean).to_f64(), var = s.value(bn.var).to_f64();
  CHECK(batch_norm_count(shape) == 12);
  CHECK(batch_norm_unbiased_factor(shape) == Approx(12.0 / 11.0));
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j) sum += x[static_cast<size_t>((i * 2 + c) * 3 + j)];
    double mu = sum / 12;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j)
        sq += std::pow(x[static_cast<size_t>((i * 2 + c) * 3 + j)] - mu, 2);
    CHECK(mean[static_cast<size_t>(c)] == Approx(mu).margin(1e-6));
    CHECK(var[static_cast<size_t>(c)] * batch_norm_unbiased_factor(shape) ==
          Approx(sq / 11).epsilon(1e-6));
  }
  // The normalised output has mean 0 and (biased) variance var / (var + eps) per channel.
  auto y = s.value(bn.y).to_f64();
  for (int64_t c = 0; c < 2; ++c) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        double v = y[static_cast<size_t>((i * 2 + c) * 3 + j)];
        sum += v;
        sq += v * v;
      }
    CHECK(std::abs(sum / 12) < 1e-6);
    double vc = var[static_cast<size_t>(c)];
    CHECK(sq / 12 == Approx(vc / (vc + kNormEps)).epsilon(1e-5));
  }
}

TEST_CASE("batch_norm_train's backward differentiates again (against the classic formula)",
          "[norm][autodiff]") {
  // L2 = sum(dx * v) with dx = d sum(y * w) / dx; the classic formula in float64 is
  // dx = gamma rstd (w - mean(w) - xhat mean(w xhat)), means over every axis but 1.
  for (Shape shape : {Shape{5, 3}, Shape{2, 3, 2, 2}}) {
    INFO("x " << shape_str(shape));
    const int64_t ch = shape[1], sp = numel(shape) / (shape[0] * ch), m = numel(shape) / ch;
    const auto nx = static_cast<size_t>(numel(shape));
    std::vector<double> x = uniform(nx, 11, -2, 2),
                        gamma = uniform(static_cast<size_t>(ch), 12, 0.5, 1.5);
    std::vector<double> w = uniform(nx, 13), v = uniform(nx, 14);
    const double eps = 1e-5;
    auto chan = [&](size_t i) { return (static_cast<int64_t>(i) / sp) % ch; };
    auto l2 = [&](const std::vector<std::vector<double>>& in) {
      const auto &xx = in[0], &gg = in[1];
      std::vector<double> mu(static_cast<size_t>(ch)), var(mu.size()), mw(mu.size()),
          mwx(mu.size());
      for (size_t i = 0; i < nx; ++i)
        mu[static_cast<size_t>(chan(i))] += xx[i] / static_cast<double>(m);
      for (size_t i = 0; i < nx; ++i)
        var[static_cast<size_t>(chan(i))] +=
            std::pow(xx[i] - mu[static_cast<size_t>(chan(i))], 2) / static_cast<double>(m);
      auto xhat = [&](size_t i) {
        auto k = static_cast<size_t>(chan(i));
        return (xx[i] - mu[k]) / std::sqrt(var[k] + eps);
      };
      for (size_t i = 0; i < nx; ++i) {
        auto k = static_cast<size_t>(chan(i));
        mw[k] += w[i] / static_cast<double>(m);
        mwx[k] += w[i] * xhat(i) / static_cast<double>(m);
      }
      double total = 0;
      for (size_t i = 0; i < nx; ++i) {
        auto k = static_cast<size_t>(chan(i));
        double dx = gg[k] / std::sqrt(var[k] + eps) * (w[i] - mw[k] - xhat(i) * mwx[k]);
        total += dx * v[i];
      }
      return total;
    };

    Graph g("bn2");
    Ref xr = g.add_input("x", {DType::F32, shape});
    Ref gr = g.add_input("gamma", {DType::F32, {ch}});
    Ref br = g.add_constant("beta", Tensor::zeros(host(), DType::F32, {ch}, AllocTag::Other));
    Ref wr = g.add_constant("w", to_tensor(RefArray{shape, w}, DType::F32));
    Ref vr = g.add_constant("v", to_tensor(RefArray{shape, v}, DType::F32));
    BatchNormOut bn = batch_norm_train(g, xr, gr, br, eps);
    auto g1 = append_backward(g, sum(g, mul(g, bn.y, wr), {}, false), Refs{xr});
    REQUIRE(g1.ok());
    Ref loss2 = sum(g, mul(g, (*g1)[0], vr), {}, false);
    auto g2 = append_backward(g, loss2, Refs{xr, gr});
    REQUIRE(g2.ok());
    g.set_outputs({loss2, (*g2)[0], (*g2)[1]});
    auto plan = CompiledPlan::compile(g, host());
    REQUIRE(plan.ok());
    REQUIRE(plan->bind(xr, to_tensor(RefArray{shape, x}, DType::F32)).ok());
    REQUIRE(plan->bind(gr, to_tensor(RefArray{{ch}, gamma}, DType::F32)).ok());
    plan->run();
    CHECK(plan->tensor(loss2).to_f64()[0] == Approx(l2({x, gamma})).epsilon(1e-4).margin(1e-5));
    require_close(plan->tensor((*g2)[0]).to_f64(), fd_grad(l2, {x, gamma}, 0), 2e-3, 2e-4, "d2/dx");
    require_close(plan->tensor((*g2)[1]).to_f64(), fd_grad(l2, {x, gamma}, 1), 2e-3, 2e-4,
                  "d2/dgamma");
  }
}

TEST_CASE("dropout: the mask is the splitmix64 stream of the seed, in graph and eager alike",
          "[norm]") {
  const int64_t n = 10000;
  const double p = 0.3;
  const uint64_t seed = 1234567;
  EagerSession s(host());
  Ref x = s.leaf(Tensor::from_f32(host(), {100, 100}, std::vector<float>(n, 2.0f)), true);
  Tensor step_t = Tensor::from_i64(host(), {1}, {41});
  Ref step = s.leaf(step_t);
  Ref y = dropout(s, x, p, seed, step, true);
  auto yv = s.value(y).to_f64();
  Rng stream(dropout_seed(static_cast<int64_t>(seed), 41));
  int64_t kept = 0;
  bool same = true;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = stream.uniform() >= p;
    kept += keep;
    double want = keep ? 2.0 / (1 - p) : 0.0;
    same = same && std::abs(yv[static_cast<size_t>(i)] - want) < 1e-5;
  }
  CHECK(same);
  CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.02);
  // The gradient passes through the same mask, scaled the same.
  Refs g = s.grad(sum(s, y, {}, false), Refs{x});
  auto gv = s.value(g[0]).to_f64();
  for (size_t i = 0; i < gv.size(); ++i) REQUIRE(gv[i] == Approx(yv[i] / 2.0));
  // Another seed, another mask; not training: the identity.
  CHECK(s.value(dropout(s, x, p, seed + 1, step, true)).to_f64() != yv);
  auto ident = s.value(dropout(s, x, p, seed, step, false)).to_f64();
  CHECK(std::all_of(ident.begin(), ident.end(), [](double v) { return v == 2.0; }));
  // The static plan draws the same mask.
  Graph gr("dropout");
  Ref xi = gr.add_input("x", {DType::F32, {100, 100}});
  Ref si = gr.add_input("step_seed", {DType::I64, {1}});
  Ref yo = dropout(gr, xi, p, seed, si, true);
  gr.set_outputs({yo});
  auto plan = CompiledPlan::compile(gr, host());
  REQUIRE(plan.ok());
  REQUIRE(plan->bind(xi, s.value(x)).ok());
  REQUIRE(plan->bind(si, step_t).ok());
  plan->run();
  CHECK(plan->tensor(yo).to_f64() == yv);
  // A new step seed in the bound tensor: the same plan draws a new mask.
  int64_t next = 42;
  step_t.fill_raw(&next, sizeof next);
  plan->run();
  CHECK(plan->tensor(yo).to_f64() != yv);
}

TEST_CASE("embedding: out-of-range indices give zero rows and no gradient, repeats accumulate",
          "[norm]") {
  EagerSession s(host());
  Ref w = s.leaf(Tensor::from_f32(host(), {3, 2}, {1, 2, 3, 4, 5, 6}), true);
  Ref idx = s.leaf(Tensor::from_i64(host(), {5}, {0, -1, 3, 2, 0}));
  Ref y = embedding(s, w, idx);
  CHECK(s.value(y).shape() == Shape{5, 2});
  CHECK(s.value(y).to_f64() == std::vector<double>{1, 2, 0, 0, 0, 0, 5, 6, 1, 2});
  Ref weights =
      s.leaf(Tensor::from_f32(host(), {5, 2}, {1, 10, 100, 1000, 1e4, 1e5, 2, 20, 3, 30}));
  Refs g = s.grad(sum(s, mul(s, y, weights), {}, false), Refs{w});
  CHECK(s.value(g[0]).to_f64() == std::vector<double>{4, 40, 0, 0, 2, 20});
}

TEST_CASE("type errors name the shapes at fault", "[norm]") {
  Graph g("errors");
  Ref x = g.add_input("x", {DType::F32, {2, 3}});
  Ref c4 = g.add_input("c4", {DType::F32, {4}});
  Ref c3 = g.add_input("c3", {DType::F32, {3}});
  Ref fidx = g.add_input("fidx", {DType::F32, {5}});
  auto contains = [](const Result<Refs>& r, const std::string& text) {
    return !r.ok() && r.error().message.find(text) != std::string::npos;
  };
  CHECK(contains(g.add_node("batch_norm_train", Refs{x, c4, c4}, {}), "[3]"));
  CHECK(contains(g.add_node("layer_norm", Refs{x, c4, c4}, {}), "[4]"));
  CHECK(contains(g.add_node("layer_norm", Refs{x, c3, c3}, {{"axes_count", int64_t{2}}}),
                 "axes_count"));
  CHECK(g.add_node("layer_norm", Refs{x, c3, c3}, {}).ok());
  CHECK(contains(g.add_node("embedding", Refs{x, fidx}, {}), "i64"));
  Ref step = g.add_input("step_seed", {DType::I64, {1}});
  CHECK(contains(
      g.add_node("dropout", Refs{x, step}, {{"p", 1.0}, {"seed", int64_t{1}}, {"training", int64_t{1}}}),
      "p must"));
  CHECK(contains(
      g.add_node("dropout", Refs{x, x}, {{"p", 0.5}, {"seed", int64_t{1}}, {"training", int64_t{1}}}),
      "step seed"));
  CHECK(contains(
      g.add_node("dropout", Refs{x, step}, {{"p", 0.5}, {"seed", 1.5}, {"training", int64_t{1}}}),
      "seed"));
  CHECK(contains(g.add_node("softmax", Refs{x}, {{"axis", int64_t{2}}}), "[2,3]"));
  CHECK(contains(g.add_node("sigmoid_cross_entropy", Refs{x, c3}, {}), "f32[3]"));
}
