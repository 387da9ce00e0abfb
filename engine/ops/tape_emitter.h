// Internal to engine/ops: an Emitter that records what a composite emits, so that an op whose
// rule is easiest written as a composite (the forward-mode rule of attention, the second
// derivatives of batch_norm_backward) can differentiate that composite with autodiff.
//
//   TapeEmitter t(c.e, "attention");
//   Ref loss = ...composite written on t...;
//   return t.vjp(c, loss);  // the composite's gradients for the inputs the rule needs
//
// An op whose composite is a whole function (inputs, attrs) -> outputs gets both rules from it:
//   Refs my_op_vjp(const GradContext& c) { return composite_vjp(c, my_op_composite, "my op"); }
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "engine/autodiff/autodiff.h"
#include "engine/ir/emitter.h"
#include "engine/ir/graph.h"

namespace mls::ops {

class TapeEmitter final : public Emitter {
 public:
  // `who` names the op in the check that every emitted op is registered.
  TapeEmitter(Emitter& inner, const char* who) : inner_(inner), who_(who) {
    if (auto* g = dynamic_cast<Graph*>(&inner)) scope_ = g->label();
  }
  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override {
    Refs outs = inner_.emit(op, inputs, attrs);
    const OpDef* def = op_registry().find(op);
    MLS_CHECK(def != nullptr, (std::string(who_) + ": a composite emits an unknown op").c_str());
    tape_.push_back({def, attrs, Refs(inputs.begin(), inputs.end()), outs, scope_});
    return outs;
  }
  ValueType type_of(Ref r) const override { return inner_.type_of(r); }
  std::span<const TapeEntry> tape() const { return tape_; }
  // Gradients of `loss` for the inputs a rule needs (an input passed twice gets its gradient
  // once, in its first slot).
  Refs vjp(const GradContext& c, Ref loss) {
    Refs wrt, out(c.inputs.size());
    std::vector<size_t> slot;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const bool first =
          std::find(c.inputs.begin(), c.inputs.begin() + static_cast<std::ptrdiff_t>(i),
                    c.inputs[i]) == c.inputs.begin() + static_cast<std::ptrdiff_t>(i);
      if (c.needs(i) && first) {
        wrt.push_back(c.in(i));
        slot.push_back(i);
      }
    }
    Refs g = backprop(inner_, tape_, loss, wrt);
    for (size_t k = 0; k < slot.size(); ++k) out[slot[k]] = g[k];
    inner_.set_scope(scope_);
    return out;
  }
  Refs jvp(const JvpContext& c, std::span<const Ref> outputs) {
    Refs primals, tangents;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      if (c.tan(i).valid()) {
        primals.push_back(c.in(i));
        tangents.push_back(c.tan(i));
      }
    Refs t = forward_tangents(inner_, tape_, primals, tangents, outputs);
    inner_.set_scope(scope_);
    return t;
  }

 private:
  Emitter& inner_;
  const char* who_;
  std::string scope_;
  std::vector<TapeEntry> tape_;
};

// What an op computes, written with other ops.
using Composite = Refs (*)(Emitter&, std::span<const Ref>, const Attrs&);

// The reverse rule of an op from its composite: the gradients of sum_k <out_k, gout_k> over
// the outputs that receive one.
inline Refs composite_vjp(const GradContext& c, Composite f, const char* who) {
  TapeEmitter t(c.e, who);
  const Refs outs = f(t, c.inputs, c.attrs);
  Ref loss;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!c.gout(k).valid() || !outs[k].valid()) continue;
    const Ref term = sum(t, mul(t, outs[k], c.gout(k)), {}, false);
    loss = loss.valid() ? add(t, loss, term) : term;
  }
  if (!loss.valid()) return Refs(c.inputs.size());
  return t.vjp(c, loss);
}

// The forward rule of an op from its composite: its outputs' tangents.
inline Refs composite_jvp(const JvpContext& c, Composite f, const char* who) {
  TapeEmitter t(c.e, who);
  const Refs outs = f(t, c.inputs, c.attrs);
  return t.jvp(c, outs);
}

}  // namespace mls::ops
