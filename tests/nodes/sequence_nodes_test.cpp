// The sequence node types (mls.lstm, mls.gru, mls.multi_head_attention): ports and shapes,
// parameters named and counted as PyTorch's and initialised with its bounds, 'last' is the
// final step of 'out', small sequence models train, and shape errors name the node.
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

// Sequences [T, F] in U(-1, 1); the class is whether feature 0 sums to more than 0 over the
// steps (so the model has to carry information across all of them).
class Sequences final : public BatchSource {
 public:
  Sequences(int64_t n, int64_t t, int64_t f, uint64_t seed) : n_(n), t_(t), f_(f) {
    Rng r(seed);
    x_.resize(static_cast<size_t>(n * t * f));
    y_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t k = 0; k < t * f; ++k) {
        auto v = static_cast<float>(r.uniform(-1, 1));
        x_[static_cast<size_t>(i * t * f + k)] = v;
        if (k % f == 0) s += v;
      }
      y_[static_cast<size_t>(i)] = s > 0;
    }
  }
  int64_t num_samples() const override { return n_; }
  Shape sample_shape() const override { return {t_, f_}; }
  int64_t num_classes() const override { return 2; }
  void start_epoch(int64_t) override { pos_ = 0; }
  bool next(int64_t bs, HostBatch& out) override {
    if (pos_ >= n_) return false;
    out.size = std::min(bs, n_ - pos_);
    const int64_t per = t_ * f_;
    out.x.assign(x_.begin() + pos_ * per, x_.begin() + (pos_ + out.size) * per);
    out.y.assign(y_.begin() + pos_, y_.begin() + pos_ + out.size);
    pos_ += out.size;
    return true;
  }
  InferContext context() const { return {{t_, f_}, 2, {}}; }

 private:
  int64_t n_, t_, f_, pos_ = 0;
  std::vector<float> x_;
  std::vector<int64_t> y_;
};

// in -> `layer` (its port `port`) -> [flatten] -> Linear(2) -> cross-entropy.
Document classifier(NodeSpec layer, const std::string& port, bool flatten) {
  std::vector<NodeSpec> n{{"x", "mls.input"},
                          {"y", "mls.labels"},
                          layer,
                          {"fc", "mls.linear", {{"out_features", 2}}},
                          {"loss", "mls.cross_entropy"}};
  std::vector<std::pair<std::string, std::string>> l{
      {"x:out", layer.id + ":in"}, {"fc:out", "loss:logits"}, {"y:out", "loss:labels"}};
  if (flatten) {
    n.push_back({"flat", "mls.flatten"});
    l.push_back({layer.id + ":" + port, "flat:in"});
    l.push_back({"flat:out", "fc:in"});
  } else {
    l.push_back({layer.id + ":" + port, "fc:in"});
  }
  return make_doc(n, l);
}

ModelBuilder builder(const Document& doc, const InferContext& ctx) {
  return [doc, ctx](int64_t batch, bool training) {
    return lower(doc, ctx, batch, training, "seq.mls");
  };
}

std::vector<double> step_losses(const Document& doc, Sequences& data, int64_t steps,
                                OptimizerConfig opt) {
  Trainer t(host(), builder(doc, data.context()),
            {.epochs = 100, .batch_size = 16, .seed = 9, .opt = opt, .max_steps = steps});
  auto r = t.fit(data, nullptr, nullptr);
  if (!r) FAIL(r.error().message);
  REQUIRE(static_cast<int64_t>(r->step_losses.size()) == steps);
  return r->step_losses;
}

// The mean of the last five step losses over the mean of the first five.
double loss_ratio(const std::vector<double>& v) {
  INFO("first " << v.front() << ", last " << v.back());
  for (double l : v) REQUIRE(std::isfinite(l));
  double first = std::accumulate(v.begin(), v.begin() + 5, 0.0),
         last = std::accumulate(v.end() - 5, v.end(), 0.0);
  return last / first;
}

// name -> shape of the model's parameters.
std::map<std::string, Shape> param_shapes(const Graph& g) {
  std::map<std::string, Shape> out;
  for (Ref p : g.params()) out[g.value(p).name] = g.type_of(p).shape;
  return out;
}

}  // namespace

