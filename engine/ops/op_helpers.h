// Shared pieces of op declarations: type inference helpers and float64 reference helpers.
// Internal to engine/ops.
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <vector>

#include "engine/core/op.h"
#include "engine/ir/emitter.h"

namespace mls::ops {

using Types = std::vector<ValueType>;
using InTypes = std::span<const ValueType>;

Result<Types> infer_same(InTypes in, const Attrs&);
Result<Types> infer_broadcast(InTypes in, const Attrs&);
// Reduction output shape for `axes` (empty: all) with keepdims; error names a bad axis.
Result<Shape> reduced_shape(const Shape& in, const std::vector<int64_t>& axes, bool keepdims);
// Normalised, sorted axes (empty -> all).
std::vector<int64_t> norm_axes(const std::vector<int64_t>& axes, int64_t rank);
// Shared by the reductions (attrs "axes", "keepdims"): type rule, the gradient broadcast
// back over the reduced axes, and how many elements each output reduces.
Result<Types> infer_reduce(InTypes in, const Attrs& a);
Ref spread(Emitter& e, Ref g, Ref x, const Attrs& a);
int64_t reduced_count(const Shape& xs, const std::vector<int64_t>& axes);

// Declares a broadcasting binary op with the standard samples (same shape, row broadcast,
// both broadcast), floats drawn in [lo, hi).
void define_binary(OpRegistry& reg, const char* name, std::function<double(double, double)> f, VjpFn vjp,
                   JvpFn jvp, double lo, double hi, const char* doc, InferFn infer = infer_broadcast);
// An error unless every input is a float tensor and two inputs share their dtype.
Result<void> require_float(InTypes in);

RefArray ref_unary(const RefArray& a, const std::function<double(double)>& f);
RefArray ref_binary(const RefArray& a, const RefArray& b, const std::function<double(double, double)>& f);
// Index of an element of `a` (broadcast into `out_shape`) for flat output index i.
int64_t broadcast_index(const Shape& a, const Shape& out_shape, int64_t i);

// Sample helpers
OpSample sample(std::vector<ValueType> inputs, Attrs attrs = {}, std::string note = "");
inline ValueType f32(Shape s) { return {DType::F32, std::move(s)}; }
inline ValueType i64(Shape s) { return {DType::I64, std::move(s)}; }
// Every dtype but f32: the others a dtype-generic kernel (a copy, a gather) registers.
inline constexpr DType kNonF32Dtypes[] = {DType::F16, DType::BF16, DType::I64, DType::I32,
                                          DType::U8,  DType::I8,   DType::Bool};
// Copies of `s` with its f32 inputs at each of `dtypes` (forward_only): the conformance
// suite then runs those dtypes' kernels, which it requires of every registered kernel.
std::vector<OpSample> at_dtypes(const OpSample& s, std::span<const DType> dtypes);
// `samples`, then at_dtypes of the first one.
std::vector<OpSample> with_dtypes(std::vector<OpSample> samples, std::span<const DType> dtypes);

void register_elementwise_ops(OpRegistry& reg);
void register_reduce_ops(OpRegistry& reg);
void register_shape_ops(OpRegistry& reg);
void register_nn_ops(OpRegistry& reg);
void register_optimizer_ops(OpRegistry& reg);
void register_math_ops(OpRegistry& reg);      // math_ops.cpp: more unary/binary, comparisons, where, cast
void register_layout_ops(OpRegistry& reg);    // layout_ops.cpp: reductions max/min/var, slice, concat, ...
void register_conv_ops(OpRegistry& reg);      // conv_ops.cpp: conv2d, conv_transpose2d, pooling
void register_norm_ops(OpRegistry& reg);      // norm_ops.cpp: softmax, norms, dropout, embedding, losses
void register_fused_ops(OpRegistry& reg);     // fused_ops.cpp: fused_elementwise, linear_act, conv2d_act
void register_attention_ops(OpRegistry& reg);  // attention_ops.cpp: attention, attention_backward

}  // namespace mls::ops
