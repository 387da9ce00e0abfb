// Reductions (sum, mean, max, min over any axes), softmax, log_softmax and argmax
// (device/reduce.cu).
#include <algorithm>

#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

template <dev::ReduceOp Op>
void reduce_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(y.is_contiguous(), "cuda: reduction output must be contiguous");
  const auto rank = static_cast<int64_t>(x.shape().size());
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  const std::vector<int64_t> axes = c.attrs.get_ints("axes");
  if (axes.empty()) std::fill(reduced.begin(), reduced.end(), true);
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  // The kept dims in order (the output's, without the size-1 keepdims) and the reduced
  // ones, each with x's strides: the output's element o reads from its kept offset.
  Shape kd, rd;
  std::vector<std::vector<int64_t>> ks(1), rs(1);
  for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
    (reduced[d] ? rd : kd).push_back(x.shape()[d]);
    (reduced[d] ? rs[0] : ks[0]).push_back(x.strides()[d]);
  }
  dev::ReduceArgs a;
  a.y = dptr<float>(y);
  a.x = dptr<float>(x);
  a.nout = numel(kd);
  a.nred = numel(rd);
  a.op = Op;
  a.scale = static_cast<float>(1.0 / static_cast<double>(std::max<int64_t>(a.nred, 1)));
  const Collapsed kl = collapse(kd, ks), rl = collapse(rd, rs);
  a.kept_rank = kl.rank;
  std::copy(kl.dims, kl.dims + kl.rank, a.kept_dims);
  std::copy(ks[0].begin(), ks[0].end(), a.kept_strides);
  a.red_rank = rl.rank;
  std::copy(rl.dims, rl.dims + rl.rank, a.red_dims);
  std::copy(rs[0].begin(), rs[0].end(), a.red_strides);
  dev::reduce(a, cu(c).stream());
}

// The lines along `axis` of a contiguous tensor: (outer x inner) of them, len long.
dev::Lines lines_of(const Tensor& x, int64_t axis) {
  const auto rank = static_cast<int64_t>(x.shape().size());
  if (axis < 0) axis += rank;
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < rank; ++d) inner *= x.shape()[static_cast<size_t>(d)];
  const int64_t len = rank == 0 ? 1 : x.shape()[static_cast<size_t>(axis)];
  return {x.numel() / std::max<int64_t>(len, 1), len, std::max<int64_t>(inner, 1)};
}

template <bool Log>
void softmax_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(x.is_contiguous() && y.is_contiguous(), "cuda: softmax operands must be contiguous");
  dev::softmax(dptr<float>(y), dptr<float>(x), lines_of(x, c.attrs.get_int("axis")), Log,
               cu(c).stream());
}

void argmax_kernel(const KernelCall& c) {
  const Tensor& x = *c.inputs[0];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(x.is_contiguous() && y.is_contiguous(), "cuda: argmax operands must be contiguous");
  dev::argmax(dptr<int64_t>(y), dptr<float>(x), lines_of(x, c.attrs.get_int("axis")),
              cu(c).stream());
}

}  // namespace

void register_reduce_kernels(OpRegistry& reg) {
  add_kernel(reg, "sum", DType::F32, reduce_kernel<dev::kSum>);
  add_kernel(reg, "mean", DType::F32, reduce_kernel<dev::kMean>);
  add_kernel(reg, "max", DType::F32, reduce_kernel<dev::kMax>);
  add_kernel(reg, "min", DType::F32, reduce_kernel<dev::kMin>);
  add_kernel(reg, "softmax", DType::F32, softmax_kernel<false>);
  add_kernel(reg, "log_softmax", DType::F32, softmax_kernel<true>);
  add_kernel(reg, "argmax", DType::F32, argmax_kernel);
}

}  // namespace mls::cuda