TEST_CASE("lstm and gru: ports, shapes, and PyTorch's parameters and init bounds",
          "[nodes][sequence]") {
  host();
  const NodeTypeDef* lstm = builtin_catalogue().find("mls.lstm");
  REQUIRE(lstm != nullptr);
  CHECK(lstm->output_index("out") == 0);
  CHECK(lstm->output_index("last") == 1);
  CHECK(lstm->find_param("hidden_size")->required);
  Sequences data(64, 5, 3, 1);
  for (const char* type : {"mls.lstm", "mls.gru"}) {
    INFO(type);
    const int64_t gates = std::string(type) == "mls.lstm" ? 4 : 3, h = 4;
    Document doc = classifier({"rnn", type, {{"hidden_size", h}}}, "last", false);
    auto shapes = infer_shapes(doc, data.context());
    REQUIRE(shapes);
    CHECK(shapes->at("rnn") == std::vector<Shape>{{-1, 5, h}, {-1, h}});
    auto m = lower(doc, data.context(), 7, true, "seq.mls");
    REQUIRE(m);
    auto ps = param_shapes(m->graph);
    CHECK(ps.at("rnn.weight_ih") == Shape{3, gates * h});  // PyTorch's weight_ih_l0, transposed
    CHECK(ps.at("rnn.weight_hh") == Shape{h, gates * h});
    CHECK(ps.at("rnn.bias_ih") == Shape{gates * h});
    CHECK(ps.at("rnn.bias_hh") == Shape{gates * h});
    CHECK(m->graph.type_of(m->logits).shape == Shape{7, 2});
    // PyTorch's nn.LSTM(3, 4) has 144 parameters, nn.GRU(3, 4) 108.
    int64_t count = 0;
    for (Ref p : m->graph.params())
      if (m->graph.value(p).name.rfind("rnn.", 0) == 0) count += numel(m->graph.type_of(p).shape);
    CHECK(count == gates * h * (3 + h + 2));
    // Every weight and bias starts in U(-1/sqrt(H), 1/sqrt(H)), spread over most of it.
    Trainer t(host(), builder(doc, data.context()), {.batch_size = 7, .seed = 3});
    REQUIRE(t.init());
    for (size_t i = 0; i < t.params().size(); ++i) {
      if (t.param_names()[i].rfind("rnn.", 0) != 0) continue;
      INFO(t.param_names()[i]);
      auto v = t.params()[i].to_f64();
      double most = 0;
      for (double x : v) most = std::max(most, std::abs(x));
      CHECK(most <= 0.5);
      CHECK(most > 0.3);
    }
    Document no_bias =
        classifier({"rnn", type, {{"hidden_size", h}, {"bias", false}}}, "last", false);
    auto nb = lower(no_bias, data.context(), 7, true, "seq.mls");
    REQUIRE(nb);
    CHECK(param_shapes(nb->graph).count("rnn.bias_ih") == 0);
  }
}

TEST_CASE("the 'last' output of an lstm node is the final step of 'out'", "[nodes][sequence]") {
  host();
  InferContext ctx{{4, 2}, 2, {}};
  const NodeTypeDef* def = builtin_catalogue().find("mls.lstm");
  auto params = complete_params(*def, {{"hidden_size", 3}});
  REQUIRE(params);
  ModelGraph one{Graph("lstm"), {}, {}, {}, {}, {}};
  Ref x = one.graph.add_input("x", {DType::F32, {2, 4, 2}});
  Refs ins{x};
  const std::string nid = "rnn";
  LowerContext c{one, nid, *params, ins, 2, ctx, false};
  auto outs = def->lower(c);
  REQUIRE(outs);
  REQUIRE(outs->size() == 2);
  one.graph.set_outputs(*outs);
  auto plan = CompiledPlan::compile(one.graph, host());
  REQUIRE(plan.ok());
  Rng r(2);
  std::vector<float> xv(16);
  for (float& v : xv) v = static_cast<float>(r.uniform(-1, 1));
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {2, 4, 2}, xv)).ok());
  for (Ref p : one.graph.params()) {
    std::vector<float> w(static_cast<size_t>(numel(one.graph.type_of(p).shape)));
    for (float& v : w) v = static_cast<float>(r.uniform(-0.5, 0.5));
    REQUIRE(plan->bind(p, Tensor::from_f32(host(), one.graph.type_of(p).shape, w)).ok());
  }
  plan->run();
  auto out = plan->tensor((*outs)[0]).to_f64(), last = plan->tensor((*outs)[1]).to_f64();
  REQUIRE(out.size() == 24);
  REQUIRE(last.size() == 6);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 3; ++j)
      CHECK(last[static_cast<size_t>(b * 3 + j)] == out[static_cast<size_t>((b * 4 + 3) * 3 + j)]);
  // And the steps differ (it is a recurrence, not a copy).
  CHECK(out[0] != out[3]);
}

