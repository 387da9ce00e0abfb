// Internal to engine/cpu: an elementwise instruction's formula (scalar_math.h) as a float
// function of its operands, chosen by one switch that the list generates
// (engine/ops/elementwise_list.h). The plain op kernels and the fused interpreter both go
// through it, so they compute the same expression, and a list entry without a formula in
// scalar_math.h fails to compile here ("'frobnicate' is not a member of
// 'mls::cpu::scalar'").
//
//   with_formula(instr, [&](auto f) { unary_kernel(call, f); });  // f: float(float) or
//                                                                  // float(float, float)
#pragma once

#include <type_traits>

#include "engine/core/check.h"
#include "engine/cpu/scalar_math.h"
#include "engine/ops/fused.h"

namespace mls::cpu {

// Whether a formula from with_formula takes two operands.
template <typename F>
inline constexpr bool kBinaryFormula = std::is_invocable_v<F, float, float>;

// with_formula for an instruction whose code, Code, is known when compiling: visit is
// instantiated for that formula alone. (One kernel per op through with_formula instantiated
// the list's every formula in each: elementwise_kernels.cpp took 77 s of CPU to compile
// under ASan.)
#define MLS_CPU_FORMULA_1(params, f) \
  [=](float x) { return MLS_EW_CALL(1, params, f, x, x, p0, p1); }
#define MLS_CPU_FORMULA_2(params, f) \
  [=](float x, float y) { return MLS_EW_CALL(2, params, f, x, y, p0, p1); }
template <FusedCode Code, typename Visit>
decltype(auto) with_formula_of(const FusedInstr& in, Visit&& visit) {
  MLS_CHECK(in.code == Code, "with_formula_of: an instruction of another code");
  const auto p0 = static_cast<float>(in.p0), p1 = static_cast<float>(in.p1);
  (void)p0;
  (void)p1;
#define MLS_CPU_CASE(Name, text, op, operands, params)              \
  if constexpr (Code == FusedCode::Name)                            \
    return visit(MLS_CPU_FORMULA_##operands(params, scalar::text)); \
  else
  MLS_ELEMENTWISE(MLS_CPU_CASE)
#undef MLS_CPU_CASE
  {
    MLS_CHECK(false, "with_formula_of: an input or a constant is not an op");
    std::abort();
  }
}
#undef MLS_CPU_FORMULA_2
#undef MLS_CPU_FORMULA_1

// visit(f) for the instruction's formula f, with the instruction's attributes bound; the
// instruction is an op (not Input or Const). Returns what visit returns. visit is
// instantiated for every formula of the list: for one op's kernel, use with_formula_of.
template <typename Visit>
decltype(auto) with_formula(const FusedInstr& in, Visit&& visit) {
  switch (in.code) {
#define MLS_CPU_CASE(Name, text, op, operands, params) \
  case FusedCode::Name:                                \
    return with_formula_of<FusedCode::Name>(in, visit);
    MLS_ELEMENTWISE(MLS_CPU_CASE)
#undef MLS_CPU_CASE
    case FusedCode::Input:
    case FusedCode::Const:
      break;
  }
  MLS_CHECK(false, "with_formula: an input or a constant is not an op");
  std::abort();
}

}  // namespace mls::cpu
