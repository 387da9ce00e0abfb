// The layer, activation, merge and loss node types added for issue 4: each one's lowering
// gives the shapes its shape rule promised, small models built from them train (the loss
// falls under SGD), regression losses train on value targets, and shape errors name the
// node and say what to do.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <catch2/catch.hpp>

#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/compiled_plan.h"
#include "engine/train/rng.h"
#include "engine/train/trainer.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"
#include "node_test_util.h"

using namespace mls;
using namespace mls::nodes;
using nlohmann::json;
using namespace mls::nodes::test;

namespace {

// [SECTION] Lowering one node type on its own

struct NodeIn {
  Shape shape;  // the batch dim as -1
  DType dtype = DType::F32;
};

// Runs the type's shape rule and its lowering (batch 3) and checks that they agree; returns
// the inferred shapes.
std::vector<Shape> lowers_as_inferred(const char* id, const std::vector<NodeIn>& ins,
                                      const json& params, const InferContext& ctx = {}) {
  INFO(id);
  host();
  const NodeTypeDef* def = builtin_catalogue().find(id);
  REQUIRE(def != nullptr);
  Result<json> full = complete_params(*def, params);
  REQUIRE(full);
  std::vector<Shape> in_shapes;
  for (const NodeIn& i : ins) in_shapes.push_back(i.shape);
  auto inferred = def->infer(in_shapes, *full, ctx);
  if (!inferred) FAIL(inferred.error().message);
  constexpr int64_t batch = 3;
  auto concrete = [](Shape s) {
    for (int64_t& d : s)
      if (d == -1) d = batch;
    return s;
  };
  for (bool training : {true, false}) {
    ModelGraph m{Graph("one"), {}, {}, {}, {}, {}};
    Refs inputs;
    for (size_t k = 0; k < ins.size(); ++k)
      inputs.push_back(
          m.graph.add_input("in" + std::to_string(k), {ins[k].dtype, concrete(ins[k].shape)}));
    const std::string node_id = "node";
    LowerContext c{m, node_id, *full, inputs, batch, ctx, training};
    auto outs = def->lower(c);
    if (!outs) FAIL(outs.error().message);
    REQUIRE(outs->size() == def->outputs.size());
    for (size_t k = 0; k < outs->size(); ++k)
      CHECK(m.graph.shape_of((*outs)[k]) == concrete((*inferred)[k]));
    CHECK(m.graph.verify().ok());
  }
  return *inferred;
}

std::string infer_error(const char* id, std::vector<Shape> ins, const json& params,
                        const InferContext& ctx = {}) {
  const NodeTypeDef* def = builtin_catalogue().find(id);
  REQUIRE(def != nullptr);
  Result<json> full = complete_params(*def, params);
  REQUIRE(full);
  auto out = def->infer(ins, *full, ctx);
  REQUIRE_FALSE(out);
  return out.error().message;
}

// [SECTION] Documents and training

// A data set in memory: class labels or target values.
class Memory final : public BatchSource {
 public:
  Memory(Shape sample, std::vector<float> x, std::vector<int64_t> y, int64_t classes)
      : sample_(std::move(sample)), x_(std::move(x)), y_(std::move(y)), classes_(classes) {
    n_ = static_cast<int64_t>(y_.size());
  }
  Memory(Shape sample, std::vector<float> x, std::vector<float> t, Shape target)
      : sample_(std::move(sample)), x_(std::move(x)), t_(std::move(t)), target_(std::move(target)) {
    n_ = static_cast<int64_t>(t_.size()) / numel(target_);
  }
  int64_t num_samples() const override { return n_; }
  Shape sample_shape() const override { return sample_; }
  int64_t num_classes() const override { return classes_; }
  TargetKind target_kind() const override {
    return target_.empty() ? TargetKind::Classes : TargetKind::Values;
  }
  Shape target_shape() const override { return target_; }
  void start_epoch(int64_t) override { pos_ = 0; }
  bool next(int64_t bs, HostBatch& out) override {
    if (pos_ >= n_) return false;
    out.size = std::min(bs, n_ - pos_);
    const int64_t f = numel(sample_);
    out.x.assign(x_.begin() + pos_ * f, x_.begin() + (pos_ + out.size) * f);
    if (target_.empty()) {
      out.y.assign(y_.begin() + pos_, y_.begin() + pos_ + out.size);
      out.t.clear();
    } else {
      const int64_t k = numel(target_);
      out.t.assign(t_.begin() + pos_ * k, t_.begin() + (pos_ + out.size) * k);
      out.y.clear();
    }
    pos_ += out.size;
    return true;
  }
  InferContext context() const { return {sample_, classes_, target_}; }

