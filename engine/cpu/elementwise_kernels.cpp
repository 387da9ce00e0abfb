// Elementwise kernels (f32): every op of engine/ops/elementwise_list.h, and the broadcast
// helpers. Loops are written so GCC vectorises them (-O3 -march=native).
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

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

// The list (engine/ops/elementwise_list.h), in FusedCode order from Neg on.
struct Entry {
  FusedCode code;
  std::string_view op;
  int params;
};
constexpr Entry kList[] = {
#define MLS_CPU_ENTRY(Name, text, op, operands, params) {FusedCode::Name, #op, params},
    MLS_ELEMENTWISE(MLS_CPU_ENTRY)
#undef MLS_CPU_ENTRY
};
constexpr size_t kFirstOp = static_cast<size_t>(FusedCode::Const) + 1;

// Whether another code stands for the same op (gelu: Gelu and GeluTanh).
constexpr bool shares_op(const Entry& e) {
  int n = 0;
  for (const Entry& other : kList) n += other.op == e.op ? 1 : 0;
  return n > 1;
}

// Runs the instruction's formula over the whole tensor by elementwise.h's loops; only the
// formulas of the codes that share Code's op are instantiated (one, but for gelu's two).
template <FusedCode Code, typename Run, size_t... I>
void run_code_of_op(const FusedInstr& in, Run& run, std::index_sequence<I...>) {
  constexpr std::string_view op = kList[static_cast<size_t>(Code) - kFirstOp].op;
  bool done = false;
  auto one = [&]<size_t J>() {
    if constexpr (kList[J].op == op)
      if (!done && in.code == kList[J].code) {
        with_formula_of<kList[J].code>(in, run);
        done = true;
      }
  };
  (one.template operator()<I>(), ...);
  MLS_CHECK(done, "an elementwise op's instruction of another op");
}

// The op's kernel. Only an op with attributes or variants asks FusedProgram for its
// instruction (which reads p0, p1 and picks the variant); the others (relu, add, ...) pay no
// lookup per call.
template <FusedCode Code>
void op_kernel(const KernelCall& c) {
  static constexpr Entry kEntry = kList[static_cast<size_t>(Code) - kFirstOp];
  auto run = [&](auto f) {
    if constexpr (kBinaryFormula<decltype(f)>)
      binary_f32(c, f);
    else
      unary_kernel(c, f);
  };
  if constexpr (kEntry.params == 0 && !shares_op(kEntry)) {
    with_formula_of<Code>(FusedInstr{.code = Code}, run);
  } else {
    const std::optional<FusedInstr> found = FusedProgram::instr_of(kEntry.op, c.attrs);
    MLS_CHECK(found.has_value(), "an elementwise op without an instruction");
    run_code_of_op<Code>(*found, run, std::make_index_sequence<std::size(kList)>{});
  }
}

}  // namespace

// Every op of the list gets its kernel from the list: the first code of each op registers it
// (gelu's kernel runs Gelu or GeluTanh as its attributes say).
void register_elementwise_kernels(OpRegistry& reg) {
  static constexpr KernelFn kKernels[] = {
#define MLS_CPU_KERNEL(Name, text, op, operands, params) op_kernel<FusedCode::Name>,
      MLS_ELEMENTWISE(MLS_CPU_KERNEL)
#undef MLS_CPU_KERNEL
  };
  for (size_t i = 0; i < std::size(kList); ++i) {
    bool first = true;
    for (size_t j = 0; j < i; ++j) first = first && kList[j].op != kList[i].op;
    if (!first) continue;
    const std::string op(kList[i].op);
    MLS_CHECK(
        reg.find(op) != nullptr,
        ("engine/ops/elementwise_list.h names op '" + op + "', which no OpDef defines").c_str());
    reg.register_kernel(op, DeviceKind::CPU, DType::F32, kKernels[i]);
  }
}

}  // namespace mls::cpu
