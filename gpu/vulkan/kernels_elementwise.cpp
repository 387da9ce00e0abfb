// Elementwise kernels: every f32 unary and broadcasting binary op, and fused_elementwise.
// One op over operands of its output's shape runs shaders/ew_simple.comp. Anything else is a
// program (a plain op: its inputs and one instruction): up to 48 instructions it becomes the
// specialization constants of a pipeline of its own (shaders/fused.comp), compiled by the
// driver once per program; longer ones run on an interpreter (shaders/elementwise.comp).
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "engine/ops/fused.h"
#include "gpu/vulkan/fused_codes_check.h"  // generated: the shaders number the codes as FusedCode
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

constexpr size_t kMaxInputs = 8;
constexpr size_t kMaxInstructions = 96;  // shaders/elementwise.comp's kMaxInstr
constexpr size_t kMaxSpecialised = 48;   // instructions shaders/fused.comp declares

// How the inputs are read: rank, number of inputs, the (collapsed) dims, and per input its
// mode (0 in place, 1 scalar, 2 gathered) and strides over those dims.
std::vector<uint32_t> layout_words(const KernelCall& c) {
  const Tensor& out = *c.outputs[0];
  const Shape& shape = out.shape();
  // The output's dims with size-1 dims dropped and neighbours merged wherever every input
  // steps through both as through one (a per-channel operand over [N, C, H, W] leaves
  // [N, C, H*W]): fewer divisions per element for the gathered inputs.
  std::vector<std::vector<int64_t>> st;
  for (const Tensor* t : c.inputs) st.push_back(broadcast_strides(*t, shape));
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(c.inputs.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; merge && k < st.size(); ++k)
      merge = strides[k].back() == st[k][d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < st.size(); ++k) strides[k].back() = st[k][d];
      continue;
    }
    dims.push_back(shape[d]);
    for (size_t k = 0; k < st.size(); ++k) strides[k].push_back(st[k][d]);
  }
  std::vector<uint32_t> w;
  w.push_back(u32(static_cast<int64_t>(dims.size())));
  w.push_back(u32(static_cast<int64_t>(c.inputs.size())));
  for (int64_t d : dims) w.push_back(u32(d));
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Tensor* t = c.inputs[k];
    uint32_t mode = 2;  // gather
    if (t->numel() == 1)
      mode = 1;
    else if (t->shape() == shape && t->is_contiguous())
      mode = 0;
    w.push_back(mode);
    for (int64_t s : strides[k]) w.push_back(u32(s));
  }
  return w;
}

// The program as words: code, a, b, p0 bits, p1 bits per instruction.
std::vector<uint32_t> program_words(const FusedProgram& p) {
  std::vector<uint32_t> w;
  for (const FusedInstr& in : p.code) {
    w.push_back(static_cast<uint32_t>(in.code));
    w.push_back(u32(std::max(in.a, 0)));
    w.push_back(u32(std::max(in.b, 0)));
    w.push_back(std::bit_cast<uint32_t>(static_cast<float>(in.p0)));
    w.push_back(std::bit_cast<uint32_t>(static_cast<float>(in.p1)));
  }
  return w;
}

void run_program(const KernelCall& c, const FusedProgram& p) {
  VulkanBackend& be = vk(c);
  MLS_CHECK(c.inputs.size() <= kMaxInputs,
            "vulkan: an elementwise program with more than 8 inputs");
  MLS_CHECK(p.code.size() <= kMaxInstructions,
            "vulkan: an elementwise program longer than 96 instructions");
  Tensor& y = *c.outputs[0];
  MLS_CHECK(y.is_contiguous(), "vulkan: elementwise output must be contiguous");
  const Tensor* x[kMaxInputs];
  for (size_t k = 0; k < kMaxInputs; ++k) x[k] = k < c.inputs.size() ? c.inputs[k] : &y;
  const uint32_t n = u32(y.numel());
  std::vector<uint32_t> layout = layout_words(c);
  const std::vector<uint32_t> code = program_words(p);
  if (p.code.size() <= kMaxSpecialised) {
    // The program compiled into a pipeline of its own (shaders/fused.comp).
    std::vector<uint32_t> constants{u32(static_cast<int64_t>(p.code.size()))};
    constants.insert(constants.end(), code.begin(), code.end());
    const Tensor& tab = table(be, layout);
    be.dispatch_specialized(Shader::fused, constants,
                            {&y, &tab, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]}, n,
                            be.groups_for(n));
    return;
  }
  // Longer programs: the interpreter (shaders/elementwise.comp), the program in its table.
  std::vector<uint32_t> words{u32(static_cast<int64_t>(p.code.size()))};
  words.insert(words.end(), layout.begin(), layout.end());
  words.insert(words.end(), code.begin(), code.end());
  const Tensor& tab = table(be, words);
  be.dispatch(Shader::elementwise, {&y, &tab, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]}, n,
              be.groups_for(n));
}