 private:
  Shape sample_;
  std::vector<float> x_;
  std::vector<int64_t> y_;
  std::vector<float> t_;
  Shape target_;
  int64_t classes_ = 0, n_ = 0, pos_ = 0;
};

// Gaussian blobs: class k around a random centre, each sample of shape `sample`.
Memory blobs(int64_t n, const Shape& sample, int64_t classes, uint64_t seed) {
  Rng r(seed);
  const int64_t f = numel(sample);
  std::vector<double> centres(static_cast<size_t>(classes * f));
  for (double& v : centres) v = r.uniform(-2, 2);
  std::vector<float> x(static_cast<size_t>(n * f));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto k = static_cast<int64_t>(r.below(static_cast<uint64_t>(classes)));
    y[static_cast<size_t>(i)] = k;
    for (int64_t j = 0; j < f; ++j)
      x[static_cast<size_t>(i * f + j)] =
          static_cast<float>(centres[static_cast<size_t>(k * f + j)] + r.uniform(-1, 1));
  }
  return Memory(sample, std::move(x), std::move(y), classes);
}

// t = 1.5 x0 - 2 x1 + 0.5 x2 + 0.25 + noise, one value per sample (target shape {1}).
Memory linear_values(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> x(static_cast<size_t>(n * 3)), t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v[3];
    for (double& e : v) e = r.uniform(-1, 1);
    for (int j = 0; j < 3; ++j) x[static_cast<size_t>(i * 3 + j)] = static_cast<float>(v[j]);
    t[static_cast<size_t>(i)] =
        static_cast<float>(1.5 * v[0] - 2 * v[1] + 0.5 * v[2] + 0.25 + r.uniform(-0.05, 0.05));
  }
  return Memory({3}, std::move(x), std::move(t), {1});
}

TrainResult train(const Document& doc, Memory& data, int64_t steps,
                  OptimizerConfig opt = {"sgd", 0.1, 0.9}) {
  const InferContext ctx = data.context();
  ModelBuilder build = [doc, ctx](int64_t batch, bool training) {
    return lower(doc, ctx, batch, training, "test.mls");
  };
  Trainer t(host(), build,
            {.epochs = 100, .batch_size = 16, .seed = 5, .opt = opt, .max_steps = steps});
  auto r = t.fit(data, nullptr, nullptr);
  if (!r) FAIL(r.error().message);
  REQUIRE(static_cast<int64_t>(r->step_losses.size()) == steps);
  return *r;
}

double mean_of(const std::vector<double>& v, size_t from, size_t count) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(from + count), 0.0) /
         static_cast<double>(count);
}

// The mean of the last five step losses over the mean of the first five.
double loss_ratio(const std::vector<double>& losses) {
  INFO("first " << losses.front() << ", last " << losses.back());
  for (double l : losses) REQUIRE(std::isfinite(l));
  return mean_of(losses, losses.size() - 5, 5) / mean_of(losses, 0, 5);
}

