// The window attributes of ONNX's Conv, ConvTranspose, MaxPool and AveragePool read once,
// as the engine's Conv2dParams and Pool2dParams (engine/ops/conv.h): ONNX's defaults (no
// padding, count_include_pad 0), pads as [top, left, bottom, right], and what the engine
// cannot run refused with the reason. The engine-graph importer (onnx_ops.cpp) and the
// project importer (nodes/onnx_import.cpp) both read windows here.
//
//   Result<Conv2dParams> p = onnx::conv_window(node);   // node.op_type "Conv" or "ConvTranspose"
//   if (!p) why = p.error().message;                     // "asymmetric pads are not supported"
//   Result<Pool2dParams> q = onnx::pool_window(node);   // MaxPool, AveragePool
#pragma once

#include "engine/core/result.h"
#include "engine/onnx/onnx_ir.h"
#include "engine/ops/conv.h"

namespace mls::onnx {

Result<Conv2dParams> conv_window(const Node& n);
Result<Pool2dParams> pool_window(const Node& n);

}  // namespace mls::onnx
