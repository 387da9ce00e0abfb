// The math ops beyond what the conformance suite checks: published values, conversion
// rules of cast, gradients at ties and bounds, second derivatives, and type errors.
#include <cmath>
#include <limits>
#include <numbers>

#include "engine/exec/eager.h"
#include "engine/ir/graph.h"
#include "engine/ops/math.h"
#include "test_util.h"

using namespace mls;
using namespace mls::test;

namespace {

std::vector<double> eager_unary(const char* op, const std::vector<float>& x, const Attrs& a = {}) {
  EagerSession s(host());
  Ref r = s.leaf(Tensor::from_f32(host(), {static_cast<int64_t>(x.size())}, x));
  return s.value(s.emit1(op, {r}, a)).to_f64();
}

// The dtype-`t` tensor holding `v` (exactly, for the values used here).
Tensor typed(DType t, Shape shape, const std::vector<double>& v) {
  return to_tensor(RefArray{std::move(shape), v}, t);
}

std::string infer_error(const char* op, std::vector<ValueType> in, const Attrs& a = {}) {
  Graph g("errors");
  Refs xs;
  for (size_t i = 0; i < in.size(); ++i) xs.push_back(g.add_input("x" + std::to_string(i), in[i]));
  auto r = g.add_node(op, xs, a);
  return r ? std::string() : r.error().message;
}

}  // namespace

TEST_CASE("activations match published values", "[math]") {
  // PyTorch: F.gelu(1.), F.gelu(1., approximate='tanh'), F.silu(1.), F.softplus(1.).
  auto g = eager_unary("gelu", {1.f, -1.f, 0.f});
  CHECK(g[0] == Approx(0.8413447460685429).epsilon(1e-6));
  CHECK(g[1] == Approx(-0.15865525393145707).epsilon(1e-6));
  CHECK(g[2] == 0.0);
  CHECK(eager_unary("gelu", {1.f}, {{"approximate", std::string("tanh")}})[0] ==
        Approx(0.8411919906082768).epsilon(1e-6));
  CHECK(eager_unary("silu", {1.f})[0] == Approx(0.7310585786300049).epsilon(1e-6));
  auto sp = eager_unary("softplus", {1.f, 25.f, -30.f});
  CHECK(sp[0] == Approx(1.3132616875182228).epsilon(1e-6));
  CHECK(sp[1] == 25.0);                                   // past the threshold: x itself
  CHECK(sp[2] == Approx(std::exp(-30.0)).epsilon(1e-4));  // no underflow to 0 or overflow
  CHECK(eager_unary("leaky_relu", {-2.f, 3.f})[0] == Approx(-0.02));  // default alpha 0.01
  CHECK(eager_unary("rsqrt", {4.f})[0] == 0.5);
  CHECK(eager_unary("clamp", {-3.f, 0.2f, 3.f}, {{"max", 1.0}}) ==
        std::vector<double>{-3, 0.2f, 1});
  CHECK(eager_unary("sign", {-0.5f, 0.f, 2.f}) == std::vector<double>{-1, 0, 1});
}

TEST_CASE("gelu and its derivative match float64 from -14 to 14, the far tail included", "[math]") {
  // The kernel's own erfc (engine/cpu/scalar_math.h) is vectorised; it must keep libm's
  // accuracy: within 2.5e-7 of max(1, |y|) everywhere, and 1e-6 relative where Phi(x) is
  // tiny (x down to -12, where gelu is about -2e-32; libm's float erfc is off by 1e-5 there).
  std::vector<float> xs;
  for (float x = -14.f; x <= 14.f; x += 1.f / 1024) xs.push_back(x);
  const std::vector<double> y = eager_unary("gelu", xs);
  EagerSession s(host());
  Ref dy = s.leaf(Tensor::from_f32(host(), {static_cast<int64_t>(xs.size())}, std::vector<float>(xs.size(), 1.f)));
  Ref x = s.leaf(Tensor::from_f32(host(), {static_cast<int64_t>(xs.size())}, xs));
  const std::vector<double> dx = s.value(s.emit1("gelu_backward", {dy, x}, {})).to_f64();
  double worst = 0, worst_tail = 0, worst_d = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], cdf = 0.5 * std::erfc(-v / std::numbers::sqrt2);
    const double ref = v * cdf;
    const double ref_d = cdf + v * std::exp(-v * v / 2) / std::sqrt(2 * std::numbers::pi);
    worst = std::max(worst, std::abs(y[i] - ref) / std::max(1.0, std::abs(ref)));
    if (v <= -1 && v >= -12) worst_tail = std::max(worst_tail, std::abs(y[i] - ref) / std::abs(ref));
    worst_d = std::max(worst_d, std::abs(dx[i] - ref_d) / std::max(1.0, std::abs(ref_d)));
  }
  CHECK(worst < 2.5e-7);
  CHECK(worst_tail < 1e-6);
  CHECK(worst_d < 2.5e-7);
  CHECK(y.front() > -1e-30);  // x = -14: about -2e-44, not -87's clamp times 14
  CHECK(y.front() <= 0.0);
  CHECK(y.back() == 14.0);
}