std::vector<NodeSpec> with(std::vector<NodeSpec> a, const std::vector<NodeSpec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("every parameter of every built-in type has a doc, and losses have the Loss role",
          "[nodes][layers]") {
  host();
  for (const NodeTypeDef& t : builtin_catalogue().all()) {
    INFO(t.id);
    for (const ParamDef& p : t.params) {
      INFO(p.name);
      CHECK_FALSE(p.doc.empty());
      if (!p.required) CHECK(check_param_value(p, p.default_value).ok());
    }
  }
  for (const char* id :
       {"mls.nll_loss", "mls.bce_with_logits", "mls.mse_loss", "mls.l1_loss", "mls.huber_loss"}) {
    const NodeTypeDef* t = builtin_catalogue().find(id);
    REQUIRE(t != nullptr);
    CHECK(t->role == NodeRole::Loss);
    REQUIRE(t->inputs.size() == 2);
    CHECK(t->inputs[0].kind == PortKind::Tensor);
    CHECK(t->inputs[1].kind == PortKind::Labels);
  }
  CHECK(builtin_catalogue().find("mls.mse_loss")->inputs[0].name == "prediction");
  CHECK(builtin_catalogue().find("mls.mse_loss")->inputs[1].name == "targets");
}

TEST_CASE("layer node types lower to the shapes their rules infer", "[nodes][layers]") {
  host();
  CHECK(lowers_as_inferred("mls.layer_norm", {{{-1, 5, 8}}}, {}) == std::vector<Shape>{{-1, 5, 8}});
  CHECK(lowers_as_inferred("mls.embedding", {{{-1, 7}}},
                           {{"num_embeddings", 20}, {"embedding_dim", 6}}) ==
        std::vector<Shape>{{-1, 7, 6}});
  CHECK(lowers_as_inferred("mls.reshape", {{{-1, 784}}}, {{"shape", "28,28"}}) ==
        std::vector<Shape>{{-1, 28, 28}});
  CHECK(lowers_as_inferred("mls.reshape", {{{-1, 1, 28, 28}}}, {{"shape", " -1, 7 "}}) ==
        std::vector<Shape>{{-1, 112, 7}});
  CHECK(lowers_as_inferred("mls.reshape", {{{-1, 6}}}, {{"shape", "2,-1,1"}}) ==
        std::vector<Shape>{{-1, 2, 3, 1}});
  // PyTorch: ConvTranspose2d(3, 5, 3, stride=2, padding=1, output_padding=1) maps 7x7 to 14x14.
  CHECK(lowers_as_inferred(
            "mls.conv_transpose2d", {{{-1, 3, 7, 7}}},
            {{"out_channels", 5}, {"stride", 2}, {"padding", 1}, {"output_padding", 1}}) ==
        std::vector<Shape>{{-1, 5, 14, 14}});
  CHECK(lowers_as_inferred("mls.conv_transpose2d", {{{-1, 4, 5, 6}}},
                           {{"out_channels", 6},
                            {"kernel_size", 2},
                            {"stride", 2},
                            {"groups", 2},
                            {"bias", false}}) == std::vector<Shape>{{-1, 6, 10, 12}});
  for (const char* act : {"mls.leaky_relu", "mls.gelu", "mls.silu", "mls.softplus", "mls.elu",
                          "mls.softmax", "mls.log_softmax"})
    CHECK(lowers_as_inferred(act, {{{-1, 3, 4}}}, {}) == std::vector<Shape>{{-1, 3, 4}});
  CHECK(lowers_as_inferred("mls.gelu", {{{-1, 4}}}, {{"approximate", "tanh"}}) ==
        std::vector<Shape>{{-1, 4}});
  CHECK(lowers_as_inferred("mls.add", {{{-1, 4, 2}}, {{-1, 4, 2}}}, {}) ==
        std::vector<Shape>{{-1, 4, 2}});
  CHECK(lowers_as_inferred("mls.concat", {{{-1, 3, 5}}, {{-1, 2, 5}}}, {}) ==
        std::vector<Shape>{{-1, 5, 5}});
  CHECK(lowers_as_inferred("mls.concat", {{{-1, 3, 5}}, {{-1, 3, 1}}}, {{"axis", -1}}) ==
        std::vector<Shape>{{-1, 3, 6}});

  const InferContext classes{{4}, 3, {}}, values{{4}, 0, {2}};
  const NodeIn labels{{-1}, DType::I64}, targets{{-1, 2}, DType::F32};
  CHECK(lowers_as_inferred("mls.nll_loss", {{{-1, 3}}, labels}, {}, classes) ==
        std::vector<Shape>{{}});
  CHECK(lowers_as_inferred("mls.cross_entropy", {{{-1, 3}}, labels},
                           {{"class_weights", "1, 2.5, 0.5"}}, classes) == std::vector<Shape>{{}});
  for (const char* loss :
       {"mls.mse_loss", "mls.l1_loss", "mls.huber_loss", "mls.bce_with_logits"}) {
    CHECK(lowers_as_inferred(loss, {{{-1, 3}}, labels}, {}, classes) == std::vector<Shape>{{}});
    CHECK(lowers_as_inferred(loss, {{{-1, 2}}, targets}, {}, values) == std::vector<Shape>{{}});
  }
}

TEST_CASE("new activations compute their PyTorch functions", "[nodes][layers]") {
  host();
  const std::vector<double> xs{-3.0, -0.5, 0.25, 2.0};
  auto run = [&](const char* id, json params) {
    const NodeTypeDef* def = builtin_catalogue().find(id);
    auto full = complete_params(*def, params);
    REQUIRE(full);
    ModelGraph m{Graph("act"), {}, {}, {}, {}, {}};
    Ref x = m.graph.add_input("x", {DType::F32, {1, 4}});
    Refs ins{x};
    const std::string nid = "a";
    LowerContext c{m, nid, *full, ins, 1, InferContext{}, true};
    auto out = def->lower(c);
    REQUIRE(out);
    m.graph.set_outputs({(*out)[0]});
    auto plan = CompiledPlan::compile(m.graph, host());
    REQUIRE(plan.ok());
    REQUIRE(
        plan->bind(x, Tensor::from_f32(host(), {1, 4}, std::vector<float>(xs.begin(), xs.end())))
            .ok());
    plan->run();
    return plan->tensor((*out)[0]).to_f64();
  };
  auto close = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i)
      CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-7));
  };
  std::vector<double> elu, leaky, softplus;
  for (double x : xs) {
    elu.push_back(x > 0 ? x : 0.7 * (std::exp(x) - 1));
    leaky.push_back(x > 0 ? x : 0.2 * x);
    softplus.push_back(std::log1p(std::exp(2 * x)) / 2);
  }
  close(run("mls.elu", {{"alpha", 0.7}}), elu);
  close(run("mls.leaky_relu", {{"negative_slope", 0.2}}), leaky);
  close(run("mls.softplus", {{"beta", 2.0}}), softplus);
  // GELU(-0.5) = -0.154269 and GELU(2) = 1.954500 (x Phi(x)); SiLU(2) = 1.761594.
  auto g = run("mls.gelu", {});
  CHECK(g[1] == Approx(-0.1542687).epsilon(1e-5));
  CHECK(g[3] == Approx(1.9544997).epsilon(1e-5));
  CHECK(run("mls.silu", {})[3] == Approx(1.7615942).epsilon(1e-5));
  double z = 0;
  for (double x : xs) z += std::exp(x);
  std::vector<double> sm, lsm;
  for (double x : xs) {
    sm.push_back(std::exp(x) / z);
    lsm.push_back(x - std::log(z));
  }
  close(run("mls.softmax", {}), sm);
  close(run("mls.log_softmax", {}), lsm);
}

