// open_dataset: DatasetSpec -> loaded data -> splits -> transforms -> batch sources and the
// input encoder. One loader per source fills a Loaded; everything after it is shared.
#include <filesystem>
#include <numeric>

#include "datasets/array_dataset.h"
#include "datasets/csv_dataset.h"
#include "datasets/dataset_spec.h"
#include "datasets/image_classification.h"
#include "datasets/image_folder.h"
#include "datasets/in_memory_source.h"
#include "datasets/mnist.h"
#include "datasets/npz.h"
#include "datasets/prefetch.h"
#include "datasets/synthetic.h"
#include "datasets/words_dataset.h"

namespace mls::data {
namespace {

// What every loader produces: the samples (the test split may live in its own Dataset),
// the index lists, and what the encoder needs beyond the samples.
struct Loaded {
  std::shared_ptr<const Dataset> data, test_data;  // test_data: data unless the source has its own
  Splits splits;
  Normalization default_normalization;
  std::optional<CsvEncoding> csv;
  char delimiter = ',';
};

const std::vector<std::string> kFashionClasses{"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                               "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                               "Bag",         "Ankle boot"};

std::string resolve(const std::string& path, const std::string& base_dir) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

SplitPlan plan_of(const DatasetSpec& s, bool own_test) {
  SplitPlan p;
  p.test_fraction = own_test ? 0.0 : s.test_fraction;
  p.validation = s.validation;
  p.limit = s.limit;
  p.test_limit = s.test_limit;
  p.seed = s.split_seed;
  return p;
}

std::vector<int64_t> first_n(int64_t count, int64_t limit) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), int64_t{0});
  apply_limit(v, limit);
  return v;
}

// A source with its own test split: the training pool is split, the test set kept whole.
void own_test_split(Loaded& l, Dataset train, Dataset test, const DatasetSpec& s) {
  l.splits = split_indices(train.count, plan_of(s, true));
  l.splits.test = first_n(test.count, s.test_limit);
  l.data = std::make_shared<const Dataset>(std::move(train));
  l.test_data = std::make_shared<const Dataset>(std::move(test));
}

void held_out_split(Loaded& l, Dataset d, const DatasetSpec& s) {
  l.splits = split_indices(d.count, plan_of(s, false));
  l.data = std::make_shared<const Dataset>(std::move(d));
  l.test_data = l.data;
}

Dataset from_mnist(LabeledImages images, const std::vector<std::string>& names) {
  Dataset d;
  d.count = images.count;
  d.sample_shape = {1, images.rows, images.cols};
  d.bytes = std::move(images.pixels);
  d.labels.assign(images.labels.begin(), images.labels.end());
  d.num_classes = 10;
  d.class_names = names;
  return d;
}

Result<Loaded> load(const DatasetSpec& s, const std::string& path, const std::string& base_dir) {
  Loaded l;
  if (s.source == "fashion-mnist" || s.source == "mnist") {
    auto train = load_mnist_split(path, "train");
    if (!train) return train.error();
    auto test = load_mnist_split(path, "t10k");
    if (!test) return test.error();
    std::vector<std::string> names = kFashionClasses;
    if (s.source == "mnist")
      for (int i = 0; i < 10; ++i) names[static_cast<size_t>(i)] = std::to_string(i);
    own_test_split(l, from_mnist(std::move(*train), names), from_mnist(std::move(*test), names), s);
    // The statistics of Fashion-MNIST's training pixels; MNIST has used them too so far.
    l.default_normalization = {{kFashionMnistMean}, {kFashionMnistStd}};
    return l;
  }
  if (s.source == "csv") {
    CsvOptions o;
    o.target = s.csv.target;
    o.features = s.csv.features;
    o.categorical = s.csv.categorical;
    o.regression = s.csv.task == "regression";
    o.missing = s.csv.missing == "drop"   ? MissingPolicy::Drop
                : s.csv.missing == "mean" ? MissingPolicy::Mean
                                          : MissingPolicy::Error;
    o.standardize = s.csv.standardize;
    o.delimiter = s.csv.delimiter.empty() ? ',' : s.csv.delimiter[0];
    auto r = load_csv(path, o, plan_of(s, false));
    if (!r) return r.error();
    l.splits = std::move(r->splits);
    l.data = std::make_shared<const Dataset>(std::move(r->data));
    l.test_data = l.data;
    l.csv = std::move(r->encoding);
    l.delimiter = o.delimiter;
    return l;
  }
  if (s.source == "npy" || s.source == "npz") {
    const bool npy = s.source == "npy";
    const std::string x_name = npy ? path : path + ": array '" + s.npz.x + "'";
    const std::string labels = resolve(s.npy.labels, base_dir);
    const std::string y_name = npy ? labels : path + ": array '" + s.npz.y + "'";
    auto x = npy ? read_npy(path) : read_npz_array(path, s.npz.x);
    if (!x) return x.error();
    auto y = npy ? read_npy(labels) : read_npz_array(path, s.npz.y);
    if (!y) return y.error();
    ArrayOptions o;
    o.task = npy ? s.npy.task : s.npz.task;
    o.num_classes = npy ? s.npy.num_classes : s.npz.num_classes;
    auto d = arrays_to_dataset(std::move(*x), std::move(*y), o, x_name, y_name);
    if (!d) return d.error();
    held_out_split(l, std::move(*d), s);
    return l;
  }
  if (s.source == "image-folder") {
    ImageFolderOptions o;
    if (s.image.size.size() == 2) {
      o.height = s.image.size[0];
      o.width = s.image.size[1];
    }
    o.channels = s.image.channels;
    auto r = load_image_folder(path, o);
    if (!r) return r.error();
    if (r->has_test)
      own_test_split(l, std::move(r->train), std::move(r->test), s);
    else
      held_out_split(l, std::move(r->train), s);
    return l;
  }
  if (s.source == "synthetic") {
    SyntheticOptions o;
    o.kind = s.synthetic.kind;
    o.samples = s.synthetic.samples;
    o.noise = s.synthetic.noise;
    o.classes = s.synthetic.classes;
    o.seed = s.synthetic.seed;
    auto d = make_synthetic(o);
    if (!d) return make_error("dataset: " + d.error().message);
    held_out_split(l, std::move(*d), s);
    return l;
  }
  if (s.source == "words") {  // split by word, not by sample (datasets/words_dataset.h)
    auto w = load_words(path, s.words.block_size, plan_of(s, false));
    if (!w) return w.error();
    l.splits = std::move(w->splits);
    l.data = std::make_shared<const Dataset>(std::move(w->data));
    l.test_data = l.data;
    return l;
  }
  return make_error("dataset: unknown source '" + s.source + "'");
}

}  // namespace

