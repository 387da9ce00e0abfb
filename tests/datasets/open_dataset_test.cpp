#include <stb_image_write.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "datasets/dataset_spec.h"
#include "datasets/image_classification.h"
#include "tests/datasets/fixtures.h"
#include "tests/datasets/formats.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::HostBatch;
using mls::Shape;
using mls::TargetKind;
using namespace mls::data;
using namespace mls::data::test;

namespace {

DatasetSpec spec(const std::string& text) {
  auto s = parse_dataset_spec(nlohmann::json::parse(text), "P.mls: /dataset");
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s.ok());
  return *s;
}

DatasetSplits open(const DatasetSpec& s, const std::string& base = "", bool prefetch = true) {
  auto r = open_dataset(s, base, /*shuffle_seed=*/0, prefetch);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return std::move(*r);
}

HostBatch first_batch(mls::BatchSource& s, int64_t size) {
  HostBatch b;
  s.start_epoch(0);
  REQUIRE(s.next(size, b));
  return b;
}

std::vector<float> all_x(mls::BatchSource& s, int64_t epoch) {
  std::vector<float> x;
  HostBatch b;
  s.start_epoch(epoch);
  while (s.next(50, b)) x.insert(x.end(), b.x.begin(), b.x.end());
  return x;
}

}  // namespace

TEST_CASE("open_dataset: synthetic spirals with test and validation hold-outs", "[open]") {
  const DatasetSpec s = spec(R"({"source": "synthetic", "validation": 0.1, "split_seed": 4,
                                 "synthetic": {"samples": 1000}})");
  DatasetSplits d = open(s);
  CHECK(d.train->num_samples() == 720);
  REQUIRE(d.validation);
  CHECK(d.validation->num_samples() == 80);
  REQUIRE(d.test);
  CHECK(d.test->num_samples() == 200);
  CHECK(d.sample_shape == Shape{2});
  CHECK(d.num_classes == 2);
  CHECK(d.target_kind == TargetKind::Classes);
  CHECK(d.class_names == std::vector<std::string>{"0", "1"});

  DatasetSplits plain = open(s, "", /*prefetch=*/false);
  CHECK(all_x(*d.train, 2) == all_x(*plain.train, 2));
  CHECK(all_x(*d.test, 0) == all_x(*plain.test, 0));
}

TEST_CASE("open_dataset: a CSV relative to the project, and its encoder", "[open]") {
  TempDir dir;
  write_text(
      dir.file("flowers.csv"),
      "petal,colour,species\n1,red,rose\n2,white,lily\n3,red,rose\n4,white,lily\n5,red,rose\n");
  const DatasetSpec s = spec(R"({"source": "csv", "path": "flowers.csv", "test_fraction": 0.2,
                                 "csv": {"target": "species"}, "transforms": [{"type": "one_hot"}]})");
  DatasetSplits d = open(s, dir.str());
  CHECK(d.train->num_samples() == 4);
  CHECK(d.test->num_samples() == 1);
  CHECK(d.sample_shape == Shape{3});
  CHECK(d.target_kind == TargetKind::Values);  // one-hot
  CHECK(d.target_shape == Shape{2});
  CHECK(d.class_names == std::vector<std::string>{"lily", "rose"});

  write_text(dir.file("new.csv"), "colour,petal\nwhite,3\n");
  REQUIRE(d.encoder);
  auto x = d.encoder->encode(dir.file("new.csv"));
  INFO((x ? std::string() : x.error().message));
  REQUIRE(x.ok());
  CHECK(x->size == 1);
  REQUIRE(x->x.size() == 3);
  CHECK(x->x[1] == 0.0f);  // red
  CHECK(x->x[2] == 1.0f);  // white

  const DatasetSpec missing =
      spec(R"({"source": "csv", "path": "nope.csv", "csv": {"target": "y"}})");
  CHECK(error_of(open_dataset(missing, dir.str(), 0)) == dir.file("nope.csv") + ": file not found");
}

