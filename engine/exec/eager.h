// The dynamic (define-by-run) path: ops run as soon as they are emitted, on the same
// kernels as the static plan, and a tape records them for backward.
//
//   EagerSession s(cpu);
//   Ref w = s.leaf(w_tensor, /*requires_grad=*/true);
//   Ref x = s.leaf(x_tensor);
//   Ref loss = mean(s, relu(s, matmul(s, x, w)), {}, false);   // computed now
//   Refs g = s.grad(loss, {w});                                  // walks the tape
//   s.value(g[0]).to_f64();
//   s.reset();                                                   // next step
#pragma once

#include <vector>

#include "engine/autodiff/autodiff.h"
#include "engine/core/tensor.h"
#include "engine/ir/emitter.h"

namespace mls {

class EagerSession final : public Emitter {
 public:
  explicit EagerSession(Backend& backend) : backend_(backend) {}

  Ref leaf(const Tensor& t, bool requires_grad = false);
  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override;
  ValueType type_of(Ref r) const override;
  const Tensor& value(Ref r) const;

  // Reverse mode over the tape. With create_graph the gradient ops are recorded too, so
  // the result can be differentiated again.
  Refs grad(Ref loss, std::span<const Ref> wrt, bool create_graph = false);
  // Drops every value and the tape; tensors still referenced elsewhere stay alive.
  void reset();
  size_t tape_size() const { return tape_.size(); }
  Backend& backend() { return backend_; }

 private:
  Backend& backend_;
  std::vector<Tensor> values_;
  std::vector<ValueType> types_;
  std::vector<bool> requires_grad_;
  std::vector<TapeEntry> tape_;
  bool recording_ = true;
};

}  // namespace mls
