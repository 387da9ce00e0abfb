// ONNX files: an onnx::Model (engine/onnx/onnx_ir.h) to bytes and back, with libonnx's
// checker and strict shape inference run on every write and read, so a file mlstudio
// writes is one that other ONNX tools accept. The only code that links protobuf.
//
//   if (auto r = onnx::write_model(model, "mlp.onnx"); !r) fail(r.error().message);
//   Result<onnx::Model> back = onnx::read_model("mlp.onnx");   // "mlp.onnx: not an ONNX model: ..."
#pragma once

#include <string>

#include "engine/core/result.h"
#include "engine/onnx/onnx_ir.h"

namespace mls::onnx {

// The newest ONNX operator set mlstudio reads and writes (libonnx 1.12's); a file that
// imports a newer one is refused.
constexpr int64_t kNewestOpset = 17;

// The model as ONNX protobuf bytes, after the checker and shape inference accepted it.
Result<std::string> serialize(const Model& m);
// Checks, then writes atomically (a failure leaves an earlier file as it was).
Result<void> write_model(const Model& m, const std::string& path);

// Parses and checks (the operator set, the window attributes libonnx's shape inference
// trusts, then libonnx's checker and inference); `source` names the bytes in messages.
Result<Model> parse(const std::string& bytes, const std::string& source);
Result<Model> read_model(const std::string& path);

// The ONNX IR version written with an operator set (opset 17 -> IR 8).
int64_t ir_version_for(int64_t opset);

}  // namespace mls::onnx