TEST_CASE("layer types train: the loss falls under SGD", "[nodes][layers][train]") {
  host();
  const std::vector<NodeSpec> io{{"x", "mls.input"}, {"y", "mls.labels"}};
  SECTION("reshape, layer_norm, gelu, silu, leaky_relu, elu, softplus") {
    Memory data = blobs(640, {12}, 3, 1);
    Document doc = make_doc(with(io, {{"r", "mls.reshape", {{"shape", "3,4"}}},
                                      {"ln", "mls.layer_norm"},
                                      {"g", "mls.gelu"},
                                      {"flat", "mls.flatten"},
                                      {"fc1", "mls.linear", {{"out_features", 16}}},
                                      {"a1", "mls.silu"},
                                      {"fc2", "mls.linear", {{"out_features", 16}}},
                                      {"a2", "mls.leaky_relu", {{"negative_slope", 0.1}}},
                                      {"a3", "mls.elu"},
                                      {"a4", "mls.softplus"},
                                      {"fc3", "mls.linear", {{"out_features", 3}}},
                                      {"loss", "mls.cross_entropy"}}),
                            {{"x:out", "r:in"},
                             {"r:out", "ln:in"},
                             {"ln:out", "g:in"},
                             {"g:out", "flat:in"},
                             {"flat:out", "fc1:in"},
                             {"fc1:out", "a1:in"},
                             {"a1:out", "fc2:in"},
                             {"fc2:out", "a2:in"},
                             {"a2:out", "a3:in"},
                             {"a3:out", "a4:in"},
                             {"a4:out", "fc3:in"},
                             {"fc3:out", "loss:logits"},
                             {"y:out", "loss:labels"}});
    CHECK(loss_ratio(train(doc, data, 40).step_losses) < 0.5);
  }
  SECTION("conv_transpose2d") {
    Memory data = blobs(640, {1, 4, 4}, 3, 2);
    Document doc = make_doc(with(io, {{"up",
                                       "mls.conv_transpose2d",
                                       {{"out_channels", 2}, {"kernel_size", 2}, {"stride", 2}}},
                                      {"act", "mls.relu"},
                                      {"pool", "mls.max_pool2d"},
                                      {"flat", "mls.flatten"},
                                      {"fc", "mls.linear", {{"out_features", 3}}},
                                      {"loss", "mls.cross_entropy"}}),
                            {{"x:out", "up:in"},
                             {"up:out", "act:in"},
                             {"act:out", "pool:in"},
                             {"pool:out", "flat:in"},
                             {"flat:out", "fc:in"},
                             {"fc:out", "loss:logits"},
                             {"y:out", "loss:labels"}});
    auto shapes = infer_shapes(doc, data.context());
    REQUIRE(shapes);
    CHECK(shapes->at("up")[0] == Shape{-1, 2, 8, 8});
    CHECK(loss_ratio(train(doc, data, 40).step_losses) < 0.5);
  }
  SECTION("embedding: token ids from the data") {
    // Sequences of 5 ids in [0, 8); the class is whether id 3 occurs.
    Rng r(4);
    std::vector<float> x(800 * 5);
    std::vector<int64_t> y(800);
    for (size_t i = 0; i < 800; ++i) {
      for (size_t j = 0; j < 5; ++j) {
        x[i * 5 + j] = static_cast<float>(r.below(8));
        y[i] = y[i] || x[i * 5 + j] == 3.0f;
      }
    }
    Memory data({5}, std::move(x), std::move(y), 2);
    Document doc =
        make_doc(with(io, {{"emb", "mls.embedding", {{"num_embeddings", 8}, {"embedding_dim", 4}}},
                           {"flat", "mls.flatten"},
                           {"fc", "mls.linear", {{"out_features", 2}}},
                           {"loss", "mls.cross_entropy"}}),
                 {{"x:out", "emb:in"},
                  {"emb:out", "flat:in"},
                  {"flat:out", "fc:in"},
                  {"fc:out", "loss:logits"},
                  {"y:out", "loss:labels"}});
    CHECK(loss_ratio(train(doc, data, 50, {"sgd", 0.5, 0.9}).step_losses) < 0.7);
  }
  SECTION("merges: a residual add and a concat") {
    Memory data = blobs(640, {8}, 4, 5);
    Document doc = make_doc(with(io, {{"fc1", "mls.linear", {{"out_features", 8}}},
                                      {"act", "mls.relu"},
                                      {"res", "mls.add"},
                                      {"cat", "mls.concat"},
                                      {"fc2", "mls.linear", {{"out_features", 4}}},
                                      {"loss", "mls.cross_entropy"}}),
                            {{"x:out", "fc1:in"},
                             {"fc1:out", "act:in"},
                             {"x:out", "res:a"},
                             {"act:out", "res:b"},
                             {"res:out", "cat:a"},
                             {"x:out", "cat:b"},
                             {"cat:out", "fc2:in"},
                             {"fc2:out", "loss:logits"},
                             {"y:out", "loss:labels"}});
    auto shapes = infer_shapes(doc, data.context());
    REQUIRE(shapes);
    CHECK(shapes->at("cat")[0] == Shape{-1, 16});
    CHECK(loss_ratio(train(doc, data, 40).step_losses) < 0.5);
  }
}

