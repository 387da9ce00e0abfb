// Elementwise kernels (f32): every op of engine/ops/elementwise_list.h, and the broadcast
// helpers. Loops are written so GCC vectorises them (-O3 -march=native).
#include <iterator>
#include <optional>
#include <string_view>

#include "engine/cpu/elementwise.h"
#include "engine/cpu/elementwise_dispatch.h"

namespace mls::cpu {

Strides strides_over(const Shape& s, const Shape& out) {
  Strides full(out.size(), 0);
  Strides cs = contiguous_strides(s);
  size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) full[lead + i] = s[i] == 1 ? 0 : cs[i];
  return full;
}

BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out) {
  BroadcastPlan p;
  p.out = out;
  p.sa = strides_over(a, out);
  p.sb = strides_over(b, out);
  p.inner = out.empty() ? 1 : out.back();
  p.rows = out.empty() ? 1 : numel(out) / std::max<int64_t>(p.inner, 1);
  return p;
}

namespace {

// The op's kernel: its instruction (the attributes pick a variant and give p0, p1) run over
// the whole tensor by the shared loops of elementwise.h.
template <FusedCode Code>
void op_kernel(const KernelCall& c) {
  static constexpr std::string_view kOp = [] {
    switch (Code) {
#define MLS_OP_NAME(Name, text, op, operands, params) \
  case FusedCode::Name:                               \
    return std::string_view(#op);
      MLS_ELEMENTWISE(MLS_OP_NAME)
#undef MLS_OP_NAME
      default:
        return std::string_view();
    }
  }();
  const std::optional<FusedInstr> in = FusedProgram::instr_of(kOp, c.attrs);
  MLS_CHECK(in.has_value(), "an elementwise op without an instruction");
  with_formula(*in, [&](auto f) {
    if constexpr (kBinaryFormula<decltype(f)>)
      binary_f32(c, f);
    else
      unary_kernel(c, f);
  });
}

}  // namespace

// Every op of the list (engine/ops/elementwise_list.h) gets its kernel from the list: the
// first code of each op registers it (gelu's kernel runs Gelu or GeluTanh as its attributes
// say).
void register_elementwise_kernels(OpRegistry& reg) {
  struct Entry {
    std::string_view op;
    KernelFn fn;
  };
  static constexpr Entry kEntries[] = {
#define MLS_OP_KERNEL(Name, text, op, operands, params) {#op, op_kernel<FusedCode::Name>},
      MLS_ELEMENTWISE(MLS_OP_KERNEL)
#undef MLS_OP_KERNEL
  };
  for (size_t i = 0; i < std::size(kEntries); ++i) {
    bool first = true;
    for (size_t j = 0; j < i; ++j) first = first && kEntries[j].op != kEntries[i].op;
    if (first) reg.register_kernel(kEntries[i].op, DeviceKind::CPU, DType::F32, kEntries[i].fn);
  }
}

}  // namespace mls::cpu
