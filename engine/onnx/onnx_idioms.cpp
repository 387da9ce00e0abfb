// The idioms of the ONNX export (onnx_ops.h, match_idiom): several engine ops written as the
// one ONNX op the importer reads back as those very ops. Each matcher starts at the op that
// ends the pattern (an add) and takes in only values nothing else reads.
#include <optional>

#include "engine/onnx/onnx_ops.h"

namespace mls::onnx {

namespace {

struct Idioms {
  const Graph& g;
  const std::function<bool(Ref)>& single;

  // The node that defines r (its index), when r is output 0 of op `op` and read once.
  std::optional<int32_t> made_by(Ref r, std::string_view op) const {
    const Value& v = g.value(r);
    if (v.kind != ValueKind::Node || v.output_index != 0 || !single(r)) return std::nullopt;
    if (g.nodes()[static_cast<size_t>(v.node)].op->name != op) return std::nullopt;
    return v.node;
  }
  const mls::Node& node(int32_t k) const { return g.nodes()[static_cast<size_t>(k)]; }
  // A parameter or constant of shape [n].
  bool leaf_vector(Ref r, int64_t n) const {
    const Value& v = g.value(r);
    return (v.kind == ValueKind::Param || v.kind == ValueKind::Const) && v.type.shape == Shape{n};
  }
  // A shape that broadcasts C along axis 1 of a rank-`rank` tensor: [1, C, 1, ..], [C, 1, ..].
  static bool channel_shape(const Shape& s, size_t rank, int64_t c) {
    if (rank < 2 || s.empty() || s.size() > rank) return false;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != (rank - s.size() + i == 1 ? c : 1)) return false;
    return rank - s.size() <= 1;
  }
  // reshape(p) of a parameter p [C] to a channel shape: p's Ref.
  std::optional<Ref> per_channel(Ref r, size_t rank, int64_t c) const {
    auto k = made_by(r, "reshape");
    if (!k) return std::nullopt;
    const Ref p = node(*k).inputs[0];
    if (!channel_shape(g.type_of(r).shape, rank, c) || !leaf_vector(p, c)) return std::nullopt;
    return p;
  }
};

// conv2d(x, w) + reshape(b): Conv(x, w, b).
std::optional<IdiomMatch> conv_bias(const Idioms& m, const mls::Node& add) {
  for (size_t i = 0; i < 2; ++i) {
    const Ref y = add.inputs[i], b = add.inputs[1 - i];
    auto conv = m.made_by(y, "conv2d");
    if (!conv) conv = m.made_by(y, "conv_transpose2d");
    if (!conv) continue;
    const Shape ys = m.g.type_of(y).shape;
    if (m.g.type_of(add.outputs[0]).shape != ys) continue;
    auto bias = m.per_channel(b, ys.size(), ys.at(1));
    if (!bias) continue;
    auto rk = m.g.value(b).node;
    const mls::Node& c = m.node(*conv);
    return IdiomMatch{
        {*conv, rk}, {c.inputs[0], c.inputs[1], *bias}, [&c](ExportContext& root) -> Result<void> {
          ExportContext inner{root.m,      root.g,
                              c,           root.inputs,
                              root.output, root.dynamic_batch};  // no reshape: no twin needed
          return mapping_for_engine(c.op->name)->to_onnx(inner);
        }};
  }
  return std::nullopt;
}

// matmul(x, w) + b of 2-D operands and b [out]: Gemm(x, w, b).
std::optional<IdiomMatch> gemm_bias(const Idioms& m, const mls::Node& add) {
  for (size_t i = 0; i < 2; ++i) {
    const Ref y = add.inputs[i], b = add.inputs[1 - i];
    auto mm = m.made_by(y, "matmul");
    if (!mm) continue;
    const mls::Node& p = m.node(*mm);
    const Shape ys = m.g.type_of(y).shape;
    if (ys.size() != 2 || m.g.type_of(p.inputs[0]).shape.size() != 2 ||
        m.g.type_of(p.inputs[1]).shape.size() != 2)
      continue;
    if (!m.leaf_vector(b, ys[1]) || m.g.type_of(add.outputs[0]).shape != ys) continue;
    const int64_t ta = p.attrs.get_int_or("transpose_a", 0),
                  tb = p.attrs.get_int_or("transpose_b", 0);
    return IdiomMatch{
        {*mm}, {p.inputs[0], p.inputs[1], b}, [ta, tb](ExportContext& c) -> Result<void> {
          c.emit("Gemm", c.inputs, {Attribute::i("transA", ta), Attribute::i("transB", tb)});
          return {};
        }};
  }
  return std::nullopt;
}

// batch_norm_eval (engine/ops/nn.cpp): (x - rm) * (gamma * exp(-0.5 log(rv + eps))) + beta,
// the per-channel values reshaped to [1, C, 1, ..]: BatchNormalization.
std::optional<IdiomMatch> batch_norm_eval(const Idioms& m, const mls::Node& add) {
  const Shape xs = m.g.type_of(add.outputs[0]).shape;
  if (xs.size() < 2) return std::nullopt;
  const int64_t ch = xs[1];
  auto scaled = m.made_by(add.inputs[0], "mul");
  auto beta = m.per_channel(add.inputs[1], xs.size(), ch);
  if (!scaled || !beta) return std::nullopt;
  const mls::Node& mul = m.node(*scaled);
  auto centred = m.made_by(mul.inputs[0], "sub");
  auto factor_shaped = m.made_by(mul.inputs[1], "reshape");
  if (!centred || !factor_shaped) return std::nullopt;
  const mls::Node& sub = m.node(*centred);
  auto mean = m.per_channel(sub.inputs[1], xs.size(), ch);
  if (!mean || m.g.type_of(sub.inputs[0]).shape != xs) return std::nullopt;
  const Ref factor = m.node(*factor_shaped).inputs[0];
  if (!Idioms::channel_shape(m.g.type_of(mul.inputs[1]).shape, xs.size(), ch) ||
      m.g.type_of(factor).shape != Shape{ch})
    return std::nullopt;
  auto gamma_mul = m.made_by(factor, "mul");
  if (!gamma_mul) return std::nullopt;
  const mls::Node& gm = m.node(*gamma_mul);
  auto ex = m.made_by(gm.inputs[1], "exp");
  if (!ex || !m.leaf_vector(gm.inputs[0], ch)) return std::nullopt;
  auto sc = m.made_by(m.node(*ex).inputs[0], "scale");
  if (!sc || m.node(*sc).attrs.get_float_or("alpha", 0) != -0.5) return std::nullopt;
  auto lg = m.made_by(m.node(*sc).inputs[0], "log");
  if (!lg) return std::nullopt;
  auto shifted = m.made_by(m.node(*lg).inputs[0], "add_scalar");
  if (!shifted) return std::nullopt;
  const mls::Node& eps_node = m.node(*shifted);
  const Ref var = eps_node.inputs[0];
  if (!m.leaf_vector(var, ch)) return std::nullopt;
  const double eps = eps_node.attrs.get_float_or("value", 0);
  std::vector<int32_t> absorbed{*scaled,
                                m.g.value(add.inputs[1]).node,
                                *centred,
                                m.g.value(sub.inputs[1]).node,
                                *factor_shaped,
                                *gamma_mul,
                                *ex,
                                *sc,
                                *lg,
                                *shifted};
  return IdiomMatch{absorbed,
                    {sub.inputs[0], gm.inputs[0], *beta, *mean, var},
                    [eps](ExportContext& c) -> Result<void> {
                      c.emit("BatchNormalization", c.inputs, {Attribute::f("epsilon", eps)});
                      return {};
                    }};
}

}  // namespace

std::optional<IdiomMatch> match_idiom(const Graph& g, size_t root,
                                      const std::function<bool(Ref)>& single) {
  const mls::Node& n = g.nodes()[root];
  if (n.op->name != "add" || n.inputs.size() != 2) return std::nullopt;
  const Idioms m{g, single};
  if (auto r = conv_bias(m, n)) return r;
  if (auto r = gemm_bias(m, n)) return r;
  return batch_norm_eval(m, n);
}

}  // namespace mls::onnx