TEST_CASE("loss types train, regression losses on value targets", "[nodes][losses][train]") {
  host();
  const std::vector<NodeSpec> io{{"x", "mls.input"}, {"y", "mls.labels"}};
  auto head = [&](const char* loss, json params, const char* port, bool log_softmax) {
    if (params.is_null()) params = json::object();
    std::vector<NodeSpec> n =
        with(io, {{"fc1", "mls.linear", {{"out_features", 16}}},
                  {"act", "mls.tanh"},
                  {"fc2", "mls.linear", {{"out_features", params.value("out", 3)}}},
                  {"loss", loss, params.value("loss", json::object())}});
    std::vector<std::pair<std::string, std::string>> l{
        {"x:out", "fc1:in"}, {"fc1:out", "act:in"}, {"act:out", "fc2:in"}};
    std::string tgt =
        std::string(loss) == "mls.cross_entropy" || std::string(loss) == "mls.nll_loss" ? "labels"
                                                                                        : "targets";
    if (log_softmax) {
      n.push_back({"lsm", "mls.log_softmax"});
      l.push_back({"fc2:out", "lsm:in"});
      l.push_back({"lsm:out", std::string("loss:") + port});
    } else {
      l.push_back({"fc2:out", std::string("loss:") + port});
    }
    l.push_back({"y:out", "loss:" + tgt});
    return make_doc(n, l);
  };
  SECTION("classification: nll, weighted cross-entropy, and mse/l1/huber/bce on one-hot targets") {
    Memory data = blobs(640, {6}, 3, 7);
    CHECK(loss_ratio(train(head("mls.nll_loss", {}, "log_probs", true), data, 40).step_losses) <
          0.5);
    CHECK(loss_ratio(train(head("mls.cross_entropy", {{"loss", {{"class_weights", "1,3,0.5"}}}},
                                "logits", false),
                           data, 40)
                         .step_losses) < 0.5);
    CHECK(loss_ratio(
              train(head("mls.bce_with_logits", {}, "logits", false), data, 40).step_losses) < 0.6);
    CHECK(loss_ratio(train(head("mls.mse_loss", {}, "prediction", false), data, 40).step_losses) <
          0.6);
    CHECK(loss_ratio(train(head("mls.l1_loss", {}, "prediction", false), data, 40).step_losses) <
          0.8);
    CHECK(
        loss_ratio(train(head("mls.huber_loss", {{"loss", {{"delta", 0.5}}}}, "prediction", false),
                         data, 40)
                       .step_losses) < 0.6);
  }
  SECTION("regression: value targets of shape {1}") {
    Memory data = linear_values(640, 8);
    for (const char* loss : {"mls.mse_loss", "mls.l1_loss", "mls.huber_loss"}) {
      INFO(loss);
      Document doc = head(loss, {{"out", 1}}, "prediction", false);
      auto m = lower(doc, data.context(), 16, true, "r.mls");
      REQUIRE(m);
      CHECK(m->graph.type_of(m->labels).dtype == DType::F32);
      CHECK(m->graph.type_of(m->labels).shape == Shape{16, 1});
      CHECK(m->graph.type_of(m->logits).shape == Shape{16, 1});
      TrainResult r = train(doc, data, 40, {"sgd", 0.05, 0.9});
      CHECK(loss_ratio(r.step_losses) < 0.3);
    }
  }
}

