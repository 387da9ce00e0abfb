// Helpers shared by the dataset tests: a scratch directory, IDX byte builders, and the
// real Fashion-MNIST splits (loaded once per process).
//
//   TempDir dir;
//   write_plain(dir.file("a.idx"), idx_bytes(0x08, {2, 3}, {1, 2, 3, 4, 5, 6}));
//   const LabeledImages& train = fashion_split("train");
#pragma once

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "datasets/mnist.h"

#include "tests/common/temp_dir.h"

namespace mls::data::test {

using Bytes = std::vector<uint8_t>;

// Each layer's tests name their temp dirs after the layer.
class TempDir : public mls::test::TempDir {
 public:
  TempDir() : mls::test::TempDir("mls_datasets") {}
};

// An IDX file image: 0 0 type ndims, big-endian u32 dims, then `data` as given.
inline Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b{0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(d >> shift));
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// The error message of a result that must have failed.
template <typename T>
std::string error_of(const Result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

inline Bytes iota_bytes(size_t n, uint8_t step = 7) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * step);
  return b;
}

inline void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

// mode "wb" starts a file; "ab" appends another gzip member to it.
inline void write_gzip(const std::string& path, const Bytes& bytes, const char* mode = "wb") {
  gzFile f = gzopen(path.c_str(), mode);
  REQUIRE(f != nullptr);
  const int n = gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  const int closed = gzclose(f);
  REQUIRE(n == static_cast<int>(bytes.size()));
  REQUIRE(closed == Z_OK);
}

inline Bytes read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

// The real dataset is installed by scripts/setup; its absence is a broken setup, not a
// reason to skip, so this fails loudly.
inline const LabeledImages& fashion_split(const std::string& split) {
  static std::map<std::string, LabeledImages> cache;
  if (auto it = cache.find(split); it != cache.end()) return it->second;
  if (!std::filesystem::is_directory(kFashionMnistDir))
    FAIL(std::string("Fashion-MNIST is not installed at ") + kFashionMnistDir +
         "; run scripts/setup (it installs the Debian package dataset-fashion-mnist)");
  Result<LabeledImages> r = load_mnist_split(kFashionMnistDir, split);
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
  return cache.emplace(split, std::move(*r)).first->second;
}

}  // namespace mls::data::test
