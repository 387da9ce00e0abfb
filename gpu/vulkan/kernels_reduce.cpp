// Reductions (sum, mean, max, min over any axes), softmax, log_softmax and argmax.
#include <algorithm>

#include "gpu/vulkan/vulkan_kernels.h"

namespace mls::vulkan {

namespace {

struct ReduceParams {
  uint32_t nout, nred, op, per_thread;
  float scale;
};

// Below this many elements per output, one invocation reduces a whole output; above the
// second, never (a workgroup shares the line: also what keeps lavapipe's invocations below
// its loop limit, VulkanBackend::kSoftwareLoopLimit).
constexpr int64_t kPerThreadBelow = 64;
constexpr int64_t kPerThreadAtMost = 4096;

struct LinesParams {
  uint32_t outer, red, inner, op, per_thread;
  float scale;
};

// A contiguous x whose reduced axes are one block: [outer, red, inner] over the middle
// (shaders/reduce_lines.comp). False: the general path.
template <uint32_t Op>
bool reduce_lines(const KernelCall& c, const std::vector<bool>& reduced) {
  const Tensor& x = *c.inputs[0];
  if (!x.is_contiguous() || !c.outputs[0]->is_contiguous()) return false;
  const size_t rank = reduced.size();
  size_t first = rank, last = 0;
  for (size_t d = 0; d < rank; ++d)
    if (reduced[d]) {
      first = std::min(first, d);
      last = d;
    }
  if (first == rank) return false;
  for (size_t d = first; d <= last; ++d)
    if (!reduced[d]) return false;
  int64_t outer = 1, red = 1, inner = 1;
  for (size_t d = 0; d < rank; ++d) (d < first ? outer : d <= last ? red : inner) *= x.shape()[d];
  VulkanBackend& be = vk(c);
  const int64_t nout = outer * inner;
  if (nout == 0) return true;
  // One invocation per output when there are many outputs or short lines (on a software
  // device, whose barriers are dear, unless there are very few outputs); else a workgroup
  // per output.
  const bool per_thread =
      red < kPerThreadBelow || (nout >= (be.is_software() ? 16 : 1024) && red <= kPerThreadAtMost);
  LinesParams p{u32(outer), u32(red), u32(inner), Op, per_thread, static_cast<float>(1.0 / std::max<int64_t>(red, 1))};
  be.dispatch(Shader::reduce_lines, {c.outputs[0], &x}, p,
              per_thread ? be.groups_for(nout) : u32(std::min<int64_t>(nout, 65535)));
  return true;
}

template <uint32_t Op>
void reduce_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  const auto rank = static_cast<int64_t>(x.shape().size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  const std::vector<int64_t> axes = c.attrs.get_ints("axes");
  if (axes.empty()) std::fill(reduced.begin(), reduced.end(), true);
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  if (reduce_lines<Op>(c, reduced)) return;
  std::vector<uint32_t> kd, ks, rd, rs;
  int64_t nout = 1, nred = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const auto i = static_cast<size_t>(d);
    if (reduced[i]) {
      rd.push_back(u32(x.shape()[i]));
      rs.push_back(u32(x.strides()[i]));
      nred *= x.shape()[i];
    } else {
      kd.push_back(u32(x.shape()[i]));
      ks.push_back(u32(x.strides()[i]));
      nout *= x.shape()[i];
    }
  }
  std::vector<uint32_t> w{u32(static_cast<int64_t>(kd.size()))};
  w.insert(w.end(), kd.begin(), kd.end());
  w.insert(w.end(), ks.begin(), ks.end());
  w.push_back(u32(static_cast<int64_t>(rd.size())));
  w.insert(w.end(), rd.begin(), rd.end());
  w.insert(w.end(), rs.begin(), rs.end());
  const Tensor& tab = table(be, w);
  ReduceParams p{u32(nout), u32(nred), Op, nred < kPerThreadBelow, static_cast<float>(1.0 / std::max<int64_t>(nred, 1))};
  if (nout == 0) return;
  const uint32_t groups = p.per_thread ? be.groups_for(nout) : u32(std::min<int64_t>(nout, 65535));
  be.dispatch(Shader::reduce, {&y, &tab, &x}, p, groups);
}

struct LineParams {
  uint32_t lines, len, inner, flag;
};

// The lines along `axis` of a contiguous tensor: (outer x inner) of them, len long.
LineParams lines_of(const Tensor& x, int64_t axis) {
  const auto rank = static_cast<int64_t>(x.shape().size());
  if (axis < 0) axis += rank;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t len = rank == 0 ? 1 : x.shape()[static_cast<size_t>(axis)];
  return {u32(x.numel() / std::max<int64_t>(len, 1)), u32(len), u32(std::max<int64_t>(inner, 1)), 0};
}

// A software device stops long loops (VulkanBackend::kSoftwareLoopLimit): lines that long
// are refused there rather than computed wrong.
void check_line(const VulkanBackend& be, const LineParams& p, int passes) {
  MLS_CHECK(!be.is_software() || int64_t{p.len} * passes < VulkanBackend::kSoftwareLoopLimit,
            "vulkan: softmax/argmax lines this long exceed a software device's loop limit (use --device cpu)");
}

template <uint32_t Log>
void softmax_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& x = *c.inputs[0];
  MLS_CHECK(x.is_contiguous(), "vulkan: softmax input must be contiguous");
  LineParams p = lines_of(x, c.attrs.get_int("axis"));
  check_line(be, p, 3);
  p.flag = Log;
  be.dispatch(Shader::softmax, {c.outputs[0], &x}, p, be.groups_for(p.lines));
}

void argmax_kernel(const KernelCall& c) {
  VulkanBackend& be = vk(c);
  const Tensor& x = *c.inputs[0];
  MLS_CHECK(x.is_contiguous(), "vulkan: argmax input must be contiguous");
  LineParams p = lines_of(x, c.attrs.get_int("axis"));
  check_line(be, p, 1);
  struct {
    uint32_t lines, len, inner;
  } q{p.lines, p.len, p.inner};
  // The output's i64 elements are written as word pairs: bind it as 32-bit words.
  be.dispatch(Shader::argmax, {c.outputs[0], &x}, q, be.groups_for(q.lines));
}

}  // namespace

void register_reduce_kernels(OpRegistry& reg) {
  reg.register_kernel("sum", DeviceKind::Vulkan, DType::F32, reduce_kernel<0>);
  reg.register_kernel("mean", DeviceKind::Vulkan, DType::F32, reduce_kernel<1>);
  reg.register_kernel("max", DeviceKind::Vulkan, DType::F32, reduce_kernel<2>);
  reg.register_kernel("min", DeviceKind::Vulkan, DType::F32, reduce_kernel<3>);
  reg.register_kernel("softmax", DeviceKind::Vulkan, DType::F32, softmax_kernel<0>);
  reg.register_kernel("log_softmax", DeviceKind::Vulkan, DType::F32, softmax_kernel<1>);
  reg.register_kernel("argmax", DeviceKind::Vulkan, DType::F32, argmax_kernel);
}

}  // namespace mls::vulkan
