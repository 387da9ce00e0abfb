#include "datasets/mnist.h"

#include <array>
#include <catch2/catch.hpp>
#include <numeric>

#include "tests/datasets/fixtures.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::Result;
using namespace mls::data;
using namespace mls::data::test;

namespace {

std::array<int64_t, 10> histogram(const std::vector<uint8_t>& labels) {
  std::array<int64_t, 10> h{};
  for (uint8_t l : labels) ++h[l];
  return h;
}

uint64_t sum(const std::vector<uint8_t>& v, size_t begin = 0, size_t end = SIZE_MAX) {
  end = std::min(end, v.size());
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin),
                         v.begin() + static_cast<std::ptrdiff_t>(end), uint64_t{0});
}

// A tiny MNIST-layout split: `n` images of 2x3 pixels and `labels`.
void write_split(const TempDir& dir, const std::string& split, uint32_t n, const Bytes& labels) {
  write_gzip(dir.file(split + "-images-idx3-ubyte.gz"),
             idx_bytes(0x08, {n, 2, 3}, iota_bytes(size_t{n} * 6)));
  write_gzip(dir.file(split + "-labels-idx1-ubyte.gz"),
             idx_bytes(0x08, {static_cast<uint32_t>(labels.size())}, labels));
}

}  // namespace

// The reference values below were computed once, independently of this code, with
// python3's gzip + struct modules over the files of Debian's dataset-fashion-mnist:
//   px = gzip.open(".../train-images-idx3-ubyte.gz").read()[16:]; sum(px), sum(px[:784]) ...
TEST_CASE("Fashion-MNIST train split has the published shape and content", "[mnist][real]") {
  const LabeledImages& train = fashion_split("train");
  CHECK(train.count == 60000);
  CHECK(train.rows == 28);
  CHECK(train.cols == 28);
  CHECK(train.pixels.size() == 60000u * 28 * 28);
  CHECK(train.labels.size() == 60000u);
  CHECK(train.labels.front() == 9);  // Ankle boot
  CHECK(train.labels.back() == 5);   // Sandal
  for (int64_t n : histogram(train.labels)) CHECK(n == 6000);
  CHECK(sum(train.pixels) == 3431114169u);
  CHECK(sum(train.pixels, 0, 784) == 76247u);  // first image
  CHECK(train.pixels[14 * 28 + 14] == 217);    // centre of the first image
}

TEST_CASE("Fashion-MNIST t10k split has the published shape and content", "[mnist][real]") {
  const LabeledImages& test = fashion_split("t10k");
  CHECK(test.count == 10000);
  CHECK(test.rows == 28);
  CHECK(test.cols == 28);
  CHECK(test.pixels.size() == 10000u * 28 * 28);
  CHECK(test.labels.front() == 9);  // Ankle boot
  for (int64_t n : histogram(test.labels)) CHECK(n == 1000);
  CHECK(sum(test.pixels) == 573469082u);
  CHECK(sum(test.pixels, 0, 784) == 33456u);
  CHECK(sum(test.pixels, test.pixels.size() - 784) == 24390u);  // last image
}

TEST_CASE("load_mnist_split reads a small split and an unpacked one", "[mnist]") {
  TempDir dir;
  write_split(dir, "train", 4, {3, 1, 4, 1});
  // The unpacked form, as left by `gunzip *.gz`.
  write_plain(dir.file("t10k-images-idx3-ubyte"), idx_bytes(0x08, {1, 2, 3}, iota_bytes(6, 5)));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(0x08, {1}, {9}));

  Result<LabeledImages> train = load_mnist_split(dir.str(), "train");
  INFO((train ? std::string() : train.error().message));
  REQUIRE(train.ok());
  CHECK(train->count == 4);
  CHECK(train->rows == 2);
  CHECK(train->cols == 3);
  CHECK(train->pixels == iota_bytes(24));
  CHECK(train->labels == Bytes{3, 1, 4, 1});

  Result<LabeledImages> test = load_mnist_split(dir.str(), "t10k");
  REQUIRE(test.ok());
  CHECK(test->count == 1);
  CHECK(test->pixels == iota_bytes(6, 5));
  CHECK(test->labels == Bytes{9});
}

TEST_CASE("load_mnist_split checks that images and labels agree", "[mnist]") {
  TempDir dir;
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  const std::string labels = dir.file("train-labels-idx1-ubyte.gz");

  SECTION("count mismatch") {
    write_split(dir, "train", 4, {1, 2, 3});
    CHECK(error_of(load_mnist_split(dir.str(), "train")) ==
          labels + ": 3 labels, but " + images + " has 4 images");
  }
  SECTION("label out of range") {
    write_split(dir, "train", 4, {1, 2, 10, 3});
    CHECK(error_of(load_mnist_split(dir.str(), "train")) ==
          labels + ": label 10 at index 2 is out of range 0..9");
  }
  SECTION("images not 3-D") {
    write_split(dir, "train", 4, {1, 2, 3, 4});
    write_gzip(images, idx_bytes(0x08, {4, 6}, iota_bytes(24)));
    CHECK(error_of(load_mnist_split(dir.str(), "train")) ==
          images + ": expected 3-D images (count, rows, cols), got 2-D");
  }
  SECTION("labels not 1-D") {
    write_split(dir, "train", 4, {1, 2, 3, 4});
    write_gzip(labels, idx_bytes(0x08, {2, 2}, {1, 2, 3, 4}));
    CHECK(error_of(load_mnist_split(dir.str(), "train")) ==
          labels + ": expected 1-D labels, got 2-D");
  }
  SECTION("a file is missing") {
    write_split(dir, "train", 4, {1, 2, 3, 4});
    std::filesystem::remove(labels);
    CHECK(error_of(load_mnist_split(dir.str(), "train")) == labels + ": file not found");
  }
  SECTION("a file is corrupt") {
    write_split(dir, "train", 4, {1, 2, 3, 4});
    write_plain(images, {0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xff});
    CHECK_THAT(error_of(load_mnist_split(dir.str(), "train")),
               StartsWith(images + ": corrupt gzip stream"));
  }
}

TEST_CASE("load_mnist_split explains a missing directory and a bad split name", "[mnist]") {
  TempDir dir;
  const std::string missing = dir.file("fashion-mnist");
  const std::string msg = error_of(load_mnist_split(missing, "train"));
  CHECK_THAT(msg, StartsWith(missing + ": dataset directory not found"));
  CHECK_THAT(msg, Contains("apt-get install dataset-fashion-mnist"));

  CHECK(error_of(load_mnist_split(dir.str(), "test")) ==
        dir.str() + ": unknown split 'test' (expected \"train\" or \"t10k\")");
}