Result<DatasetSplits> open_dataset(const DatasetSpec& spec, const std::string& base_dir,
                                   uint64_t shuffle_seed, bool prefetch) {
  const std::string path = resolve(spec.path, base_dir);
  auto loaded = load(spec, path, base_dir);
  if (!loaded) return loaded.error();
  Loaded& l = *loaded;
  const Dataset& d = *l.data;
  const std::string name =
      spec.source == "synthetic" ? "synthetic dataset '" + spec.synthetic.kind + "'" : path;
  if (l.splits.train.empty()) return make_error(name + ": no training samples");

  SourceOptions train_o;
  train_o.shuffle = true;
  train_o.seed = shuffle_seed;
  train_o.normalization = l.default_normalization;
  const int64_t channels = channel_count(d.sample_shape);
  for (const TransformSpec& t : spec.transforms) {
    if (t.type == "normalize") {
      if (t.mean.empty()) {
        train_o.normalization = fit_normalization(d, l.splits.train);
        continue;
      }
      if (t.mean.size() != 1 && static_cast<int64_t>(t.mean.size()) != channels)
        return make_error(name + ": normalize has " + std::to_string(t.mean.size()) +
                          " values, but the samples " + shape_str(d.sample_shape) + " have " +
                          std::to_string(channels) + " channels");
      train_o.normalization = {{t.mean.begin(), t.mean.end()}, {t.std.begin(), t.std.end()}};
    } else if (t.type == "one_hot") {
      if (d.target_kind != TargetKind::Classes)
        return make_error(name + ": one_hot needs class targets, but this data has values");
      train_o.one_hot = true;
    } else {
      ImageDims dims;
      if (!image_dims(d.sample_shape, dims))
        return make_error(name + ": transform '" + t.type +
                          "' needs image samples [C, H, W], but "
                          "the samples are " +
                          shape_str(d.sample_shape));
      Augmentation a;
      a.kind = t.type == "random_crop"       ? AugmentKind::RandomCrop
               : t.type == "horizontal_flip" ? AugmentKind::HorizontalFlip
                                             : AugmentKind::Rotation;
      a.padding = t.padding;
      a.p = t.p;
      a.degrees = t.degrees;
      train_o.augmentations.push_back(a);
    }
  }
  SourceOptions eval_o = train_o;  // evaluation: same encoding, file order, no augmentation
  eval_o.shuffle = false;
  eval_o.augmentations.clear();

  auto wrap = [&](std::unique_ptr<BatchSource> s) -> std::unique_ptr<BatchSource> {
    if (!prefetch) return s;
    return std::make_unique<PrefetchSource>(std::move(s));
  };
  DatasetSplits out;
  out.train = wrap(std::make_unique<InMemorySource>(l.data, std::move(l.splits.train), train_o));
  if (!l.splits.validation.empty())
    out.validation =
        wrap(std::make_unique<InMemorySource>(l.data, std::move(l.splits.validation), eval_o));
  if (!l.splits.test.empty())
    out.test =
        wrap(std::make_unique<InMemorySource>(l.test_data, std::move(l.splits.test), eval_o));
  out.sample_shape = out.train->sample_shape();
  out.target_kind = out.train->target_kind();
  out.target_shape = out.train->target_shape();
  out.num_classes = out.train->num_classes();
  out.class_names = out.train->class_names();
  if (l.csv)
    out.encoder =
        std::make_shared<const InputEncoder>(std::move(*l.csv), l.delimiter, train_o.normalization);
  else
    out.encoder =
        std::make_shared<const InputEncoder>(d.sample_shape, d.has_bytes(), train_o.normalization);
  return out;
}

}  // namespace mls::data
