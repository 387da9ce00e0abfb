// The "dataset" section: JSON -> DatasetSpec with every rule checked and every message
// naming the JSON path at fault, and DatasetSpec -> JSON. open_dataset is in open_dataset.cpp.
//
// [SECTION] Field readers (the message style of nodes/document.cpp)
// [SECTION] Parser: the section, the source blocks, the transforms
// [SECTION] Writer
#include "datasets/dataset_spec.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <sstream>

#include "datasets/synthetic.h"
#include "datasets/words_dataset.h"
#include "engine/core/field_text.h"

namespace mls::data {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;

// [SECTION] Field readers (the message style of nodes/document.cpp)

const Range kAtLeastTwo{2.0, std::nullopt};
const Range kUnitClosed{0.0, 1.0};             // [0, 1]
const Range kDegrees{0.0, 180.0, true};        // (0, 180]

const std::vector<std::string> kSources{"fashion-mnist", "mnist",        "csv",       "npy",
                                        "npz",           "image-folder", "synthetic", "words"};
const std::vector<std::string> kTasks{"classification", "regression"};
const std::vector<std::string> kTransforms{"normalize", "one_hot", "random_crop", "horizontal_flip",
                                           "rotation"};

bool has_own_test_split(const std::string& source) {
  return source == "fashion-mnist" || source == "mnist";
}

class Fields {
 public:
  explicit Fields(std::string where) : where_(std::move(where)) {}

  Error fail(const std::string& path, const std::string& message) const {
    return make_error(where_ + path + ": " + message);
  }

  Result<void> object(const json& j, const std::string& path) const {
    if (!j.is_object()) return fail(path, "must be an object");
    return {};
  }

  Result<void> known_keys(const json& obj, const std::string& path,
                          const std::vector<std::string>& allowed,
                          const std::string& context = "") const {
    for (const auto& [key, value] : obj.items())
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
        return fail(path + "/" + key, "unknown key '" + key + "'" + context + " (expected " +
                                          quoted_list(allowed) + ")");
    return {};
  }

  Result<void> string(const json& obj, const std::string& path, const char* key, std::string& out,
                      bool non_empty = false) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_string() || (non_empty && it->get<std::string>().empty()))
      return fail(path + "/" + key, non_empty ? "must be a non-empty string" : "must be a string");
    out = it->get<std::string>();
    return {};
  }

  Result<void> boolean(const json& obj, const std::string& path, const char* key, bool& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_boolean()) return fail(path + "/" + key, "must be true or false");
    out = it->get<bool>();
    return {};
  }

  Result<void> number(const json& obj, const std::string& path, const char* key, const Range& range,
                      double& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    if (!it->is_number() || !range.contains(it->get<double>()))
      return fail(path + "/" + key, "must be a number" + range.describe());
    out = it->get<double>();
    return {};
  }

  template <typename Int>
  Result<void> integer(const json& obj, const std::string& path, const char* key,
                       const Range& range, Int& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    // Positive literals parse as unsigned; one past Int's range would wrap on get<Int>().
    const bool fits = !it->is_number_unsigned() ||
                      it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<Int>::max());
    if (!it->is_number_integer() || !fits || !range.contains(it->get<double>()))
      return fail(path + "/" + key, "must be an integer" + range.describe());
    out = it->get<Int>();
    return {};
  }

  Result<void> choice(const json& obj, const std::string& path, const char* key, const char* what,
                      const std::vector<std::string>& choices, std::string& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    const std::string value = it->is_string() ? it->get<std::string>() : it->dump();
    if (!it->is_string() || std::find(choices.begin(), choices.end(), value) == choices.end())
      return fail(path + "/" + key, std::string("unknown ") + what + " '" + value + "' (expected " +
                                        quoted_list(choices) + ")");
    out = value;
    return {};
  }

  // An array of non-empty strings; `one_allowed`: a single string stands for [string].
  Result<void> strings(const json& obj, const std::string& path, const char* key,
                       std::vector<std::string>& out, bool one_allowed = false) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    const std::string at = path + "/" + key;
    const char* what = one_allowed ? "must be a column name or an array of them"
                                   : "must be an array of column names";
    if (one_allowed && it->is_string() && !it->get<std::string>().empty()) {
      out = {it->get<std::string>()};
      return {};
    }
    if (!it->is_array() || (one_allowed && it->empty())) return fail(at, what);
    out.clear();
    for (size_t i = 0; i < it->size(); ++i) {
      const json& v = (*it)[i];
      if (!v.is_string() || v.get<std::string>().empty())
        return fail(at + "/" + std::to_string(i), "must be a non-empty string");
      if (std::find(out.begin(), out.end(), v.get<std::string>()) != out.end())
        return fail(at + "/" + std::to_string(i),
                    "duplicate column '" + v.get<std::string>() + "'");
      out.push_back(v.get<std::string>());
    }
    return {};
  }

  // A number or an array of numbers, each in `range`.
  Result<void> numbers(const json& obj, const std::string& path, const char* key,
                       const Range& range, std::vector<double>& out) const {
    auto it = obj.find(key);
    if (it == obj.end()) return {};
    const std::string at = path + "/" + key;
    const std::string what = "must be a number" + range.describe() + " or an array of them";
    if (it->is_number() && range.contains(it->get<double>())) {
      out = {it->get<double>()};
      return {};
    }
    if (!it->is_array() || it->empty()) return fail(at, what);
    out.clear();
    for (const json& v : *it) {
      if (!v.is_number() || !range.contains(v.get<double>())) return fail(at, what);
      out.push_back(v.get<double>());
    }
    return {};
  }

 private:
  std::string where_;
};

