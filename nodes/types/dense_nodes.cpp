// Dense layers and reshaping: Flatten, Reshape, Linear, Embedding.
#include <algorithm>
#include <charconv>

#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

NodeTypeDef flatten_node() {
  NodeTypeDef d = make_type("mls.flatten", "Flatten", "Layers",
                            "Keeps the batch dim and flattens the rest: [N,1,28,28] -> [N,784].",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() < 2)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; Flatten expects at least [N,d]");
    int64_t features = 1;
    for (size_t i = 1; i < s.size(); ++i) features *= s[i];
    return one(Shape{s[0], features});
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    Shape s = c.shape(0);
    return Refs{reshape(c.g(), c.inputs[0], {s[0], numel(s) / std::max<int64_t>(s[0], 1)})};
  };
  return d;
}

// The per-sample dims of a Reshape's "shape" ("28,28", "-1, 7"); at most one -1.
Result<Shape> parse_dims(const std::string& text) {
  const std::string example =
      "write the per-sample dims separated by commas, e.g. \"28,28\" or \"-1,7\"";
  if (text.find_first_not_of(" \t") == std::string::npos)
    return make_error("parameter 'shape' is empty; " + example + " (the batch dim is kept)");
  Shape dims;
  for (size_t pos = 0; pos <= text.size();) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string tok = text.substr(pos, comma - pos);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    pos = comma + 1;
    if (tok.empty())
      return make_error("parameter 'shape' \"" + text + "\" has an empty entry; " + example);
    int64_t v = 0;
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || end != tok.data() + tok.size())
      return make_error("parameter 'shape' \"" + text + "\": '" + tok + "' is not an integer; " +
                        example);
    if (v == 0 || v < -1)
      return make_error("parameter 'shape' \"" + text + "\": dim " + tok +
                        " must be >= 1, or -1 (once) to have it inferred");
    dims.push_back(v);
  }
  if (std::count(dims.begin(), dims.end(), -1) > 1)
    return make_error("parameter 'shape' \"" + text +
                      "\" has more than one -1; only one dim can be inferred");
  return dims;
}

// The reshaped per-sample dims for an input of `per_sample` values, -1 resolved.
Result<Shape> reshaped(const Shape& in, const std::string& text) {
  auto dims = parse_dims(text);
  if (!dims) return dims.error();
  int64_t per_sample = 1;
  for (size_t i = 1; i < in.size(); ++i) per_sample *= in[i];
  int64_t known = 1;
  for (int64_t v : *dims)
    if (v != -1) known *= v;
  const std::string values = "input 'in' has shape " + format_shape(in) + ", " +
                             std::to_string(per_sample) + " values per sample";
  auto hole = std::find(dims->begin(), dims->end(), -1);
  if (hole != dims->end()) {
    if (per_sample % known != 0)
      return make_error(values + ", which \"" + text +
                        "\" cannot hold: " + std::to_string(per_sample) + " is not a multiple of " +
                        std::to_string(known) + " — change the other dims");
    *hole = per_sample / known;
  } else if (known != per_sample) {
    return make_error(values + ", but \"" + text + "\" holds " + std::to_string(known) +
                      " — the dims must multiply to " + std::to_string(per_sample) +
                      " (or use -1 for one of them)");
  }
  return dims;
}

NodeTypeDef reshape_node() {
  NodeTypeDef d = make_type("mls.reshape", "Reshape", "Layers",
                            "Keeps the batch dim and gives each sample a new shape with the same "
                            "number of values, row-major as torch.reshape: [N,784] with shape "
                            "\"1,28,28\" -> [N,1,28,28]. One dim may be -1 and is inferred.",
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = {
      make_param("shape", ParamKind::String, nullptr,
                 "The per-sample dims, comma separated, without the batch: \"28,28\", \"-1,7\".")};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (in[0].empty()) return make_error("input 'in' has no batch dim");
    auto dims = reshaped(in[0], p.at("shape").get<std::string>());
    if (!dims) return dims.error();
    Shape s{in[0][0]};
    s.insert(s.end(), dims->begin(), dims->end());
    return one(std::move(s));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    auto dims = reshaped(c.shape(0), c.params.at("shape").get<std::string>());
    if (!dims) return dims.error();
    Shape s{c.batch};
    s.insert(s.end(), dims->begin(), dims->end());
    return Refs{reshape(c.g(), c.inputs[0], s)};
  };
  return d;
}

