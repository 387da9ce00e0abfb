// autocast: matrix products in bf16 (or f16) with f32 results, everything else in f32.
//
// Before autodiff is the place for it: cast's rule (derivative 1, in f32) and matmul_lowp's
// (the output gradient rounded once, both products in low precision) then make the whole
// backward mixed precision, and parameters' gradients come out f32 with nothing to undo.
// On a differentiated graph it converts the backward's matmuls too, to the same effect
// but with the forward's rules still in f32.
#include <unordered_map>

#include "engine/ops/math.h"
#include "engine/ops/precision.h"
#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

Graph autocast(const Graph& g, DType low) {
  MLS_CHECK(low == DType::BF16 || low == DType::F16, "autocast: the low precision must be bf16 or f16");
  Rewriter rw(g);
  Graph& out = rw.graph();
  // One cast per value, however many products read it (a weight used forward and backward).
  std::unordered_map<int32_t, Ref> lowered;
  auto to_low = [&](const Node& like, Ref v) {
    auto [it, fresh] = lowered.try_emplace(v.id);
    if (fresh) {
      out.set_label(like.label);
      out.set_backward_mode(like.backward);
      it->second = cast(out, v, low);
    }
    return it->second;
  };
  for (const Node& n : g.nodes()) {
    if (n.op->name != "matmul" || g.type_of(n.inputs[0]).dtype != DType::F32) {
      rw.copy(n);
      continue;
    }
    const Ref a = to_low(n, rw.map(n.inputs[0])), b = to_low(n, rw.map(n.inputs[1]));
    rw.replace(n.outputs[0], rw.emit(n, "matmul_lowp", {a, b}, n.attrs)[0]);
  }
  return rw.finish();
}

}  // namespace mls
