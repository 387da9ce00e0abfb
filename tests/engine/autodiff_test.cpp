// Reverse mode through composed graphs, checked against finite differences of the same
// function written directly in float64.
#include <cmath>
#include <functional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/compiled_plan.h"
#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

std::vector<double> fd_grad(const std::function<double(const std::vector<double>&)>& f, std::vector<double> x) {
  std::vector<double> g(x.size());
  const double h = 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + h;
    double fp = f(x);
    x[i] = keep - h;
    double fm = f(x);
    x[i] = keep;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

std::vector<double> random_values(size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(r.uniform(-1, 1));
  return v;
}

}  // namespace

TEST_CASE("an input used twice and a shared subexpression: L = sum(x*x + exp(x*x) * b)", "[autodiff]") {
  // x: [3,4], b: [4] broadcast over rows; s = x*x is used twice.
  Graph g("shared");
  Ref x = g.add_input("x", {DType::F32, {3, 4}});
  Ref b = g.add_input("b", {DType::F32, {4}});
  Ref s = mul(g, x, x);
  Ref l = sum(g, add(g, s, mul(g, exp(g, s), b)), {}, false);
  auto grads = append_backward(g, l, Refs{x, b});
  REQUIRE(grads.ok());
  g.set_outputs(*grads);
  REQUIRE(g.verify().ok());

  auto xv = random_values(12, 1), bv = random_values(4, 2);
  auto f = [&](const std::vector<double>& xx, const std::vector<double>& bb) {
    double t = 0;
    for (size_t i = 0; i < 12; ++i) t += xx[i] * xx[i] + std::exp(xx[i] * xx[i]) * bb[i % 4];
    return t;
  };
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {3, 4}, std::vector<float>(xv.begin(), xv.end()))).ok());
  REQUIRE(plan->bind(b, Tensor::from_f32(host(), {4}, std::vector<float>(bv.begin(), bv.end()))).ok());
  plan->run();
  require_close(plan->tensor((*grads)[0]).to_f64(), fd_grad([&](auto& v) { return f(v, bv); }, xv), 1e-4, 1e-4, "dL/dx");
  require_close(plan->tensor((*grads)[1]).to_f64(), fd_grad([&](auto& v) { return f(xv, v); }, bv), 1e-4, 1e-4, "dL/db (unbroadcast)");
}

TEST_CASE("a two-layer MLP with cross-entropy: gradients of every parameter", "[autodiff]") {
  const int64_t n = 5, d = 6, h = 4, c = 3;
  Graph g("mlp");
  Ref x = g.add_input("x", {DType::F32, {n, d}});
  Ref y = g.add_input("y", {DType::I64, {n}});
  Ref w1 = g.add_param("w1", {DType::F32, {d, h}});
  Ref b1 = g.add_param("b1", {DType::F32, {h}});
  Ref w2 = g.add_param("w2", {DType::F32, {h, c}});
  Ref logits = linear(g, g.emit1("tanh", {linear(g, x, w1, b1)}), w2, Ref{});
  Ref loss = cross_entropy(g, logits, y, 0.1);
  auto grads = append_backward(g, loss, g.params());
  REQUIRE(grads.ok());
  g.set_outputs(*grads);

  auto xv = random_values(n * d, 3), w1v = random_values(d * h, 4), b1v = random_values(h, 5), w2v = random_values(h * c, 6);
  std::vector<int64_t> yv{0, 2, 1, 1, 0};
  auto f = [&](const std::vector<double>& W1, const std::vector<double>& B1, const std::vector<double>& W2) {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> hid(h), lo(c, 0.0);
      for (int64_t j = 0; j < h; ++j) {
        double s = B1[j];
        for (int64_t k = 0; k < d; ++k) s += xv[i * d + k] * W1[k * h + j];
        hid[j] = std::tanh(s);
      }
      for (int64_t j = 0; j < c; ++j)
        for (int64_t k = 0; k < h; ++k) lo[j] += hid[k] * W2[k * c + j];
      double mx = *std::max_element(lo.begin(), lo.end()), se = 0;
      for (double v : lo) se += std::exp(v - mx);
      for (int64_t j = 0; j < c; ++j) {
        double target = 0.9 * (j == yv[i]) + 0.1 / c;
        total -= target * (lo[j] - mx - std::log(se));
      }
    }
    return total / n;
  };
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  auto t = [](const std::vector<double>& v, Shape s) { return Tensor::from_f32(host(), s, std::vector<float>(v.begin(), v.end())); };
  REQUIRE(plan->bind(x, t(xv, {n, d})).ok());
  REQUIRE(plan->bind(y, Tensor::from_i64(host(), {n}, yv)).ok());
  REQUIRE(plan->bind(w1, t(w1v, {d, h})).ok());
  REQUIRE(plan->bind(b1, t(b1v, {h})).ok());
  REQUIRE(plan->bind(w2, t(w2v, {h, c})).ok());
  plan->run();
  require_close(plan->tensor((*grads)[0]).to_f64(), fd_grad([&](auto& v) { return f(v, b1v, w2v); }, w1v), 1e-3, 1e-5, "w1");
  require_close(plan->tensor((*grads)[1]).to_f64(), fd_grad([&](auto& v) { return f(w1v, v, w2v); }, b1v), 1e-3, 1e-5, "b1");
  require_close(plan->tensor((*grads)[2]).to_f64(), fd_grad([&](auto& v) { return f(w1v, b1v, v); }, w2v), 1e-3, 1e-5, "w2");
}

