#include "datasets/idx.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/datasets/fixtures.h"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using mls::Result;
using namespace mls::data;
using namespace mls::data::test;

namespace {

// A 3x2x4 array: 24 bytes of data after a 16-byte header.
const std::vector<uint32_t> kDims{3, 2, 4};
const Bytes kData = iota_bytes(24);

}  // namespace

TEST_CASE("read_idx round-trips plain and gzip files", "[idx]") {
  TempDir dir;
  const bool gz = GENERATE(false, true);
  const std::string path = dir.file(gz ? "a.idx.gz" : "a.idx");
  if (gz)
    write_gzip(path, idx_bytes(0x08, kDims, kData));
  else
    write_plain(path, idx_bytes(0x08, kDims, kData));
  if (gz) REQUIRE(read_all(path)[0] == 0x1f);  // really compressed

  Result<IdxArray> r = read_idx(path);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->dims == std::vector<int64_t>{3, 2, 4});
  CHECK(r->data == kData);
}

TEST_CASE("read_idx reads 1-D and 4-D arrays and detects gzip by content", "[idx]") {
  TempDir dir;
  // Plain bytes under a .gz name and gzip under a plain name: the magic decides.
  write_plain(dir.file("one.gz"), idx_bytes(0x08, {5}, {9, 8, 7, 6, 5}));
  write_gzip(dir.file("four"), idx_bytes(0x08, {2, 1, 3, 2}, iota_bytes(12, 3)));

  Result<IdxArray> one = read_idx(dir.file("one.gz"));
  REQUIRE(one.ok());
  CHECK(one->dims == std::vector<int64_t>{5});
  CHECK(one->data == Bytes{9, 8, 7, 6, 5});

  Result<IdxArray> four = read_idx(dir.file("four"));
  REQUIRE(four.ok());
  CHECK(four->dims == std::vector<int64_t>{2, 1, 3, 2});
  CHECK(four->data == iota_bytes(12, 3));
}

TEST_CASE("read_idx accepts concatenated gzip members", "[idx]") {
  TempDir dir;
  const Bytes whole = idx_bytes(0x08, kDims, kData);
  const std::string path = dir.file("two_members.gz");
  write_gzip(path, Bytes(whole.begin(), whole.begin() + 10), "wb");
  write_gzip(path, Bytes(whole.begin() + 10, whole.end()), "ab");

  Result<IdxArray> r = read_idx(path);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  CHECK(r->data == kData);
}

TEST_CASE("read_idx reports truncated data with expected and found sizes", "[idx]") {
  TempDir dir;
  const bool gz = GENERATE(false, true);
  const std::string path = dir.file(gz ? "short.gz" : "short");
  const Bytes bytes = idx_bytes(0x08, kDims, Bytes(kData.begin(), kData.begin() + 20));
  gz ? write_gzip(path, bytes) : write_plain(path, bytes);

  const std::string msg = error_of(read_idx(path));
  CHECK_THAT(msg, StartsWith(path + ": "));
  CHECK_THAT(msg, Contains("truncated: expected 24 bytes of data, found 20"));
}

TEST_CASE("read_idx reports a truncated header", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("header");
  Bytes bytes = idx_bytes(0x08, kDims, {});
  bytes.resize(10);  // 3 dims need 16 header bytes
  write_plain(path, bytes);
  CHECK_THAT(error_of(read_idx(path)),
             StartsWith(path + ": truncated header: expected 16 bytes, found 10"));

  write_plain(path, {});
  CHECK_THAT(error_of(read_idx(path)), StartsWith(path + ": truncated header") &&
                                           Contains("expected at least 4 bytes, found 0"));
}

TEST_CASE("read_idx rejects a wrong magic", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("magic");
  Bytes bytes = idx_bytes(0x08, kDims, kData);
  bytes[1] = 0x12;
  write_plain(path, bytes);
  const std::string msg = error_of(read_idx(path));
  CHECK_THAT(msg, StartsWith(path + ": bad magic 0x00 0x12"));
  CHECK_THAT(msg, Contains("not an IDX file"));
}

