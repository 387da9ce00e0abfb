// Metrics against hand-computed values (and scikit-learn's documented examples), a
// double-precision two-pass reference, and batch-split invariance.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/train/metrics.h"
#include "engine/train/rng.h"

using namespace mls;
using Catch::Detail::Approx;

namespace {

ConfusionMatrix from_pairs(int64_t classes, const std::vector<int64_t>& truth,
                           const std::vector<int64_t>& pred) {
  ConfusionMatrix cm(classes);
  for (size_t i = 0; i < truth.size(); ++i) cm.add(truth[i], pred[i]);
  return cm;
}

}  // namespace

TEST_CASE("confusion matrix: scikit-learn's 3-class example", "[metrics]") {
  // truth = [0,1,2,0,1,2], pred = [0,2,1,0,0,1] (sklearn.metrics.f1_score docs).
  // Rows truth, columns predicted:  [2 0 0]  [1 0 1]  [0 2 0]
  // class 0: TP 2, predicted 3, true 2 -> P 2/3, R 1, F1 2*2/(3+2) = 0.8
  // class 1: TP 0, predicted 2, true 2 -> P 0, R 0, F1 0
  // class 2: TP 0, predicted 1, true 2 -> P 0, R 0, F1 0
  // macro P 2/9 = 0.2222, macro R 1/3, macro F1 0.8/3 = 0.2667; accuracy 2/6.
  ConfusionMatrix cm = from_pairs(3, {0, 1, 2, 0, 1, 2}, {0, 2, 1, 0, 0, 1});
  REQUIRE(cm.total() == 6);
  const int64_t want[3][3] = {{2, 0, 0}, {1, 0, 1}, {0, 2, 0}};
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t p = 0; p < 3; ++p) REQUIRE(cm.at(t, p) == want[t][p]);

  CHECK(cm.accuracy() == Approx(1.0 / 3.0));
  CHECK(cm.precision(0) == Approx(2.0 / 3.0));
  CHECK(cm.recall(0) == Approx(1.0));
  CHECK(cm.f1(0) == Approx(0.8));
  for (int64_t k : {1, 2}) {
    CHECK(cm.precision(k) == 0.0);
    CHECK(cm.recall(k) == 0.0);
    CHECK(cm.f1(k) == 0.0);
  }
  CHECK(cm.macro_precision() == Approx(2.0 / 9.0));
  CHECK(cm.macro_recall() == Approx(1.0 / 3.0));
  CHECK(cm.macro_f1() == Approx(0.26666667));
}

TEST_CASE("confusion matrix: a never-predicted class has precision 0", "[metrics]") {
  // truth = [0,0,1,1,1,2,2], pred = [0,1,1,1,0,1,1]; class 2 is never predicted.
  // Rows truth, columns predicted:  [1 1 0]  [1 2 0]  [0 2 0]
  // class 0: TP 1, predicted 2, true 2 -> P 1/2, R 1/2, F1 2/(2+2) = 0.5
  // class 1: TP 2, predicted 5, true 3 -> P 2/5, R 2/3, F1 4/(5+3) = 0.5
  // class 2: TP 0, predicted 0, true 2 -> P 0/0 := 0, R 0, F1 0/(0+2) = 0
  // macro P (0.5+0.4+0)/3 = 0.3, macro R (0.5+2/3+0)/3 = 7/18, macro F1 1/3; accuracy 3/7.
  ConfusionMatrix cm = from_pairs(3, {0, 0, 1, 1, 1, 2, 2}, {0, 1, 1, 1, 0, 1, 1});
  CHECK(cm.accuracy() == Approx(3.0 / 7.0));
  CHECK(cm.precision(0) == Approx(0.5));
  CHECK(cm.recall(0) == Approx(0.5));
  CHECK(cm.f1(0) == Approx(0.5));
  CHECK(cm.precision(1) == Approx(0.4));
  CHECK(cm.recall(1) == Approx(2.0 / 3.0));
  CHECK(cm.f1(1) == Approx(0.5));
  CHECK(cm.precision(2) == 0.0);
  CHECK(cm.recall(2) == 0.0);
  CHECK(cm.f1(2) == 0.0);
  CHECK(cm.macro_precision() == Approx(0.3));
  CHECK(cm.macro_recall() == Approx(7.0 / 18.0));
  CHECK(cm.macro_f1() == Approx(1.0 / 3.0));

  ConfusionMatrix empty(4);
  CHECK(empty.accuracy() == 0.0);
  CHECK(empty.macro_f1() == 0.0);
}

