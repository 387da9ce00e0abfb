#include <atomic>

#include "engine/core/op.h"

namespace mls {

OpDef& OpRegistry::define(OpDef def) {
  MLS_CHECK(find(def.name) == nullptr, "op defined twice");
  MLS_CHECK(def.infer != nullptr, "op without type inference");
  // Every op's inferred shapes are checked here, once for all ops and every path (graphs,
  // eager, traces): an attribute can name sizes whose product wraps (reshape to
  // {2^32, 2^32} "has" the 0 elements of an empty tensor), and nothing after this point
  // could allocate or index such a tensor safely.
  def.infer = [infer = std::move(def.infer)](std::span<const ValueType> in,
                                             const Attrs& attrs) -> Result<std::vector<ValueType>> {
    auto out = infer(in, attrs);
    if (!out) return out;
    for (const ValueType& t : *out)
      if (!checked_numel(t.shape))
        return make_error("shape " + shape_str(t.shape) +
                          " is too large or has a negative size (the element count overflows)");
    return out;
  };
  if (def.kind == OpKind::Compute)
    MLS_CHECK(def.vjp != nullptr && def.jvp != nullptr, "differentiable op without vjp/jvp");
  ops_.push_back(std::make_unique<OpDef>(std::move(def)));
  return *ops_.back();
}

const OpDef* OpRegistry::find(std::string_view name) const {
  for (const auto& op : ops_)
    if (op->name == name) return op.get();
  return nullptr;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& op : ops_) out.push_back(op.get());
  return out;
}

void OpRegistry::register_kernel(std::string_view op, DeviceKind device, DType dtype, KernelFn fn) {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o->name == op; });
  MLS_CHECK(it != ops_.end(), "kernel registered for an unknown op");
  (*it)->kernels[static_cast<size_t>(device)][static_cast<size_t>(dtype)] = fn;
}

void OpRegistry::register_workspace(std::string_view op, DeviceKind device, DType dtype, WorkspaceFn fn) {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o->name == op; });
  MLS_CHECK(it != ops_.end(), "workspace registered for an unknown op");
  (*it)->workspaces[static_cast<size_t>(device)][static_cast<size_t>(dtype)] = fn;
}

bool OpRegistry::supports(std::string_view op, DeviceKind device, DType dtype) const {
  const OpDef* d = find(op);
  return d && d->kernel(device, dtype) != nullptr;
}

double op_flops(const OpDef& op, std::span<const ValueType> inputs, std::span<const ValueType> outputs,
                const Attrs& attrs) {
  if (op.view || outputs.empty()) return 0;
  if (op.flops) return op.flops(inputs, outputs, attrs);
  return static_cast<double>(numel(outputs[0].shape));
}

namespace {
// Elements of a per output channel slice of a weight [O, ...]: the products behind each output.
double per_channel(const Shape& w) { return w.empty() || w[0] == 0 ? 0.0 : static_cast<double>(numel(w)) / static_cast<double>(w[0]); }
}  // namespace

double matmul_flops(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs& attrs) {
  const Shape& a = in[0].shape;
  if (a.size() < 2) return static_cast<double>(numel(out[0].shape));
  const int64_t k = attrs.get_int_or("transpose_a", 0) ? a[a.size() - 2] : a.back();
  return 2.0 * static_cast<double>(numel(out[0].shape)) * static_cast<double>(k);
}

double conv_flops(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs&) {
  return 2.0 * static_cast<double>(numel(out[0].shape)) * per_channel(in[1].shape);
}

double conv_flops_per_input(std::span<const ValueType> in, std::span<const ValueType>, const Attrs&) {
  return 2.0 * static_cast<double>(numel(in[0].shape)) * per_channel(in[1].shape);
}

double conv_backward_weight_flops(std::span<const ValueType> in, std::span<const ValueType> out, const Attrs&) {
  return 2.0 * static_cast<double>(numel(in[1].shape)) * per_channel(out[0].shape);
}

DType kernel_dtype(const OpDef& op, std::span<const ValueType> inputs,
                   std::span<const ValueType> outputs) {
  (void)op;
  if (!inputs.empty()) return inputs[0].dtype;
  MLS_CHECK(!outputs.empty(), "op without inputs or outputs");
  return outputs[0].dtype;
}

bool Backend::supports(const OpDef& op, DType dtype) const { return op.kernel(kind(), dtype) != nullptr; }

int32_t trace_thread_id() {
  static std::atomic<int32_t> next{0};
  thread_local const int32_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

OpRegistry& op_registry() {
  static OpRegistry reg;
  return reg;
}

}  // namespace mls
