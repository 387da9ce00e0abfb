#include "engine/train/mixed_precision.h"

#include <algorithm>

#include "engine/passes/passes.h"

namespace mls {

namespace {

// Scales stay powers of two (multiplying by one is exact) within f32's range, so that
// loss * S itself never overflows because S grew without bound over a long bf16 run.
constexpr double kMaxScale = 0x1p64, kMinScale = 0x1p-64;

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::F32: return "f32";
    case Precision::BF16: return "bf16";
    case Precision::F16: return "f16";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view name) {
  for (Precision p : {Precision::F32, Precision::BF16, Precision::F16})
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

DType compute_dtype(Precision p) {
  switch (p) {
    case Precision::F32: return DType::F32;
    case Precision::BF16: return DType::BF16;
    case Precision::F16: return DType::F16;
  }
  return DType::F32;
}

LossScaler::LossScaler(Precision p, LossScaleConfig c)
    : active_(p != Precision::F32),
      dynamic_(p == Precision::F16 || (p == Precision::BF16 && c.init > 0)),
      scale_(c.init > 0 && dynamic_ ? c.init : p == Precision::F16 ? 65536.0 : 1.0),
      growth_interval_(c.growth_interval) {}

bool LossScaler::update(bool finite) {
  if (!finite) {
    if (dynamic_) scale_ = std::max(scale_ * 0.5, kMinScale);
    good_ = 0;
    ++skipped_;
    return false;
  }
  if (dynamic_ && growth_interval_ > 0 && ++good_ >= growth_interval_) {
    scale_ = std::min(scale_ * 2.0, kMaxScale);
    good_ = 0;
  }
  return true;
}

void LossScaler::restore(double scale, int64_t good_steps, int64_t skipped) {
  if (scale > 0 && dynamic_) scale_ = scale;
  good_ = good_steps;
  skipped_ = skipped;
}

void autocast_model(ModelGraph& mg, Precision p) {
  if (p == Precision::F32) return;
  Graph& g = mg.graph;
  // The rewrite keeps inputs (in order) and outputs: carry loss and logits as outputs.
  const Refs saved = g.outputs();
  Refs outs{mg.loss, mg.logits.valid() ? mg.logits : mg.loss};
  outs.insert(outs.end(), saved.begin(), saved.end());
  g.set_outputs(outs);
  Graph low = autocast(g, compute_dtype(p));
  auto input = [&](Ref r) {
    if (!r.valid()) return Ref{};
    auto i = static_cast<size_t>(std::find(g.inputs().begin(), g.inputs().end(), r) - g.inputs().begin());
    MLS_CHECK(i < g.inputs().size(), "autocast_model: a model handle is not a graph input");
    return low.inputs()[i];
  };
  mg.input = input(mg.input);
  mg.labels = input(mg.labels);
  mg.step_seed = input(mg.step_seed);
  mg.loss = low.outputs()[0];
  if (mg.logits.valid()) mg.logits = low.outputs()[1];
  low.set_outputs(Refs(low.outputs().begin() + 2, low.outputs().end()));
  mg.graph = std::move(low);
}

Refs unscale_gradients(Emitter& e, std::span<const Ref> scaled_grads, Ref scale, Ref* check) {
  Refs out;
  Ref total;
  for (Ref g : scaled_grads) {
    if (!g.valid()) {
      out.push_back(g);
      continue;
    }
    Ref u = scale.valid() ? div(e, g, scale) : g;
    out.push_back(u);
    Ref s = sum(e, u, {}, false);
    total = total.valid() ? add(e, total, s) : s;
  }
  *check = total.valid() ? total : fill(e, {DType::F32, {}}, 0.0);
  return out;
}

}  // namespace mls