TEST_CASE("open_dataset: NPZ with fitted normalisation, and an NPY sample encoded alike",
          "[open]") {
  TempDir dir;
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int i = 0; i < 100; ++i) {
    xs.insert(xs.end(), {static_cast<float>(i), 2.0f * static_cast<float>(i)});
    ys.push_back(i % 3);
  }
  write_plain(dir.file("d.npz"),
              zip_bytes({{"feat.npy", npy_bytes("<f4", {100, 2}, le_bytes(xs)), true},
                         {"lab.npy", npy_bytes("<i8", {100}, le_bytes(ys)), true}}));
  const DatasetSpec s = spec(R"({"source": "npz", "path": "d.npz", "npz": {"x": "feat", "y": "lab"},
                                 "test_fraction": 0.5, "transforms": [{"type": "normalize"}]})");
  DatasetSplits d = open(s, dir.str(), false);
  CHECK(d.num_classes == 3);
  CHECK(d.train->num_samples() == 50);
  // Normalised training features have mean 0 per feature.
  const std::vector<float> x = all_x(*d.train, 0);
  double m0 = 0, m1 = 0;
  for (size_t i = 0; i < x.size(); i += 2) m0 += x[i], m1 += x[i + 1];
  CHECK(m0 / 50 == Approx(0).margin(1e-5));
  CHECK(m1 / 50 == Approx(0).margin(1e-5));

  // The encoder applies the fitted statistics: raw sample i is (i, 2i), so the training
  // split's first batch (unshuffled here) and the encoder agree on the same raw values.
  write_plain(dir.file("one.npy"), npy_bytes("<f4", {2}, le_bytes<float>({10, 20})));
  write_plain(dir.file("batch.npy"),
              npy_bytes("<f4", {3, 2}, le_bytes<float>({10, 20, 0, 0, 1, 2})));
  auto one = d.encoder->encode(dir.file("one.npy"));
  auto batch = d.encoder->encode(dir.file("batch.npy"));
  REQUIRE(one.ok());
  REQUIRE(batch.ok());
  CHECK(one->size == 1);
  CHECK(batch->size == 3);
  CHECK(std::vector<float>(batch->x.begin(), batch->x.begin() + 2) == one->x);
  const Normalization& n = d.encoder->normalization();
  CHECK(one->x[0] == (10 - n.mean[0]) / n.stddev[0]);

  write_plain(dir.file("wrong.npy"), npy_bytes("<f4", {3}, le_bytes<float>({1, 2, 3})));
  CHECK_THAT(error_of(d.encoder->encode(dir.file("wrong.npy"))),
             StartsWith(dir.file("wrong.npy") + ": shape [3]"));

  const DatasetSpec bad_key = spec(R"({"source": "npz", "path": "d.npz"})");
  CHECK(error_of(open_dataset(bad_key, dir.str(), 0)) ==
        dir.file("d.npz") + ": no array 'x' (the archive holds 'feat', 'lab')");
}

TEST_CASE("open_dataset: an image folder, and a PNG encoded like its training sample", "[open]") {
  TempDir dir;
  std::filesystem::create_directories(dir.file("imgs/train/a"));
  std::filesystem::create_directories(dir.file("imgs/train/b"));
  std::filesystem::create_directories(dir.file("imgs/test/b"));
  std::vector<uint8_t> px(6 * 6);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 7);
  for (const char* f : {"imgs/train/a/1.png", "imgs/train/b/1.png", "imgs/test/b/1.png"})
    REQUIRE(stbi_write_png(dir.file(f).c_str(), 6, 6, 1, px.data(), 6) != 0);
  const DatasetSpec s = spec(R"({"source": "image-folder", "path": "imgs",
                                 "image": {"size": [4, 4], "channels": 1},
                                 "transforms": [{"type": "normalize", "mean": 0.5, "std": 0.25},
                                                {"type": "horizontal_flip"}]})");
  DatasetSplits d = open(s, dir.str());
  CHECK(d.sample_shape == Shape{1, 4, 4});
  CHECK(d.train->num_samples() == 2);
  REQUIRE(d.test);
  CHECK(d.test->num_samples() == 1);
  const HostBatch t = first_batch(*d.test, 1);  // no flip: evaluation is not augmented
  auto enc = d.encoder->encode(dir.file("imgs/test/b/1.png"));
  REQUIRE(enc.ok());
  CHECK(enc->x == t.x);
  CHECK(t.y == std::vector<int64_t>{1});

  const DatasetSpec csv_aug =
      spec(R"({"source": "synthetic", "transforms": [{"type": "rotation"}]})");
  CHECK(error_of(open_dataset(csv_aug, "", 0)) ==
        "synthetic dataset 'spirals': transform 'rotation' needs image samples [C, H, W], but the "
        "samples are [2]");
}

