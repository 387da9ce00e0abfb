// Ops are declared once: name, attributes, type inference, reverse-mode rule written with
// other ops, forward-mode rule, a float64 reference (what the conformance suite checks
// every kernel against) and sample cases; kernels per (device, dtype) register apart.
//
//   OpDef& d = reg.define({.name = "exp", .num_inputs = 1, .infer = infer_same,
//                          .vjp = [](const GradContext& c) { return Refs{mul(c.e, c.gout(0), c.out(0))}; },
//                          ...});
//   reg.register_kernel("exp", DeviceKind::CPU, DType::F32, cpu_exp_f32);
//   const OpDef* op = reg.find("exp");
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/backend.h"
#include "engine/core/result.h"
#include "engine/core/value.h"

namespace mls {

class Emitter;
using Refs = std::vector<Ref>;

// What a reverse-mode rule sees: the forward node and the gradients of its outputs.
struct GradContext {
  Emitter& e;
  std::span<const Ref> inputs;
  std::span<const Ref> outputs;
  std::span<const Ref> grad_outputs;  // an invalid Ref: no gradient reaches that output
  const Attrs& attrs;
  uint64_t needs_mask = ~uint64_t{0};  // bit i: input i needs a gradient (rules may skip others)
  Ref in(size_t i) const { return inputs[i]; }
  Ref out(size_t i) const { return outputs[i]; }
  Ref gout(size_t i) const { return grad_outputs[i]; }
  bool needs(size_t i) const { return (needs_mask >> i) & 1; }
};

// What a forward-mode rule sees: the forward node and the tangents of its inputs.
struct JvpContext {
  Emitter& e;
  std::span<const Ref> inputs;
  std::span<const Ref> outputs;
  std::span<const Ref> tangents;  // an invalid Ref: that input's tangent is zero
  const Attrs& attrs;
  Ref in(size_t i) const { return inputs[i]; }
  Ref out(size_t i) const { return outputs[i]; }
  Ref tan(size_t i) const { return tangents[i]; }
};

// A dense float64 array for reference implementations.
struct RefArray {
  Shape shape;
  std::vector<double> v;
};

// A sample case for the conformance suite: input types, attributes, and how to draw inputs.
struct OpSample {
  std::vector<ValueType> inputs;
  Attrs attrs;
  // Integer inputs are drawn in [0, int_high); floats uniform in [lo, hi).
  int64_t int_high = 4;
  double lo = -1.0, hi = 1.0;
  // Floats closer than this to zero are pushed away (kinks break finite differences).
  double min_abs = 0.0;
  std::string note;
  // A copy of another sample at another dtype (ops::at_dtypes), there so the kernel for that
  // dtype is run: its forward is checked against the reference; the derivative rules do
  // not depend on the dtype and are checked on the f32 sample.
  bool forward_only = false;
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  bool required = true;
};

using InferFn = std::function<Result<std::vector<ValueType>>(std::span<const ValueType>, const Attrs&)>;
using VjpFn = std::function<Refs(const GradContext&)>;  // one entry per input (invalid: none)
using JvpFn = std::function<Refs(const JvpContext&)>;   // one entry per output
using ReferenceFn = std::function<std::vector<RefArray>(std::span<const RefArray>, const Attrs&)>;
// Floating-point operations of one call, from the operand types (multiply and add count as
// two): what the op profiler divides by time and the pre-flight estimate costs. Unset: one
// per element of output 0 (elementwise work).
using FlopsFn = double (*)(std::span<const ValueType> inputs, std::span<const ValueType> outputs, const Attrs&);
// The scratch bytes one call of a backend's kernel needs beyond its outputs (packed or
// padded copies of operands, per-thread partial sums): declared per (op, device, dtype) so
// the compiled plan places it in its arena, where the memory profiler sees it.
using WorkspaceFn = size_t (*)(std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                               const Attrs& attrs, const Backend& backend);

enum class OpKind : uint8_t {
  Compute,  // differentiable (or piecewise so): must have vjp and jvp
  NonDiff,  // integer or discrete output (argmax, one_hot, fill): no gradient by nature
  Update,   // mutates its inputs in place (optimizer steps); checked by value only
};

struct OpDef {
  std::string name;
  int num_inputs = 1;  // -1: variadic
  int num_outputs = 1;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  VjpFn vjp;
  JvpFn jvp;
  ReferenceFn reference;
  std::function<std::vector<OpSample>()> samples;
  OpKind kind = OpKind::Compute;
  bool view = false;  // output 0 is a view of input 0 (reshape): executors alias, no copy
  // Output 0 may take the buffer of any input of its own shape and dtype: every kernel of
  // the op (each device) reads element i of that input before writing element i of the
  // output and reads no other element of it. Executors use this for in-place reuse.
  bool inplace = false;
  // Inputs an Update op writes (their indices).
  std::vector<int> mutated_inputs;
  std::string doc;
  FlopsFn flops = nullptr;

  // Kernels, by device and by the dtype of input 0 (or of output 0 for ops without inputs).
  std::array<std::array<KernelFn, 8>, kNumDeviceKinds> kernels{};
  KernelFn kernel(DeviceKind d, DType t) const {
    return kernels[static_cast<size_t>(d)][static_cast<size_t>(t)];
  }
  // The workspace each kernel declares (none: it needs none).
  std::array<std::array<WorkspaceFn, 8>, kNumDeviceKinds> workspaces{};
  WorkspaceFn workspace(DeviceKind d, DType t) const {
    return workspaces[static_cast<size_t>(d)][static_cast<size_t>(t)];
  }
};

class OpRegistry {
 public:
  OpDef& define(OpDef def);  // asserts the name is new
  const OpDef* find(std::string_view name) const;
  std::vector<const OpDef*> all() const;
  void register_kernel(std::string_view op, DeviceKind device, DType dtype, KernelFn fn);
  void register_workspace(std::string_view op, DeviceKind device, DType dtype, WorkspaceFn fn);
  bool supports(std::string_view op, DeviceKind device, DType dtype) const;

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
};

// The process-wide registry. engine_init() fills it with the ops explicitly; each backend's
// init (cpu::init() in engine/cpu) adds its kernels. app/ and the tests call those once at
// start-up.
OpRegistry& op_registry();
// Defined in engine/ops (op_helpers.cpp), which holds the ops: core names none of them.
void engine_init();

// FLOPs of one call of `op` (OpDef::flops, else one per output element; none for a view).
double op_flops(const OpDef& op, std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                const Attrs& attrs);
// The FLOPs rules that several ops share: a matrix product of inputs 0 and 1 (attrs
// transpose_a) and a convolution whose weight is input 1 (2 x outputs x weight numel / its first dim).
double matmul_flops(std::span<const ValueType> inputs, std::span<const ValueType> outputs, const Attrs& attrs);
double conv_flops(std::span<const ValueType> inputs, std::span<const ValueType> outputs, const Attrs& attrs);
// Per element of input 0 rather than of the output: conv2d_backward_input and conv_transpose2d.
double conv_flops_per_input(std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                            const Attrs& attrs);
double conv_backward_weight_flops(std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                                  const Attrs& attrs);

// The dtype that selects an op's kernel.
DType kernel_dtype(const OpDef& op, std::span<const ValueType> inputs,
                   std::span<const ValueType> outputs);

}  // namespace mls
