// Elementwise kernels: every f32 unary and broadcasting binary op, and fused_elementwise,
// run by one interpreter kernel (device/elementwise.cu) that evaluates a small program per
// element. A plain op is a program of one instruction after its inputs.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "engine/ops/fused.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

// The device interpreter numbers its instructions as FusedCode does (both come from
// engine/ops/elementwise_list.h; these stop the build should either enum change alone).
static_assert(static_cast<int>(FusedCode::Input) == dev::kInput &&
              static_cast<int>(FusedCode::Const) == dev::kConst);
#define MLS_SAME_CODE(Name, text, op, operands, params)            \
  static_assert(static_cast<int>(FusedCode::Name) == dev::k##Name, \
                "dev::k" #Name " is not FusedCode::" #Name);
MLS_ELEMENTWISE(MLS_SAME_CODE)
#undef MLS_SAME_CODE

void run_program(const KernelCall& c, const FusedProgram& p) {
  MLS_CHECK(c.inputs.size() <= static_cast<size_t>(dev::kMaxInputs),
            "cuda: an elementwise program with more than 8 inputs");
  MLS_CHECK(p.code.size() <= static_cast<size_t>(dev::kMaxInstr),
            "cuda: an elementwise program longer than 96 instructions");
  MLS_CHECK(!p.code.empty(), "cuda: an empty elementwise program");
  Tensor& y = *c.outputs[0];
  MLS_CHECK(y.is_contiguous(), "cuda: elementwise output must be contiguous");
  dev::ElementwiseArgs a;
  a.y = dptr<float>(y);
  a.n = y.numel();
  // Inputs of the output's element count are read in place where contiguous (broadcasting to
  // the same count moves no element), scalars as scalars, the others gathered.
  std::vector<std::vector<int64_t>> strides;
  std::vector<size_t> gathered;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Tensor& t = *c.inputs[k];
    a.x[k] = dptr<float>(t);
    if (t.numel() == a.n && t.is_contiguous()) {
      a.access[k] = dev::kInPlace;
    } else if (t.numel() == 1) {
      a.access[k] = dev::kScalar;
    } else {
      a.access[k] = dev::kGather;
      gathered.push_back(k);
      strides.push_back(broadcast_strides(t, y.shape()));
    }
  }
  const Collapsed l = collapse(y.shape(), strides);
  a.rank = l.rank;
  std::copy(l.dims, l.dims + l.rank, a.dims);
  for (size_t g = 0; g < gathered.size(); ++g)
    std::copy(strides[g].begin(), strides[g].end(), a.strides[gathered[g]]);
  a.ninstr = static_cast<int32_t>(p.code.size());
  for (size_t i = 0; i < p.code.size(); ++i) {
    const FusedInstr& in = p.code[i];
    a.code[i] = {static_cast<uint8_t>(in.code), static_cast<uint8_t>(std::max(in.a, 0)),
                 static_cast<uint8_t>(std::max(in.b, 0)), static_cast<float>(in.p0),
                 static_cast<float>(in.p1)};
  }
  dev::elementwise(a, cu(c).stream());
}

// The registry op of each code of the list (engine/ops/elementwise_list.h), in its order.
constexpr const char* kOps[] = {
#define MLS_OP_NAME(Name, text, op, operands, params) #op,
    MLS_ELEMENTWISE(MLS_OP_NAME)
#undef MLS_OP_NAME
};
constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);

template <size_t I>
void op_kernel(const KernelCall& c) {
  auto in = FusedProgram::instr_of(kOps[I], c.attrs);
  MLS_CHECK(in.has_value(), "cuda: an elementwise op without an instruction");
  FusedProgram p;
  p.num_inputs = static_cast<int>(c.inputs.size());
  for (size_t k = 0; k < c.inputs.size(); ++k)
    p.code.push_back({.code = FusedCode::Input, .p0 = static_cast<double>(k)});
  in->a = 0;
  in->b = c.inputs.size() > 1 ? 1 : -1;
  p.code.push_back(*in);
  run_program(c, p);
}

// Parsed once per program text: a plan's kernel runs every step with the same attributes.
std::shared_ptr<const FusedProgram> parsed(const std::string& text) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const FusedProgram>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find(text);
  if (it != cache.end()) return it->second;
  auto p = std::make_shared<const FusedProgram>(FusedProgram::parse(text).value());
  return cache.emplace(text, p).first->second;
}

void fused_kernel(const KernelCall& c) {
  run_program(c, *parsed(c.attrs.get_string("program")));
}

// Whether entry I is the first of its op (gelu's kernel runs Gelu or GeluTanh as its
// attributes say): each op gets one kernel.
constexpr bool first_of_op(size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (std::string_view(kOps[j]) == kOps[i]) return false;
  return true;
}

template <size_t... I>
void register_ops(OpRegistry& reg, std::index_sequence<I...>) {
  ((first_of_op(I) ? add_kernel(reg, kOps[I], DType::F32, op_kernel<I>) : void()), ...);
}

}  // namespace

void register_elementwise_kernels(OpRegistry& reg) {
  register_ops(reg, std::make_index_sequence<kNumOps>{});
  add_kernel(reg, "fused_elementwise", DType::F32, fused_kernel);
}

}  // namespace mls::cuda
