#include "datasets/csv_dataset.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace mls::data {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string quoted_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out;
}

Error cell_error(const std::string& name, int64_t line, const std::string& column,
                 const std::string& what) {
  return make_error(name + ":" + std::to_string(line) + ": column '" + column + "': " + what);
}

Error not_a_number(const std::string& name, int64_t line, const std::string& column,
                   std::string_view cell) {
  return cell_error(name, line, column, "'" + std::string(trimmed(cell)) + "' is not a number");
}

Result<size_t> find_column(const CsvTable& t, const std::string& path, const std::string& col) {
  if (auto c = t.column(col)) return *c;
  return make_error(path + ": no column '" + col + "' (the header has " + quoted_names(t.header) +
                    ")");
}

// A column is categorical when most of its values are not numbers: a lone "abc" in a column
// of ages is then a typo to report, while "red", "green", "3" is a column of categories.
bool mostly_text(const CsvTable& t, size_t col) {
  int64_t text = 0, numbers = 0;
  for (const auto& row : t.rows) {
    if (is_missing_cell(row[col])) continue;
    (parse_number(row[col]) ? numbers : text) += 1;
  }
  return text > numbers;
}

// Sorted distinct values; numerically when every value is a number ("2" before "10").
std::vector<std::string> sorted_categories(const CsvTable& t, size_t col) {
  std::vector<std::string> values;
  for (const auto& row : t.rows)
    if (!is_missing_cell(row[col])) values.emplace_back(trimmed(row[col]));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  const bool numeric = std::all_of(values.begin(), values.end(), [](const std::string& v) {
    return parse_number(v).has_value();
  });
  if (numeric)
    std::stable_sort(values.begin(), values.end(), [](const std::string& a, const std::string& b) {
      return *parse_number(a) < *parse_number(b);
    });
  return values;
}

int64_t category_index(const std::vector<std::string>& categories, std::string_view cell) {
  const std::string_view v = trimmed(cell);
  for (size_t i = 0; i < categories.size(); ++i)
    if (categories[i] == v) return static_cast<int64_t>(i);
  return -1;
}

// Drops rows with a missing target or feature cell, or reports the first one.
Result<void> handle_missing(CsvTable& t, const std::string& path,
                            const std::vector<size_t>& targets, const std::vector<size_t>& features,
                            MissingPolicy policy) {
  size_t kept = 0;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    bool drop = false;
    for (int pass = 0; pass < 2 && !drop; ++pass)
      for (size_t c : pass == 0 ? features : targets) {
        if (!is_missing_cell(t.rows[r][c])) continue;
        if (policy == MissingPolicy::Error)
          return cell_error(path, t.lines[r], t.header[c],
                            "missing value (set \"missing\": \"drop\" or \"mean\" to accept "
                            "rows with missing values)");
        // A missing target cannot be filled: a made-up label would be trained on.
        if (policy == MissingPolicy::Drop || pass == 1) {
          drop = true;
          break;
        }
      }
    if (drop) continue;
    if (kept != r) {
      t.rows[kept] = std::move(t.rows[r]);
      t.lines[kept] = t.lines[r];
    }
    ++kept;
  }
  t.rows.resize(kept);
  t.lines.resize(kept);
  return {};
}

// Mean / scale / fill of each feature column over the training rows.
void fit_columns(const CsvTable& t, const std::vector<size_t>& cols,
                 const std::vector<int64_t>& train, bool standardize, std::vector<CsvColumn>& out) {
  for (size_t f = 0; f < out.size(); ++f) {
    CsvColumn& c = out[f];
    const size_t col = cols[f];
    if (c.categorical) {
      std::vector<int64_t> counts(c.categories.size());
      for (int64_t r : train) {
        const int64_t k = category_index(c.categories, t.rows[static_cast<size_t>(r)][col]);
        if (k >= 0) ++counts[static_cast<size_t>(k)];
      }
      c.fill = counts.empty() ? 0.0
                              : static_cast<double>(std::max_element(counts.begin(), counts.end()) -
                                                    counts.begin());
      continue;
    }
    // Two passes, so a constant column gets a standard deviation of exactly 0.
    double sum = 0, dev = 0;
    int64_t n = 0;
    for (int64_t r : train) {
      const std::string& cell = t.rows[static_cast<size_t>(r)][col];
      if (is_missing_cell(cell)) continue;
      sum += *parse_number(cell);  // checked when the column was typed
      ++n;
    }
    const double mean = n ? sum / static_cast<double>(n) : 0.0;
    for (int64_t r : train) {
      const std::string& cell = t.rows[static_cast<size_t>(r)][col];
      if (is_missing_cell(cell)) continue;
      const double d = *parse_number(cell) - mean;
      dev += d * d;
    }
    const double sd = n ? std::sqrt(dev / static_cast<double>(n)) : 0.0;
    c.fill = mean;
    if (standardize) {
      c.mean = mean;
      c.stddev = sd > 1e-12 ? sd : 1.0;  // a constant column maps to 0, not to inf
    }
  }
}

}  // namespace

int64_t CsvEncoding::width() const {
  int64_t w = 0;
  for (const CsvColumn& c : features)
    w += c.categorical ? static_cast<int64_t>(c.categories.size()) : 1;
  return w;
}

