// CPU kernels of the fused ops (engine/ops/fused.h).
//
// fused_elementwise interprets its program over blocks of kBlock elements: each instruction
// runs one vectorisable loop over the block into a scratch register (a few KiB, so the
// intermediates stay in L1 and never reach the arena), and the last writes the output.
// Inputs of the output's shape are read in place, scalars as scalars, and other broadcast
// inputs are gathered per block. Every op computes the same float expression as its own
// kernel (both go through elementwise_dispatch.h), so fusing changes no bit of a result;
// tests/engine/fusion_test.cpp checks that, op by op.
//
// linear_act is one gemm() with its bias and activation epilogue; conv2d_act is conv2d's
// forward with a per-block epilogue (conv_kernels.cpp).
//
// [SECTION] Programs prepared for the CPU
// [SECTION] Inputs: in place, scalar, or gathered
// [SECTION] The ops
// [SECTION] Kernels
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/cpu/conv_kernels.h"
#include "engine/cpu/elementwise.h"
#include "engine/cpu/elementwise_dispatch.h"
#include "engine/cpu/gemm.h"
#include "engine/ops/fused.h"

// "No overlap the compiler must check for", for GCC. Clang vectorises these loops with its
// own overlap check (and warns where it cannot, e.g. under the sanitizers, if asked to).
#if defined(__clang__)
#define MLS_IVDEP
#else
#define MLS_IVDEP _Pragma("GCC ivdep")
#endif

namespace mls::cpu {

namespace {

// [SECTION] Programs prepared for the CPU

constexpr int64_t kBlock = 512;  // floats per register: 2 KiB
constexpr int kMaxRank = 8;

struct Prepared {
  FusedProgram p;
  std::vector<int32_t> reg;  // each instruction's register (-1: none needed)
  int32_t regs = 0;
};

// Registers by liveness: an instruction's register is free after its last use. A result may
// take an operand's register: element i is read before it is written.
Prepared prepare(FusedProgram p) {
  Prepared r{std::move(p), {}, 0};
  const auto& code = r.p.code;
  std::vector<size_t> last(code.size(), 0);
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i].a >= 0) last[static_cast<size_t>(code[i].a)] = i;
    if (code[i].b >= 0) last[static_cast<size_t>(code[i].b)] = i;
  }
  r.reg.assign(code.size(), -1);
  std::vector<int32_t> free;
  for (size_t i = 0; i < code.size(); ++i) {
    for (int32_t o : {code[i].a, code[i].b})
      if (o >= 0 && last[static_cast<size_t>(o)] == i && r.reg[static_cast<size_t>(o)] >= 0 &&
          (o != code[i].b || code[i].a != code[i].b)) {
        free.push_back(r.reg[static_cast<size_t>(o)]);
      }
    if (code[i].code == FusedCode::Const || i + 1 == code.size()) continue;
    if (free.empty()) {
      r.reg[i] = r.regs++;
    } else {
      r.reg[i] = free.back();
      free.pop_back();
    }
  }
  return r;
}

// Parsed once per program text: the kernel runs every step with the same attributes.
std::shared_ptr<const Prepared> prepared(const std::string& text) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<const Prepared>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(text);
  if (it != cache.end()) return it->second;
  auto p = std::make_shared<const Prepared>(prepare(FusedProgram::parse(text).value()));
  cache.emplace(text, p);
  return p;
}

// [SECTION] Inputs: in place, scalar, or gathered

enum class Access : uint8_t { InPlace, Scalar, Gather };

struct Source {
  const float* p = nullptr;
  Access access = Access::InPlace;
  int64_t strides[kMaxRank] = {};  // Gather: element strides over Layout::dims
};

// The output's axes with size-1 axes dropped and neighbours merged wherever every gathered
// input steps through both as through one (a bias [C] over [N, C, H, W] leaves [N, C, H*W]).
struct Layout {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
};

