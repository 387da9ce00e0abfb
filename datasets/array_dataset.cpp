#include "datasets/array_dataset.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace mls::data {

Shape array_sample_shape(const Shape& shape) {
  if (shape.size() <= 1) return {1};
  if (shape.size() == 3) return {1, shape[1], shape[2]};
  return Shape(shape.begin() + 1, shape.end());
}

namespace {

// A NaN or infinity in the data would surface many steps later as a diverged loss; it is
// named here, where it sits: "x.npy: sample 17, feature 3 is nan".
std::optional<Error> non_finite(const std::vector<float>& v, int64_t per_sample,
                                const std::string& file, const char* what) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) {
      const int64_t k = per_sample > 0 ? per_sample : 1;
      return make_error(file + ": sample " + std::to_string(static_cast<int64_t>(i) / k) + ", " +
                        what + " " + std::to_string(static_cast<int64_t>(i) % k) + " is " +
                        (std::isnan(v[i]) ? "nan" : "inf") +
                        " (the data must be finite: fix or drop that sample)");
    }
  return std::nullopt;
}

}  // namespace

Result<Dataset> arrays_to_dataset(NpyArray x, NpyArray y, const ArrayOptions& o,
                                  const std::string& x_name, const std::string& y_name) {
  if (x.shape.empty())
    return make_error(x_name + ": features must have a sample dimension, got a 0-d array");
  if (y.shape.empty())
    return make_error(y_name + ": labels must have a sample dimension, got a 0-d array");
  Dataset d;
  d.count = x.shape[0];
  d.sample_shape = array_sample_shape(x.shape);
  if (y.shape[0] != d.count)
    return make_error(y_name + ": " + std::to_string(y.shape[0]) + " labels, but " + x_name +
                      " has " + std::to_string(d.count) + " samples");

  const bool classify = o.task.empty() ? y.is_integer() : o.task == "classification";
  if (classify) {
    if (y.shape.size() > 2 || (y.shape.size() == 2 && y.shape[1] != 1))
      return make_error(y_name + ": class labels must be [N] or [N, 1], got " + shape_str(y.shape));
    std::vector<int64_t> labels;
    if (y.is_integer()) {
      labels = y.to_ints();
    } else {
      const std::vector<float> v = y.to_floats();
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i] != std::floor(v[i]))
          return make_error(y_name + ": label " + std::to_string(v[i]) + " at index " +
                            std::to_string(i) +
                            " is not a whole number (use task 'regression' "
                            "for real-valued targets)");
        labels.push_back(static_cast<int64_t>(v[i]));
      }
    }
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] < 0)
        return make_error(y_name + ": label " + std::to_string(labels[i]) + " at index " +
                          std::to_string(i) + " is negative (class labels count from 0)");
    const int64_t top = labels.empty() ? -1 : *std::max_element(labels.begin(), labels.end());
    d.num_classes = o.num_classes > 0 ? o.num_classes : top + 1;
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] >= d.num_classes)
        return make_error(y_name + ": label " + std::to_string(labels[i]) + " at index " +
                          std::to_string(i) + " is out of range 0.." +
                          std::to_string(d.num_classes - 1));
    d.labels = std::move(labels);
  } else {
    d.target_kind = TargetKind::Values;
    d.target_shape = y.shape.size() == 1 ? Shape{1} : Shape(y.shape.begin() + 1, y.shape.end());
    d.targets = y.to_floats();
    if (auto bad = non_finite(d.targets, numel(d.target_shape), y_name, "target")) return *bad;
  }
  if (x.dtype == NpyType::U8) {
    d.bytes = std::move(x.raw);
  } else {
    d.floats = x.to_floats();
    if (auto bad = non_finite(d.floats, numel(d.sample_shape), x_name, "feature")) return *bad;
  }
  check_dataset(d);
  return d;
}

}  // namespace mls::data
