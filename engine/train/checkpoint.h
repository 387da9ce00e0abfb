// Checkpoints: parameters, optimizer state, RNG state and the step count in one file,
// written atomically (a temporary file next to the target, fsync, rename), so a crash or
// a full disk mid-write leaves the previous checkpoint as it was.
//
//   Checkpoint c;
//   c.step = opt.steps();  c.epoch = epoch;
//   c.ints["seed"] = static_cast<int64_t>(seed);       // u64 values go in bit-cast
//   c.strings["optimizer.type"] = opt.config().type;
//   c.numbers["schedule.best"] = best;                 // stored as raw bits: NaN, -0.0 survive
//   for (size_t i = 0; i < params.size(); ++i)
//     c.tensors.push_back(snapshot("param/" + names[i], params[i]));
//   if (auto r = write_checkpoint(c, dir + "/last.ckpt"); !r) return r.error();
//
//   auto back = read_checkpoint(dir + "/last.ckpt");   // validated: magic, version, sizes, CRC
//   if (!back) return back.error();                    // "run-3/last.ckpt: checksum mismatch: ..."
//   const CheckpointTensor* w = back->find("param/fc1.weight");
//   if (!w) return make_error(...);
//   if (auto r = restore(*w, params[0]); !r) return r.error();  // dtype and shape must match
//
// File layout, version 1 (little-endian; "str" is a u32 byte length then the bytes, no NUL):
//
//   offset 0   char[8]  magic "MLSCKPT\0"
//          8   u32      format version (1)
//         12   u64      file size in bytes, the final CRC included
//         20   u32      CRC-32 of bytes [0, 20): a damaged size field reads as corruption,
//                       not as truncation
//         24   i64      step, then i64 epoch
//              u32 n, then n x (str key, i64 value)          ints
//              u32 n, then n x (str key, u64 IEEE-754 bits)  numbers
//              u32 n, then n x (str key, str value)          strings
//              u32 n, then n x tensor entry:                 tensor table
//                str name, str dtype ("f32", "i64", ...), u32 rank, i64 dims[rank],
//                u64 data offset (from the file's start; a multiple of 64 unless the tensor
//                is empty), u64 byte count
//              tensor data: each tensor's raw bytes at its offset, in table order, zero
//                padding in between (aligned so a later reader may map them directly)
//   size - 4   u32      CRC-32 (IEEE 802.3, as zlib's crc32) of bytes [0, size - 4)
//
// Map keys are written sorted (std::map order), tensors in the order given, so the same
// checkpoint always gives the same bytes. A reader refuses a version newer than its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/checkpoint_tensor.h"  // CheckpointTensor, a host copy of one tensor
#include "engine/core/dtype.h"
#include "engine/core/result.h"
#include "engine/core/shape.h"
#include "engine/core/tensor.h"

namespace mls {

inline constexpr uint32_t kCheckpointVersion = 1;

struct Checkpoint {
  int64_t step = 0, epoch = 0;                 // completed optimisation steps / epochs
  std::map<std::string, int64_t> ints;         // "seed", "optimizer.steps", ...
  std::map<std::string, double> numbers;       // "schedule.best", "early_stop.best", ...
  std::map<std::string, std::string> strings;  // "optimizer.type", "model.hash", ...
  std::vector<CheckpointTensor> tensors;       // "param/fc1.weight", "opt/fc1.weight/0", ...

  // The tensor called `name`, or nullptr.
  const CheckpointTensor* find(std::string_view name) const;
};

// Copies a tensor (any backend, any dtype, views included) to the host.
CheckpointTensor snapshot(const std::string& name, const Tensor& t);
// Copies a checkpointed tensor into `t`, which must have its dtype and shape and be
// contiguous; the message names the tensor and both types.
Result<void> restore(const CheckpointTensor& c, Tensor& t);

// Writes `path` atomically. On any failure (a missing or read-only directory, a full
// disk) the previous file is untouched, no temporary file remains, and the message names
// the path and the system's reason.
Result<void> write_checkpoint(const Checkpoint& c, const std::string& path);
// Reads and validates a checkpoint; a truncated, corrupt or foreign file gives a message
// naming the file and what is wrong with it.
Result<Checkpoint> read_checkpoint(const std::string& path);

// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), continuing from `crc`:
// crc32(b, n2, crc32(a, n1)) == crc32(a followed by b). crc32("123456789") == 0xCBF43926.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace mls
