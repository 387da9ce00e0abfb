// matmul and linear_act: cuBLAS's f32 GEMM (no TF32: the backend's handle keeps the default
// math mode), batched over broadcast batch dims, then the bias and activation epilogue
// (device/linalg.cu). matmul_lowp: the same calls through cublasGemmStridedBatchedEx with
// bf16 or f16 operands, f32 sums and an f32 result (the tensor cores' mixed precision).
//
// cuBLAS is column-major: a row-major C [M, N] is a column-major C^T, and C^T = op(B)^T
// op(A)^T, so the call passes B first and A second, each with the transposition it has.
#include <climits>

#include "engine/ops/fused.h"
#include "gpu/cuda/cublas_api.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

namespace {

static_assert(static_cast<int>(EpilogueAct::None) == dev::kActNone,
              "device/launch.h's Act numbers the epilogue's activations as EpilogueAct does");
#define MLS_CHECK_ACT(Name, text)                                       \
  static_assert(static_cast<int>(EpilogueAct::Name) == dev::kAct##Name, \
                "device/launch.h's Act numbers act '" #text "' as EpilogueAct does");
MLS_EPILOGUE_ACTS(MLS_CHECK_ACT)
#undef MLS_CHECK_ACT

constexpr size_t kMaxBatchDims = 4;

// Batch strides (in elements) of a contiguous operand [batch..., r, c] read at the index of
// the output's batch dims (broadcast dims step by 0).
std::vector<int64_t> batch_strides(const Shape& s, const Shape& out_batch) {
  const size_t r = out_batch.size(), sr = s.size() - 2;
  std::vector<int64_t> strides(r, 0);
  int64_t step = s[s.size() - 1] * s[s.size() - 2];
  for (size_t d = r; d-- > 0;) {
    if (d + sr < r) continue;
    const size_t j = d + sr - r;
    if (!(s[j] == 1 && out_batch[d] != 1)) strides[d] = step;
    step *= s[j];
  }
  return strides;
}

int as_int(int64_t v) {
  MLS_CHECK(v >= 0 && v <= INT_MAX, "cuda: a GEMM dimension above cuBLAS's int range");
  return static_cast<int>(v);
}

void gemm(const KernelCall& c, bool ta, bool tb, const Tensor* bias, EpilogueAct act) {
  CudaBackend& be = cu(c);
  const Tensor& a = *c.inputs[0];
  const Tensor& b = *c.inputs[1];
  Tensor& y = *c.outputs[0];
  MLS_CHECK(a.is_contiguous() && b.is_contiguous() && y.is_contiguous(),
            "cuda: matmul operands must be contiguous");
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const Shape& ys = y.shape();
  int64_t m = ys[ys.size() - 2];
  const int64_t n = ys.back(), k = ta ? as[as.size() - 2] : as.back();
  Shape batch(ys.begin(), ys.end() - 2);
  // A batch of x against one w with x not transposed folds into rows: one product.
  if (!ta && bs.size() == 2 && !batch.empty()) {
    m = numel(ys) / n;
    batch.clear();
  }
  MLS_CHECK(batch.size() <= kMaxBatchDims, "cuda: matmul with more than 4 batch dims");
  const int64_t count = numel(batch);
  if (m == 0 || n == 0 || count == 0) return;
  float* yp = dptr<float>(y);
  cudaStream_t stream = be.stream();
  if (k == 0) {
    check(cudaMemsetAsync(yp, 0, y.nbytes(), stream), "cudaMemsetAsync (empty GEMM)");
  } else {
    const std::vector<int64_t> sa =
        batch.empty() ? std::vector<int64_t>{} : batch_strides(as, batch);
    const std::vector<int64_t> sb =
        batch.empty() ? std::vector<int64_t>{} : batch_strides(bs, batch);
    // The innermost batch dims that both operands step through as through one (a broadcast
    // one steps by 0 throughout) make one strided-batched call; the outer ones loop.
    size_t first = batch.size();
    int64_t run = 1;
    while (first > 0) {
      const size_t d = first - 1;
      const bool joins = first == batch.size() ||
                         (sa[d] == sa[first] * batch[first] && sb[d] == sb[first] * batch[first]);
      if (!joins) break;
      run *= batch[d];
      first = d;
    }
    const long long stride_a = batch.empty() ? 0 : sa.back(),
                    stride_b = batch.empty() ? 0 : sb.back();
    const int64_t outer = count / run;
    const float one = 1.f, zero = 0.f;
    const char* ap = dptr<const char>(a);
    const char* bp = dptr<const char>(b);
    const auto esize = static_cast<int64_t>(dtype_size(a.dtype()));
    for (int64_t o = 0; o < outer; ++o) {
      int64_t rest = o, aoff = 0, boff = 0;
      for (size_t d = first; d-- > 0;) {
        const int64_t i = rest % batch[d];
        rest /= batch[d];
        aoff += i * sa[d];
        boff += i * sb[d];
      }
      const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
      float* yo = yp + o * run * m * n;
      if (a.dtype() == DType::F32) {
        check(cublas_api().sgemm_strided_batched(
                  be.cublas(), op_b, op_a, as_int(n), as_int(m), as_int(k), &one,
                  reinterpret_cast<const float*>(bp) + boff, as_int(tb ? k : n), stride_b,
                  reinterpret_cast<const float*>(ap) + aoff, as_int(ta ? m : k), stride_a, &zero,
                  yo, as_int(n), static_cast<long long>(m * n), as_int(run)),
              "cublasSgemmStridedBatched");
      } else {
        const cudaDataType_t t = a.dtype() == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
        check(cublas_api().gemm_strided_batched_ex(
                  be.cublas(), op_b, op_a, as_int(n), as_int(m), as_int(k), &one, bp + boff * esize,
                  t, as_int(tb ? k : n), stride_b, ap + aoff * esize, t, as_int(ta ? m : k),
                  stride_a, &zero, yo, CUDA_R_32F, as_int(n), static_cast<long long>(m * n),
                  as_int(run), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
      }
    }
  }
  dev::bias_act(yp, bias ? dptr<float>(*bias) : nullptr, count * m, n, static_cast<int32_t>(act),
                stream);
}

void matmul_kernel(const KernelCall& c) {
  gemm(c, c.attrs.get_int("transpose_a") != 0, c.attrs.get_int("transpose_b") != 0, nullptr,
       EpilogueAct::None);
}

void linear_act_kernel(const KernelCall& c) {
  gemm(c, c.attrs.get_int_or("transpose_a", 0) != 0, c.attrs.get_int_or("transpose_b", 0) != 0,
       c.inputs.size() > 2 ? c.inputs[2] : nullptr, epilogue_act_of(c.attrs));
}

void matmul_lowp_kernel(const KernelCall& c) {
  MLS_CHECK(c.inputs[0]->dtype() == c.inputs[1]->dtype(), "cuda: matmul_lowp operands of two dtypes");
  matmul_kernel(c);
}

}  // namespace

void register_linalg_kernels(OpRegistry& reg) {
  add_kernel(reg, "matmul_lowp", DType::BF16, matmul_lowp_kernel);
  add_kernel(reg, "matmul_lowp", DType::F16, matmul_lowp_kernel);
  add_kernel(reg, "matmul", DType::F32, matmul_kernel);
  add_kernel(reg, "linear_act", DType::F32, linear_act_kernel);
}

}  // namespace mls::cuda
