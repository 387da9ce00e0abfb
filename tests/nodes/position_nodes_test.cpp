// The position node types (mls.positional_embedding, mls.last_step) and Linear over a
// sequence: shapes, errors that name what to do, and values against a float64 reference of
// y = ((x + P)[:, -1]) W + b and of Linear applied to every step; the table trains.
#include <cmath>
#include <map>

#include <catch2/catch.hpp>

#include "engine/exec/compiled_plan.h"
#include "engine/train/rng.h"
#include "engine/train/trainer.h"
#include "node_test_util.h"
#include "nodes/lower.h"
#include "nodes/shape_check.h"

using namespace mls;
using namespace mls::nodes;
using nlohmann::json;
using namespace mls::nodes::test;

namespace {

const NodeTypeDef& type(const char* id) {
  const NodeTypeDef* def = builtin_catalogue().find(id);
  REQUIRE(def != nullptr);
  return *def;
}

Result<std::vector<Shape>> infer(const char* id, const Shape& in, const json& params = {}) {
  const NodeTypeDef& def = type(id);
  auto full = complete_params(def, params.is_null() ? json::object() : params);
  REQUIRE(full);
  return def.infer({in}, *full, {});
}

// One node lowered onto `x`; its first output.
Ref lower_one(ModelGraph& m, const char* id, const std::string& node_id, Ref x,
              const json& params = json::object()) {
  const NodeTypeDef& def = type(id);
  static const InferContext ctx{};
  auto full = complete_params(def, params);
  REQUIRE(full);
  Refs ins{x};
  LowerContext c{m, node_id, *full, ins, m.graph.shape_of(x)[0], ctx, true};
  auto outs = def.lower(c);
  REQUIRE(outs);
  return (*outs)[0];
}

std::vector<float> uniform(Rng& r, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = static_cast<float>(r.uniform(-1, 1));
  return v;
}

}  // namespace

TEST_CASE("positional embedding and last step: shapes and errors", "[nodes][sequence]") {
  host();
  CHECK(*infer("mls.positional_embedding", {-1, 16, 8}) == std::vector<Shape>{{-1, 16, 8}});
  CHECK(*infer("mls.last_step", {-1, 16, 8}) == std::vector<Shape>{{-1, 8}});
  CHECK(*infer("mls.last_step", {-1, 5, 2, 3}) == std::vector<Shape>{{-1, 2, 3}});
  CHECK(*infer("mls.linear", {-1, 16, 8}, {{"out_features", 27}}) ==
        std::vector<Shape>{{-1, 16, 27}});

  auto pe = infer("mls.positional_embedding", {-1, 16});
  REQUIRE_FALSE(pe);
  CHECK(pe.error().message ==
        "input 'in' has shape [N,16]; PositionalEmbedding expects a sequence [N,T,E] — feed it "
        "from an Embedding of token ids [N,T]");
  auto ls = infer("mls.last_step", {-1, 8});
  REQUIRE_FALSE(ls);
  CHECK(ls.error().message ==
        "input 'in' has shape [N,8]; LastStep expects a sequence [N,T,features] — put it after "
        "a sequence layer (attention, LSTM)");
  // An image still asks for a Flatten.
  auto lin = infer("mls.linear", {-1, 1, 28, 28}, {{"out_features", 4}});
  REQUIRE_FALSE(lin);
  CHECK(lin.error().message.find("add a Flatten node before it") != std::string::npos);

  // In a document, the message names the node.
  Document doc = make_doc({{"x", "mls.input"},
                           {"y", "mls.labels"},
                           {"pos", "mls.positional_embedding"},
                           {"fc", "mls.linear", {{"out_features", 3}}},
                           {"loss", "mls.cross_entropy"}},
                          {{"x:out", "pos:in"},
                           {"pos:out", "fc:in"},
                           {"fc:out", "loss:logits"},
                           {"y:out", "loss:labels"}});
  auto shapes = infer_shapes(doc, InferContext{{6}, 3, {}});
  REQUIRE_FALSE(shapes);
  CHECK(shapes.error().message.find("node 'pos' (mls.positional_embedding): input 'in' has shape "
                                    "[N,6]") != std::string::npos);
}

