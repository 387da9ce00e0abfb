#include "engine/ir/emitter.h"

#include "engine/core/check.h"
#include "engine/ir/graph.h"

namespace mls {

// Graph is the one emitter in this layer; it keeps constants as values of kind Const (named
// by their id, so two captured tensors never clash). The eager session overrides this.
Ref Emitter::constant(const Tensor& value) {
  auto* g = dynamic_cast<Graph*>(this);
  MLS_CHECK(g != nullptr, "Emitter::constant: this emitter cannot hold constants");
  // Kernels read contiguous memory; a strided view is packed once here.
  return g->add_constant("c" + std::to_string(g->values().size()),
                         value.is_contiguous() ? value : value.contiguous(AllocTag::Other));
}

Ref add(Emitter& e, Ref a, Ref b) { return e.emit1("add", {a, b}); }
Ref sub(Emitter& e, Ref a, Ref b) { return e.emit1("sub", {a, b}); }
Ref mul(Emitter& e, Ref a, Ref b) { return e.emit1("mul", {a, b}); }
Ref div(Emitter& e, Ref a, Ref b) { return e.emit1("div", {a, b}); }
Ref neg(Emitter& e, Ref a) { return e.emit1("neg", {a}); }
Ref scale(Emitter& e, Ref a, double alpha) { return e.emit1("scale", {a}, {{"alpha", alpha}}); }
Ref add_scalar(Emitter& e, Ref a, double value) {
  return e.emit1("add_scalar", {a}, {{"value", value}});
}
Ref exp(Emitter& e, Ref a) { return e.emit1("exp", {a}); }
Ref log(Emitter& e, Ref a) { return e.emit1("log", {a}); }
Ref relu(Emitter& e, Ref a) { return e.emit1("relu", {a}); }

Ref matmul(Emitter& e, Ref a, Ref b, bool transpose_a, bool transpose_b) {
  return e.emit1("matmul", {a, b},
                 {{"transpose_a", int64_t{transpose_a}}, {"transpose_b", int64_t{transpose_b}}});
}

Ref sum(Emitter& e, Ref a, std::vector<int64_t> axes, bool keepdims) {
  return e.emit1("sum", {a}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}

Ref mean(Emitter& e, Ref a, std::vector<int64_t> axes, bool keepdims) {
  return e.emit1("mean", {a}, {{"axes", std::move(axes)}, {"keepdims", int64_t{keepdims}}});
}

Ref reshape(Emitter& e, Ref a, const Shape& shape) {
  if (e.shape_of(a) == shape) return a;
  return e.emit1("reshape", {a}, {{"shape", shape}});
}

Ref expand(Emitter& e, Ref a, const Shape& shape) {
  if (e.shape_of(a) == shape) return a;
  return e.emit1("expand", {a}, {{"shape", shape}});
}

Ref transpose(Emitter& e, Ref a, std::vector<int64_t> perm) {
  return e.emit1("transpose", {a}, {{"perm", std::move(perm)}});
}

Ref fill(Emitter& e, const ValueType& type, double value) {
  return e.emit(
      "fill", {},
      Attrs{{"shape", type.shape}, {"value", value}, {"dtype", std::string(dtype_name(type.dtype))}})[0];
}

Ref log_softmax(Emitter& e, Ref a, int64_t axis) {
  return e.emit1("log_softmax", {a}, {{"axis", axis}});
}

Ref unbroadcast(Emitter& e, Ref g, const Shape& shape) {
  const Shape gs = e.shape_of(g);
  if (gs == shape) return g;
  MLS_CHECK(gs.size() >= shape.size(), "unbroadcast to a higher rank");
  size_t lead = gs.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < gs.size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && gs[i] != 1)) axes.push_back(static_cast<int64_t>(i));
  Ref s = axes.empty() ? g : sum(e, g, axes, true);
  return reshape(e, s, shape);
}

Ref accumulate(Emitter& e, Ref a, Ref b) {
  if (!a.valid()) return b;
  if (!b.valid()) return a;
  return add(e, a, b);
}

Ref vector_constant(Emitter& e, const std::vector<double>& values) {
  MLS_CHECK(!values.empty(), "vector_constant: no values");
  std::vector<Ref> parts;
  for (size_t i = 0; i < values.size();) {
    size_t j = i + 1;
    while (j < values.size() && values[j] == values[i]) ++j;
    parts.push_back(fill(e, {DType::F32, {static_cast<int64_t>(j - i)}}, values[i]));
    i = j;
  }
  if (parts.size() == 1) return parts[0];
  return e.emit("concat", parts, {{"axis", int64_t{0}}})[0];
}

Ref cross_entropy(Emitter& e, Ref logits, Ref labels, double label_smoothing, Ref class_weights) {
  const Shape s = e.shape_of(logits);
  MLS_CHECK(s.size() == 2, "cross_entropy expects logits [N, C]");
  int64_t classes = s[1];
  Ref logp = log_softmax(e, logits, 1);
  Ref one_hot = e.emit1("one_hot", {labels}, {{"num_classes", classes}});
  Ref target = one_hot;
  if (label_smoothing > 0) {  // (1 - eps) * onehot + eps / C
    target = add_scalar(e, scale(e, target, 1.0 - label_smoothing),
                        label_smoothing / static_cast<double>(classes));
  }
  if (class_weights.valid()) {
    MLS_CHECK(e.shape_of(class_weights) == Shape{classes},
              "cross_entropy: class_weights must be [C]");
    // PyTorch: (1 - eps) nll_weighted + eps/C sum_c w_c (-log p_c), both over sum_i w_{y_i};
    // w_{y_i} onehot_ic = w_c onehot_ic, so that is one weighted target w_c t_ic.
    Ref total = sum(e, mul(e, mul(e, target, class_weights), logp), {}, false);
    Ref weight = sum(e, mul(e, one_hot, class_weights), {}, false);
    return neg(e, div(e, total, weight));
  }
  Ref per_sample = sum(e, mul(e, target, logp), {1}, false);
  return neg(e, mean(e, per_sample, {}, false));
}

Ref linear(Emitter& e, Ref x, Ref w, Ref b) {
  Ref y = matmul(e, x, w);
  return b.valid() ? add(e, y, b) : y;
}

}  // namespace mls
