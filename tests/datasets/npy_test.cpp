#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "datasets/array_dataset.h"
#include "datasets/npy.h"
#include "datasets/npz.h"
#include "tests/datasets/fixtures.h"
#include "tests/datasets/formats.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::Shape;
using mls::TargetKind;
using namespace mls::data;
using namespace mls::data::test;

TEST_CASE("NPY files of every supported dtype and both header versions", "[npy]") {
  TempDir dir;
  const int version = GENERATE(1, 2, 3);
  const std::string path = dir.file("a.npy");
  SECTION("<f4") {
    write_plain(path,
                npy_bytes("<f4", {2, 3}, le_bytes<float>({1.5f, -2, 3, 4, 5, 6.25f}), version));
    auto a = read_npy(path);
    INFO((a ? std::string() : a.error().message));
    REQUIRE(a.ok());
    CHECK(a->shape == Shape{2, 3});
    CHECK(a->dtype == NpyType::F32);
    CHECK(a->to_floats() == std::vector<float>{1.5f, -2, 3, 4, 5, 6.25f});
  }
  SECTION("<f8") {
    write_plain(path, npy_bytes("<f8", {3}, le_bytes<double>({0.1, 1e10, -7}), version));
    auto a = read_npy(path);
    REQUIRE(a.ok());
    CHECK(a->to_floats() == std::vector<float>{0.1f, 1e10f, -7});
  }
  SECTION("|u1") {
    write_plain(path, npy_bytes("|u1", {2, 2}, {0, 7, 128, 255}, version));
    auto a = read_npy(path);
    REQUIRE(a.ok());
    CHECK(a->is_integer());
    CHECK(a->to_ints() == std::vector<int64_t>{0, 7, 128, 255});
  }
  SECTION("<i4 and <i8") {
    write_plain(path, npy_bytes("<i4", {3}, le_bytes<int32_t>({-1, 2, 70000}), version));
    CHECK(read_npy(path)->to_ints() == std::vector<int64_t>{-1, 2, 70000});
    write_plain(path, npy_bytes("<i8", {2, 1}, le_bytes<int64_t>({int64_t{1} << 40, 9}), version));
    auto a = read_npy(path);
    REQUIRE(a.ok());
    CHECK(a->shape == Shape{2, 1});
    CHECK(a->to_ints() == std::vector<int64_t>{int64_t{1} << 40, 9});
  }
  SECTION("0-d") {
    write_plain(path, npy_bytes("<f4", {}, le_bytes<float>({42}), version));
    auto a = read_npy(path);
    REQUIRE(a.ok());
    CHECK(a->shape.empty());
    CHECK(a->to_floats() == std::vector<float>{42});
  }
}

TEST_CASE("an NPY array with a zero dimension reads as empty (found by the fuzzer)", "[npy]") {
  auto a = parse_npy(npy_bytes("<f4", {0, 3}, {}), "empty.npy");
  REQUIRE(a.ok());
  CHECK(a->numel() == 0);
  CHECK(a->to_floats().empty());  // no copy from a buffer that is not there (UBSan)
  auto b = parse_npy(npy_bytes("<i8", {0}, {}), "empty.npy");
  REQUIRE(b.ok());
  CHECK(b->to_ints().empty());
}

