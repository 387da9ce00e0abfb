#include "datasets/dataset.h"

#include "engine/core/check.h"

namespace mls::data {

void check_dataset(const Dataset& d) {
  MLS_CHECK(d.count >= 0, "Dataset::count must be >= 0");
  const size_t features = static_cast<size_t>(d.count * d.sample_numel());
  MLS_CHECK(
      d.has_bytes() ? d.floats.empty() && d.bytes.size() == features : d.floats.size() == features,
      "Dataset features disagree with count * numel(sample_shape)");
  if (d.target_kind == TargetKind::Classes) {
    MLS_CHECK(d.labels.size() == static_cast<size_t>(d.count), "Dataset needs one label a sample");
    MLS_CHECK(d.targets.empty(), "a classification Dataset has no target values");
    MLS_CHECK(d.class_names.empty() || d.class_names.size() == static_cast<size_t>(d.num_classes),
              "Dataset::class_names must be empty or num_classes long");
    for (int64_t l : d.labels) MLS_CHECK(l >= 0 && l < d.num_classes, "Dataset label out of range");
  } else {
    MLS_CHECK(d.labels.empty() && d.num_classes == 0, "a regression Dataset has no classes");
    MLS_CHECK(d.targets.size() == static_cast<size_t>(d.count * numel(d.target_shape)),
              "Dataset targets disagree with count * numel(target_shape)");
  }
}

int64_t channel_count(const Shape& s) {
  if (s.empty()) return 1;
  return s[0];
}

}  // namespace mls::data