// [SECTION] Parser: the section, the source blocks, the transforms

// The block that configures each source, and the source it belongs to.
const std::vector<std::pair<std::string, std::string>> kBlocks{{"csv", "csv"},
                                                               {"npy", "npy"},
                                                               {"npz", "npz"},
                                                               {"image", "image-folder"},
                                                               {"synthetic", "synthetic"},
                                                               {"words", "words"}};

Result<void> parse_csv_block(const Fields& f, const json& c, const std::string& path,
                             CsvSpec& out) {
  if (auto r = f.known_keys(
          c, path,
          {"target", "features", "categorical", "task", "missing", "standardize", "delimiter"});
      !r)
    return r;
  if (!c.contains("target")) return f.fail(path + "/target", "required for source 'csv'");
  if (auto r = f.strings(c, path, "target", out.target, true); !r) return r;
  if (auto r = f.strings(c, path, "features", out.features); !r) return r;
  if (auto r = f.strings(c, path, "categorical", out.categorical); !r) return r;
  if (auto r = f.choice(c, path, "task", "task", kTasks, out.task); !r) return r;
  if (auto r = f.choice(c, path, "missing", "missing-value policy", {"error", "drop", "mean"},
                        out.missing);
      !r)
    return r;
  if (auto r = f.boolean(c, path, "standardize", out.standardize); !r) return r;
  if (auto r = f.string(c, path, "delimiter", out.delimiter); !r) return r;
  if (out.delimiter.size() != 1 || out.delimiter == "\"" || out.delimiter == "\n")
    return f.fail(path + "/delimiter", "must be one character (not a quote or a newline)");
  if (out.task == "classification" && out.target.size() != 1)
    return f.fail(path + "/target", "classification takes one target column");
  for (const std::string& t : out.target)
    if (std::find(out.features.begin(), out.features.end(), t) != out.features.end())
      return f.fail(path + "/features", "column '" + t + "' is also the target");
  return {};
}

template <typename ArraySpec>
Result<void> parse_array_task(const Fields& f, const json& c, const std::string& path,
                              ArraySpec& out) {
  if (auto r = f.choice(c, path, "task", "task", kTasks, out.task); !r) return r;
  if (auto r = f.integer(c, path, "num_classes", kAtLeastTwo, out.num_classes); !r) return r;
  if (out.task == "regression" && c.contains("num_classes"))
    return f.fail(path + "/num_classes", "not used with task 'regression'");
  return {};
}