NodeTypeDef embedding_node() {
  NodeTypeDef d = make_type(
      "mls.embedding", "Embedding", "Layers",
      "A learned vector per token: token ids [N,T] -> [N,T,embedding_dim], row k of the "
      "[num_embeddings, embedding_dim] table for id k. The ids come from the data as numbers "
      "and are cast to integers (truncated); an id outside [0, num_embeddings) gives a zero "
      "vector. The table starts N(0, 0.01^2) ('normal'; PyTorch draws N(0, 1)).",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef v = make_param("num_embeddings", ParamKind::Int, nullptr,
                          "Vocabulary size: ids run from 0 to this - 1.");
  v.min = 1;
  v.max = 1 << 24;
  ParamDef dim =
      make_param("embedding_dim", ParamKind::Int, nullptr, "Length of each token's vector.");
  dim.min = 1;
  dim.max = 1 << 16;
  ParamDef init = make_param("init", ParamKind::Enum, "normal", "How the table is initialised.");
  init.choices = {"normal", "xavier_uniform", "kaiming_uniform"};
  d.params = {v, dim, init, frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() != 2)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; Embedding expects token ids [N,T] — feed it from an Input whose samples "
                        "are T token ids (or a Reshape to \"-1\")");
    auto ps = layer_params("embedding", layer_config(p, p.at("num_embeddings").get<int64_t>(),
                                                     p.at("embedding_dim").get<int64_t>()));
    if (!ps) return ps.error();
    return op_shapes("embedding", {{DType::F32, ps->at(0).shape}, {DType::I64, s}}, {},
                     "Embedding cannot take " + format_shape(s));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const LayerConfig cfg = layer_config(c.params, c.params.at("num_embeddings").get<int64_t>(),
                                         c.params.at("embedding_dim").get<int64_t>());
    auto ps = layer_param_refs(c, "embedding", cfg, !frozen(c.params));
    if (!ps) return ps.error();
    const Ref w = ps->at(0);
    Ref ids = c.g().type_of(c.inputs[0]).dtype == DType::I64 ? c.inputs[0]
                                                             : cast(c.g(), c.inputs[0], DType::I64);
    return Refs{embedding(c.g(), w, ids)};
  };
  return d;
}

NodeTypeDef linear_node() {
  NodeTypeDef d =
      make_type("mls.linear", "Linear", "Layers",
                "A fully connected layer: y = x W + b, [N,in_features] -> [N,out_features]. "
                "Over a sequence it acts on the last axis, as PyTorch's nn.Linear: [N,T,E] -> "
                "[N,T,out_features], one W for every step.",
                {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef out_features =
      make_param("out_features", ParamKind::Int, nullptr, "Number of output features.");
  out_features.min = 1;
  out_features.max = 1 << 24;  // keeps weight sizes far from int64 overflow
  d.params = {
      out_features, make_param("bias", ParamKind::Bool, true, "Learn an additive bias."),
      init_param("How the weight is initialised (the bias as PyTorch's: U(+-1/sqrt(fan_in))))."),
      frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json& params,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    // A sequence [N,T,F] is taken (the last axis, as nn.Linear); an image is refused, since
    // it reaching a Linear is almost always a missing Flatten.
    if (s.size() != 2 && s.size() != 3)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; Linear expects [N,features] — add a Flatten node before it");
    // The weight as the layer declares it, the product's shape as matmul infers it.
    auto ps = layer_params(
        "linear", layer_config(params, s.back(), params.at("out_features").get<int64_t>()));
    if (!ps) return ps.error();
    return op_shapes("matmul", {{DType::F32, s}, {DType::F32, ps->at(0).shape}},
                     {{"transpose_a", int64_t{0}}, {"transpose_b", int64_t{0}}},
                     "Linear cannot take " + format_shape(s));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const LayerConfig cfg =
        layer_config(c.params, c.shape(0).back(), c.params.at("out_features").get<int64_t>());
    auto ps = layer_param_refs(c, "linear", cfg, !frozen(c.params));
    if (!ps) return ps.error();
    const Ref w = ps->at(0), b = ps->size() > 1 ? ps->at(1) : Ref{};
    const Shape s = c.shape(0);
    if (s.size() == 2) return Refs{linear(c.g(), c.inputs[0], w, b)};
    // [N,T,F] as one [N*T,F] product: the weight's gradient is then one GEMM over every
    // row, not a batch of per-sample products summed afterwards.
    const int64_t rows = numel(s) / s.back();
    Ref y = linear(c.g(), reshape(c.g(), c.inputs[0], {rows, s.back()}), w, b);
    Shape out = s;
    out.back() = cfg.out;
    return Refs{reshape(c.g(), y, out)};
  };
  return d;
}

}  // namespace

void register_dense_nodes(NodeCatalogue& catalogue) {
  catalogue.add(flatten_node());
  catalogue.add(linear_node());
  catalogue.add(reshape_node());
  catalogue.add(embedding_node());
  // Early project files called the fully connected layer "dense" (the Keras name).
  catalogue.add_rename("mls.dense", "mls.linear");
}

}  // namespace mls::nodes