TEST_CASE("cast rounds, truncates, saturates and wraps as documented", "[math]") {
  EagerSession s(host());
  auto cast_to = [&](DType from, std::vector<double> v, DType to) {
    Ref x = s.leaf(typed(from, {static_cast<int64_t>(v.size())}, v));
    Ref y = cast(s, x, to);
    REQUIRE(s.type_of(y).dtype == to);
    return s.value(y).to_f64();
  };
  // 1/3 to the 16-bit floats: round to nearest even.
  CHECK(cast_to(DType::F32, {1.0 / 3}, DType::F16)[0] == 0.333251953125);
  CHECK(cast_to(DType::F32, {1.0 / 3}, DType::BF16)[0] == 0.333984375);
  CHECK(cast_to(DType::F32, {70000.0}, DType::F16)[0] == std::numeric_limits<double>::infinity());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(cast_to(DType::F32, {-2.7, 2.7, nan, 1e20, -1e20}, DType::I32) ==
        std::vector<double>{-2, 2, 0, 2147483647.0, -2147483648.0});
  CHECK(cast_to(DType::F16, {-0.5, 0.0, 3.0}, DType::Bool) == std::vector<double>{1, 0, 1});
  CHECK(cast_to(DType::Bool, {1, 0}, DType::BF16) == std::vector<double>{1, 0});
  // i64 -> i32 wraps: 2^32 + 5 -> 5.
  Ref big = s.leaf(Tensor::from_i64(host(), {1}, {(int64_t{1} << 32) + 5}));
  CHECK(s.value(cast(s, big, DType::I32)).to_f64()[0] == 5.0);
  CHECK(cast_to(DType::I32, {-7}, DType::I64)[0] == -7.0);
}

TEST_CASE("comparisons and where broadcast, on integers too", "[math]") {
  EagerSession s(host());
  Ref a = s.leaf(Tensor::from_i64(host(), {3, 1}, {0, 1, 2}));
  Ref b = s.leaf(Tensor::from_i64(host(), {2}, {1, 2}));
  Ref lt = less(s, a, b);
  REQUIRE(s.type_of(lt) == ValueType{DType::Bool, {3, 2}});
  CHECK(s.value(lt).to_f64() == std::vector<double>{1, 1, 0, 1, 0, 0});
  CHECK(s.value(equal(s, a, b)).to_f64() == std::vector<double>{0, 0, 1, 0, 0, 1});
  // where(bool [3,2], i64 [3,1], i64 []) picks a where a < b, else -1.
  Ref minus1 = s.leaf(Tensor::from_i64(host(), {}, {-1}));
  Ref w = where(s, lt, a, minus1);
  REQUIRE(s.type_of(w) == ValueType{DType::I64, {3, 2}});
  CHECK(s.value(w).to_f64() == std::vector<double>{0, 0, -1, 1, -1, -1});
}

TEST_CASE("maximum splits its gradient on ties, clamp passes it only strictly inside", "[math]") {
  EagerSession s(host());
  Ref a = s.leaf(Tensor::from_f32(host(), {3}, {1, 2, 3}), true);
  Ref b = s.leaf(Tensor::from_f32(host(), {3}, {1, 0, 5}), true);
  Refs g = s.grad(sum(s, maximum(s, a, b), {}, false), Refs{a, b});
  CHECK(s.value(g[0]).to_f64() == std::vector<double>{0.5, 1, 0});
  CHECK(s.value(g[1]).to_f64() == std::vector<double>{0.5, 0, 1});

  Ref x = s.leaf(Tensor::from_f32(host(), {5}, {-1, -0.5f, 0, 0.5f, 1}), true);
  Refs gx = s.grad(sum(s, clamp(s, x, -0.5, 0.5), {}, false), Refs{x});
  CHECK(s.value(gx[0]).to_f64() == std::vector<double>{0, 0, 1, 0, 0});

  // pow at a == 0 and b == 0: gradients 0, not NaN (PyTorch's convention).
  Ref pa = s.leaf(Tensor::from_f32(host(), {2}, {0, 2}), true);
  Ref pb = s.leaf(Tensor::from_f32(host(), {2}, {2, 0}), true);
  Refs gp = s.grad(sum(s, pow(s, pa, pb), {}, false), Refs{pa, pb});
  CHECK(s.value(gp[0]).to_f64() == std::vector<double>{0, 0});
  CHECK(s.value(gp[1]).to_f64()[0] == 0.0);
  CHECK(s.value(gp[1]).to_f64()[1] == Approx(std::log(2.0)));
}