TEST_CASE("open_dataset: Fashion-MNIST batches equal the original source's", "[open][real]") {
  fashion_split("train");  // fails with setup instructions when the dataset is missing
  const DatasetSpec s = spec(R"({"limit": 2000, "test_limit": 1000})");
  auto r = open_dataset(s, "", /*shuffle_seed=*/5, /*prefetch=*/true);
  REQUIRE(r.ok());
  DatasetSplits& d = *r;
  CHECK(d.sample_shape == Shape{1, 28, 28});
  CHECK(d.num_classes == 10);
  CHECK(d.class_names[9] == "Ankle boot");
  CHECK(d.train->num_samples() == 2000);
  CHECK(d.test->num_samples() == 1000);
  CHECK_FALSE(d.validation);

  ImageSourceOptions o;
  o.seed = 5;
  o.mean = kFashionMnistMean;
  o.stddev = kFashionMnistStd;
  o.limit = 2000;
  auto old = open_fashion_mnist(kFashionMnistDir, "train", o);
  REQUIRE(old.ok());
  HostBatch a, b;
  for (int64_t epoch : {0, 1}) {
    (*old)->start_epoch(epoch);
    d.train->start_epoch(epoch);
    while ((*old)->next(128, a)) {
      REQUIRE(d.train->next(128, b));
      REQUIRE(a.y == b.y);
      REQUIRE(a.x == b.x);
    }
    CHECK_FALSE(d.train->next(128, b));
  }

  // The first test image, written as a PNG, encodes to the test split's first sample.
  const LabeledImages& test = fashion_split("t10k");
  TempDir dir;
  const std::string png = dir.file("first.png");
  REQUIRE(stbi_write_png(png.c_str(), 28, 28, 1, test.pixels.data(), 28) != 0);
  auto enc = d.encoder->encode(png);
  REQUIRE(enc.ok());
  CHECK(enc->x == first_batch(*d.test, 1).x);
}

TEST_CASE("open_dataset names a missing dataset directory and bad labels", "[open][errors]") {
  TempDir dir;
  const DatasetSpec s = spec(R"({"source": "mnist", "path": "mnist"})");
  CHECK_THAT(error_of(open_dataset(s, dir.str(), 0)),
             StartsWith(dir.file("mnist") + ": dataset directory not found"));

  std::filesystem::create_directories(dir.file("mnist"));
  for (const char* split : {"train", "t10k"}) {
    write_gzip(dir.file("mnist/" + std::string(split) + "-images-idx3-ubyte.gz"),
               idx_bytes(0x08, {3, 2, 2}, iota_bytes(12)));
    write_gzip(
        dir.file("mnist/" + std::string(split) + "-labels-idx1-ubyte.gz"),
        idx_bytes(0x08, {3}, {1, 2, std::string(split) == "train" ? uint8_t{3} : uint8_t{11}}));
  }
  CHECK(error_of(open_dataset(s, dir.str(), 0)) ==
        dir.file("mnist/t10k-labels-idx1-ubyte.gz") + ": label 11 at index 2 is out of range 0..9");

  const DatasetSpec img = spec(R"({"source": "image-folder", "path": "/no/such/dir"})");
  CHECK(error_of(open_dataset(img, "", 0)) == "/no/such/dir: dataset directory not found");
}