TEST_CASE("confusion matrix: to_text names the classes and shows the counts", "[metrics]") {
  ConfusionMatrix cm = from_pairs(3, {0, 1, 2, 0, 1, 2}, {0, 2, 1, 0, 0, 1});
  std::string text = cm.to_text({"cat", "dog", "bird"});
  INFO(text);
  CHECK(text.find("cat") != std::string::npos);
  CHECK(text.find("dog") != std::string::npos);
  CHECK(text.find("bird") != std::string::npos);
  CHECK(text.find("0.800") != std::string::npos);  // class 0's F1
  CHECK(text.find("0.667") != std::string::npos);  // class 0's precision
  CHECK(text.find("0.267") != std::string::npos);  // macro F1
  // Header, three class rows, the summary line.
  CHECK(std::count(text.begin(), text.end(), '\n') == 5);
  // Without names, classes are shown by index.
  CHECK(cm.to_text().find("truth\\pred") != std::string::npos);
}

TEST_CASE("argmax and top-k accuracy from logits, ties to the lower index", "[metrics]") {
  // 4 rows, 3 classes:
  //   row 0 label 1: [0.1, 2.0, 0.5] -> argmax 1, label rank 0
  //   row 1 label 1: [1.0, 1.0, 0.0] -> argmax 0 (first max), label rank 1
  //   row 2 label 2: [0.3, 0.2, 0.1] -> argmax 0, label rank 2
  //   row 3 label 2: [-1., 3.0, 3.0] -> argmax 1, label rank 1
  // top-1 1/4, top-2 3/4, top-3 1.
  const std::vector<float> logits = {0.1f, 2.0f, 0.5f, 1.0f, 1.0f, 0.0f,
                                     0.3f, 0.2f, 0.1f, -1.f, 3.0f, 3.0f};
  const std::vector<int64_t> labels = {1, 1, 2, 2};
  ConfusionMatrix cm(3);
  cm.add_logits(logits.data(), 4, 3, labels.data());
  CHECK(cm.at(1, 1) == 1);
  CHECK(cm.at(1, 0) == 1);
  CHECK(cm.at(2, 0) == 1);
  CHECK(cm.at(2, 1) == 1);
  CHECK(cm.accuracy() == Approx(0.25));
  CHECK(top_k_accuracy(logits.data(), 4, 3, labels.data(), 1) == Approx(0.25));
  CHECK(top_k_accuracy(logits.data(), 4, 3, labels.data(), 2) == Approx(0.75));
  CHECK(top_k_accuracy(logits.data(), 4, 3, labels.data(), 3) == 1.0);
  CHECK(top_k_accuracy(logits.data(), 4, 3, labels.data(), 5) == 1.0);
}

TEST_CASE("top-1 equals accuracy and top-classes is 1 on random tied logits", "[metrics]") {
  const int64_t rows = 500, classes = 7;
  Rng rng(11);
  std::vector<float> logits(static_cast<size_t>(rows * classes));
  std::vector<int64_t> labels(static_cast<size_t>(rows));
  for (float& v : logits) v = static_cast<float>(rng.below(4));  // few values: many ties
  for (int64_t& l : labels) l = static_cast<int64_t>(rng.below(classes));
  ConfusionMatrix cm(classes);
  cm.add_logits(logits.data(), rows, classes, labels.data());
  REQUIRE(cm.total() == rows);
  double top1 = top_k_accuracy(logits.data(), rows, classes, labels.data(), 1);
  CHECK(top1 == cm.accuracy());
  CHECK(top1 > 0.0);
  CHECK(top1 < 1.0);
  double prev = top1;
  for (int64_t k = 2; k <= classes; ++k) {
    double acc = top_k_accuracy(logits.data(), rows, classes, labels.data(), k);
    CHECK(acc >= prev);
    prev = acc;
  }
  CHECK(prev == 1.0);
}