Result<void> CsvEncoding::encode(const CsvTable& t, const std::string& name,
                                 std::vector<float>& out) const {
  std::vector<size_t> cols;
  for (const CsvColumn& c : features) {
    auto col = t.column(c.name);
    if (!col) {
      std::vector<std::string> names;
      for (const CsvColumn& f : features) names.push_back(f.name);
      return make_error(name + ": no column '" + c.name + "' (the model's feature columns are " +
                        quoted_names(names) + ")");
    }
    cols.push_back(*col);
  }
  out.reserve(out.size() + t.rows.size() * static_cast<size_t>(width()));
  for (size_t r = 0; r < t.rows.size(); ++r)
    for (size_t f = 0; f < features.size(); ++f) {
      const CsvColumn& c = features[f];
      const std::string& cell = t.rows[r][cols[f]];
      const bool missing = is_missing_cell(cell);
      if (missing && this->missing != MissingPolicy::Mean)
        return cell_error(name, t.lines[r], c.name, "missing value");
      if (c.categorical) {
        const int64_t k =
            missing ? static_cast<int64_t>(c.fill) : category_index(c.categories, cell);
        if (k < 0)
          return cell_error(name, t.lines[r], c.name,
                            "unknown category '" + std::string(trimmed(cell)) +
                                "' (known: " + quoted_names(c.categories) + ")");
        for (size_t i = 0; i < c.categories.size(); ++i)
          out.push_back(static_cast<int64_t>(i) == k ? 1.0f : 0.0f);
        continue;
      }
      double v = c.fill;
      if (!missing) {
        auto parsed = parse_number(cell);
        if (!parsed) return not_a_number(name, t.lines[r], c.name, cell);
        v = *parsed;
      }
      out.push_back(static_cast<float>((v - c.mean) / c.stddev));
    }
  return {};
}

Result<CsvData> load_csv(const std::string& path, const CsvOptions& o, const SplitPlan& plan) {
  Result<CsvTable> table = read_csv(path, o.delimiter);
  if (!table) return table.error();
  CsvTable& t = *table;

  if (o.target.empty()) return make_error(path + ": no target column given");
  if (!o.regression && o.target.size() != 1)
    return make_error(path + ": classification takes one target column, got " +
                      std::to_string(o.target.size()));
  std::vector<size_t> targets, features;
  for (const std::string& name : o.target) {
    auto c = find_column(t, path, name);
    if (!c) return c.error();
    targets.push_back(*c);
  }
  auto is_target = [&](size_t c) {
    return std::find(targets.begin(), targets.end(), c) != targets.end();
  };
  if (o.features.empty()) {
    for (size_t c = 0; c < t.header.size(); ++c)
      if (!is_target(c)) features.push_back(c);
  } else {
    for (const std::string& name : o.features) {
      auto c = find_column(t, path, name);
      if (!c) return c.error();
      if (is_target(*c))
        return make_error(path + ": column '" + name + "' is both target and feature");
      features.push_back(*c);
    }
  }
  if (features.empty()) return make_error(path + ": no feature columns (only the target)");
  for (const std::string& name : o.categorical)
    if (auto c = t.column(name);
        !c || std::find(features.begin(), features.end(), *c) == features.end())
      return make_error(path + ": categorical column '" + name + "' is not a feature column");

  const size_t rows_before = t.rows.size();
  if (auto r = handle_missing(t, path, targets, features, o.missing); !r) return r.error();
  if (t.rows.empty())
    return make_error(path + (rows_before ? ": no rows left after dropping " +
                                                std::to_string(rows_before) + " with missing values"
                                          : ": no data rows after the header"));

  CsvData out;
  out.encoding.missing = o.missing;
  for (size_t col : features) {
    CsvColumn c;
    c.name = t.header[col];
    c.categorical =
        std::find(o.categorical.begin(), o.categorical.end(), c.name) != o.categorical.end() ||
        mostly_text(t, col);
    if (c.categorical) {
      c.categories = sorted_categories(t, col);
    } else {
      for (size_t r = 0; r < t.rows.size(); ++r)
        if (!is_missing_cell(t.rows[r][col]) && !parse_number(t.rows[r][col]))
          return not_a_number(path, t.lines[r], c.name, t.rows[r][col]);
    }
    out.encoding.features.push_back(std::move(c));
  }

  Dataset& d = out.data;
  d.count = static_cast<int64_t>(t.rows.size());
  if (o.regression) {
    d.target_kind = TargetKind::Values;
    d.target_shape = {static_cast<int64_t>(targets.size())};
    d.targets.reserve(t.rows.size() * targets.size());
    for (size_t r = 0; r < t.rows.size(); ++r)
      for (size_t col : targets) {
        auto v = parse_number(t.rows[r][col]);
        if (!v) return not_a_number(path, t.lines[r], t.header[col], t.rows[r][col]);
        d.targets.push_back(static_cast<float>(*v));
      }
  } else {
    d.class_names = sorted_categories(t, targets[0]);
    d.num_classes = static_cast<int64_t>(d.class_names.size());
    for (const auto& row : t.rows)
      d.labels.push_back(category_index(d.class_names, row[targets[0]]));
  }

  out.splits = split_indices(d.count, plan);
  fit_columns(t, features, out.splits.train, o.standardize, out.encoding.features);
  d.sample_shape = {out.encoding.width()};
  if (auto r = out.encoding.encode(t, path, d.floats); !r) return r.error();
  check_dataset(d);
  return out;
}

}  // namespace mls::data