TEST_CASE("positional embedding, linear over steps and last step compute their formulas",
          "[nodes][sequence]") {
  host();
  const int64_t n = 2, t = 3, e = 4, f = 5;
  ModelGraph m{Graph("pos"), {}, {}, {}, {}, {}};
  Ref x = m.graph.add_input("x", {DType::F32, {n, t, e}});
  Ref pos = lower_one(m, "mls.positional_embedding", "pos", x);
  Ref lin = lower_one(m, "mls.linear", "fc", pos, {{"out_features", f}});
  Ref last = lower_one(m, "mls.last_step", "last", lin);
  CHECK(m.graph.shape_of(pos) == Shape{n, t, e});
  CHECK(m.graph.shape_of(lin) == Shape{n, t, f});
  CHECK(m.graph.shape_of(last) == Shape{n, f});
  m.graph.set_outputs({lin, last});
  auto plan = CompiledPlan::compile(m.graph, host());
  REQUIRE(plan.ok());

  Rng r(5);
  const std::vector<float> xv = uniform(r, n * t * e);
  REQUIRE(plan->bind(x, Tensor::from_f32(host(), {n, t, e}, xv)).ok());
  std::map<std::string, std::vector<float>> w;
  for (Ref p : m.graph.params()) {
    const std::string& name = m.graph.value(p).name;
    const Shape s = m.graph.type_of(p).shape;
    w[name] = uniform(r, numel(s));
    REQUIRE(plan->bind(p, Tensor::from_f32(host(), s, w[name])).ok());
  }
  REQUIRE(w.count("pos.weight"));
  CHECK(m.graph.type_of(m.graph.params()[0]).shape == Shape{t, e});  // the table [T,E]
  const std::vector<float>&P = w["pos.weight"], &W = w["fc.weight"], &b = w["fc.bias"];
  REQUIRE(W.size() == static_cast<size_t>(e * f));
  plan->run();
  const std::vector<double> y = plan->tensor(lin).to_f64(), yl = plan->tensor(last).to_f64();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < t; ++s)
      for (int64_t j = 0; j < f; ++j) {
        double ref = b[static_cast<size_t>(j)];
        for (int64_t k = 0; k < e; ++k)
          ref += (static_cast<double>(xv[static_cast<size_t>((i * t + s) * e + k)]) +
                  P[static_cast<size_t>(s * e + k)]) *
                 W[static_cast<size_t>(k * f + j)];
        const double got = y[static_cast<size_t>((i * t + s) * f + j)];
        CHECK(std::abs(got - ref) < 1e-5);
        if (s == t - 1) CHECK(yl[static_cast<size_t>(i * f + j)] == got);
      }
}

TEST_CASE("the positional table starts N(0, 0.01^2) and trains", "[nodes][sequence][train]") {
  host();
  // x [T,E] -> positional -> last step -> Linear(2) -> cross-entropy.
  Document doc = make_doc({{"x", "mls.input"},
                           {"y", "mls.labels"},
                           {"pos", "mls.positional_embedding"},
                           {"last", "mls.last_step"},
                           {"fc", "mls.linear", {{"out_features", 2}}},
                           {"loss", "mls.cross_entropy"}},
                          {{"x:out", "pos:in"},
                           {"pos:out", "last:in"},
                           {"last:out", "fc:in"},
                           {"fc:out", "loss:logits"},
                           {"y:out", "loss:labels"}});
  const InferContext ctx{{8, 16}, 2, {}};
  ModelBuilder build = [doc, ctx](int64_t batch, bool training) {
    return lower(doc, ctx, batch, training, "pos.mls");
  };
  Trainer tr(host(), build, {.batch_size = 4, .seed = 3});
  REQUIRE(tr.init());
  size_t table = tr.params().size();
  for (size_t i = 0; i < tr.params().size(); ++i)
    if (tr.param_names()[i] == "pos.weight") table = i;
  REQUIRE(table < tr.params().size());
  const std::vector<double> before = tr.params()[table].to_f64();
  REQUIRE(before.size() == 8 * 16);
  double sum2 = 0;
  for (double v : before) sum2 += v * v;
  const double sd = std::sqrt(sum2 / static_cast<double>(before.size()));
  CHECK(sd > 0.007);  // 128 draws of N(0, 0.01^2): the sample sd is within 0.01 +- 0.002
  CHECK(sd < 0.013);

  Rng r(9);
  HostBatch batch;
  batch.size = 4;
  batch.x = uniform(r, 4 * 8 * 16);
  batch.y = {0, 1, 1, 0};
  REQUIRE(tr.train_step(batch));
  const std::vector<double> after = tr.params()[table].to_f64();
  // Only the last row (step 7) reaches the loss through LastStep: the others keep their values.
  for (size_t k = 0; k < before.size(); ++k) {
    INFO(k);
    if (k >= 7 * 16)
      CHECK(after[k] != before[k]);
    else
      CHECK(after[k] == before[k]);
  }
}