// The registry op of each code of the list (engine/ops/elementwise_list.h), in its order.
constexpr const char* kOps[] = {
#define MLS_OP_NAME(Name, text, op, operands, params) #op,
    MLS_ELEMENTWISE(MLS_OP_NAME)
#undef MLS_OP_NAME
};
constexpr size_t kNumOps = sizeof(kOps) / sizeof(kOps[0]);

// Whether entry I is the first of its op (gelu's kernel runs Gelu or GeluTanh as its
// attributes say): each op gets one kernel.
constexpr bool first_of_op(size_t i) {
  for (size_t j = 0; j < i; ++j)
    if (std::string_view(kOps[j]) == kOps[i]) return false;
  return true;
}

// One op whose operands are all of the output's shape and contiguous (the second may be a
// scalar): shaders/ew_simple.comp, no program to interpret.
bool run_simple(const KernelCall& c, const FusedInstr& in) {
  const Tensor& y = *c.outputs[0];
  auto plain = [&](const Tensor& t) { return t.shape() == y.shape() && t.is_contiguous(); };
  if (!y.is_contiguous() || !plain(*c.inputs[0])) return false;
  const bool binary = c.inputs.size() > 1;
  const bool scalar_b = binary && c.inputs[1]->numel() == 1 && y.numel() != 1;
  if (binary && !scalar_b && !plain(*c.inputs[1])) return false;
  VulkanBackend& be = vk(c);
  struct {
    uint32_t n, op, scalar_b;
    float p0, p1;
  } p{u32(y.numel()), static_cast<uint32_t>(in.code), scalar_b, static_cast<float>(in.p0),
      static_cast<float>(in.p1)};
  be.dispatch(Shader::ew_simple, {&y, c.inputs[0], binary ? c.inputs[1] : c.inputs[0]}, p,
              be.groups_for(p.n));
  return true;
}

template <size_t I>
void op_kernel(const KernelCall& c) {
  auto in = FusedProgram::instr_of(kOps[I], c.attrs);
  MLS_CHECK(in.has_value(), "vulkan: an elementwise op without an instruction");
  if (run_simple(c, *in)) return;
  FusedProgram p;
  p.num_inputs = static_cast<int>(c.inputs.size());
  for (size_t k = 0; k < c.inputs.size(); ++k)
    p.code.push_back({.code = FusedCode::Input, .p0 = static_cast<double>(k)});
  in->a = 0;
  in->b = c.inputs.size() > 1 ? 1 : -1;
  p.code.push_back(*in);
  run_program(c, p);
}

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

template <size_t... I>
void register_ops(OpRegistry& reg, std::index_sequence<I...>) {
  ((first_of_op(I) && op_registry().find(kOps[I])
        ? reg.register_kernel(kOps[I], DeviceKind::Vulkan, DType::F32, op_kernel<I>)
        : void()),
   ...);
}

}  // namespace

std::vector<int64_t> broadcast_strides(const Tensor& t, const Shape& out) {
  const size_t r = out.size(), tr = t.shape().size();
  std::vector<int64_t> s(r, 0);
  for (size_t d = 0; d < r; ++d) {
    if (d + tr < r) continue;
    const size_t j = d + tr - r;
    if (t.shape()[j] == 1 && out[d] != 1) continue;
    s[d] = t.strides()[j];
  }
  return s;
}

void register_elementwise_kernels(OpRegistry& reg) {
  register_ops(reg, std::make_index_sequence<kNumOps>{});
  reg.register_kernel("fused_elementwise", DeviceKind::Vulkan, DType::F32, fused_kernel);
}

}  // namespace mls::vulkan