TEST_CASE("multi_head_attention: shapes, PyTorch's parameters and init", "[nodes][sequence]") {
  host();
  Sequences data(64, 5, 8, 2);
  Document doc = classifier(
      {"attn", "mls.multi_head_attention", {{"num_heads", 2}, {"causal", true}}}, "out", true);
  auto shapes = infer_shapes(doc, data.context());
  REQUIRE(shapes);
  CHECK(shapes->at("attn")[0] == Shape{-1, 5, 8});
  auto m = lower(doc, data.context(), 3, true, "seq.mls");
  REQUIRE(m);
  auto ps = param_shapes(m->graph);
  for (const char* w :
       {"attn.q_proj.weight", "attn.k_proj.weight", "attn.v_proj.weight", "attn.out_proj.weight"})
    CHECK(ps.at(w) == Shape{8, 8});
  int64_t count = 0;
  for (Ref p : m->graph.params())
    if (m->graph.value(p).name.rfind("attn.", 0) == 0) count += numel(m->graph.type_of(p).shape);
  CHECK(count == 4 * 8 * 8 + 4 * 8);  // nn.MultiheadAttention(8, 2): 288
  Trainer t(host(), builder(doc, data.context()), {.batch_size = 3, .seed = 4});
  REQUIRE(t.init());
  for (size_t i = 0; i < t.params().size(); ++i) {
    const std::string& name = t.param_names()[i];
    if (name.rfind("attn.", 0) != 0) continue;
    INFO(name);
    auto v = t.params()[i].to_f64();
    double most = 0;
    for (double x : v) most = std::max(most, std::abs(x));
    if (name.find("bias") != std::string::npos) {
      CHECK(most == 0.0);
    } else if (name == "attn.out_proj.weight") {
      CHECK(most <= 1 / std::sqrt(8.0));  // Linear's default
      CHECK(most > 0.25);
    } else {
      CHECK(most <= std::sqrt(6.0 / 32));  // Xavier on the [3E, E] in_proj_weight
      CHECK(most > 0.3);
    }
  }
}

TEST_CASE("sequence models train: the loss falls under SGD", "[nodes][sequence][train]") {
  host();
  Sequences data(960, 6, 2, 5);
  const OptimizerConfig sgd{"sgd", 0.1, 0.9};
  SECTION("lstm, last step") {
    CHECK(
        loss_ratio(step_losses(classifier({"rnn", "mls.lstm", {{"hidden_size", 8}}}, "last", false),
                               data, 60, sgd)) < 0.6);
  }
  SECTION("gru, every step") {
    CHECK(loss_ratio(step_losses(classifier({"rnn", "mls.gru", {{"hidden_size", 8}}}, "out", true),
                                 data, 60, sgd)) < 0.6);
  }
  SECTION("causal multi-head attention") {
    Sequences wide(960, 6, 4, 6);
    CHECK(loss_ratio(step_losses(
              classifier({"attn", "mls.multi_head_attention", {{"num_heads", 2}, {"causal", true}}},
                         "out", true),
              wide, 60, sgd)) < 0.6);
  }
  SECTION("embedding -> lstm -> linear on token ids") {
    // Ids in [0, 6); the class is whether id 5 comes before id 0 (order matters).
    Rng r(7);
    const int64_t n = 960, t = 6;
    std::vector<float> ids(static_cast<size_t>(n * t));
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t first5 = t, first0 = t;
      for (int64_t j = 0; j < t; ++j) {
        auto v = static_cast<int64_t>(r.below(6));
        ids[static_cast<size_t>(i * t + j)] = static_cast<float>(v);
        if (v == 5) first5 = std::min(first5, j);
        if (v == 0) first0 = std::min(first0, j);
      }
      labels[static_cast<size_t>(i)] = first5 < first0;
    }
    class Tokens final : public BatchSource {
     public:
      Tokens(std::vector<float> x, std::vector<int64_t> y) : x_(std::move(x)), y_(std::move(y)) {}
      int64_t num_samples() const override { return static_cast<int64_t>(y_.size()); }
      Shape sample_shape() const override { return {6}; }
      int64_t num_classes() const override { return 2; }
      void start_epoch(int64_t) override { pos_ = 0; }
      bool next(int64_t bs, HostBatch& out) override {
        if (pos_ >= num_samples()) return false;
        out.size = std::min(bs, num_samples() - pos_);
        out.x.assign(x_.begin() + pos_ * 6, x_.begin() + (pos_ + out.size) * 6);
        out.y.assign(y_.begin() + pos_, y_.begin() + pos_ + out.size);
        pos_ += out.size;
        return true;
      }

     private:
      std::vector<float> x_;
      std::vector<int64_t> y_;
      int64_t pos_ = 0;
    } tokens(ids, labels);
    Document doc =
        make_doc({{"x", "mls.input"},
                  {"y", "mls.labels"},
                  {"emb", "mls.embedding", {{"num_embeddings", 6}, {"embedding_dim", 4}}},
                  {"rnn", "mls.lstm", {{"hidden_size", 8}}},
                  {"fc", "mls.linear", {{"out_features", 2}}},
                  {"loss", "mls.cross_entropy"}},
                 {{"x:out", "emb:in"},
                  {"emb:out", "rnn:in"},
                  {"rnn:last", "fc:in"},
                  {"fc:out", "loss:logits"},
                  {"y:out", "loss:labels"}});
    InferContext ctx{{6}, 2, {}};
    Trainer tr(
        host(), builder(doc, ctx),
        {.epochs = 100, .batch_size = 16, .seed = 9, .opt = {"adam", 0.02}, .max_steps = 120});
    auto res = tr.fit(tokens, nullptr, nullptr);
    if (!res) FAIL(res.error().message);
    CHECK(loss_ratio(res->step_losses) < 0.7);
  }
}

