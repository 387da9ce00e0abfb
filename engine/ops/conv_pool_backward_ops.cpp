// conv2d_pool_backward_weight(x, gp, y) -> (dw, db): a convolution's weight and bias
// gradients where the gradient of its output y reaches it through a 2x2, stride-2 max pool of
// relu(y) — LeNet's first convolution. With g = max_pool2d_relu_backward(gp, y):
//   dw = conv2d_backward_weight(x, g)         (the convolution's attributes, weight_shape)
//   db = sum(g, axes [0, 2, 3], keepdims)     [1, O, 1, 1]
// The pool-gradient fusion pass makes it of a step graph after autodiff, where g has no other
// reader: the kernel routes each sample's gradient where the weight gradient reads it, so the
// [N, O, OH, OW] gradient is neither written nor read back (twice: the weight gradient and the
// bias sum). Its rules differentiate that composite; its reference composes the three ops'.
#include "engine/ops/conv.h"
#include "engine/ops/op_helpers.h"
#include "engine/ops/tape_emitter.h"

namespace mls::ops {

namespace {

const Attrs kPool2x2{{"kernel", std::vector<int64_t>{2, 2}}};
const std::vector<int64_t> kBiasAxes{0, 2, 3};

const OpDef& op(std::string_view name) {
  const OpDef* d = op_registry().find(name);
  MLS_CHECK(d != nullptr, "conv2d_pool_backward_weight: an op it is made of is not registered");
  return *d;
}

Result<Types> infer_conv_pool_backward(InTypes in, const Attrs& a) {  // (x, gp, y)
  if (in.size() != 3)
    return make_error("takes (x, gp, y), got " + std::to_string(in.size()) + " inputs");
  const Shape& y = in[2].shape;
  if (y.size() != 4 || y[2] % 2 != 0 || y[3] % 2 != 0)
    return make_error("expects y [N, O, OH, OW] with OH and OW even (2x2 windows, stride 2), got " +
                      shape_str(y));
  const Shape gp{y[0], y[1], y[2] / 2, y[3] / 2};
  if (in[1].shape != gp) return make_error("gp must be y's pooled shape " + shape_str(gp));
  if (in[1].dtype != in[2].dtype) return make_error("gp and y must have one dtype");
  const ValueType xg[] = {in[0], in[2]};  // the weight gradient's (x, g): g is y-shaped
  auto dw = op("conv2d_backward_weight").infer(xg, a);
  if (!dw) return dw.error();
  return Types{(*dw)[0], ValueType{in[2].dtype, Shape{1, y[1], 1, 1}}};
}

Refs conv_pool_backward_composite(Emitter& e, std::span<const Ref> in, const Attrs& a) {
  const Ref g = e.emit1("max_pool2d_relu_backward", {in[1], in[2]}, kPool2x2);
  const Ref dw = e.emit1("conv2d_backward_weight", {in[0], g}, a);
  return {dw, sum(e, g, kBiasAxes, true)};
}

std::vector<RefArray> conv_pool_backward_ref(std::span<const RefArray> in, const Attrs& a) {
  const RefArray gy[] = {in[1], in[2]};
  const RefArray g = op("max_pool2d_relu_backward").reference(gy, kPool2x2)[0];
  const RefArray xg[] = {in[0], g};
  const RefArray dw = op("conv2d_backward_weight").reference(xg, a)[0];
  const int64_t n = g.shape[0], o = g.shape[1], plane = g.shape[2] * g.shape[3];
  RefArray db{{1, o, 1, 1}, std::vector<double>(static_cast<size_t>(o))};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < o; ++c)
      for (int64_t p = 0; p < plane; ++p)
        db.v[static_cast<size_t>(c)] += g.v[static_cast<size_t>((i * o + c) * plane + p)];
  return {dw, db};
}

// The three nodes it stands for: the pool's routing, the weight gradient, the bias sum.
double conv_pool_backward_flops(std::span<const ValueType> in, std::span<const ValueType> out,
                                const Attrs& a) {
  const ValueType xg[] = {in[0], in[2]};
  return op("conv2d_backward_weight").flops(std::span<const ValueType>(xg), out.first(1), a) +
         2.0 * static_cast<double>(numel(in[2].shape));
}

}  // namespace

void register_conv_pool_backward_ops(OpRegistry& reg) {
  reg.define(
      {.name = "conv2d_pool_backward_weight",
       .num_inputs = 3,
       .num_outputs = 2,
       .attrs = {{"stride", AttrKind::Ints, false},
                 {"padding", AttrKind::Ints, false},
                 {"dilation", AttrKind::Ints, false},
                 {"groups", AttrKind::Int, false},
                 {"weight_shape", AttrKind::Ints}},
       .infer = infer_conv_pool_backward,
       .vjp = [](const GradContext& c) {
         return composite_vjp(c, conv_pool_backward_composite, "conv pool backward");
       },
       .jvp = [](const JvpContext& c) {
         return composite_jvp(c, conv_pool_backward_composite, "conv pool backward");
       },
       .reference = conv_pool_backward_ref,
       .samples =
           [] {
             using Ints = std::vector<int64_t>;
             // Only the values are checked: a finite difference across a window's argmax or
             // relu's kink is not a derivative, and the pass makes the op after autodiff.
             Attrs lenet{{"padding", Ints{2}}, {"weight_shape", Ints{3, 1, 5, 5}}};
             Attrs wide{{"padding", Ints{1, 0}}, {"weight_shape", Ints{4, 2, 3, 2}}};
             std::vector<OpSample> v{
                 sample({f32({2, 1, 8, 8}), f32({2, 3, 4, 4}), f32({2, 3, 8, 8})}, lenet,
                        "LeNet's conv1 in small: 1 -> 3 channels, 5x5, padding 2"),
                 sample({f32({3, 2, 6, 9}), f32({3, 4, 3, 4}), f32({3, 4, 6, 8})}, wide,
                        "2 -> 4 channels, 3x2, padding 1x0")};
             for (OpSample& s : v) s.forward_only = true;
             return v;
           },
       .doc = "a convolution's weight and bias gradients through a 2x2, stride-2 max pool of "
              "relu(y): (x, gp, y) -> (conv2d_backward_weight(x, g), sum of g over N, H, W "
              "[1,O,1,1]) with g = max_pool2d_relu_backward(gp, y), never written. Made of the "
              "step graph by the pool-gradient fusion pass",
       .flops = conv_pool_backward_flops});
}

}  // namespace mls::ops