TEST_CASE("the lowered losses compute PyTorch's values", "[nodes][losses]") {
  host();
  // logits [2,3], labels {1, 2}: the losses of the node types against hand computations.
  const std::vector<float> logits{1, 2, 0.5, 0, -1, 3};
  const std::vector<int64_t> labels{1, 2};
  auto run = [&](const char* id, json params) {
    const NodeTypeDef* def = builtin_catalogue().find(id);
    auto full = complete_params(*def, params);
    REQUIRE(full);
    ModelGraph m{Graph("loss"), {}, {}, {}, {}, {}};
    Ref x = m.graph.add_input("x", {DType::F32, {2, 3}});
    Ref y = m.graph.add_input("y", {DType::I64, {2}});
    Refs ins{x, y};
    const std::string nid = "loss";
    InferContext ctx{{3}, 3, {}};
    LowerContext c{m, nid, *full, ins, 2, ctx, true};
    REQUIRE(def->lower(c));
    CHECK(m.logits == x);
    m.graph.set_outputs({m.loss});
    auto plan = CompiledPlan::compile(m.graph, host());
    REQUIRE(plan.ok());
    REQUIRE(plan->bind(x, Tensor::from_f32(host(), {2, 3}, logits)).ok());
    REQUIRE(plan->bind(y, Tensor::from_i64(host(), {2}, labels)).ok());
    plan->run();
    return plan->tensor(m.loss).to_f64()[0];
  };
  // PyTorch: F.cross_entropy(..., weight=tensor([1., 3., 0.5])) = 0.407442
  CHECK(run("mls.cross_entropy", {{"class_weights", "1, 3, 0.5"}}) ==
        Approx(0.40744237).epsilon(1e-6));
  // nll_loss takes the inputs as log-probabilities: -(2 + 3) / 2
  CHECK(run("mls.nll_loss", {}) == Approx(-2.5));
  // One-hot targets {0,1,0}, {0,0,1}: squared errors 1+1+0.25, 0+1+4 over 6 values.
  CHECK(run("mls.mse_loss", {}) == Approx(7.25 / 6));
  CHECK(run("mls.l1_loss", {}) == Approx((1 + 1 + 0.5 + 0 + 1 + 2) / 6.0));
  // Huber, delta 1: |d| = 1, 1, 0.5, 0, 1, 2 -> 0.5, 0.5, 0.125, 0, 0.5, 1.5
  CHECK(run("mls.huber_loss", {}) == Approx(3.125 / 6));
  double bce = 0;
  for (int i = 0; i < 6; ++i) {
    double t = (i == 1 || i == 5) ? 1.0 : 0.0, z = logits[static_cast<size_t>(i)];
    bce += std::max(z, 0.0) - z * t + std::log1p(std::exp(-std::abs(z)));
  }
  CHECK(run("mls.bce_with_logits", {}) == Approx(bce / 6).epsilon(1e-6));
}

