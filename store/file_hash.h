// The project hash stored with each run: FNV-1a 64-bit of the file's bytes, as 16 lowercase
// hex digits. It answers "did the project change since this run?", nothing more: FNV is
// fast and dependency-free but trivially forgeable, so never use it for security.
//
//   Result<std::string> h = file_hash_hex("mnist.mlsproj");
//   if (h) new_run.project_hash = *h;  // e.g. "a430d84680aabd0b"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "engine/core/result.h"

namespace mls::store {

constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// Continues a hash over more bytes; start from kFnv1a64Offset.
uint64_t fnv1a64(std::string_view bytes, uint64_t state = kFnv1a64Offset);

// Error: "PATH: cannot read (reason)".
Result<std::string> file_hash_hex(const std::string& path);

}  // namespace mls::store