Layout make_layout(const KernelCall& c, std::vector<Source>& src) {
  const Shape& out = c.outputs[0]->shape();
  const int64_t total = numel(out);
  std::vector<Strides> st;
  std::vector<size_t> gathered;
  for (size_t k = 0; k < src.size(); ++k) {
    const Tensor& t = *c.inputs[k];
    src[k].p = in_ptr<float>(c, k);
    if (t.numel() == total) {
      src[k].access = Access::InPlace;  // broadcasting to the same count changes no offset
    } else if (t.numel() == 1) {
      src[k].access = Access::Scalar;
    } else {
      src[k].access = Access::Gather;
      gathered.push_back(k);
      st.push_back(strides_over(t.shape(), out));
    }
  }
  Layout l;
  std::vector<std::vector<int64_t>> merged(gathered.size());
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = l.rank > 0;
    for (size_t g = 0; g < gathered.size() && merge; ++g)
      merge = merged[g].back() == st[g][d] * out[d];
    if (merge) {
      l.dims[l.rank - 1] *= out[d];
      for (size_t g = 0; g < gathered.size(); ++g) merged[g].back() = st[g][d];
    } else {
      MLS_CHECK(l.rank < kMaxRank, "fused_elementwise: rank above 8");
      l.dims[l.rank++] = out[d];
      for (size_t g = 0; g < gathered.size(); ++g) merged[g].push_back(st[g][d]);
    }
  }
  for (size_t g = 0; g < gathered.size(); ++g)
    std::copy(merged[g].begin(), merged[g].end(), src[gathered[g]].strides);
  return l;
}

// dst[0, n) <- the broadcast input at flat output indices [i0, i0 + n), a run along the
// innermost axis at a time (a fill where that axis is broadcast, a copy where it is not).
void gather(const Source& s, const Layout& l, int64_t i0, int64_t n, float* dst) {
  const int r = l.rank;
  int64_t idx[kMaxRank], off = 0, rem = i0;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % l.dims[d];
    rem /= l.dims[d];
    off += idx[d] * s.strides[d];
  }
  const int64_t last = l.dims[r - 1], sl = s.strides[r - 1];
  while (n > 0) {
    int64_t len = std::min(n, last - idx[r - 1]);
    const float* p = s.p + off;
    if (sl == 0) {
      std::fill(dst, dst + len, *p);
    } else if (sl == 1) {
      std::memcpy(dst, p, sizeof(float) * static_cast<size_t>(len));
    } else {
      for (int64_t i = 0; i < len; ++i) dst[i] = p[i * sl];
    }
    dst += len;
    n -= len;
    idx[r - 1] += len;
    off += len * sl;
    if (idx[r - 1] < last) continue;
    off -= last * sl;
    idx[r - 1] = 0;
    for (int d = r - 2; d >= 0; --d) {
      off += s.strides[d];
      if (++idx[d] < l.dims[d]) break;
      off -= l.dims[d] * s.strides[d];
      idx[d] = 0;
    }
  }
}

// [SECTION] The ops

// A value of the block: n floats at p, or one scalar s everywhere (p null).
struct Operand {
  const float* p = nullptr;
  float s = 0;
};

// A result's register may be an operand's (identical, never partly overlapping), which
// leaves no loop-carried dependence: ivdep lets GCC vectorise without an overlap check.
template <typename F>
Operand unary(Operand a, float* out, int64_t n, F f) {
  if (!a.p) return {nullptr, f(a.s)};
  const float* x = a.p;
  MLS_IVDEP
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
  return {out, 0};
}

template <typename F>
Operand binary(Operand a, Operand b, float* out, int64_t n, F f) {
  if (!a.p && !b.p) return {nullptr, f(a.s, b.s)};
  if (!a.p) {
    const float va = a.s, *y = b.p;
    MLS_IVDEP
    for (int64_t i = 0; i < n; ++i) out[i] = f(va, y[i]);
  } else if (!b.p) {
    const float vb = b.s, *x = a.p;
    MLS_IVDEP
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], vb);
  } else {
    const float *x = a.p, *y = b.p;
    MLS_IVDEP
    for (int64_t i = 0; i < n; ++i) out[i] = f(x[i], y[i]);
  }
  return {out, 0};
}

// One instruction over a block: the formula its op's own kernel computes
// (elementwise_dispatch.h).
Operand run(const FusedInstr& in, Operand a, Operand b, float* out, int64_t n) {
  return with_formula(in, [&](auto f) {
    if constexpr (kBinaryFormula<decltype(f)>)
      return binary(a, b, out, n, f);
    else
      return unary(a, out, n, f);
  });
}

// [SECTION] Kernels