Result<void> parse_block(const Fields& f, const json& c, const std::string& path,
                         const std::string& block, DatasetSpec& out) {
  if (auto r = f.object(c, path); !r) return r;
  if (block == "csv") return parse_csv_block(f, c, path, out.csv);
  if (block == "npy") {
    if (auto r = f.known_keys(c, path, {"labels", "task", "num_classes"}); !r) return r;
    if (!c.contains("labels")) return f.fail(path + "/labels", "required for source 'npy'");
    if (auto r = f.string(c, path, "labels", out.npy.labels, true); !r) return r;
    return parse_array_task(f, c, path, out.npy);
  }
  if (block == "npz") {
    if (auto r = f.known_keys(c, path, {"x", "y", "task", "num_classes"}); !r) return r;
    if (auto r = f.string(c, path, "x", out.npz.x, true); !r) return r;
    if (auto r = f.string(c, path, "y", out.npz.y, true); !r) return r;
    return parse_array_task(f, c, path, out.npz);
  }
  if (block == "image") {
    if (auto r = f.known_keys(c, path, {"size", "channels"}); !r) return r;
    if (auto it = c.find("size"); it != c.end()) {
      const bool ok =
          it->is_array() && it->size() == 2 &&
          std::all_of(it->begin(), it->end(), [](const json& v) {
            return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 65536;
          });
      if (!ok) return f.fail(path + "/size", "must be [height, width], integers in [1, 65536]");
      out.image.size = {(*it)[0].get<int64_t>(), (*it)[1].get<int64_t>()};
    }
    if (auto r = f.integer(c, path, "channels", kAtLeastOne, out.image.channels); !r) return r;
    if (out.image.channels != 1 && out.image.channels != 3)
      return f.fail(path + "/channels", "must be 1 (grey) or 3 (RGB)");
    return {};
  }
  if (block == "words") {
    if (auto r = f.known_keys(c, path, {"block_size"}); !r) return r;
    const Range block_sizes{1.0, static_cast<double>(kMaxWordsBlockSize)};
    return f.integer(c, path, "block_size", block_sizes, out.words.block_size);
  }
  // synthetic
  SyntheticSpec& s = out.synthetic;
  if (auto r = f.known_keys(c, path, {"kind", "samples", "noise", "classes", "seed"}); !r) return r;
  if (auto r = f.choice(c, path, "kind", "synthetic dataset", synthetic_kinds(), s.kind); !r)
    return r;
  if (auto r = f.integer(c, path, "samples", kAtLeastOne, s.samples); !r) return r;
  if (s.samples > 10'000'000) return f.fail(path + "/samples", "must be at most 10000000");
  if (auto r = f.number(c, path, "noise", kNonNegative, s.noise); !r) return r;
  if (auto r = f.integer(c, path, "classes", kAtLeastTwo, s.classes); !r) return r;
  if (s.classes > 1000) return f.fail(path + "/classes", "must be at most 1000");
  if (c.contains("classes") && s.kind != "blobs")
    return f.fail(path + "/classes",
                  "only used by kind 'blobs' (the others have 2 classes or none)");
  return f.integer(c, path, "seed", kNonNegative, s.seed);
}

Result<void> parse_transform(const Fields& f, const json& t, const std::string& path,
                             TransformSpec& out) {
  if (auto r = f.object(t, path); !r) return r;
  if (!t.contains("type")) return f.fail(path, "missing 'type'");
  if (auto r = f.choice(t, path, "type", "transform", kTransforms, out.type); !r) return r;
  const std::string context = " for transform '" + out.type + "'";
  if (out.type == "normalize") {
    if (auto r = f.known_keys(t, path, {"type", "mean", "std"}, context); !r) return r;
    if (auto r = f.numbers(t, path, "mean", Range{}, out.mean); !r) return r;
    if (auto r = f.numbers(t, path, "std", kPositive, out.std); !r) return r;
    if (out.mean.empty() != out.std.empty())
      return f.fail(path,
                    "give both 'mean' and 'std', or neither (to fit them on the training split)");
    if (out.mean.size() != out.std.size())
      return f.fail(path + "/std", "has " + std::to_string(out.std.size()) +
                                       " values but 'mean' has " + std::to_string(out.mean.size()));
    return {};
  }
  if (out.type == "one_hot") return f.known_keys(t, path, {"type"}, context);
  if (out.type == "random_crop") {
    if (auto r = f.known_keys(t, path, {"type", "padding"}, context); !r) return r;
    return f.integer(t, path, "padding", kAtLeastOne, out.padding);
  }
  if (out.type == "horizontal_flip") {
    if (auto r = f.known_keys(t, path, {"type", "p"}, context); !r) return r;
    return f.number(t, path, "p", kUnitClosed, out.p);
  }
  if (auto r = f.known_keys(t, path, {"type", "degrees"}, context); !r) return r;
  return f.number(t, path, "degrees", kDegrees, out.degrees);
}

}  // namespace

