// Per-label time and output statistics after training (what the editor draws on each node).
#include <catch2/catch.hpp>
#include <cmath>

#include "engine/train/node_stats.h"
#include "graph_fixtures.h"

using namespace mls;
using namespace mls::test;

TEST_CASE("output_stats describes each label's output, as computed in double by hand",
          "[train][node_stats]") {
  // x [4,3] -> matmul w [3,2] ("fc") -> relu ("act"), cross-entropy ("loss").
  auto build = [](int64_t batch, bool) -> Result<ModelGraph> {
    ModelGraph m{Graph("tiny"), {}, {}, {}, {}, {}};
    Graph& g = m.graph;
    m.input = g.add_input("x", {DType::F32, {batch, 3}});
    m.labels = g.add_input("y", {DType::I64, {batch}});
    Ref w = g.add_param("fc.weight", {DType::F32, {3, 2}});
    g.set_label("fc");
    Ref h = matmul(g, m.input, w);
    g.set_label("act");
    m.logits = relu(g, h);
    g.set_label("loss");
    m.loss = cross_entropy(g, m.logits, m.labels);
    return m;
  };
  const std::vector<float> x = {1, 2, 3, -1, 0, 1, 0.5f, -2, 1, 2, 2, -1};
  const std::vector<float> w = {0.5f, -1, 0.25f, 1, -0.5f, 0.5f};
  Tensor wt = Tensor::empty(host(), DType::F32, {3, 2}, AllocTag::Parameter);
  wt.fill_from_host(w);
  HostBatch batch{4, x, {0, 1, 1, 0}, {}};
  auto stats = output_stats(host(), *build(4, false), std::vector<Tensor>{wt}, batch);
  REQUIRE(stats.ok());
  REQUIRE(stats->size() == 3);
  CHECK((*stats)[0].label == "fc");
  CHECK((*stats)[1].label == "act");
  CHECK((*stats)[2].label == "loss");
  // The reference, in double.
  std::vector<double> fc, act;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += double(x[i * 3 + k]) * w[k * 2 + j];
      fc.push_back(s);
      act.push_back(std::max(0.0, s));
    }
  auto check = [](const OutputStats& st, const std::vector<double>& v) {
    double mean = 0, sq = 0, zeros = 0;
    for (double d : v) mean += d / v.size();
    for (double d : v) sq += (d - mean) * (d - mean) / v.size(), zeros += d == 0;
    CHECK(st.mean == Approx(mean).epsilon(1e-6));
    CHECK(st.std == Approx(std::sqrt(sq)).epsilon(1e-5));
    CHECK(st.zero_fraction == Approx(zeros / v.size()));
    CHECK(st.shape == Shape{4, 2});
  };
  check((*stats)[0], fc);
  check((*stats)[1], act);
  CHECK((*stats)[1].zero_fraction > 0.2);  // this weight kills some units: the test sees it
  CHECK((*stats)[1].min == 0);
}

TEST_CASE("time_by_label splits a profiled step's kernel time into forward and backward per layer",
          "[train][node_stats]") {
  TrainConfig cfg;
  cfg.batch_size = 16;
  Trainer t(host(), mlp_builder(8, {32}, 3), cfg);
  REQUIRE(t.init().ok());
  t.set_profiling(true);
  HostBatch b{16, std::vector<float>(16 * 8, 0.5f), std::vector<int64_t>(16, 1), {}};
  for (int i = 0; i < 3; ++i) REQUIRE(t.train_step(b).ok());
  auto plan = t.training_plan(16);
  REQUIRE(plan.ok());
  auto times = time_by_label(**plan);
  double total = 0, step = 0;
  for (const auto& s : (*plan)->step_times()) step += s.runs ? s.seconds / s.runs : 0;
  bool any_backward = false;
  for (const LabelTime& l : times) {
    total += l.forward_seconds + l.backward_seconds;
    any_backward |= l.backward_seconds > 0;
  }
  CHECK(total == Approx(step));
  CHECK(any_backward);
  REQUIRE_FALSE(times.empty());
}
