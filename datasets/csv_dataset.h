// A CSV file as a dataset: one target column (or several, for regression), feature columns,
// string columns one-hot encoded, numeric ones optionally standardised, missing values
// refused, dropped or filled.
//
//   CsvOptions o;
//   o.target = {"species"};                       // classification: class names from the cells
//   SplitPlan plan;  plan.test_fraction = 0.2;
//   Result<CsvData> r = load_csv("iris.csv", o, plan);
//   if (!r) { std::cerr << r.error().message << "\n"; return 1; }  // "iris.csv:17: column ..."
//   r->data (a Dataset), r->splits (train/validation/test), r->encoding (for predict)
//
// Why the encoding is its own object: `mlstudio predict` must turn a new CSV into model
// inputs exactly as the training file was (same columns, categories, means and scales), so
// training and prediction both go through CsvEncoding::encode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/csv_reader.h"
#include "datasets/dataset.h"
#include "datasets/splits.h"
#include "engine/core/result.h"

namespace mls::data {

enum class MissingPolicy { Error, Drop, Mean };

struct CsvOptions {
  std::vector<std::string> target;       // required; several only for regression
  std::vector<std::string> features;     // empty: every column but the targets, in file order
  std::vector<std::string> categorical;  // one-hot these even if their cells look numeric
  bool regression = false;               // false: classification (one target column)
  MissingPolicy missing = MissingPolicy::Error;
  bool standardize = true;  // numeric features: (v - mean) / std over the training split
  char delimiter = ',';
};

struct CsvColumn {
  std::string name;
  bool categorical = false;
  std::vector<std::string> categories;  // sorted; one-hot slot order
  // MissingPolicy::Mean: the numeric value or category index that replaces a missing cell.
  double fill = 0;
  double mean = 0, stddev = 1;  // standardisation; identity when off
};

struct CsvEncoding {
  std::vector<CsvColumn> features;
  MissingPolicy missing = MissingPolicy::Error;

  // Floats per row: one per numeric column, one per category of a categorical column.
  int64_t width() const;
  // Appends width() floats per row of `t`, looking the feature columns up by name (other
  // columns, the target among them, are ignored). Errors name `name`, the line and column.
  Result<void> encode(const CsvTable& t, const std::string& name, std::vector<float>& out) const;
};

struct CsvData {
  Dataset data;
  Splits splits;
  CsvEncoding encoding;
};

// Reads, checks, splits (by `plan`) and encodes `path`. Categories are learned from the
// whole file; means and scales from the training split only, so no test value leaks in.
// Rows whose target is missing are an error under MissingPolicy::Error and dropped otherwise.
Result<CsvData> load_csv(const std::string& path, const CsvOptions& options, const SplitPlan& plan);

}  // namespace mls::data
