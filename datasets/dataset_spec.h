// The "dataset" section of a project: which data, how it is split and transformed, and
// the factory that opens it as batch sources for the trainer.
//
//   Result<DatasetSpec> spec = parse_dataset_spec(doc_json["dataset"], "P.mls: /dataset");
//   if (!spec) { std::cerr << spec.error().message << "\n"; return 1; }
//   // "P.mls: /dataset/csv/target: required for source 'csv'"
//   Result<DatasetSplits> s = open_dataset(*spec, /*base_dir=*/"projects/iris", /*seed=*/0);
//   if (!s) { std::cerr << s.error().message << "\n"; return 1; }  // names the data file
//   trainer.fit(*s->train, s->test.get());
//   Result<HostBatch> x = s->encoder->encode("new_flower.csv");  // for predict
//
// JSON (every key optional unless noted; defaults shown):
//   {"source": "fashion-mnist" | "mnist" | "csv" | "npy" | "npz" | "image-folder" | "synthetic"
//              | "words",
//    "path": "/usr/share/datasets/fashion-mnist",  required but for fashion-mnist and words
//                                                  (/usr/share/dict/words); none for
//                                                  synthetic; relative to the project file
//    "limit": 0, "test_limit": 0,    first N of the training pool / test split; 0 = all
//    "validation": 0,                fraction of the training pool held out; 0 = none
//    "test_fraction": 0.2,           held out as test where the data has no test split
//    "split_seed": 0,
//    "csv": {"target": "species" | ["y1", "y2"],  required
//            "features": [...], "categorical": [...], "task": "classification" | "regression",
//            "missing": "error" | "drop" | "mean", "standardize": true, "delimiter": ","},
//    "npy": {"labels": "y.npy" (required), "task": "classification" | "regression",
//            "num_classes": 0},      path is the features file; task from the labels' dtype
//    "npz": {"x": "x", "y": "y", "task": ..., "num_classes": 0},
//    "image": {"size": [h, w], "channels": 3},  image-folder; size: the first image's
//    "synthetic": {"kind": "spirals" | "circles" | "xor" | "blobs" | "sine",
//                  "samples": 1000, "noise": 0.1, "classes": 3 (blobs), "seed": 0},
//    "words": {"block_size": 16},    a word list (datasets/words_dataset.h): the context
//                                    length; split by word, limit/test_limit count words
//    "transforms": [{"type": "normalize", "mean": [..], "std": [..]},  per channel; no
//                                          values: fitted on the training split
//                   {"type": "one_hot"},   class targets -> values [classes] (MSE / BCE)
//                   {"type": "random_crop", "padding": 4},   training split only
//                   {"type": "horizontal_flip", "p": 0.5},   training split only
//                   {"type": "rotation", "degrees": 10}]}    training split only
// Fashion-MNIST and MNIST are normalised with mean 0.2860, std 0.3530 unless a normalize
// transform says otherwise. Unknown keys are errors: a typo must not silently change a run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "datasets/input_encoder.h"
#include "engine/core/result.h"
#include "engine/core/shape.h"
#include "engine/train/data_source.h"

namespace mls::data {

constexpr const char* kDefaultDatasetPath = "/usr/share/datasets/fashion-mnist";

struct CsvSpec {
  std::vector<std::string> target;
  std::vector<std::string> features;     // empty: every column but the target(s)
  std::vector<std::string> categorical;  // one-hot even if numeric-looking
  std::string task = "classification";   // or "regression"
  std::string missing = "error";         // "drop", "mean"
  bool standardize = true;
  std::string delimiter = ",";
  bool operator==(const CsvSpec&) const = default;
};

struct NpySpec {
  std::string labels;       // the labels file, relative like path
  std::string task;         // "", "classification", "regression"
  int64_t num_classes = 0;  // 0: largest label + 1
  bool operator==(const NpySpec&) const = default;
};

struct NpzSpec {
  std::string x = "x", y = "y";  // array keys
  std::string task;
  int64_t num_classes = 0;
  bool operator==(const NpzSpec&) const = default;
};

struct ImageSpec {
  std::vector<int64_t> size;  // {} or {height, width}
  int channels = 3;
  bool operator==(const ImageSpec&) const = default;
};

struct SyntheticSpec {
  std::string kind = "spirals";
  int64_t samples = 1000;
  double noise = 0.1;
  int64_t classes = 3;
  uint64_t seed = 0;
  bool operator==(const SyntheticSpec&) const = default;
};

struct WordsSpec {
  int64_t block_size = 16;
  bool operator==(const WordsSpec&) const = default;
};

struct TransformSpec {
  std::string type;               // normalize, one_hot, random_crop, horizontal_flip, rotation
  std::vector<double> mean, std;  // normalize; empty: fitted on the training split
  int64_t padding = 4;            // random_crop
  double p = 0.5;                 // horizontal_flip
  double degrees = 10;            // rotation
  bool operator==(const TransformSpec&) const = default;
};

struct DatasetSpec {
  std::string source = "fashion-mnist";
  std::string path = kDefaultDatasetPath;  // "" for synthetic
  int64_t limit = 0;
  int64_t test_limit = 0;
  double validation = 0.0;
  double test_fraction = 0.2;
  uint64_t split_seed = 0;
  CsvSpec csv;
  NpySpec npy;
  NpzSpec npz;
  ImageSpec image;
  SyntheticSpec synthetic;
  WordsSpec words;
  std::vector<TransformSpec> transforms;
  bool operator==(const DatasetSpec&) const = default;
};

// `where` starts every message and names the section, e.g. "P.mls: /dataset"; a field's
// message continues its JSON pointer: "P.mls: /dataset/limit: must be an integer >= 0".
Result<DatasetSpec> parse_dataset_spec(const nlohmann::json& j, const std::string& where);

// Keys in a fixed order (source, path, limits, splits, the source's block, transforms), and
// defaults left out. parse_dataset_spec(dataset_spec_to_json(s)) == s for a parsed s.
nlohmann::ordered_json dataset_spec_to_json(const DatasetSpec& spec);

struct DatasetSplits {
  std::unique_ptr<mls::BatchSource> train, validation, test;  // validation, test may be null
  Shape sample_shape;
  mls::TargetKind target_kind = mls::TargetKind::Classes;
  Shape target_shape;       // {} for classes
  int64_t num_classes = 0;  // 0 for regression
  std::vector<std::string> class_names;
  std::shared_ptr<const InputEncoder> encoder;
};

// Loads, splits and transforms the data. Relative paths are resolved against `base_dir`
// (the project file's folder). The training split is shuffled and augmented from
// `shuffle_seed` (the training seed); `prefetch` puts each source behind a PrefetchSource.
// Errors name the data file ("iris.csv:17: column 'age': 'abc' is not a number").
Result<DatasetSplits> open_dataset(const DatasetSpec& spec, const std::string& base_dir,
                                   uint64_t shuffle_seed, bool prefetch = true);

}  // namespace mls::data