Result<DatasetSpec> parse_dataset_spec(const json& d, const std::string& where) {
  const Fields f(where);
  DatasetSpec out;
  if (auto r = f.object(d, ""); !r) return r.error();
  if (auto r = f.known_keys(
          d, "",
          {"source", "path", "limit", "test_limit", "validation", "test_fraction", "split_seed",
           "csv", "npy", "npz", "image", "synthetic", "words", "transforms"});
      !r)
    return r.error();
  if (auto r = f.choice(d, "", "source", "dataset source", kSources, out.source); !r)
    return r.error();

  if (out.source == "synthetic") {
    if (d.contains("path")) return f.fail("/path", "not used by source 'synthetic'");
    out.path.clear();
  } else if (!d.contains("path")) {
    // Only Fashion-MNIST and the word list have a packaged home; for anything else a default
    // would be a guess.
    if (out.source == "words")
      out.path = kDefaultWordsPath;
    else if (out.source != "fashion-mnist")
      return f.fail("/path", "required for dataset source '" + out.source + "'");
  }
  if (auto r = f.string(d, "", "path", out.path, true); !r) return r.error();
  if (auto r = f.integer(d, "", "limit", kNonNegative, out.limit); !r) return r.error();
  if (auto r = f.integer(d, "", "test_limit", kNonNegative, out.test_limit); !r) return r.error();
  if (auto r = f.number(d, "", "validation", kUnitOpen, out.validation); !r) return r.error();
  if (auto r = f.number(d, "", "test_fraction", kUnitOpen, out.test_fraction); !r) return r.error();
  if (d.contains("test_fraction") && has_own_test_split(out.source))
    return f.fail("/test_fraction",
                  "not used by source '" + out.source + "' (it has its own test split)");
  if (auto r = f.integer(d, "", "split_seed", kNonNegative, out.split_seed); !r) return r.error();

  for (const auto& [block, source] : kBlocks) {
    auto it = d.find(block);
    if (it == d.end()) continue;
    if (source != out.source)
      return f.fail("/" + block, "only used with source '" + source +
                                     "' (this dataset's source is '" + out.source + "')");
    if (auto r = parse_block(f, *it, "/" + block, block, out); !r) return r.error();
  }
  if (out.source == "csv" && !d.contains("csv"))
    return f.fail("/csv/target", "required for source 'csv'");
  if (out.source == "npy" && !d.contains("npy"))
    return f.fail("/npy/labels", "required for source 'npy'");

  if (auto it = d.find("transforms"); it != d.end()) {
    if (!it->is_array()) return f.fail("/transforms", "must be an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string path = "/transforms/" + std::to_string(i);
      TransformSpec t;
      if (auto r = parse_transform(f, (*it)[i], path, t); !r) return r.error();
      for (const TransformSpec& prev : out.transforms)
        if (prev.type == t.type) return f.fail(path, "transform '" + t.type + "' given twice");
      const bool regression = (out.source == "csv" && out.csv.task == "regression") ||
                              (out.source == "npy" && out.npy.task == "regression") ||
                              (out.source == "npz" && out.npz.task == "regression") ||
                              (out.source == "synthetic" && out.synthetic.kind == "sine");
      if (t.type == "one_hot" && regression)
        return f.fail(path, "one_hot needs class targets, and this dataset's are values");
      if (t.type == "normalize" && out.source == "words")
        return f.fail(path,
                      "normalize is not used with source 'words' (its samples are token "
                      "ids for an Embedding)");
      out.transforms.push_back(std::move(t));
    }
  }
  return out;
}