TEST_CASE("attention then an LSTM: eager and static training give the same losses",
          "[nodes][sequence][eager]") {
  host();
  Sequences data(320, 5, 4, 11);
  Document doc =
      make_doc({{"x", "mls.input"},
                {"y", "mls.labels"},
                {"attn", "mls.multi_head_attention", {{"num_heads", 2}, {"causal", true}}},
                {"ln", "mls.layer_norm"},
                {"rnn", "mls.lstm", {{"hidden_size", 6}}},
                {"fc", "mls.linear", {{"out_features", 2}}},
                {"loss", "mls.cross_entropy"}},
               {{"x:out", "attn:in"},
                {"attn:out", "ln:in"},
                {"ln:out", "rnn:in"},
                {"rnn:last", "fc:in"},
                {"fc:out", "loss:logits"},
                {"y:out", "loss:labels"}});
  TrainConfig cfg{.epochs = 1, .batch_size = 16, .seed = 12, .opt = {"sgd", 0.1, 0.9}};
  Trainer st(host(), builder(doc, data.context()), cfg);
  cfg.mode = ExecMode::Eager;
  Trainer ea(host(), builder(doc, data.context()), cfg);
  auto rs = st.fit(data, nullptr, nullptr);
  auto re = ea.fit(data, nullptr, nullptr);
  REQUIRE(rs);
  REQUIRE(re);
  REQUIRE(rs->step_losses.size() == 20);
  REQUIRE(re->step_losses.size() == 20);
  for (size_t i = 0; i < 20; ++i) {
    INFO("step " << i);
    CHECK(re->step_losses[i] == Approx(rs->step_losses[i]).epsilon(1e-4));
  }
  CHECK(rs->step_losses.back() < rs->step_losses.front());
}

TEST_CASE("sequence shape errors name the node and say what to do", "[nodes][sequence]") {
  host();
  Document doc = classifier({"rnn", "mls.lstm", {{"hidden_size", 4}}}, "last", false);
  auto s = infer_shapes(doc, InferContext{{20}, 2, {}});  // flat samples: [N,20] is no sequence
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "node 'rnn' (mls.lstm): input 'in' has shape [N,20]; LSTM expects a sequence "
        "[N,T,features] — add a Reshape "
        "before it (shape \"28,28\" reads a 28x28 image as 28 steps of 28 values) or an Embedding "
        "for token ids");
  // 'out' [N,T,H] into a Linear: it acts on every step (as nn.Linear), and the loss names
  // the per-step logits.
  Document out = classifier({"rnn", "mls.gru", {{"hidden_size", 4}}}, "out", false);
  s = infer_shapes(out, InferContext{{5, 3}, 2, {}});
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "node 'loss' (mls.cross_entropy): input 'logits' has shape [N,5,2]; CrossEntropy "
        "expects [N,classes]");

  Document attn = classifier({"attn", "mls.multi_head_attention", {{"num_heads", 3}}}, "out", true);
  s = infer_shapes(attn, InferContext{{5, 8}, 2, {}});
  REQUIRE_FALSE(s);
  CHECK(s.error().message ==
        "node 'attn' (mls.multi_head_attention): num_heads 3 does not divide the embedding size 8 "
        "(the last dim of "
        "[N,5,8]) — use one of 1, 2, 4, 8");
  auto m = lower(attn, InferContext{{5, 8}, 2, {}}, 4, true, "a.mls");
  REQUIRE_FALSE(m);
  CHECK(m.error().message.find("a.mls: node 'attn'") == 0);
}