TEST_CASE("NPY errors name the file", "[npy][errors]") {
  TempDir dir;
  const std::string path = dir.file("bad.npy");
  const Bytes data = le_bytes<float>({1, 2, 3, 4, 5, 6});

  Bytes cut = npy_bytes("<f4", {2, 3}, data);
  cut.resize(cut.size() - 5);
  write_plain(path, cut);
  CHECK(error_of(read_npy(path)) == path + ": truncated: expected 24 bytes of data, found 19");

  write_plain(path, npy_bytes("<f4", {2, 3}, data, 1, /*fortran=*/true));
  CHECK_THAT(error_of(read_npy(path)),
             StartsWith(path + ": Fortran-order arrays are not supported"));

  write_plain(path, npy_bytes(">f4", {2, 3}, data));
  CHECK_THAT(error_of(read_npy(path)),
             StartsWith(path + ": big-endian dtype '>f4' is not supported"));

  write_plain(path, npy_bytes("<c8", {3}, data));
  CHECK(error_of(read_npy(path)) ==
        path + ": unsupported dtype '<c8' (supported: <f4, <f8, |u1, <i4, <i8)");

  write_plain(path, {'P', 'K', 3, 4});
  CHECK_THAT(error_of(read_npy(path)), StartsWith(path + ": not an NPY file"));

  Bytes header_cut = npy_bytes("<f4", {2, 3}, data);
  header_cut.resize(40);
  write_plain(path, header_cut);
  CHECK_THAT(error_of(read_npy(path)), StartsWith(path + ": truncated header"));

  CHECK(error_of(read_npy(dir.file("no.npy"))) == dir.file("no.npy") + ": file not found");
}

TEST_CASE("NPZ archives, stored and deflated", "[npz]") {
  TempDir dir;
  const bool deflate = GENERATE(false, true);
  const std::string path = dir.file("d.npz");
  std::vector<float> xs(600);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 17) * 0.5f;
  const Bytes x = npy_bytes("<f4", {300, 2}, le_bytes(xs));
  const Bytes y = npy_bytes("<i8", {300}, le_bytes(std::vector<int64_t>(300, 1)));
  const Bytes zip = zip_bytes({{"x.npy", x, deflate}, {"y.npy", y, deflate}});
  write_plain(path, zip);
  if (deflate) CHECK(zip.size() < x.size() / 2);  // really compressed

  auto entries = list_zip(path);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 2);
  CHECK((*entries)[0].method == (deflate ? 8 : 0));
  CHECK((*entries)[1].size == y.size());

  auto a = read_npz_array(path, "x");
  INFO((a ? std::string() : a.error().message));
  REQUIRE(a.ok());
  CHECK(a->shape == Shape{300, 2});
  CHECK(a->to_floats() == xs);
  auto b = read_npz_array(path, "y");
  REQUIRE(b.ok());
  CHECK(b->to_ints() == std::vector<int64_t>(300, 1));
}

TEST_CASE("NPZ members with zip64 sizes, as np.savez writes them", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("z64.npz");
  const Bytes x = npy_bytes("<i4", {3}, le_bytes<int32_t>({7, 8, 9}));
  ZipMember m{"x.npy", x, GENERATE(false, true), /*zip64=*/true};
  write_plain(path, zip_bytes({m}));
  auto entries = list_zip(path);
  REQUIRE(entries.ok());
  CHECK((*entries)[0].size == x.size());
  auto a = read_npz_array(path, "x");
  INFO((a ? std::string() : a.error().message));
  REQUIRE(a.ok());
  CHECK(a->to_ints() == std::vector<int64_t>{7, 8, 9});
}

TEST_CASE("NPZ errors name the file and the array", "[npz][errors]") {
  TempDir dir;
  const std::string path = dir.file("e.npz");
  Bytes cut = npy_bytes("<f4", {4}, le_bytes<float>({1, 2, 3, 4}));
  cut.resize(cut.size() - 4);
  write_plain(path, zip_bytes({{"x.npy", cut, true}, {"labels.npy", npy_bytes("|u1", {1}, {1})}}));
  CHECK(error_of(read_npz_array(path, "y")) ==
        path + ": no array 'y' (the archive holds 'x', 'labels')");
  CHECK(error_of(read_npz_array(path, "x")) ==
        path + ": array 'x': truncated: expected 16 bytes of data, found 12");

  Bytes zip = zip_bytes({{"x.npy", npy_bytes("<f4", {4}, le_bytes<float>({1, 2, 3, 4})), true}});
  zip[40] ^= 0xff;  // inside the deflate stream
  write_plain(path, zip);
  CHECK_THAT(error_of(read_npz_array(path, "x")), StartsWith(path + ": member 'x.npy': "));

  write_plain(path, npy_bytes("<f4", {1}, le_bytes<float>({1})));
  CHECK_THAT(error_of(read_npz_array(path, "x")), StartsWith(path + ": not a zip archive"));

  // Found by the fuzzer: a 351-byte archive whose member claims 4 GiB was allocated first.
  const std::string huge = MLS_SOURCE_DIR "/tests/fuzz/corpus/npy/regress-npz-4gb-member.npz";
  const std::string msg = error_of(read_npz_array(huge, "x"));
  CHECK_THAT(msg, StartsWith(huge + ": member "));
  CHECK_THAT(msg, Contains("past the end of the archive") || Contains("cannot hold"));
}

