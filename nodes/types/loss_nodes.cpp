// Losses. Exactly one per graph; whatever feeds its first input is the model's output.
//
// Classification losses (CrossEntropy, NLL) need class labels. The others compare the
// prediction with values: with value targets (regression data) the prediction has the
// targets' shape [N, *target shape]; with class labels they compare it with
// one_hot(labels, C), C the prediction's columns (MSE or BCE on one-hot targets).
#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/ops/nn.h"
#include "nodes/types/type_kit.h"

namespace mls::nodes {

namespace {

// [N, *target_shape] as the shape rules write it (batch -1).
Shape target_value_shape(const InferContext& ctx) {
  Shape s{-1};
  s.insert(s.end(), ctx.target_shape.begin(), ctx.target_shape.end());
  return s;
}

bool same_batch(int64_t a, int64_t b) {
  return a < 0 || b < 0 || a == b;
}

// The checks shared by the class-label losses: `first` is the name of the model-output port.
Result<void> check_classes(const std::string& loss, const std::string& first, const Shape& out,
                           const Shape& labels, const InferContext& ctx) {
  if (ctx.regression())
    return make_error(loss + " needs class labels, but the dataset's targets are values " +
                      format_shape(labels) + " — use a regression loss (MSE, L1, Huber)");
  if (out.size() != 2)
    return make_error("input '" + first + "' has shape " + format_shape(out) + "; " + loss +
                      " expects [N,classes]");
  if (labels.size() != 1)
    return make_error("input 'labels' has shape " + format_shape(labels) + "; " + loss +
                      " expects [N]");
  if (!same_batch(out[0], labels[0]))
    return make_error(first + " have batch size " + std::to_string(out[0]) + " but labels have " +
                      std::to_string(labels[0]));
  if (ctx.num_classes > 0 && out[1] != ctx.num_classes)
    return make_error(first + " have " + std::to_string(out[1]) + " classes but the dataset has " +
                      std::to_string(ctx.num_classes));
  return {};
}

// "1, 2.5, 0.5" -> {1, 2.5, 0.5}; "" -> {}.
Result<std::vector<double>> parse_weights(const std::string& text) {
  std::vector<double> out;
  if (text.find_first_not_of(" \t") == std::string::npos) return out;
  for (size_t pos = 0; pos <= text.size();) {
    size_t comma = std::min(text.find(',', pos), text.size());
    std::string tok = text.substr(pos, comma - pos);
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    pos = comma + 1;
    double v = 0;
    auto [end, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || end != tok.data() + tok.size() || !std::isfinite(v) ||
        v < 0)
      return make_error("parameter 'class_weights': '" + tok +
                        "' is not a number >= 0; write one weight per class separated by commas, "
                        "e.g. \"1, 2.5, 1\"");
    out.push_back(v);
  }
  if (std::all_of(out.begin(), out.end(), [](double w) { return w == 0; }))
    return make_error(
        "parameter 'class_weights' has no weight above 0; every sample would count for nothing");
  return out;
}

NodeTypeDef cross_entropy_node() {
  NodeTypeDef d =
      make_type("mls.cross_entropy", "Cross-entropy loss", "Losses",
                "Mean softmax cross-entropy of logits [N,C] against class labels "
                "[N]. Whatever feeds 'logits' is the model's output. With class_weights, "
                "each sample counts by the weight of its class and the mean divides by "
                "the summed weights, as PyTorch's CrossEntropyLoss(weight=...).",
                {{"logits", PortKind::Tensor}, {"labels", PortKind::Labels}},
                {{"loss", PortKind::Tensor}}, NodeRole::Loss);
  ParamDef weights =
      make_param("class_weights", ParamKind::String, "",
                 "One weight per class, comma separated (\"1, 3, 1\": class 1 counts three "
                 "times); empty = every class weighs 1. For imbalanced data.");
  weights.saved_when_default = false;
  d.params = {float_param("label_smoothing", 0.0, 0.0, 1.0,
                          "Mixes the one-hot target with a uniform one (0 = off).", true),
              weights};
  d.infer = [](const std::vector<Shape>& in, const json& p,
               const InferContext& ctx) -> Result<std::vector<Shape>> {
    if (auto r = check_classes("CrossEntropy", "logits", in[0], in[1], ctx); !r) return r.error();
    auto w = parse_weights(p.at("class_weights").get<std::string>());
    if (!w) return w.error();
    if (!w->empty() && static_cast<int64_t>(w->size()) != in[0][1])
      return make_error("parameter 'class_weights' has " + std::to_string(w->size()) +
                        " weights but the logits have " + std::to_string(in[0][1]) +
                        " classes — give exactly one weight per class");
    return one(Shape{});
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    auto w = parse_weights(c.params.at("class_weights").get<std::string>());
    if (!w) return w.error();
    Ref weights = w->empty() ? Ref{} : vector_constant(c.g(), *w);
    c.model.logits = c.inputs[0];
    c.model.loss = cross_entropy(c.g(), c.inputs[0], c.inputs[1],
                                 c.params.at("label_smoothing").get<double>(), weights);
    return Refs{c.model.loss};
  };
  return d;
}

NodeTypeDef nll_loss_node() {
  NodeTypeDef d =
      make_type("mls.nll_loss", "NLL loss", "Losses",
                "Mean negative log-likelihood of log-probabilities [N,C] against class "
                "labels [N]: -mean(log_probs[i, label_i]), as PyTorch's NLLLoss. Feed it "
                "from a LogSoftmax node (LogSoftmax + NLL = CrossEntropy on the logits).",
                {{"log_probs", PortKind::Tensor}, {"labels", PortKind::Labels}},
                {{"loss", PortKind::Tensor}}, NodeRole::Loss);
  d.infer = [](const std::vector<Shape>& in, const json&,
               const InferContext& ctx) -> Result<std::vector<Shape>> {
    if (auto r = check_classes("NLL", "log_probs", in[0], in[1], ctx); !r) return r.error();
    return one(Shape{});
  };
  d.lower = [](LowerContext& c) -> Result<Refs> {
    c.model.logits = c.inputs[0];
    c.model.loss = nll_loss(c.g(), c.inputs[0], c.inputs[1]);
    return Refs{c.model.loss};
  };
  return d;
}

// The shape rule of the losses that compare values (MSE, L1, Huber, BCE).
Result<std::vector<Shape>> compare_rule(const std::string& loss, const std::string& first,
                                        const Shape& pred, const Shape& targets,
                                        const InferContext& ctx) {
  if (ctx.regression()) {
    const Shape want = target_value_shape(ctx);
    bool ok = pred.size() == want.size() && same_batch(pred[0], targets.empty() ? -1 : targets[0]);
    for (size_t i = 1; ok && i < want.size(); ++i) ok = pred[i] == want[i];
    if (!ok) {
      std::string fix =
          ctx.target_shape.size() == 1
              ? "add a Linear with out_features=" + std::to_string(ctx.target_shape[0]) +
                    " before it"
              : "make the model output " + format_shape(want);
      return make_error("input '" + first + "' has shape " + format_shape(pred) +
                        " but the targets are " + format_shape(want) + "; " + loss +
                        " compares them value by value — " + fix);
    }
    return one(Shape{});
  }
  if (pred.size() != 2)
    return make_error(
        "input '" + first + "' has shape " + format_shape(pred) + "; with class labels " + loss +
        " compares [N,classes] with one-hot targets — add a Flatten and a Linear with "
        "out_features=" +
        (ctx.num_classes > 0 ? std::to_string(ctx.num_classes) : std::string("<classes>")));
  if (ctx.num_classes > 0 && pred[1] != ctx.num_classes)
    return make_error(
        "input '" + first + "' has " + std::to_string(pred[1]) + " columns but the dataset has " +
        std::to_string(ctx.num_classes) +
        " classes — add a Linear with out_features=" + std::to_string(ctx.num_classes));
  if (targets.size() != 1)
    return make_error("input 'targets' has shape " + format_shape(targets) +
                      "; class labels are [N]");
  if (!same_batch(pred[0], targets[0]))
    return make_error(first + " has batch size " + std::to_string(pred[0]) +
                      " but the targets have " + std::to_string(targets[0]));
  return one(Shape{});
}

using CompareFn = std::function<Ref(LowerContext& c, Ref prediction, Ref targets)>;

NodeTypeDef compare_loss(std::string id, std::string name, std::string doc, std::string first,
                         CompareFn fn, std::vector<ParamDef> params = {}) {
  NodeTypeDef d = make_type(std::move(id), name, "Losses", std::move(doc),
                            {{first, PortKind::Tensor}, {"targets", PortKind::Labels}},
                            {{"loss", PortKind::Tensor}}, NodeRole::Loss);
  d.params = std::move(params);
  d.infer = [name, first](const std::vector<Shape>& in, const json&, const InferContext& ctx) {
    return compare_rule(name, first, in[0], in[1], ctx);
  };
  d.lower = [fn = std::move(fn)](LowerContext& c) -> Result<Refs> {
    Ref pred = c.inputs[0], targets = c.inputs[1];
    // Class labels: one-hot over the prediction's columns.
    if (c.g().type_of(targets).dtype == DType::I64)
      targets = c.g().emit1("one_hot", {targets}, {{"num_classes", c.shape(0)[1]}});
    c.model.logits = pred;
    c.model.loss = fn(c, pred, targets);
    return Refs{c.model.loss};
  };
  return d;
}

// What every value-comparing loss's doc ends with.
std::string with_note(const std::string& doc, const std::string& first) {
  return doc + " Whatever feeds '" + first +
         "' is the model's output. With value targets it must have their shape [N, *target "
         "shape]; with class labels it is [N,C] and is compared with one_hot(labels, C).";
}

}  // namespace

void register_loss_nodes(NodeCatalogue& catalogue) {
  catalogue.add(cross_entropy_node());
  catalogue.add(nll_loss_node());
  catalogue.add(compare_loss(
      "mls.mse_loss", "MSE loss",
      with_note("Mean squared error mean((prediction - target)^2), as PyTorch's MSELoss.",
                "prediction"),
      "prediction", [](LowerContext& c, Ref p, Ref t) { return mse_loss(c.g(), p, t); }));
  catalogue.add(compare_loss(
      "mls.l1_loss", "L1 loss",
      with_note("Mean absolute error mean(|prediction - target|), as PyTorch's L1Loss.",
                "prediction"),
      "prediction", [](LowerContext& c, Ref p, Ref t) { return l1_loss(c.g(), p, t); }));
  catalogue.add(compare_loss(
      "mls.huber_loss", "Huber loss",
      with_note(
          "PyTorch's HuberLoss: the mean of d^2/2 where |d| < delta and delta (|d| - delta/2) "
          "elsewhere, d = prediction - target: squared near the target, linear (robust to "
          "outliers) far from it.",
          "prediction"),
      "prediction",
      [](LowerContext& c, Ref p, Ref t) {
        return huber_loss(c.g(), p, t, c.params.at("delta").get<double>());
      },
      {float_param("delta", 1.0, 1e-9, 1e9, "Where the loss turns from squared to linear.")}));
  catalogue.add(compare_loss(
      "mls.bce_with_logits", "BCE-with-logits loss",
      with_note("Mean binary cross-entropy of sigmoid(logits) against targets in [0, 1], computed "
                "stably from the logits, as PyTorch's BCEWithLogitsLoss: binary or multi-label "
                "classification. Do not put a Sigmoid before it.",
                "logits"),
      "logits", [](LowerContext& c, Ref p, Ref t) { return bce_with_logits(c.g(), p, t); }));
}

}  // namespace mls::nodes
