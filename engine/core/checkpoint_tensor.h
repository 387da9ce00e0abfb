// A host copy of one tensor: what a checkpoint stores (engine/train/checkpoint.h) and what an
// ONNX model holds as an initializer (engine/onnx/onnx_ir.h). In core so that ONNX needs
// nothing from train.
//
//   CheckpointTensor w{"fc1.weight", DType::F32, {10, 784}, std::vector<uint8_t>(10 * 784 * 4)};
//   size_t n = w.bytes.size() / dtype_size(w.dtype);   // 7840 elements
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/dtype.h"
#include "engine/core/shape.h"

namespace mls {

// Contiguous, row-major, its raw bytes.
struct CheckpointTensor {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<uint8_t> bytes;  // numel(shape) * dtype_size(dtype) of them
};

}  // namespace mls
