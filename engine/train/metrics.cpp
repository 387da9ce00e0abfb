#include "engine/train/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/core/check.h"

namespace mls {

namespace {

double ratio(int64_t num, int64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace

ConfusionMatrix::ConfusionMatrix(int64_t classes)
    : classes_(classes), counts_(static_cast<size_t>(classes * classes), 0) {
  MLS_CHECK(classes > 0, "ConfusionMatrix needs at least one class");
}

void ConfusionMatrix::add(int64_t truth, int64_t predicted) {
  MLS_CHECK(truth >= 0 && truth < classes_, "ConfusionMatrix: true label out of range");
  MLS_CHECK(predicted >= 0 && predicted < classes_, "ConfusionMatrix: prediction out of range");
  ++counts_[static_cast<size_t>(truth * classes_ + predicted)];
  ++total_;
}

void ConfusionMatrix::add_logits(const float* logits, int64_t rows, int64_t classes,
                                 const int64_t* labels) {
  MLS_CHECK(classes == classes_, "ConfusionMatrix::add_logits: class count differs");
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (row[c] > row[best]) best = c;  // strict: the first maximum wins
    add(labels[r], best);
  }
}

int64_t ConfusionMatrix::at(int64_t truth, int64_t pred) const {
  MLS_CHECK(truth >= 0 && truth < classes_ && pred >= 0 && pred < classes_,
            "ConfusionMatrix::at out of range");
  return counts_[static_cast<size_t>(truth * classes_ + pred)];
}

int64_t ConfusionMatrix::predicted_count(int64_t k) const {
  int64_t n = 0;
  for (int64_t t = 0; t < classes_; ++t) n += at(t, k);
  return n;
}

int64_t ConfusionMatrix::true_count(int64_t k) const {
  int64_t n = 0;
  for (int64_t p = 0; p < classes_; ++p) n += at(k, p);
  return n;
}

double ConfusionMatrix::accuracy() const {
  int64_t correct = 0;
  for (int64_t k = 0; k < classes_; ++k) correct += at(k, k);
  return ratio(correct, total_);
}

double ConfusionMatrix::precision(int64_t k) const {
  return ratio(at(k, k), predicted_count(k));
}

double ConfusionMatrix::recall(int64_t k) const {
  return ratio(at(k, k), true_count(k));
}

double ConfusionMatrix::f1(int64_t k) const {
  // 2TP / (2TP + FP + FN) equals 2PR / (P + R) where both are defined, and is 0 otherwise.
  int64_t tp = at(k, k);
  return ratio(2 * tp, predicted_count(k) + true_count(k));
}

double ConfusionMatrix::macro_precision() const {
  double s = 0;
  for (int64_t k = 0; k < classes_; ++k) s += precision(k);
  return s / static_cast<double>(classes_);
}

double ConfusionMatrix::macro_recall() const {
  double s = 0;
  for (int64_t k = 0; k < classes_; ++k) s += recall(k);
  return s / static_cast<double>(classes_);
}

double ConfusionMatrix::macro_f1() const {
  double s = 0;
  for (int64_t k = 0; k < classes_; ++k) s += f1(k);
  return s / static_cast<double>(classes_);
}

std::string ConfusionMatrix::to_text(const std::vector<std::string>& names) const {
  auto name = [&](int64_t k) {
    return k < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(k)]
                                                  : std::to_string(k);
  };
  const std::string corner = "truth\\pred";
  size_t label_w = corner.size();
  size_t cell_w = std::to_string(total_).size();
  for (int64_t k = 0; k < classes_; ++k) {
    label_w = std::max(label_w, name(k).size());
    cell_w = std::max(cell_w, name(k).size());
  }
  auto pad = [](const std::string& s, size_t w, bool left) {
    std::string fill(w > s.size() ? w - s.size() : 0, ' ');
    return left ? s + fill : fill + s;
  };
  auto fixed3 = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };

  std::ostringstream os;
  os << pad(corner, label_w, true);
  for (int64_t p = 0; p < classes_; ++p) os << "  " << pad(name(p), cell_w, false);
  os << "  precision     recall         f1\n";
  for (int64_t t = 0; t < classes_; ++t) {
    os << pad(name(t), label_w, true);
    for (int64_t p = 0; p < classes_; ++p)
      os << "  " << pad(std::to_string(at(t, p)), cell_w, false);
    os << "  " << pad(fixed3(precision(t)), 9, false) << "  " << pad(fixed3(recall(t)), 9, false)
       << "  " << pad(fixed3(f1(t)), 9, false) << "\n";
  }
  os << "accuracy " << fixed3(accuracy()) << " of " << total_ << "; macro precision "
     << fixed3(macro_precision()) << ", recall " << fixed3(macro_recall()) << ", f1 "
     << fixed3(macro_f1()) << "\n";
  return os.str();
}

double top_k_accuracy(const float* logits, int64_t rows, int64_t classes, const int64_t* labels,
                      int64_t k) {
  MLS_CHECK(classes > 0 && k > 0, "top_k_accuracy needs classes > 0 and k > 0");
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * classes;
    int64_t label = labels[r];
    MLS_CHECK(label >= 0 && label < classes, "top_k_accuracy: label out of range");
    // The label's rank: how many classes come before it (larger, or equal at a lower index).
    int64_t rank = 0;
    for (int64_t c = 0; c < classes && rank < k; ++c)
      if (row[c] > row[label] || (row[c] == row[label] && c < label)) ++rank;
    if (rank < k) ++hits;
  }
  return ratio(hits, rows);
}

void RegressionAccumulator::add(const float* pred, const float* target, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double p = pred[i], t = target[i];
    double e = p - t;
    abs_err_ += std::abs(e);
    sq_err_ += e * e;
    ++count_;
    double delta = t - mean_;
    mean_ += delta / static_cast<double>(count_);
    m2_ += delta * (t - mean_);
  }
}

RegressionMetrics RegressionAccumulator::result() const {
  RegressionMetrics m;
  m.count = count_;
  if (count_ == 0) return m;
  double n = static_cast<double>(count_);
  m.mae = abs_err_ / n;
  m.rmse = std::sqrt(sq_err_ / n);
  if (m2_ > 0)
    m.r2 = 1.0 - sq_err_ / m2_;
  else
    m.r2 = sq_err_ == 0 ? 1.0 : 0.0;  // constant targets: scikit-learn's force_finite rule
  return m;
}

}  // namespace mls