TEST_CASE("shape errors of the new layer and loss types name the node and say what to do",
          "[nodes][layers]") {
  host();
  // Through a document: the message starts with the node.
  Document doc = make_doc({{"x", "mls.input"},
                           {"y", "mls.labels"},
                           {"r", "mls.reshape", {{"shape", "28,27"}}},
                           {"flat", "mls.flatten"},
                           {"fc", "mls.linear", {{"out_features", 3}}},
                           {"loss", "mls.mse_loss"}},
                          {{"x:out", "r:in"},
                           {"r:out", "flat:in"},
                           {"flat:out", "fc:in"},
                           {"fc:out", "loss:prediction"},
                           {"y:out", "loss:targets"}});
  auto s = infer_shapes(doc, InferContext{{784}, 0, {1}});
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "node 'r' (mls.reshape): input 'in' has shape [N,784], 784 values per sample, but "
        "\"28,27\" holds 756 — the "
        "dims must multiply to 784 (or use -1 for one of them)");
  doc.nodes[2].params["shape"] = "-1,28";
  s = infer_shapes(doc, InferContext{{784}, 0, {1}});
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "node 'loss' (mls.mse_loss): input 'prediction' has shape [N,3] but the targets are [N,1]; "
        "MSE loss compares "
        "them value by value — add a Linear with out_features=1 before it");
  auto m = lower(doc, InferContext{{784}, 0, {1}}, 8, true, "p.mls");
  REQUIRE_FALSE(m);
  CHECK(m.error().message.find("p.mls: node 'loss'") == 0);

  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", "-1,5"}}) ==
        "input 'in' has shape [N,784], 784 values per sample, which \"-1,5\" cannot hold: 784 is "
        "not a multiple of 5 — "
        "change the other dims");
  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", "-1,-1"}}).find("more than one -1") !=
        std::string::npos);
  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", "28,x"}}) ==
        "parameter 'shape' \"28,x\": 'x' is not an integer; write the per-sample dims separated by "
        "commas, e.g. "
        "\"28,28\" or \"-1,7\"");
  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", ""}}).find("is empty") !=
        std::string::npos);
  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", "28,,28"}}).find("empty entry") !=
        std::string::npos);
  CHECK(infer_error("mls.reshape", {{-1, 784}}, {{"shape", "0,784"}}).find("must be >= 1") !=
        std::string::npos);

  CHECK(infer_error("mls.add", {{-1, 8}, {-1, 4}}, {}) ==
        "inputs 'a' [N,8] and 'b' [N,4] differ; Add needs one shape — make the branch keep its "
        "input's shape, or "
        "project the shortcut to match (a Linear, or a 1x1 Conv2d for images)");
  CHECK(infer_error("mls.concat", {{-1, 3, 4}, {-1, 2, 5}}, {}) ==
        "inputs 'a' [N,3,4] and 'b' [N,2,5] differ on axis 2, not only on the joined axis 1 — "
        "change the axis or make "
        "those dims agree");
  CHECK(infer_error("mls.concat", {{-1, 3}, {-1, 2}}, {{"axis", 0}}) ==
        "axis 0 is the batch; concatenate along 1 or later");
  CHECK(infer_error("mls.concat", {{-1, 3}, {-1, 2}}, {{"axis", 2}})
            .find("use 1 for the first axis") != std::string::npos);
  CHECK(infer_error("mls.concat", {{-1, 3}, {-1, 2, 1}}, {}).find("different ranks") !=
        std::string::npos);

  CHECK(
      infer_error("mls.embedding", {{-1, 1, 28, 28}}, {{"num_embeddings", 4}, {"embedding_dim", 2}})
          .find("Embedding expects token ids [N,T]") != std::string::npos);
  CHECK(infer_error("mls.layer_norm", {{-1}}, {}).find("at least [N,features]") !=
        std::string::npos);
  CHECK(infer_error("mls.softmax", {{-1}}, {}).find("at least [N,features]") != std::string::npos);
  CHECK(infer_error("mls.conv_transpose2d", {{-1, 3, 7, 7}},
                    {{"out_channels", 2}, {"stride", 2}, {"output_padding", 2}}) ==
        "output_padding 2 must be smaller than the stride (2) — lower it or raise the stride");
  CHECK(infer_error("mls.conv_transpose2d", {{-1, 49}}, {{"out_channels", 2}}).find("[N,C,H,W]") !=
        std::string::npos);

  const InferContext classes{{4}, 3, {}}, values{{4}, 0, {1}};
  CHECK(infer_error("mls.cross_entropy", {{-1, 3}, {-1}}, {{"class_weights", "1,2"}}, classes) ==
        "parameter 'class_weights' has 2 weights but the logits have 3 classes — give exactly one "
        "weight per class");
  CHECK(infer_error("mls.cross_entropy", {{-1, 3}, {-1}}, {{"class_weights", "1,-2,1"}}, classes)
            .find("'-2' is not a number >= 0") != std::string::npos);
  CHECK(infer_error("mls.cross_entropy", {{-1, 3}, {-1}}, {{"class_weights", "0,0,0"}}, classes)
            .find("no weight above 0") != std::string::npos);
  CHECK(infer_error("mls.nll_loss", {{-1, 1}, {-1, 1}}, {}, values) ==
        "NLL needs class labels, but the dataset's targets are values [N,1] — use a regression "
        "loss (MSE, L1, Huber)");
  CHECK(infer_error("mls.l1_loss", {{-1, 5}, {-1}}, {}, classes) ==
        "input 'prediction' has 5 columns but the dataset has 3 classes — add a Linear with "
        "out_features=3");
  CHECK(infer_error("mls.bce_with_logits", {{-1, 2, 2}, {-1}}, {}, classes)
            .find("add a Flatten and a Linear with out_features=3") != std::string::npos);
  CHECK(infer_error("mls.huber_loss", {{-1, 1, 1}, {-1, 2, 2}}, {}, InferContext{{4}, 0, {2, 2}}) ==
        "input 'prediction' has shape [N,1,1] but the targets are [N,2,2]; Huber loss compares "
        "them value by value — "
        "make the model output [N,2,2]");
}
