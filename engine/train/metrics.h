// Classification and regression metrics over host-side arrays (the trainer already copies
// logits and predictions to the host), accumulated batch by batch.
//
//   ConfusionMatrix cm(10);
//   for (const HostBatch& b : batches)  // logits: [rows, 10] row-major, labels: [rows]
//     cm.add_logits(logits.data(), rows, 10, labels.data());
//   double f1 = cm.macro_f1();
//   std::cout << cm.to_text({"zero", "one", ...});
//   double top5 = top_k_accuracy(logits.data(), rows, 10, labels.data(), 5);
//
//   RegressionAccumulator acc;
//   acc.add(pred.data(), target.data(), n);  // once per batch
//   RegressionMetrics m = acc.result();      // m.mae, m.rmse, m.r2, m.count
//
// Undefined ratios follow scikit-learn with zero_division=0: a class that is never predicted
// has precision 0, one that never occurs has recall 0, and F1 is 0 when both are 0.
// Labels outside [0, classes) are programmer errors (the data source validates them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mls {

class ConfusionMatrix {
 public:
  explicit ConfusionMatrix(int64_t classes);

  void add(int64_t truth, int64_t predicted);
  // Predicts the argmax of each row of logits [rows, classes] (the first maximum on ties).
  void add_logits(const float* logits, int64_t rows, int64_t classes, const int64_t* labels);

  int64_t classes() const { return classes_; }
  // Count of samples of class `truth` predicted as `pred`.
  int64_t at(int64_t truth, int64_t pred) const;
  int64_t total() const { return total_; }

  double accuracy() const;  // 0 when empty
  double precision(int64_t k) const;
  double recall(int64_t k) const;
  double f1(int64_t k) const;
  // Unweighted means over all `classes` classes, including ones absent from both truth and
  // predictions (scikit-learn's average="macro" with labels=range(classes)).
  double macro_precision() const;
  double macro_recall() const;
  double macro_f1() const;

  // A table: one row per true class, one column per predicted class, then that class's
  // precision, recall and F1; accuracy and macro averages below. Classes without a name in
  // `names` are shown by index.
  std::string to_text(const std::vector<std::string>& names = {}) const;

 private:
  int64_t predicted_count(int64_t k) const;  // column sum
  int64_t true_count(int64_t k) const;       // row sum

  int64_t classes_;
  int64_t total_ = 0;
  std::vector<int64_t> counts_;  // [truth * classes + pred]
};

// Fraction of rows whose label is among the k largest logits; equal logits rank the lower
// index first. k >= classes gives 1; no rows gives 0.
double top_k_accuracy(const float* logits, int64_t rows, int64_t classes, const int64_t* labels,
                      int64_t k);

struct RegressionMetrics {
  double mae = 0, rmse = 0, r2 = 0;
  int64_t count = 0;
};

// Accumulates in double, in one pass over batches: the target variance uses Welford's running
// mean, so the result does not depend on how the data is split.
//
// R^2 = 1 - SS_res / SS_tot. When every target is equal (SS_tot = 0) it follows scikit-learn's
// r2_score: 1 if the predictions are exact, else 0, never NaN or infinity. No samples: all 0.
class RegressionAccumulator {
 public:
  void add(const float* pred, const float* target, int64_t n);
  RegressionMetrics result() const;

 private:
  int64_t count_ = 0;
  double abs_err_ = 0;  // sum |pred - target|
  double sq_err_ = 0;   // SS_res
  double mean_ = 0;     // running mean of the targets
  double m2_ = 0;       // SS_tot, sum (target - mean)^2
};

}  // namespace mls
