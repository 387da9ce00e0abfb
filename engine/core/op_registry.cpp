#include <mutex>

#include "engine/core/op.h"

namespace mls {

OpDef& OpRegistry::define(OpDef def) {
  MLS_CHECK(find(def.name) == nullptr, "op defined twice");
  MLS_CHECK(def.infer != nullptr, "op without type inference");
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

bool OpRegistry::supports(std::string_view op, DeviceKind device, DType dtype) const {
  const OpDef* d = find(op);
  return d && d->kernel(device, dtype) != nullptr;
}

DType kernel_dtype(const OpDef& op, std::span<const ValueType> inputs,
                   std::span<const ValueType> outputs) {
  (void)op;
  if (!inputs.empty()) return inputs[0].dtype;
  MLS_CHECK(!outputs.empty(), "op without inputs or outputs");
  return outputs[0].dtype;
}

bool Backend::supports(const OpDef& op, DType dtype) const { return op.kernel(kind(), dtype) != nullptr; }

OpRegistry& op_registry() {
  static OpRegistry reg;
  return reg;
}

// Declared by the op-definition files and the CPU backend.
void register_core_ops(OpRegistry& reg);
namespace cpu {
void register_kernels(OpRegistry& reg);
}

void engine_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_core_ops(op_registry());
    cpu::register_kernels(op_registry());
  });
}

}  // namespace mls
