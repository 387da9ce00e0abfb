// Shared by the libFuzzer targets: the engine's registry filled once, and a scratch file
// for parsers that read from a path (IDX, NPZ, checkpoints).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/core/op.h"
#include "engine/cpu/cpu_backend.h"

namespace mls::fuzz {

inline void init_once() {
  static bool done = [] {
    cpu::init();
    return true;
  }();
  (void)done;
}

// Writes the input to a per-process file and returns its path.
inline std::string as_file(const uint8_t* data, size_t size, const char* suffix) {
  static const std::string dir = [] {
    const char* shm = "/dev/shm";
    return std::string(::access(shm, W_OK) == 0 ? shm : "/tmp");
  }();
  const std::string path = dir + "/mls-fuzz-" + std::to_string(::getpid()) + suffix;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

}  // namespace mls::fuzz
