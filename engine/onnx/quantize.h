// Post-training int8 quantization of an onnx::Model in the QDQ form that ONNX Runtime
// fuses into integer kernels: every Conv, Gemm and MatMul gets its weight as int8 (one
// symmetric scale per output channel) behind a DequantizeLinear, and its input activation
// through QuantizeLinear -> DequantizeLinear with a uint8 scale and zero point from the
// range seen on calibration batches. Biases and everything else stay f32.
//
//   std::vector<std::string> names = onnx::calibration_values(model);     // what to measure
//   std::map<std::string, onnx::Range> ranges = ...;                       // min/max of each, over N batches
//   Result<onnx::Model> q = onnx::quantize_qdq(model, ranges);
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/onnx/onnx_ir.h"

namespace mls::onnx {

struct Range {
  float lo = 0, hi = 0;
  void add(const float* v, size_t n);
};

// The activations whose ranges quantize_qdq needs: input 0 of each Conv, Gemm and MatMul
// whose weight is a float initializer.
std::vector<std::string> calibration_values(const Model& m);

Result<Model> quantize_qdq(const Model& m, const std::map<std::string, Range>& ranges);

}  // namespace mls::onnx
