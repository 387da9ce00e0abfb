#include "engine/exec/eager.h"

namespace mls {

Ref EagerSession::leaf(const Tensor& t, bool requires_grad) {
  MLS_CHECK(&t.backend() == &backend_, "EagerSession::leaf: tensor on another backend");
  values_.push_back(t.is_contiguous() ? t : t.contiguous(AllocTag::Activation));
  types_.push_back({t.dtype(), t.shape()});
  requires_grad_.push_back(requires_grad);
  return Ref{static_cast<int32_t>(values_.size() - 1)};
}

ValueType EagerSession::type_of(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < types_.size(), "EagerSession: unknown value");
  return types_[static_cast<size_t>(r.id)];
}

const Tensor& EagerSession::value(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < values_.size(), "EagerSession: unknown value");
  return values_[static_cast<size_t>(r.id)];
}

Refs EagerSession::emit(std::string_view op_name, std::span<const Ref> inputs, const Attrs& attrs) {
  const OpDef* op = op_registry().find(op_name);
  MLS_CHECK(op != nullptr, "EagerSession: unknown op");
  std::vector<ValueType> in_t;
  for (Ref r : inputs) in_t.push_back(type_of(r));
  auto out_t = op->infer(in_t, attrs);
  if (!out_t) {
    std::fprintf(stderr, "mlstudio: %s: %s\n", op->name.c_str(), out_t.error().message.c_str());
    MLS_CHECK(false, "an eager op failed to type-check");
  }
  Refs outs;
  bool rg = false;
  for (Ref r : inputs) rg = rg || requires_grad_[static_cast<size_t>(r.id)];
  rg = rg && op->kind == OpKind::Compute;
  if (op->view) {  // a view: no kernel, no copy
    const Tensor& src = value(inputs[0]);
    values_.push_back(Tensor(src.buffer_ptr(), src.byte_offset(), (*out_t)[0].dtype, (*out_t)[0].shape));
    types_.push_back((*out_t)[0]);
    requires_grad_.push_back(rg);
    outs.push_back(Ref{static_cast<int32_t>(values_.size() - 1)});
  } else {
    std::vector<const Tensor*> ins;
    for (Ref r : inputs) ins.push_back(&values_[static_cast<size_t>(r.id)]);
    std::vector<Tensor> out_tensors;
    for (const ValueType& t : *out_t)
      out_tensors.push_back(Tensor::empty(backend_, t.dtype, t.shape, AllocTag::Activation));
    std::vector<Tensor*> outp;
    for (Tensor& t : out_tensors) outp.push_back(&t);
    KernelFn fn = op->kernel(backend_.kind(), kernel_dtype(*op, in_t, *out_t));
    MLS_CHECK(fn != nullptr, "EagerSession: the backend has no kernel for this op and dtype");
    backend_.launch(fn, KernelCall{attrs, ins, outp, backend_});
    for (size_t k = 0; k < out_tensors.size(); ++k) {
      values_.push_back(std::move(out_tensors[k]));
      types_.push_back((*out_t)[k]);
      requires_grad_.push_back(rg);
      outs.push_back(Ref{static_cast<int32_t>(values_.size() - 1)});
    }
  }
  if (rg && recording_)
    tape_.push_back({op, attrs, Refs(inputs.begin(), inputs.end()), outs, std::string()});
  return outs;
}

Refs EagerSession::grad(Ref loss, std::span<const Ref> wrt, bool create_graph) {
  std::vector<TapeEntry> tape = tape_;  // backprop may append to tape_ when create_graph
  bool saved = recording_;
  recording_ = create_graph;
  Refs g = backprop(*this, tape, loss, wrt);
  recording_ = saved;
  return g;
}

void EagerSession::reset() {
  values_.clear();
  types_.clear();
  requires_grad_.clear();
  tape_.clear();
}

}  // namespace mls