TEST_CASE("arrays become datasets: shapes, tasks and label checks", "[npy]") {
  auto arr = [](const std::string& descr, Shape shape, Bytes data) {
    auto a = parse_npy(npy_bytes(descr, shape, data), "mem.npy");
    REQUIRE(a.ok());
    return std::move(*a);
  };
  // [N, H, W] bytes -> one-channel images kept as bytes; int labels -> classes.
  auto d = arrays_to_dataset(arr("|u1", {2, 2, 3}, iota_bytes(12)),
                             arr("<i8", {2}, le_bytes<int64_t>({0, 4})), {}, "x.npy", "y.npy");
  REQUIRE(d.ok());
  CHECK(d->sample_shape == Shape{1, 2, 3});
  CHECK(d->bytes == iota_bytes(12));
  CHECK(d->num_classes == 5);
  CHECK(d->labels == std::vector<int64_t>{0, 4});

  // Float labels -> regression with target shape {1}.
  auto r = arrays_to_dataset(arr("<f8", {2, 2}, le_bytes<double>({1, 2, 3, 4})),
                             arr("<f4", {2}, le_bytes<float>({0.5f, 1.5f})), {}, "x.npy", "y.npy");
  REQUIRE(r.ok());
  CHECK(r->target_kind == TargetKind::Values);
  CHECK(r->target_shape == Shape{1});
  CHECK(r->floats == std::vector<float>{1, 2, 3, 4});
  CHECK(r->targets == std::vector<float>{0.5f, 1.5f});

  ArrayOptions ten;
  ten.num_classes = 10;
  CHECK(error_of(arrays_to_dataset(arr("<f4", {3, 1}, le_bytes<float>({1, 2, 3})),
                                   arr("|u1", {3}, {3, 12, 1}), ten, "x.npy", "y.npy")) ==
        "y.npy: label 12 at index 1 is out of range 0..9");
  CHECK(error_of(arrays_to_dataset(arr("<f4", {3, 1}, le_bytes<float>({1, 2, 3})),
                                   arr("|u1", {2}, {3, 1}), {}, "x.npy", "y.npy")) ==
        "y.npy: 2 labels, but x.npy has 3 samples");
  CHECK(
      error_of(arrays_to_dataset(arr("<f4", {1, 1}, le_bytes<float>({1})),
                                 arr("<i4", {1}, le_bytes<int32_t>({-1})), {}, "x.npy", "y.npy")) ==
      "y.npy: label -1 at index 0 is negative (class labels count from 0)");
  // A NaN or an infinity is named where it sits, before any training.
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  CHECK(error_of(arrays_to_dataset(arr("<f4", {3, 2}, le_bytes<float>({1, 2, 3, nan, 5, 6})),
                                   arr("|u1", {3}, {0, 1, 0}), {}, "x.npy", "y.npy")) ==
        "x.npy: sample 1, feature 1 is nan (the data must be finite: fix or drop that sample)");
  CHECK(error_of(arrays_to_dataset(arr("<f4", {2, 1}, le_bytes<float>({1, 2})),
                                   arr("<f4", {2}, le_bytes<float>({0.5f, inf})), {}, "x.npy",
                                   "y.npy")) ==
        "y.npy: sample 1, target 0 is inf (the data must be finite: fix or drop that sample)");
}