TEST_CASE("regression metrics: scikit-learn's example, split in batches", "[metrics]") {
  // pred = [2.5, 0, 2, 8], target = [3, -0.5, 2, 7]; errors -0.5, 0.5, 0, 1.
  // MAE 2/4 = 0.5; SS_res 1.5, RMSE sqrt(1.5/4) = 0.6123724357.
  // target mean 2.875, SS_tot 0.015625 + 11.390625 + 0.765625 + 17.015625 = 29.1875,
  // R^2 1 - 1.5/29.1875 = 0.9486081370 (as in sklearn.metrics.r2_score's docs).
  const std::vector<float> pred = {2.5f, 0.0f, 2.0f, 8.0f};
  const std::vector<float> target = {3.0f, -0.5f, 2.0f, 7.0f};
  RegressionAccumulator one;
  one.add(pred.data(), target.data(), 4);
  RegressionMetrics m = one.result();
  CHECK(m.count == 4);
  CHECK(m.mae == Approx(0.5));
  CHECK(m.rmse == Approx(0.6123724357));
  CHECK(m.r2 == Approx(0.9486081370));

  RegressionAccumulator two;
  two.add(pred.data(), target.data(), 1);
  two.add(pred.data() + 1, target.data() + 1, 3);
  RegressionMetrics s = two.result();
  CHECK(s.count == 4);
  CHECK(s.mae == Approx(m.mae).epsilon(1e-15));
  CHECK(s.rmse == Approx(m.rmse).epsilon(1e-15));
  CHECK(s.r2 == Approx(m.r2).epsilon(1e-15));
}

TEST_CASE("regression metrics: one pass matches a two-pass double reference", "[metrics]") {
  const int64_t n = 1000;
  Rng rng(5);
  std::vector<float> pred(static_cast<size_t>(n)), target(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // A large offset makes the naive sum-of-squares formula lose digits; Welford must not.
    target[static_cast<size_t>(i)] = static_cast<float>(1000.0 + rng.uniform(-1, 1));
    pred[static_cast<size_t>(i)] =
        static_cast<float>(target[static_cast<size_t>(i)] + rng.uniform(-0.3, 0.3));
  }
  double mean = 0, abs_err = 0, sq_err = 0, ss_tot = 0;
  for (float t : target) mean += t;
  mean /= n;
  for (size_t i = 0; i < target.size(); ++i) {
    double e = static_cast<double>(pred[i]) - target[i];
    abs_err += std::abs(e);
    sq_err += e * e;
    ss_tot += (target[i] - mean) * (target[i] - mean);
  }
  RegressionAccumulator acc;
  acc.add(pred.data(), target.data(), 300);  // uneven batches
  acc.add(pred.data() + 300, target.data() + 300, 650);
  acc.add(pred.data() + 950, target.data() + 950, 50);
  RegressionMetrics m = acc.result();
  CHECK(m.count == n);
  CHECK(m.mae == Approx(abs_err / n).epsilon(1e-12));
  CHECK(m.rmse == Approx(std::sqrt(sq_err / n)).epsilon(1e-12));
  CHECK(m.r2 == Approx(1.0 - sq_err / ss_tot).epsilon(1e-9));
  CHECK(m.r2 > 0.5);
  CHECK(m.r2 < 1.0);
}

TEST_CASE("regression metrics: constant targets give a finite R^2", "[metrics]") {
  const std::vector<float> target = {2.0f, 2.0f, 2.0f};
  const std::vector<float> exact = {2.0f, 2.0f, 2.0f};
  const std::vector<float> off = {2.0f, 3.0f, 2.0f};
  RegressionAccumulator a, b, empty;
  a.add(exact.data(), target.data(), 3);
  b.add(off.data(), target.data(), 3);
  CHECK(a.result().r2 == 1.0);
  CHECK(a.result().mae == 0.0);
  CHECK(b.result().r2 == 0.0);
  CHECK(b.result().mae == Approx(1.0 / 3.0));
  CHECK(b.result().rmse == Approx(std::sqrt(1.0 / 3.0)));
  CHECK(empty.result().count == 0);
  CHECK(empty.result().r2 == 0.0);
}