TEST_CASE("second derivatives of gelu, silu and softplus", "[math]") {
  const std::vector<float> xs{-2.f, -0.7f, 0.3f, 1.5f};
  auto second = [&](const char* op, const Attrs& a) {
    EagerSession s(host());
    Ref x = s.leaf(Tensor::from_f32(host(), {4}, xs), true);
    Ref d1 = s.grad(sum(s, s.emit1(op, {x}, a), {}, false), Refs{x}, true)[0];
    return s.value(s.grad(sum(s, d1, {}, false), Refs{x})[0]).to_f64();
  };
  const double k = std::sqrt(2 / std::numbers::pi), c = 0.044715;
  auto gelu_tanh = [&](double x) { return 0.5 * x * (1 + std::tanh(k * (x + c * x * x * x))); };
  auto silu = [](double x) { return x / (1 + std::exp(-x)); };
  auto fd2 = [](auto f, double x) {
    const double h = 1e-4;
    return (f(x + h) - 2 * f(x) + f(x - h)) / (h * h);
  };
  auto exact = second("gelu", {});
  auto approx = second("gelu", {{"approximate", std::string("tanh")}});
  auto sw = second("silu", {});
  auto sp = second("softplus", {{"beta", 2.0}});
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    INFO("x = " << x);
    // gelu'' = phi(x) (2 - x^2) in closed form; the others by finite differences.
    CHECK(
        exact[i] ==
        Approx(std::exp(-x * x / 2) / std::sqrt(2 * std::numbers::pi) * (2 - x * x)).margin(1e-5));
    CHECK(approx[i] == Approx(fd2(gelu_tanh, x)).margin(1e-4));
    CHECK(sw[i] == Approx(fd2(silu, x)).margin(1e-4));
    double sg = 1 / (1 + std::exp(-2 * x));  // softplus_beta'' = beta s (1 - s)
    CHECK(sp[i] == Approx(2 * sg * (1 - sg)).margin(1e-5));
  }
}

TEST_CASE("the math ops reject bad types and attributes with clear messages", "[math]") {
  ValueType f{DType::F32, {3, 4}}, b{DType::Bool, {3, 4}};
  CHECK_THAT(infer_error("where", {f, f, f}), Catch::Contains("cond must be bool, got f32[3,4]"));
  CHECK_THAT(infer_error("where", {b, f, {DType::I64, {3, 4}}}),
             Catch::Contains("different dtypes"));
  CHECK_THAT(infer_error("where", {b, f, {DType::F32, {5}}}), Catch::Contains("do not broadcast"));
  CHECK_THAT(infer_error("maximum", {f, {DType::F32, {3}}}), Catch::Contains("do not broadcast"));
  CHECK_THAT(infer_error("less", {f, {DType::I64, {3, 4}}}), Catch::Contains("different dtypes"));
  CHECK_THAT(infer_error("sqrt", {{DType::I64, {2}}}), Catch::Contains("expects a float tensor"));
  CHECK_THAT(infer_error("cast", {f}, {{"dtype", std::string("u8")}}),
             Catch::Contains("cannot cast to 'u8'"));
  CHECK_THAT(infer_error("gelu", {f}, {{"approximate", std::string("fast")}}),
             Catch::Contains("approximate must be"));
  CHECK_THAT(infer_error("clamp", {f}, {{"min", 1.0}, {"max", 0.0}}),
             Catch::Contains("min <= max"));
  CHECK_THAT(infer_error("leaky_relu", {f}, {{"alpha", std::string("x")}}),
             Catch::Contains("'alpha' has the wrong kind"));
  CHECK(infer_error("where", {{DType::Bool, {3, 1}}, {DType::F32, {4}}, {DType::F32, {}}}).empty());
}
