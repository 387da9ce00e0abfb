// Merges: nodes with two tensor inputs that join branches of the graph (Add, Concat).
#include "engine/ops/layout.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

NodeTypeDef add_node() {
  NodeTypeDef d =
      make_type("mls.add", "Add", "Merge",
                "Elementwise a + b of two tensors of one shape: the residual (skip) "
                "connection, y = x + f(x), that lets deep networks train (ResNet, "
                "Transformer blocks). Link the block's input to 'a' and its output to 'b'.",
                {{"a", PortKind::Tensor}, {"b", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (in[0] != in[1])
      return make_error(
          "inputs 'a' " + format_shape(in[0]) + " and 'b' " + format_shape(in[1]) +
          " differ; Add needs one shape — make the branch keep its input's shape, or project "
          "the shortcut to match (a Linear, or a 1x1 Conv2d for images)");
    return one(in[0]);
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    return Refs{add(c.g(), c.inputs[0], c.inputs[1])};
  };
  return d;
}

// The axis as an index into the shapes, or an error; axis 0 (the batch) is refused.
Result<size_t> concat_axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r)
    return make_error("axis " + std::to_string(axis) + " is outside the inputs' " +
                      std::to_string(r) +
                      " axes — use 1 for the first axis after the batch, or -1 for the last");
  if (a == 0)
    return make_error("axis " + std::to_string(axis) +
                      " is the batch; concatenate along 1 or later");
  return static_cast<size_t>(a);
}

NodeTypeDef concat_node() {
  NodeTypeDef d =
      make_type("mls.concat", "Concat", "Merge",
                "Joins a and b along one axis (default 1, the first after the batch: "
                "features of [N,F], channels of [N,C,H,W], steps of [N,T,F]; -1 is the "
                "last). The shapes must agree on every other axis.",
                {{"a", PortKind::Tensor}, {"b", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef axis = make_param("axis", ParamKind::Int, 1,
                             "The axis to join along (1 = the first after the batch; "
                             "negative counts from the end).");
  axis.min = -16;
  axis.max = 16;
  d.params = {axis};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape &a = in[0], &b = in[1];
    if (a.size() != b.size())
      return make_error("inputs 'a' " + format_shape(a) + " and 'b' " + format_shape(b) +
                        " have different ranks; Concat joins tensors of one rank — Flatten or "
                        "Reshape one of them");
    auto ax = concat_axis(p.at("axis").get<int64_t>(), a.size());
    if (!ax) return ax.error();
    for (size_t i = 0; i < a.size(); ++i)
      if (i != *ax && a[i] != b[i])
        return make_error("inputs 'a' " + format_shape(a) + " and 'b' " + format_shape(b) +
                          " differ on axis " + std::to_string(i) +
                          ", not only on the joined axis " + std::to_string(*ax) +
                          " — change the axis or make those dims agree");
    // The joined shape as the op infers it.
    return op_shapes("concat", {{DType::F32, a}, {DType::F32, b}},
                     {{"axis", static_cast<int64_t>(*ax)}},
                     "Concat cannot join " + format_shape(a) + " and " + format_shape(b));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    auto ax = concat_axis(c.params.at("axis").get<int64_t>(), c.shape(0).size());
    if (!ax) return ax.error();
    return Refs{concat(c.g(), {c.inputs[0], c.inputs[1]}, static_cast<int64_t>(*ax))};
  };
  return d;
}

}  // namespace

void register_merge_nodes(NodeCatalogue& catalogue) {
  catalogue.add(add_node());
  catalogue.add(concat_node());
}

}  // namespace mls::nodes
