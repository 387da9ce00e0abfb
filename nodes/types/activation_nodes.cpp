// Elementwise activations, and softmax / log-softmax over the last axis.
#include "engine/ops/math.h"
#include "engine/ops/nn.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

using Emit = std::function<Ref(LowerContext& c, Ref x)>;

NodeTypeDef activation(std::string id, std::string name, std::string doc, Emit emit,
                       std::vector<ParamDef> params = {}) {
  NodeTypeDef d = make_type(std::move(id), std::move(name), "Activations", std::move(doc),
                            {{"in", PortKind::Tensor}}, {{"out", PortKind::Tensor}});
  d.params = std::move(params);
  d.infer = same_shape;
  d.lower = [emit = std::move(emit)](LowerContext& c) -> Result<Refs> {
    return Refs{emit(c, c.inputs[0])};
  };
  return d;
}

NodeTypeDef unary_op(std::string id, std::string name, std::string doc, std::string op) {
  return activation(std::move(id), std::move(name), std::move(doc),
                    [op = std::move(op)](LowerContext& c, Ref x) { return c.g().emit1(op, {x}); });
}

double fparam(const LowerContext& c, const char* name) {
  return c.params.at(name).get<double>();
}

// Softmax-like nodes normalise over the features; a [N] input has none.
NodeTypeDef last_axis(std::string id, std::string name, std::string doc, bool log) {
  NodeTypeDef d =
      activation(std::move(id), std::move(name), std::move(doc), [log](LowerContext& c, Ref x) {
        return log ? log_softmax(c.g(), x, -1) : softmax(c.g(), x, -1);
      });
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext&) -> Result<std::vector<Shape>> {
    if (in[0].size() < 2)
      return make_error("input 'in' has shape " + format_shape(in[0]) +
                        "; it normalises over the last axis, so it needs at least [N,features]");
    return one(in[0]);
  };
  return d;
}

}  // namespace

void register_activation_nodes(NodeCatalogue& catalogue) {
  catalogue.add(unary_op("mls.relu", "ReLU", "max(x, 0), elementwise.", "relu"));
  catalogue.add(unary_op("mls.tanh", "Tanh", "tanh(x), elementwise.", "tanh"));
  catalogue.add(unary_op("mls.sigmoid", "Sigmoid", "1 / (1 + exp(-x)), elementwise.", "sigmoid"));

  catalogue.add(activation(
      "mls.leaky_relu", "LeakyReLU",
      "x where x > 0, else negative_slope * x, elementwise (PyTorch's LeakyReLU).",
      [](LowerContext& c, Ref x) { return leaky_relu(c.g(), x, fparam(c, "negative_slope")); },
      {float_param("negative_slope", 0.01, 0.0, 1.0, "Slope for negative inputs.")}));

  ParamDef approximate = make_param("approximate", ParamKind::Enum, "none",
                                    "'none': the exact x * Phi(x) with the normal CDF; 'tanh': "
                                    "the tanh approximation (as GPT-2).");
  approximate.choices = {"none", "tanh"};
  approximate.saved_when_default = false;
  catalogue.add(activation("mls.gelu", "GELU",
                           "x * Phi(x), Phi the standard normal CDF, elementwise (PyTorch's GELU).",
                           [](LowerContext& c, Ref x) {
                             return gelu(c.g(), x, c.params.at("approximate").get<std::string>());
                           },
                           {approximate}));

  catalogue.add(activation("mls.silu", "SiLU", "x * sigmoid(x) (swish), elementwise.",
                           [](LowerContext& c, Ref x) { return silu(c.g(), x); }));

  catalogue.add(
      activation("mls.softplus", "Softplus",
                 "log(1 + exp(beta x)) / beta, elementwise; x itself where beta x > threshold "
                 "(PyTorch's Softplus).",
                 [](LowerContext& c, Ref x) {
                   return softplus(c.g(), x, fparam(c, "beta"), fparam(c, "threshold"));
                 },
                 {float_param("beta", 1.0, 1e-6, 1e6, "Sharpness of the curve."),
                  float_param("threshold", 20.0, 0.0, 1e6,
                              "Above beta x > threshold the output is x (numerical stability).")}));

  // elu = relu(x) + alpha (exp(min(x, 0)) - 1): exp never sees a large x (no inf * 0 in the
  // gradient), and clamp passes no gradient for x > 0, where the exp term is constant.
  catalogue.add(activation(
      "mls.elu", "ELU", "x where x > 0, else alpha (exp(x) - 1), elementwise (PyTorch's ELU).",
      [](LowerContext& c, Ref x) {
        Graph& g = c.g();
        Ref neg_part =
            add_scalar(g, exp(g, clamp(g, x, -std::numeric_limits<double>::infinity(), 0.0)), -1.0);
        return add(g, relu(g, x), scale(g, neg_part, fparam(c, "alpha")));
      },
      {float_param("alpha", 1.0, 0.0, 1e6,
                   "The value approached for very negative x is -alpha.")}));

  catalogue.add(
      last_axis("mls.softmax", "Softmax",
                "exp(x) / sum(exp(x)) over the last axis: each row becomes probabilities. "
                "Feed a CrossEntropy loss the logits before it, not its output.",
                false));
  catalogue.add(
      last_axis("mls.log_softmax", "LogSoftmax",
                "log(softmax(x)) over the last axis, computed stably: the log-probabilities "
                "that an NLL loss expects.",
                true));
}

}  // namespace mls::nodes