TEST_CASE("read_idx rejects element types other than unsigned byte", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("float");
  write_plain(path, idx_bytes(0x0d, kDims, Bytes(24 * 4)));
  const std::string msg = error_of(read_idx(path));
  CHECK_THAT(msg, StartsWith(path + ": unsupported element type 0x0d (float32)"));
  CHECK_THAT(msg, Contains("only 0x08 (unsigned byte)"));

  write_plain(path, idx_bytes(0x42, kDims, kData));
  CHECK_THAT(error_of(read_idx(path)), Contains("unsupported element type 0x42"));
}

TEST_CASE("read_idx rejects a dimension count outside 1..4", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("rank");
  write_plain(path, idx_bytes(0x08, {}, {}));
  CHECK_THAT(error_of(read_idx(path)),
             StartsWith(path + ": number of dimensions 0 is out of range 1..4"));
  write_plain(path, idx_bytes(0x08, {1, 1, 1, 1, 1}, {7}));
  CHECK_THAT(error_of(read_idx(path)),
             StartsWith(path + ": number of dimensions 5 is out of range 1..4"));
}

TEST_CASE("read_idx rejects trailing bytes after the data", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("long");
  Bytes data = kData;
  data.insert(data.end(), {1, 2, 3});
  write_plain(path, idx_bytes(0x08, kDims, data));
  const std::string msg = error_of(read_idx(path));
  CHECK_THAT(msg, StartsWith(path + ": trailing data"));
  CHECK_THAT(msg, Contains("expected 24 bytes of data, found 27 (3 extra)"));
}

TEST_CASE("read_idx rejects a zero dimension", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("zero");
  write_plain(path, idx_bytes(0x08, {3, 0, 4}, {}));
  CHECK_THAT(error_of(read_idx(path)), StartsWith(path + ": dimension 1 is zero"));
}

TEST_CASE("read_idx rejects corrupt gzip streams", "[idx]") {
  TempDir dir;
  const std::string path = dir.file("bad.gz");

  SECTION("valid header, garbage body") {
    // A minimal gzip header (deflate, no flags, mtime 0, OS unix), then 0xff bytes: a
    // final block of the reserved type 3.
    const Bytes header{0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x03};
    Bytes bytes(header.size() + 32, 0xff);
    std::copy(header.begin(), header.end(), bytes.begin());
    write_plain(path, bytes);
    CHECK_THAT(error_of(read_idx(path)), StartsWith(path + ": corrupt gzip stream"));
  }
  SECTION("stream cut short") {
    write_gzip(path, idx_bytes(0x08, kDims, kData));
    Bytes bytes = read_all(path);
    bytes.resize(bytes.size() - 6);  // loses most of the CRC/size trailer
    write_plain(path, bytes);
    CHECK_THAT(error_of(read_idx(path)), StartsWith(path + ": truncated gzip stream"));
  }
  SECTION("checksum mismatch") {
    write_gzip(path, idx_bytes(0x08, kDims, kData));
    Bytes bytes = read_all(path);
    bytes[bytes.size() - 8] ^= 0x01;  // first CRC32 byte of the trailer
    write_plain(path, bytes);
    CHECK_THAT(error_of(read_idx(path)),
               StartsWith(path + ": corrupt gzip stream") && Contains("incorrect data check"));
  }
  SECTION("garbage after the stream") {
    write_gzip(path, idx_bytes(0x08, kDims, kData));
    Bytes bytes = read_all(path);
    bytes.insert(bytes.end(), {'j', 'u', 'n', 'k'});
    write_plain(path, bytes);
    CHECK_THAT(error_of(read_idx(path)),
               StartsWith(path + ": 4 bytes of trailing garbage after the gzip stream"));
  }
}

TEST_CASE("read_idx names a missing file or a directory", "[idx]") {
  TempDir dir;
  const std::string missing = dir.file("nope-idx1-ubyte.gz");
  CHECK(error_of(read_idx(missing)) == missing + ": file not found");
  CHECK(error_of(read_idx(dir.str())) == dir.str() + ": is a directory, not a regular file");
}