TEST_CASE("the backward pass is a graph: it prints, verifies, and differentiates again", "[autodiff]") {
  // f(x) = sum(x^3): grad 3x^2, and the gradient of sum(grad) is 6x.
  Graph g("cube");
  Ref x = g.add_input("x", {DType::F32, {4}});
  Ref f = sum(g, mul(g, mul(g, x, x), x), {}, false);
  auto g1 = append_backward(g, f, Refs{x});
  REQUIRE(g1.ok());
  Ref s = sum(g, (*g1)[0], {}, false);
  auto g2 = append_backward(g, s, Refs{x});
  REQUIRE(g2.ok());
  g.set_outputs({(*g1)[0], (*g2)[0]});
  REQUIRE(g.verify().ok());
  std::string text = g.to_text();
  CHECK(text.find("// backward") != std::string::npos);
  CHECK(text.find("mul(") != std::string::npos);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  std::vector<float> xv{-1.5f, -0.5f, 0.25f, 2.0f};
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {4}, xv)).ok());
  plan->run();
  auto d1 = plan->tensor((*g1)[0]).to_f64();
  auto d2 = plan->tensor((*g2)[0]).to_f64();
  for (size_t i = 0; i < 4; ++i) {
    CHECK(d1[i] == Approx(3.0 * xv[i] * xv[i]).epsilon(1e-6));
    CHECK(d2[i] == Approx(6.0 * xv[i]).epsilon(1e-6));
  }
}

TEST_CASE("Hessian-vector product and JVP against VJP on random vectors", "[autodiff]") {
  // f(x) = sum(tanh(x W)) ; check <J v, u> == <v, J^T u> for y = tanh(x W).
  Graph g("jvp_vjp");
  Ref x = g.add_input("x", {DType::F32, {3, 5}});
  Ref w = g.add_input("w", {DType::F32, {5, 2}});
  Ref y = g.emit1("tanh", {matmul(g, x, w)});
  auto vals = [](size_t n, uint64_t s) { auto v = random_values(n, s); return std::vector<float>(v.begin(), v.end()); };
  Ref v = g.add_constant("v", Tensor::from_f32(host(), {3, 5}, vals(15, 10)));
  Ref u = g.add_constant("u", Tensor::from_f32(host(), {3, 2}, vals(6, 11)));
  Refs jv = append_jvp(g, Refs{x}, Refs{v}, Refs{y});
  Ref lhs = sum(g, mul(g, jv[0], u), {}, false);
  Ref yu = sum(g, mul(g, y, u), {}, false);
  auto jtu = append_backward(g, yu, Refs{x});
  REQUIRE(jtu.ok());
  Ref rhs = sum(g, mul(g, (*jtu)[0], v), {}, false);
  g.set_outputs({lhs, rhs});
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {3, 5}, vals(15, 12))).ok());
  REQUIRE(plan->bind(w, Tensor::from_f32(host(), {5, 2}, vals(10, 13))).ok());
  plan->run();
  double a = plan->tensor(lhs).to_f64()[0], b = plan->tensor(rhs).to_f64()[0];
  CHECK(std::abs(a) > 1e-3);
  CHECK(a == Approx(b).epsilon(1e-5));
}

TEST_CASE("eager mode computes the same gradients as the static graph", "[autodiff][eager]") {
  auto xv = random_values(12, 21), wv = random_values(8, 22);
  std::vector<float> xf(xv.begin(), xv.end()), wf(wv.begin(), wv.end());
  EagerSession s(host());
  Ref x = s.leaf(Tensor::from_f32(host(), {3, 4}, xf));
  Ref w = s.leaf(Tensor::from_f32(host(), {4, 2}, wf), true);
  Ref l = mean(s, relu(s, matmul(s, x, w)), {}, false);
  Refs ge = s.grad(l, Refs{w});
  Graph g("same");
  Ref gx = g.add_input("x", {DType::F32, {3, 4}});
  Ref gw = g.add_input("w", {DType::F32, {4, 2}});
  Ref gl = mean(g, relu(g, matmul(g, gx, gw)), {}, false);
  auto gs = append_backward(g, gl, Refs{gw});
  REQUIRE(gs.ok());
  g.set_outputs(*gs);
  auto plan = CompiledPlan::compile(g, host());
  REQUIRE(plan.ok());
  REQUIRE(plan->bind(gx, Tensor::from_f32(host(), {3, 4}, xf)).ok());
  REQUIRE(plan->bind(gw, Tensor::from_f32(host(), {4, 2}, wf)).ok());
  plan->run();
  CHECK(s.value(ge[0]).to_f64() == plan->tensor((*gs)[0]).to_f64());
}
