// Fused ops: what the fusion passes (engine/passes/fusion.cpp) make of a differentiated
// graph. fused_elementwise runs a whole elementwise expression in one pass over memory;
// linear_act and conv2d_act add a bias and apply an activation to a GEMM's or a
// convolution's output while it is still in cache.
//
//   auto p = FusedProgram::parse("t0=sub(x0,x1); mul(t0,t0)");   // (a - b)^2, a DAG
//   Ref d2 = fused_elementwise(e, {a, b}, *p);
//   Ref h = linear_act(e, x, w, bias, "relu");                      // relu(x w + bias[N])
//   Ref c = conv2d_act(e, x, k, bias, {.padding = {1, 1}}, "relu"); // bias [O]
//   p->to_text();                                                    // "t0=sub(x0,x1); mul(t0,t0)"
//
// The program is the op's `program` attribute, written as nested calls of the primitive
// ops it stands for: inputs are x0, x1, ...; numbers are scalar constants, or trailing
// attributes for ops that take them (scale(x0,0.5), clamp(x0,-inf,6)); a value used twice
// is bound once (t0=...;). Gradients of the fused ops re-emit those primitives and apply
// their rules, so any order of derivative works as for the unfused graph.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/attrs.h"
#include "engine/core/result.h"
#include "engine/ir/emitter.h"
#include "engine/ops/conv.h"
#include "engine/ops/elementwise_list.h"

namespace mls {

// Input, Const, then the ops of engine/ops/elementwise_list.h in its order (Relu, Add, ...).
// The backends' switches are generated from the same list, so a code is never typed twice.
enum class FusedCode : uint8_t {
  Input,
  Const,
#define MLS_FUSED_CODE(Name, text, op, operands, params) Name,
  MLS_ELEMENTWISE(MLS_FUSED_CODE)
#undef MLS_FUSED_CODE
};

// One instruction: operands a, b are earlier instructions; p0, p1 are the op's
// attributes (Input: p0 is the input index; Const: p0 is the value).
struct FusedInstr {
  FusedCode code = FusedCode::Input;
  int32_t a = -1, b = -1;
  double p0 = 0, p1 = 0;
};

int fused_operands(FusedCode c);  // 0, 1 or 2

struct FusedProgram {
  int num_inputs = 0;
  // code[i] for i < num_inputs is Input i; every other instruction follows its operands;
  // the last is the result.
  std::vector<FusedInstr> code;

  // The message names what is wrong and where (e.g. "unknown op 'foo' at 12").
  static Result<FusedProgram> parse(std::string_view text);
  std::string to_text() const;
  // Appends an instruction for a registry op with these attributes; nullopt when the op
  // is not elementwise or not supported (a tanh-form gelu is GeluTanh).
  static std::optional<FusedInstr> instr_of(std::string_view op, const Attrs& attrs);
  // The registry op and attributes an instruction stands for (not Input or Const).
  static std::pair<std::string, Attrs> op_of(const FusedInstr& in);
};

Ref fused_elementwise(Emitter& e, std::span<const Ref> inputs, const FusedProgram& p);
// act: a name from kEpilogueActs below ("none", "relu", ..., "gelu" the exact form). bias
// (optional, invalid Ref for none) is [N] for linear_act and [O] for conv2d_act.
Ref linear_act(Emitter& e, Ref x, Ref w, Ref bias, std::string_view act, bool transpose_a = false,
               bool transpose_b = false);
Ref conv2d_act(Emitter& e, Ref x, Ref w, Ref bias, const Conv2dParams& p, std::string_view act);

// The activations a GEMM or convolution epilogue applies (linear_act's and conv2d_act's
// "act"): None, then engine/ops/elementwise_list.h's MLS_EPILOGUE_ACTS in its order. The ops'
// attribute check, the fusion pass and every backend's kernels read that list; each act
// applies the formula of the elementwise entry of its name (Gelu: the exact, erf form).
enum class EpilogueAct : uint8_t {
  None,
#define MLS_EPILOGUE_ACT(Name, text) Name,
  MLS_EPILOGUE_ACTS(MLS_EPILOGUE_ACT)
#undef MLS_EPILOGUE_ACT
};
#define MLS_EPILOGUE_ACT(Name, text) +1
inline constexpr size_t kNumEpilogueActs = 1 MLS_EPILOGUE_ACTS(MLS_EPILOGUE_ACT);
#undef MLS_EPILOGUE_ACT
#define MLS_EPILOGUE_ACT(Name, text) {EpilogueAct::Name, #text},
inline constexpr std::array<std::pair<EpilogueAct, std::string_view>, kNumEpilogueActs>
    kEpilogueActs{{{EpilogueAct::None, "none"}, MLS_EPILOGUE_ACTS(MLS_EPILOGUE_ACT)}};
#undef MLS_EPILOGUE_ACT
// The elementwise entry an act applies (Relu: FusedCode::Relu); None has none (Input).
constexpr FusedCode epilogue_fused_code(EpilogueAct act) {
  switch (act) {
#define MLS_EPILOGUE_ACT(Name, text) \
  case EpilogueAct::Name:            \
    return FusedCode::Name;
    MLS_EPILOGUE_ACTS(MLS_EPILOGUE_ACT)
#undef MLS_EPILOGUE_ACT
    case EpilogueAct::None:
      break;
  }
  return FusedCode::Input;
}
// "relu" -> Relu; nullopt for a name that is not in the list.
std::optional<EpilogueAct> epilogue_act(std::string_view name);
// The "act" attribute of linear_act / conv2d_act (absent: None). Asserts a known name: the
// ops' check refused others.
EpilogueAct epilogue_act_of(const Attrs& attrs);
// The epilogue a graph node's op computes (a relu node: Relu; an exact gelu: Gelu), or
// nullopt when the op is none of them (a tanh-form gelu included).
std::optional<EpilogueAct> epilogue_act_of_op(std::string_view op, const Attrs& attrs);
std::string_view epilogue_act_name(EpilogueAct act);
// "none, relu, sigmoid, tanh, gelu or silu", for messages.
std::string epilogue_act_names();

}  // namespace mls
