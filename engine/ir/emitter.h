// Emitter: where ops go. The static Graph records them as SSA nodes; the eager session
// runs them at once. Gradient rules are written against this interface, so one rule
// serves both paths and a gradient is itself a graph (higher order for free).
//
//   Ref y = add(e, matmul(e, x, w), b);        // broadcasting add
//   Ref l = mean(e, relu(e, y), {}, false);    // all axes
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/op.h"
#include "engine/core/value.h"

namespace mls {

class Tensor;

class Emitter {
 public:
  virtual ~Emitter() = default;
  // Emits one op; asserts that its inputs type-check (callers that handle user input
  // check first, e.g. Graph::add_node returns a Result).
  virtual Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) = 0;
  // By value: emitting ops may move the emitter's storage, so references would dangle.
  virtual ValueType type_of(Ref r) const = 0;
  // Names what the next ops belong to (the graph labels its nodes with it; eager ignores it).
  virtual void set_scope(const std::string& label) { (void)label; }

  // Emits one op and returns its first output. The eager session overrides it to skip the
  // Refs vector: a tiny eager op costs tens of nanoseconds, and one allocation is many of them.
  virtual Ref emit_first(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) {
    return emit(op, inputs, attrs)[0];
  }
  // A constant tensor (captured by a traced function, say): a graph constant in a Graph, a
  // leaf in an eager session. Emitters that cannot hold one assert.
  virtual Ref constant(const Tensor& value);

  Ref emit1(std::string_view op, std::initializer_list<Ref> inputs, const Attrs& attrs = {}) {
    return emit_first(op, std::span<const Ref>(inputs.begin(), inputs.size()), attrs);
  }
  Shape shape_of(Ref r) const { return type_of(r).shape; }
};

// Building blocks used by gradient rules, composites and model builders.
Ref add(Emitter& e, Ref a, Ref b);
Ref sub(Emitter& e, Ref a, Ref b);
Ref mul(Emitter& e, Ref a, Ref b);
Ref div(Emitter& e, Ref a, Ref b);
Ref neg(Emitter& e, Ref a);
Ref scale(Emitter& e, Ref a, double alpha);
Ref add_scalar(Emitter& e, Ref a, double value);
Ref exp(Emitter& e, Ref a);
Ref log(Emitter& e, Ref a);
Ref relu(Emitter& e, Ref a);
Ref matmul(Emitter& e, Ref a, Ref b, bool transpose_a = false, bool transpose_b = false);
// Empty axes: all axes.
Ref sum(Emitter& e, Ref a, std::vector<int64_t> axes, bool keepdims);
Ref mean(Emitter& e, Ref a, std::vector<int64_t> axes, bool keepdims);
Ref reshape(Emitter& e, Ref a, const Shape& shape);
Ref expand(Emitter& e, Ref a, const Shape& shape);
Ref transpose(Emitter& e, Ref a, std::vector<int64_t> perm);
Ref fill(Emitter& e, const ValueType& type, double value);
Ref log_softmax(Emitter& e, Ref a, int64_t axis);
// Sums a broadcast gradient back down to `shape` (the inverse of broadcasting).
Ref unbroadcast(Emitter& e, Ref g, const Shape& shape);
// Adds two optional gradients (an invalid Ref is zero).
Ref accumulate(Emitter& e, Ref a, Ref b);

// f32 [K] holding `values`: fills joined by one concat (runs of equal values share a
// fill). For small tables built by composites; constant folding makes it one constant.
Ref vector_constant(Emitter& e, const std::vector<double>& values);

// Composites: built from other ops, so every backend and every derivative comes free.
// Mean cross-entropy of logits [N,C] against integer labels [N], with label smoothing.
// class_weights (f32 [C], optional) weighs each sample by its class as PyTorch's
// `weight=`: sum_i sum_c w_c t_ic (-log p_ic) / sum_i w_{y_i}, t the (smoothed) target.
Ref cross_entropy(Emitter& e, Ref logits, Ref labels, double label_smoothing = 0.0,
                  Ref class_weights = {});
// y = x W + b with W [in, out] (b optional).
Ref linear(Emitter& e, Ref x, Ref w, Ref b);

}  // namespace mls
