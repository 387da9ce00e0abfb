// Sequence layers over [N,T,F]: LSTM, GRU (engine/ops/rnn.h) and multi-head
// self-attention (engine/ops/attention.h).
#include "engine/ops/attention.h"
#include "engine/ops/rnn.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

Result<void> expect_sequence(const Shape& s, const std::string& layer) {
  if (s.size() != 3)
    return make_error(
        "input 'in' has shape " + format_shape(s) + "; " + layer +
        " expects a sequence [N,T,features] — add a Reshape before it (shape \"28,28\" "
        "reads a 28x28 image as 28 steps of 28 values) or an Embedding for token ids");
  return {};
}

ParamDef hidden_size_param() {
  ParamDef h =
      make_param("hidden_size", ParamKind::Int, nullptr, "Features of the hidden state (H).");
  h.min = 1;
  h.max = 1 << 14;
  return h;
}

// LSTM and GRU: `gates` blocks of H columns in their weights (4 and 3).
NodeTypeDef recurrent_node(std::string id, std::string name, std::string doc, int64_t gates) {
  NodeTypeDef d = make_type(std::move(id), std::move(name), "Sequence", std::move(doc),
                            {{"in", PortKind::Tensor}},
                            {{"out", PortKind::Tensor}, {"last", PortKind::Tensor}});
  d.params = {hidden_size_param(),
              make_param("bias", ParamKind::Bool, true,
                         "Learn the input and recurrent biases (b_ih, b_hh)."),
              frozen_param()};
  const std::string layer = d.display_name;
  d.infer = [layer](const std::vector<Shape>& in, const json& p,
                    const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_sequence(s, layer); !r) return r.error();
    const int64_t h = p.at("hidden_size").get<int64_t>();
    return std::vector<Shape>{{s[0], s[1], h}, {s[0], h}};
  };
  d.lower = [gates](LowerContext& c) -> Result<Refs> {
    const Shape s = c.shape(0);
    const int64_t f = s[2], h = c.params.at("hidden_size").get<int64_t>(), gh = gates * h;
    const bool train = !frozen(c.params);
    // PyTorch: every weight and bias U(-1/sqrt(H), 1/sqrt(H)).
    const ParamInit init{"uniform_fan_in", h, gh};
    Ref w_ih = c.param("weight_ih", {f, gh}, init, train);
    Ref w_hh = c.param("weight_hh", {h, gh}, init, train);
    Ref b_ih, b_hh;
    if (c.params.at("bias").get<bool>()) {
      b_ih = c.param("bias_ih", {gh}, init, train);
      b_hh = c.param("bias_hh", {gh}, init, train);
    }
    Graph& g = c.g();
    Ref h0 = fill(g, {DType::F32, {s[0], h}}, 0.0);
    Unrolled r;
    if (gates == 4) {
      Ref b = b_ih.valid() ? add(g, b_ih, b_hh) : Ref{};
      r = lstm(g, c.inputs[0], h0, fill(g, {DType::F32, {s[0], h}}, 0.0), w_ih, w_hh, b);
    } else {
      r = gru(g, c.inputs[0], h0, w_ih, w_hh, b_ih, b_hh);
    }
    return Refs{r.out, r.last[0]};
  };
  return d;
}

std::string divisors(int64_t n) {
  std::string out;
  for (int64_t k = 1; k <= n && out.size() < 40; ++k)
    if (n % k == 0) out += (out.empty() ? "" : ", ") + std::to_string(k);
  return out;
}

NodeTypeDef attention_node() {
  NodeTypeDef d = make_type(
      "mls.multi_head_attention", "MultiHeadAttention", "Sequence",
      "Multi-head self-attention over a sequence [N,T,E] -> [N,T,E], as PyTorch's "
      "nn.MultiheadAttention(E, num_heads, batch_first=True) called with query = key = value: "
      "each step attends to every step (with 'causal', only to itself and earlier steps, as a "
      "language model must). E is split into num_heads heads of E/num_heads features. Weights "
      "start as PyTorch's (q, k, v projections Xavier-uniform, the output projection "
      "U(+-1/sqrt(E)), biases zero).",
      {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  ParamDef heads =
      make_param("num_heads", ParamKind::Int, 1, "Number of heads; must divide E, the last dim.");
  heads.min = 1;
  heads.max = 1 << 12;
  d.params = {heads,
              make_param("causal", ParamKind::Bool, false,
                         "Hide later steps from each step (autoregressive)."),
              make_param("bias", ParamKind::Bool, true, "Learn biases for the four projections."),
              frozen_param()};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext&) -> Result<std::vector<Shape>> {
    const Shape& s = in[0];
    if (auto r = expect_sequence(s, "MultiHeadAttention"); !r) return r.error();
    const int64_t h = p.at("num_heads").get<int64_t>();
    if (s[2] % h != 0)
      return make_error("num_heads " + std::to_string(h) + " does not divide the embedding size " +
                        std::to_string(s[2]) + " (the last dim of " + format_shape(s) +
                        ") — use one of " + divisors(s[2]));
    return one(s);
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    const int64_t e = c.shape(0)[2];
    const bool train = !frozen(c.params);
    // PyTorch's in_proj_weight [3E, E] is Xavier-uniform as one matrix: fans E and 3E.
    const ParamInit in_init{"xavier_uniform", e, 3 * e}, zeros{"zeros", e, e};
    Ref wq = c.param("q_proj.weight", {e, e}, in_init, train);
    Ref wk = c.param("k_proj.weight", {e, e}, in_init, train);
    Ref wv = c.param("v_proj.weight", {e, e}, in_init, train);
    Ref wo = c.param("out_proj.weight", {e, e}, {"uniform_fan_in", e, e}, train);
    AttentionBiases b;
    if (c.params.at("bias").get<bool>()) {
      b.q = c.param("q_proj.bias", {e}, zeros, train);
      b.k = c.param("k_proj.bias", {e}, zeros, train);
      b.v = c.param("v_proj.bias", {e}, zeros, train);
      b.o = c.param("out_proj.bias", {e}, zeros, train);
    }
    return Refs{multi_head_attention(c.g(), c.inputs[0], wq, wk, wv, wo, b,
                                     c.params.at("num_heads").get<int64_t>(),
                                     c.params.at("causal").get<bool>())};
  };
  return d;
}

}  // namespace

void register_sequence_nodes(NodeCatalogue& catalogue) {
  catalogue.add(recurrent_node(
      "mls.lstm", "LSTM",
      "A one-layer LSTM over a sequence [N,T,F] from a zero state, as PyTorch's nn.LSTM(F, "
      "hidden_size, batch_first=True): 'out' is the hidden state after every step [N,T,H], "
      "'last' the one after the last step [N,H] (feed it to a Linear to classify the sequence). "
      "Gates i, f, g, o; every weight starts U(+-1/sqrt(H)).",
      4));
  catalogue.add(recurrent_node(
      "mls.gru", "GRU",
      "A one-layer GRU over a sequence [N,T,F] from a zero state, as PyTorch's nn.GRU(F, "
      "hidden_size, batch_first=True): 'out' is the hidden state after every step [N,T,H], "
      "'last' the one after the last step [N,H]. Gates r, z, n; every weight starts "
      "U(+-1/sqrt(H)).",
      3));
  catalogue.add(attention_node());
}

}  // namespace mls::nodes
