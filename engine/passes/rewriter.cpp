#include "engine/passes/rewriter.h"

namespace mls {

Rewriter::Rewriter(const Graph& src) : src_(src), out_(src.name()), map_(src.values().size()) {
  for (Ref r : src.inputs()) map_[static_cast<size_t>(r.id)] = out_.add_input(src.value(r).name, src.type_of(r));
  for (Ref r : src.params()) {
    const Value& v = src.value(r);
    map_[static_cast<size_t>(r.id)] = out_.add_param(v.name, v.type, v.init, v.trainable);
  }
  for (size_t i = 0; i < src.values().size(); ++i)
    if (src.values()[i].kind == ValueKind::Const)
      map_[i] = out_.add_constant(src.values()[i].name, src.values()[i].constant);
}

Ref Rewriter::map(Ref old) const {
  Ref r = map_[static_cast<size_t>(old.id)];
  MLS_CHECK(r.valid(), "Rewriter: a value is used before its producer was copied");
  return r;
}

Refs Rewriter::emit(const Node& like, std::string_view op, const Refs& inputs, const Attrs& attrs) {
  out_.set_label(like.label);
  out_.set_backward_mode(like.backward);
  return out_.emit(op, inputs, attrs);
}

Refs Rewriter::copy(const Node& n) {
  Refs ins;
  for (Ref r : n.inputs) ins.push_back(map(r));
  Refs outs = emit(n, n.op->name, ins, n.attrs);
  for (size_t k = 0; k < outs.size(); ++k) map_[static_cast<size_t>(n.outputs[k].id)] = outs[k];
  return outs;
}

Graph Rewriter::finish() {
  Refs outs;
  for (Ref r : src_.outputs()) outs.push_back(map(r));
  out_.set_outputs(outs);
  out_.set_label("");
  out_.set_backward_mode(false);
  return std::move(out_);
}

}  // namespace mls