void fused_elementwise_kernel(const KernelCall& c) {
  std::shared_ptr<const Prepared> prog = prepared(c.attrs.get_string("program"));
  const auto& code = prog->p.code;
  std::vector<Source> src(c.inputs.size());
  const Layout layout = make_layout(c, src);
  float* y = out_ptr<float>(c, 0);
  const int64_t total = c.outputs[0]->numel();
  const int64_t blocks = (total + kBlock - 1) / kBlock;
  pool_of(c).parallel_for(
      0, blocks, std::max<int64_t>(1, kParallelGrain / kBlock), [&](int64_t lo, int64_t hi) {
        thread_local std::vector<float> scratch;
        thread_local std::vector<Operand> val;
        scratch.resize(std::max(scratch.size(), static_cast<size_t>(prog->regs * kBlock)));
        val.resize(std::max(val.size(), code.size()));
        for (int64_t blk = lo; blk < hi; ++blk) {
          const int64_t i0 = blk * kBlock, n = std::min(kBlock, total - i0);
          for (size_t i = 0; i < code.size(); ++i) {
            const FusedInstr& in = code[i];
            float* reg = prog->reg[i] >= 0 ? scratch.data() + prog->reg[i] * kBlock : y + i0;
            if (in.code == FusedCode::Input) {
              const Source& s = src[static_cast<size_t>(in.p0)];
              if (s.access == Access::InPlace) {
                val[i] = {s.p + i0, 0};
              } else if (s.access == Access::Scalar) {
                val[i] = {nullptr, s.p[0]};
              } else {
                gather(s, layout, i0, n, reg);
                val[i] = {reg, 0};
              }
            } else if (in.code == FusedCode::Const) {
              val[i] = {nullptr, static_cast<float>(in.p0)};
            } else {
              Operand b = in.b >= 0 ? val[static_cast<size_t>(in.b)] : Operand{};
              val[i] = run(in, val[static_cast<size_t>(in.a)], b, reg, n);
            }
          }
          if (!val[code.size() - 1].p)
            std::fill(y + i0, y + i0 + n, val[code.size() - 1].s);  // all scalar
        }
      });
}

// One GEMM: a batch of x against a 2-D w folds into the rows (M = all of x's rows).
GemmArgs linear_act_shape(const Shape& as, const Shape& bs, const Shape& ys, const Attrs& attrs) {
  const bool ta = attrs.get_int_or("transpose_a", 0) != 0,
             tb = attrs.get_int_or("transpose_b", 0) != 0;
  const int64_t n = ys.back(), k = ta ? as[as.size() - 2] : as.back();
  return GemmArgs{.trans_a = ta,
                  .trans_b = tb,
                  .m = n > 0 ? numel(ys) / n : 0,
                  .n = n,
                  .k = k,
                  .lda = as.back(),
                  .ldb = bs.back(),
                  .ldc = n};
}

size_t linear_act_workspace(std::span<const ValueType> in, std::span<const ValueType> out,
                            const Attrs& a, const Backend& be) {
  const GemmArgs g = linear_act_shape(in[0].shape, in[1].shape, out[0].shape, a);
  return static_cast<size_t>(gemm_workspace_floats(g, be.num_threads())) * sizeof(float);
}

void linear_act_kernel(const KernelCall& c) {
  GemmArgs g =
      linear_act_shape(c.inputs[0]->shape(), c.inputs[1]->shape(), c.outputs[0]->shape(), c.attrs);
  const bool bias = c.inputs.size() == 3;
  g.a = in_ptr<float>(c, 0);
  g.b = in_ptr<float>(c, 1);
  g.c = out_ptr<float>(c, 0);
  g.bias = bias ? in_ptr<float>(c, 2) : nullptr;
  g.bias_axis = bias ? BiasAxis::Col : BiasAxis::None;
  g.act = epilogue_act_of(c.attrs);
  const FloatSpan ws = workspace_of(c);
  g.workspace = ws.p;
  g.workspace_floats = ws.n;
  gemm(pool_of(c), g);
}

void conv2d_act_kernel(const KernelCall& c) {
  conv2d_forward(c, c.inputs.size() == 3 ? in_ptr<float>(c, 2) : nullptr, epilogue_act_of(c.attrs));
}

}  // namespace

void register_fused_kernels(OpRegistry& reg) {
  reg.register_kernel("fused_elementwise", DeviceKind::CPU, DType::F32, fused_elementwise_kernel);
  reg.register_kernel("linear_act", DeviceKind::CPU, DType::F32, linear_act_kernel);
  reg.register_workspace("linear_act", DeviceKind::CPU, DType::F32, linear_act_workspace);
  reg.register_kernel("conv2d_act", DeviceKind::CPU, DType::F32, conv2d_act_kernel);
  reg.register_workspace("conv2d_act", DeviceKind::CPU, DType::F32, conv2d_forward_workspace);
}

}  // namespace mls::cpu
