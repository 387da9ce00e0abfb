// matmul and linear_act: one tiled GEMM shader (shaders/matmul.comp) with the bias and
// activation epilogue, batched over broadcast batch dims; matmul_lowp: the same tiles over
// bf16 or f16 operands with an f32 result (shaders/matmul_lowp.comp).
#include "engine/ops/fused.h"
#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

struct GemmParams {
  uint32_t M, N, K, ta, tb, act, has_bias, batch_rank;
  uint32_t bdims[4], a_bstride[4], b_bstride[4];
  uint32_t operand_type;  // matmul_lowp: the operands' DType (f16 or bf16)
};

// Batch strides (in elements) of a contiguous operand [batch..., r, c] read at the index of
// the output's batch dims (broadcast dims step by 0).
void batch_strides(const Shape& s, const Shape& out_batch, uint32_t* strides) {
  const size_t r = out_batch.size(), sr = s.size() - 2;
  int64_t step = s[s.size() - 1] * s[s.size() - 2];
  for (size_t d = r; d-- > 0;) {
    strides[d] = 0;
    if (d + sr < r) continue;
    const size_t j = d + sr - r;
    if (!(s[j] == 1 && out_batch[d] != 1)) strides[d] = u32(step);
    step *= s[j];
  }
}

void gemm(const KernelCall& c, bool ta, bool tb, const Tensor* bias, EpilogueAct act) {
  VulkanBackend& be = vk(c);
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(a.is_contiguous() && b.is_contiguous() && y.is_contiguous(), "vulkan: matmul operands must be contiguous");
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const Shape& ys = y.shape();
  GemmParams p{};
  p.operand_type = static_cast<uint32_t>(a.dtype());
  p.M = u32(ys[ys.size() - 2]);
  p.N = u32(ys.back());
  p.K = u32(ta ? as[as.size() - 2] : as.back());
  p.ta = ta;
  p.tb = tb;
  p.act = static_cast<uint32_t>(act);
  p.has_bias = bias != nullptr;
  Shape batch(ys.begin(), ys.end() - 2);
  // A batch of x against one w with x not transposed folds into rows: one product.
  if (!ta && bs.size() == 2 && !batch.empty()) {
    p.M = u32(numel(ys) / ys.back());
    batch.clear();
  }
  // Batch dims beyond four merge from the front where both operands step through them alike.
  MLS_CHECK(batch.size() <= 4, "vulkan: matmul with more than 4 batch dims");
  p.batch_rank = u32(static_cast<int64_t>(batch.size()));
  int64_t count = 1;
  for (size_t d = 0; d < batch.size(); ++d) {
    p.bdims[d] = u32(batch[d]);
    count *= batch[d];
  }
  if (!batch.empty()) {
    batch_strides(as, batch, p.a_bstride);
    batch_strides(bs, batch, p.b_bstride);
  }
  if (p.M == 0 || p.N == 0 || count == 0) return;
  const Tensor* bt = bias ? bias : &y;
  // A software device: the register-blocked kernel (barriers are dear there), unless K
  // would take its invocations past the device's loop limit.
  if (a.dtype() != DType::F32)
    be.dispatch(Shader::matmul_lowp, {&y, &a, &b, bt}, p, (p.N + 63) / 64, (p.M + 63) / 64, u32(count));
  else if (be.is_software() && p.K < VulkanBackend::kSoftwareLoopLimit)
    be.dispatch(Shader::matmul_rows, {&y, &a, &b, bt}, p, (p.N + 255) / 256, (p.M + 7) / 8, u32(count));
  else
    be.dispatch(Shader::matmul, {&y, &a, &b, bt}, p, (p.N + 63) / 64, (p.M + 63) / 64, u32(count));
}

void matmul_kernel(const KernelCall& c) {
  gemm(c, c.attrs.get_int("transpose_a") != 0, c.attrs.get_int("transpose_b") != 0, nullptr, EpilogueAct::None);
}

void linear_act_kernel(const KernelCall& c) {
  gemm(c, c.attrs.get_int_or("transpose_a", 0) != 0, c.attrs.get_int_or("transpose_b", 0) != 0,
       c.inputs.size() > 2 ? c.inputs[2] : nullptr, epilogue_act_of(c.attrs));
}

void matmul_lowp_kernel(const KernelCall& c) {
  MLS_CHECK(c.inputs[0]->dtype() == c.inputs[1]->dtype(), "vulkan: matmul_lowp operands of two dtypes");
  matmul_kernel(c);
}

}  // namespace

void register_linalg_kernels(OpRegistry& reg) {
  add_kernel(reg, "matmul_lowp", DType::BF16, matmul_lowp_kernel);
  add_kernel(reg, "matmul_lowp", DType::F16, matmul_lowp_kernel);
  reg.register_kernel("matmul", DeviceKind::Vulkan, DType::F32, matmul_kernel);
  reg.register_kernel("linear_act", DeviceKind::Vulkan, DType::F32, linear_act_kernel);
}

}  // namespace mls::vulkan
