// Helpers shared by the store tests: a scratch directory removed on exit, and whole-file
// byte reads and writes.
//
//   TempDir dir;
//   auto store = RunStore::open(dir.file("runs.db"));
//   write_bytes(dir.file("junk.db"), "not a database");
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/core/result.h"

#include "tests/common/temp_dir.h"

namespace mls::store::test {

// Each layer's tests name their temp dirs after the layer.
class TempDir : public mls::test::TempDir {
 public:
  TempDir() : mls::test::TempDir("mls_store") {}
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The error message of a result that must have failed.
template <typename T>
std::string error_of(const Result<T>& r) {
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace mls::store::test
