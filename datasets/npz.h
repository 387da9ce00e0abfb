// NumPy .npz archives: a zip of .npy members, stored (np.savez) or deflated
// (np.savez_compressed). Reads the central directory, so zip64 archives (which np.savez
// writes for large arrays) and members in any order work.
//
//   Result<NpyArray> x = read_npz_array("mnist.npz", "x_train");  // the member x_train.npy
//   if (!x) { std::cerr << x.error().message << "\n"; return 1; }   // "mnist.npz: array ..."
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/npy.h"
#include "engine/core/result.h"

namespace mls::data {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflate
  uint16_t flags = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0, size = 0, local_offset = 0;
};

// The archive's members, from its central directory.
Result<std::vector<ZipEntry>> list_zip(const std::string& path);
// One member's bytes, inflated and CRC-checked.
Result<std::vector<uint8_t>> read_zip_entry(const std::string& path, const ZipEntry& entry);

// The array stored under `key` (member "key.npy", or "key" itself). Errors name the file and
// the key, and list the keys the archive has when `key` is not among them.
Result<NpyArray> read_npz_array(const std::string& path, const std::string& key);

}  // namespace mls::data
