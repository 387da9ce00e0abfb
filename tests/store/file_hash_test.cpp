#include "store/file_hash.h"

#include <catch2/catch.hpp>

#include "tests/store/fixtures.h"

namespace mls::store {
namespace {

// Expected values were computed independently in Python:
//   def fnv1a64(b):
//       h = 0xcbf29ce484222325
//       for c in b: h = ((h ^ c) * 0x100000001b3) & (2**64 - 1)
//       return "%016x" % h
// and the first three match the published FNV-1a test vectors.
TEST_CASE("fnv1a64: published test vectors", "[store]") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ull);
  CHECK(fnv1a64("bar", fnv1a64("foo")) == fnv1a64("foobar"));  // chunking does not matter
}

TEST_CASE("file_hash_hex: known values for small and multi-chunk files", "[store]") {
  test::TempDir dir;
  test::write_bytes(dir.file("p.mlsproj"), "mlstudio project v1\n");
  Result<std::string> h = file_hash_hex(dir.file("p.mlsproj"));
  REQUIRE(h.ok());
  CHECK(*h == "6e12adb9a80c5f06");  // fnv1a64(b"mlstudio project v1\n")

  test::write_bytes(dir.file("empty"), "");
  Result<std::string> e = file_hash_hex(dir.file("empty"));
  REQUIRE(e.ok());
  CHECK(*e == "cbf29ce484222325");

  // 76800 bytes crosses the 64 KiB read buffer: fnv1a64(bytes(range(256)) * 300).
  std::string big;
  for (int rep = 0; rep < 300; ++rep)
    for (int b = 0; b < 256; ++b) big.push_back(static_cast<char>(b));
  test::write_bytes(dir.file("big.bin"), big);
  Result<std::string> g = file_hash_hex(dir.file("big.bin"));
  REQUIRE(g.ok());
  CHECK(*g == "9a27aaa0adbc6725");
}

TEST_CASE("file_hash_hex: unreadable paths are named in the error", "[store]") {
  test::TempDir dir;
  std::string missing = dir.file("missing.mlsproj");
  CHECK(test::error_of(file_hash_hex(missing)) ==
        missing + ": cannot read (No such file or directory)");
  std::string d = dir.file("");
  CHECK_THAT(test::error_of(file_hash_hex(d)), Catch::StartsWith(d + ": cannot read ("));
}

}  // namespace
}  // namespace mls::store