// [SECTION] Writer

nlohmann::ordered_json dataset_spec_to_json(const DatasetSpec& s) {
  ordered j;
  j["source"] = s.source;
  if (s.source != "synthetic") j["path"] = s.path;
  if (s.limit) j["limit"] = s.limit;
  if (s.test_limit) j["test_limit"] = s.test_limit;
  if (s.validation != 0) j["validation"] = s.validation;
  if (s.test_fraction != DatasetSpec{}.test_fraction && !has_own_test_split(s.source))
    j["test_fraction"] = s.test_fraction;
  if (s.split_seed) j["split_seed"] = s.split_seed;

  auto task = [](ordered& b, const std::string& t, int64_t classes) {
    if (!t.empty()) b["task"] = t;
    if (classes) b["num_classes"] = classes;
  };
  if (s.source == "csv") {
    const CsvSpec& c = s.csv;
    ordered b;
    if (c.target.size() == 1)
      b["target"] = c.target[0];
    else
      b["target"] = c.target;
    if (!c.features.empty()) b["features"] = c.features;
    if (!c.categorical.empty()) b["categorical"] = c.categorical;
    if (c.task != CsvSpec{}.task) b["task"] = c.task;
    if (c.missing != CsvSpec{}.missing) b["missing"] = c.missing;
    if (!c.standardize) b["standardize"] = false;
    if (c.delimiter != CsvSpec{}.delimiter) b["delimiter"] = c.delimiter;
    j["csv"] = std::move(b);
  } else if (s.source == "npy") {
    ordered b;
    b["labels"] = s.npy.labels;
    task(b, s.npy.task, s.npy.num_classes);
    j["npy"] = std::move(b);
  } else if (s.source == "npz" && !(s.npz == NpzSpec{})) {
    ordered b;
    if (s.npz.x != NpzSpec{}.x) b["x"] = s.npz.x;
    if (s.npz.y != NpzSpec{}.y) b["y"] = s.npz.y;
    task(b, s.npz.task, s.npz.num_classes);
    j["npz"] = std::move(b);
  } else if (s.source == "image-folder" && !(s.image == ImageSpec{})) {
    ordered b;
    if (!s.image.size.empty()) b["size"] = s.image.size;
    if (s.image.channels != ImageSpec{}.channels) b["channels"] = s.image.channels;
    j["image"] = std::move(b);
  } else if (s.source == "synthetic" && !(s.synthetic == SyntheticSpec{})) {
    const SyntheticSpec& y = s.synthetic;
    const SyntheticSpec def;
    ordered b;
    b["kind"] = y.kind;
    if (y.samples != def.samples) b["samples"] = y.samples;
    if (y.noise != def.noise) b["noise"] = y.noise;
    if (y.kind == "blobs" && y.classes != def.classes) b["classes"] = y.classes;
    if (y.seed) b["seed"] = y.seed;
    j["synthetic"] = std::move(b);
  } else if (s.source == "words" && !(s.words == WordsSpec{})) {
    j["words"] = ordered{{"block_size", s.words.block_size}};
  }

  if (!s.transforms.empty()) {
    ordered list = ordered::array();
    const TransformSpec def;
    for (const TransformSpec& t : s.transforms) {
      ordered o;
      o["type"] = t.type;
      auto values = [](const std::vector<double>& v) {
        return v.size() == 1 ? ordered(v[0]) : ordered(v);
      };
      if (t.type == "normalize" && !t.mean.empty()) {
        o["mean"] = values(t.mean);
        o["std"] = values(t.std);
      }
      if (t.type == "random_crop" && t.padding != def.padding) o["padding"] = t.padding;
      if (t.type == "horizontal_flip" && t.p != def.p) o["p"] = t.p;
      if (t.type == "rotation" && t.degrees != def.degrees) o["degrees"] = t.degrees;
      list.push_back(std::move(o));
    }
    j["transforms"] = std::move(list);
  }
  return j;
}

}  // namespace mls::data
