// Positions in a sequence [N,T,E]: a learned positional embedding (what lets attention,
// which by itself ignores order, tell step 3 from step 7) and the selection of the last step
// (a next-token prediction reads the state at the end of the context).
#include "engine/ops/layout.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

NodeTypeDef positional_embedding_node() {
  NodeTypeDef d = make_type(
      "mls.positional_embedding", "PositionalEmbedding", "Sequence",
      "Adds a learned vector per position to a sequence [N,T,E] -> [N,T,E]: step t gets row t "
      "of a [T,E] table (GPT's learned position embedding, wpe). Put it after the token "
      "Embedding. The table starts N(0, 0.01^2) ('normal'), the scale the Embedding node's table "
      "starts at, so that neither drowns the other (PyTorch's nn.Embedding draws N(0, 1)).",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef init = make_param("init", ParamKind::Enum, "normal", "How the table is initialised.");
  init.choices = {"normal", "xavier_uniform", "kaiming_uniform", "zeros"};
  d.params = {init, frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() != 3)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; PositionalEmbedding expects a sequence [N,T,E] — feed it from an "
                        "Embedding of token ids [N,T]");
    return one(s);
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const Shape s = c.shape(0);
    const int64_t t = s[1], e = s[2];
    // Fans as nn.Embedding(T, E) reads its weight [T, E] (a normal init ignores them).
    Ref table = c.param("weight", {t, e}, {c.params.at("init").get<std::string>(), e, t},
                        !frozen(c.params));
    return Refs{add(c.g(), c.inputs[0], table)};  // [N,T,E] + [T,E], broadcast over N
  };
  return d;
}

NodeTypeDef last_step_node() {
  NodeTypeDef d = make_type(
      "mls.last_step", "LastStep", "Sequence",
      "The last step of a sequence: [N,T,F] -> [N,F], x[:, -1] in PyTorch. A model that "
      "predicts the token after its context reads it here; its gradient flows back into that "
      "step alone (the other steps still learn through attention).",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (s.size() < 3)
      return make_error("input 'in' has shape " + format_shape(s) +
                        "; LastStep expects a sequence [N,T,features] — put it after a sequence "
                        "layer (attention, LSTM)");
    Shape out{s[0]};
    out.insert(out.end(), s.begin() + 2, s.end());
    return one(std::move(out));
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const Shape s = c.shape(0);
    Shape out{s[0]};
    out.insert(out.end(), s.begin() + 2, s.end());
    return Refs{reshape(c.g(), slice(c.g(), c.inputs[0], 1, s[1] - 1, s[1]), out)};
  };
  return d;
}

}  // namespace

void register_position_nodes(NodeCatalogue& catalogue) {
  catalogue.add(positional_embedding_node());
  catalogue.add(last_step_node());
}

}  // namespace mls::nodes
