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

namespace mls::store::test {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "mls_store_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
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
