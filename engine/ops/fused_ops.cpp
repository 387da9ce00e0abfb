// The fused ops: fused_elementwise, linear_act, conv2d_act (engine/ops/fused.h).
//
// None has derivative rules of its own: each re-emits the primitive ops it stands for
// (all but the last, whose result is the fused op's output) and runs their rules through
// backprop / forward_tangents. The gradient is then exactly the unfused graph's, and a
// gradient of a gradient works as for any composite. Their float64 references run the
// primitives' references, so they cannot drift from what they fuse.
//
// [SECTION] Builders
// [SECTION] Tapes: the primitives a fused op stands for
// [SECTION] fused_elementwise
// [SECTION] linear_act and conv2d_act
// [SECTION] Registration
#include "engine/autodiff/autodiff.h"
#include "engine/ir/graph.h"
#include "engine/ops/fused.h"
#include "engine/ops/op_helpers.h"

// [SECTION] Builders
namespace mls {

Ref fused_elementwise(Emitter& e, std::span<const Ref> inputs, const FusedProgram& p) {
  return e.emit("fused_elementwise", inputs, {{"program", p.to_text()}})[0];
}

Ref linear_act(Emitter& e, Ref x, Ref w, Ref bias, std::string_view act, bool transpose_a,
               bool transpose_b) {
  Attrs a{{"transpose_a", int64_t{transpose_a}},
          {"transpose_b", int64_t{transpose_b}},
          {"act", std::string(act)}};
  Refs in{x, w};
  if (bias.valid()) in.push_back(bias);
  return e.emit("linear_act", in, a)[0];
}

Ref conv2d_act(Emitter& e, Ref x, Ref w, Ref bias, const Conv2dParams& p, std::string_view act) {
  Attrs a = conv2d_attrs(p);
  a.set("act", std::string(act));
  Refs in{x, w};
  if (bias.valid()) in.push_back(bias);
  return e.emit("conv2d_act", in, a)[0];
}

// Every epilogue act applies an elementwise entry of its Name and text that takes one operand
// and no attributes: the linear_act and conv2d_act kernels have nowhere to keep one.
namespace {
struct EntryFacts {
  FusedCode code;
  std::string_view text;
  int operands, params;
};
constexpr EntryFacts kEntryFacts[] = {
#define MLS_ENTRY_FACTS(Name, text, op, operands, params) \
  {FusedCode::Name, #text, operands, params},
    MLS_ELEMENTWISE(MLS_ENTRY_FACTS)
#undef MLS_ENTRY_FACTS
};
constexpr bool applies_unary_entry(FusedCode code, std::string_view text) {
  for (const EntryFacts& e : kEntryFacts)
    if (e.code == code) return e.text == text && e.operands == 1 && e.params == 0;
  return false;
}
}  // namespace
#define MLS_CHECK_ACT(Name, text)                                                            \
  static_assert(applies_unary_entry(epilogue_fused_code(EpilogueAct::Name), #text),          \
                "MLS_EPILOGUE_ACTS: act '" #text "' must name an elementwise entry X(" #Name \
                ", " #text ", ...) of one operand and no attributes");
MLS_EPILOGUE_ACTS(MLS_CHECK_ACT)
#undef MLS_CHECK_ACT

std::optional<EpilogueAct> epilogue_act(std::string_view name) {
  for (const auto& [act, n] : kEpilogueActs)
    if (n == name) return act;
  return std::nullopt;
}

EpilogueAct epilogue_act_of(const Attrs& attrs) {
  const AttrValue* v = attrs.find("act");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  if (!s) return EpilogueAct::None;
  auto act = epilogue_act(*s);
  MLS_CHECK(act.has_value(), "linear_act/conv2d_act: unknown activation");
  return *act;
}

// The op's elementwise code, as the fusion of elementwise ops reads it (a tanh-form gelu is
// GeluTanh, which no act applies).
std::optional<EpilogueAct> epilogue_act_of_op(std::string_view op, const Attrs& attrs) {
  const auto in = FusedProgram::instr_of(op, attrs);
  if (!in) return std::nullopt;
  for (const auto& [act, name] : kEpilogueActs)
    if (act != EpilogueAct::None && epilogue_fused_code(act) == in->code) return act;
  return std::nullopt;
}

std::string_view epilogue_act_name(EpilogueAct act) {
  for (const auto& [a, n] : kEpilogueActs)
    if (a == act) return n;
  return "?";
}

std::string epilogue_act_names() {
  std::string out;
  for (size_t i = 0; i < kEpilogueActs.size(); ++i)
    out += (i == 0 ? "" : i + 1 == kEpilogueActs.size() ? " or " : ", ") + std::string(kEpilogueActs[i].second);
  return out;
}

}  // namespace mls

namespace mls::ops {

namespace {

// [SECTION] Tapes: the primitives a fused op stands for

// Records primitives as a tape. The last one is not emitted: the fused op's own output
// stands for its result, so rules that read their output (exp, tanh) read the real one.
class TapeBuilder {
 public:
  TapeBuilder(Emitter& e, Ref result) : e_(e), result_(result) {
    if (auto* g = dynamic_cast<Graph*>(&e)) scope_ = g->label();
  }
  Ref add(std::string_view op, Refs inputs, const Attrs& attrs, bool last) {
    const OpDef* def = op_registry().find(op);
    MLS_CHECK(def != nullptr, "a fused op stands for an unknown op");
    Refs outs = last ? Refs{result_} : e_.emit(op, inputs, attrs);
    tape_.push_back({def, attrs, std::move(inputs), outs, scope_});
    return outs[0];
  }
  const std::vector<TapeEntry>& tape() const { return tape_; }

  // The fused op's vjp: gradients of the inputs it needs (duplicated inputs get theirs once).
  Refs vjp(const GradContext& c) const {
    Refs wrt, out(c.inputs.size());
    std::vector<size_t> slot;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      bool first = true;
      for (size_t j = 0; j < i; ++j) first = first && !(c.inputs[j] == c.inputs[i]);
      if (c.needs(i) && first) {
        wrt.push_back(c.in(i));
        slot.push_back(i);
      }
    }
    Refs g = backprop(e_, tape_, result_, wrt, c.gout(0));
    for (size_t k = 0; k < slot.size(); ++k) out[slot[k]] = g[k];
    e_.set_scope(scope_);
    return out;
  }
  Refs jvp(const JvpContext& c) const {
    Refs primals, tangents;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      if (c.tan(i).valid()) {
        primals.push_back(c.in(i));
        tangents.push_back(c.tan(i));
      }
    Refs t = forward_tangents(e_, tape_, primals, tangents, std::span<const Ref>(&result_, 1));
    e_.set_scope(scope_);
    return t;
  }

 private:
  Emitter& e_;
  Ref result_;
  std::string scope_;
  std::vector<TapeEntry> tape_;
};

// The float64 reference of a registry op (a fused op's reference runs its primitives').
RefArray ref_of(std::string_view op, std::vector<RefArray> in, const Attrs& a) {
  const OpDef* def = op_registry().find(op);
  MLS_CHECK(def != nullptr && def->reference != nullptr, "a fused op stands for an op without a reference");
  return def->reference(in, a)[0];
}

// [SECTION] fused_elementwise

FusedProgram program_of(const Attrs& a) { return FusedProgram::parse(a.get_string("program")).value(); }

Result<Types> infer_fused_elementwise(InTypes in, const Attrs& a) {
  auto p = FusedProgram::parse(a.get_string("program"));
  if (!p) return p.error();
  if (static_cast<int>(in.size()) != p->num_inputs)
    return make_error("the program reads " + std::to_string(p->num_inputs) + " inputs, got " +
                      std::to_string(in.size()));
  for (const ValueType& t : in)
    if (t.dtype != DType::F32) return make_error("expects f32 inputs, got " + type_str(t));
  // Each instruction must type-check as its primitive: the gradient re-emits them.
  Types t(p->code.size());
  for (size_t i = 0; i < p->code.size(); ++i) {
    const FusedInstr& ins = p->code[i];
    if (ins.code == FusedCode::Input) {
      t[i] = in[static_cast<size_t>(ins.p0)];
      continue;
    }
    if (ins.code == FusedCode::Const) {
      t[i] = f32({});
      continue;
    }
    auto [op, attrs] = FusedProgram::op_of(ins);
    Types args{t[static_cast<size_t>(ins.a)]};
    if (ins.b >= 0) args.push_back(t[static_cast<size_t>(ins.b)]);
    auto r = op_registry().find(op)->infer(args, attrs);
    if (!r) return make_error("instruction " + std::to_string(i) + " (" + op + "): " + r.error().message);
    t[i] = (*r)[0];
  }
  if (t.back().shape.size() > 8) return make_error("rank " + std::to_string(t.back().shape.size()) + " is above 8");
  return Types{t.back()};
}

TapeBuilder elementwise_tape(Emitter& e, std::span<const Ref> inputs, Ref result, const Attrs& a) {
  FusedProgram p = program_of(a);
  TapeBuilder t(e, result);
  Refs v(p.code.size());
  for (size_t i = 0; i < p.code.size(); ++i) {
    const FusedInstr& in = p.code[i];
    if (in.code == FusedCode::Input) {
      v[i] = inputs[static_cast<size_t>(in.p0)];
    } else if (in.code == FusedCode::Const) {
      v[i] = fill(e, {DType::F32, {}}, in.p0);
    } else {
      auto [op, attrs] = FusedProgram::op_of(in);
      Refs args{v[static_cast<size_t>(in.a)]};
      if (in.b >= 0) args.push_back(v[static_cast<size_t>(in.b)]);
      v[i] = t.add(op, args, attrs, i + 1 == p.code.size());
    }
  }
  return t;
}

std::vector<RefArray> fused_elementwise_ref(std::span<const RefArray> in, const Attrs& a) {
  FusedProgram p = program_of(a);
  std::vector<RefArray> v(p.code.size());
  for (size_t i = 0; i < p.code.size(); ++i) {
    const FusedInstr& ins = p.code[i];
    if (ins.code == FusedCode::Input) {
      v[i] = in[static_cast<size_t>(ins.p0)];
    } else if (ins.code == FusedCode::Const) {
      v[i] = RefArray{{}, {static_cast<double>(static_cast<float>(ins.p0))}};  // as the kernel holds it
    } else {
      auto [op, attrs] = FusedProgram::op_of(ins);
      std::vector<RefArray> args{v[static_cast<size_t>(ins.a)]};
      if (ins.b >= 0) args.push_back(v[static_cast<size_t>(ins.b)]);
      v[i] = ref_of(op, std::move(args), attrs);
    }
  }
  return {v.back()};
}

std::vector<OpSample> fused_elementwise_samples() {
  auto s = [](std::vector<ValueType> in, const char* program, double lo, double hi, double min_abs = 0) {
    OpSample o = sample(std::move(in), {{"program", std::string(program)}});
    o.lo = lo;
    o.hi = hi;
    o.min_abs = min_abs;
    return o;
  };
  return {
      s({f32({3, 4}), f32({3, 4}), f32({4})}, "tanh(add(mul(x0,x1),x2))", -1, 1),
      s({f32({2, 3, 4}), f32({3, 1})}, "t0=sub(x0,x1); mul(t0,t0)", -1, 1),
      // The shape of BatchNorm's input gradient: per-channel operands broadcast over NCHW.
      s({f32({2, 3, 2, 2}), f32({1, 3, 1, 1}), f32({2, 3, 2, 2}), f32({1, 3, 1, 1}), f32({1, 3, 1, 1})},
        "mul(sub(x0,add(x1,mul(x2,x3))),x4)", -1, 1),
      s({f32({3, 5}), f32({})}, "add(scale(sigmoid(x0),-1.5),mul(x1,add_scalar(silu(x0),0.25)))", -2, 2),
      s({f32({2, 6})}, "add(gelu(x0),gelu_tanh(mul(x0,0.5)))", -3, 3),
      s({f32({4, 3}), f32({4, 3})}, "div(sqrt(x0),add(rsqrt(x1),log(pow(x0,x1))))", 0.5, 2),
      s({f32({3, 4}), f32({3, 4})},
        "t0=abs(x0); add(leaky_relu(clamp(x1,-0.5,inf),0.2),mul(softplus(neg(t0),2,1.5),exp(t0)))", -1, 1,
        0.05),
      s({f32({3, 4}), f32({3, 4})},
        "add(relu_backward(x0,x1),maximum(gelu_backward(x1,x0),minimum(x0,relu(x1))))", -1, 1, 0.05),
      s({f32({3, 4}), f32({3, 4}), f32({4})},
        "add(clamp_backward(x0,x1,-0.5,0.5),mul(gelu_tanh_backward(x1,x0),x2))", -1, 1, 0.05),
  };
}

// [SECTION] linear_act and conv2d_act

Attrs without_act(const Attrs& a) {
  Attrs out;
  for (const auto& [k, v] : a.items())
    if (k != "act") out.set(k, v);
  return out;
}

std::string act_of(const Attrs& a) {
  const AttrValue* v = a.find("act");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  return s ? *s : "none";
}

// The registry op and attributes of the elementwise entry that the act applies (not None).
std::pair<std::string, Attrs> act_op(const Attrs& a) {
  return FusedProgram::op_of({.code = epilogue_fused_code(epilogue_act_of(a))});
}

Attrs matmul_attrs(const Attrs& a) {
  return {{"transpose_a", a.get_int_or("transpose_a", 0)}, {"transpose_b", a.get_int_or("transpose_b", 0)}};
}

// Checks the optional bias against `channels` and the activation.
Result<void> check_bias_act(InTypes in, const Attrs& a, int64_t channels, const char* what) {
  if (in.size() != 2 && in.size() != 3) return make_error("takes 2 or 3 inputs (x, w, optional bias), got " + std::to_string(in.size()));
  for (const ValueType& t : in)
    if (t.dtype != DType::F32) return make_error("expects f32 inputs, got " + type_str(t));
  if (in.size() == 3 && in[2].shape != Shape{channels})
    return make_error(std::string("bias must be [") + what + "] = [" + std::to_string(channels) + "], got " +
                      shape_str(in[2].shape));
  if (!epilogue_act(act_of(a)))
    return make_error("act must be " + epilogue_act_names() + ", got \"" + act_of(a) + "\"");
  return {};
}

Result<Types> infer_linear_act(InTypes in, const Attrs& a) {
  if (in.size() < 2) return make_error("takes x, w and an optional bias");
  auto t = op_registry().find("matmul")->infer(in.subspan(0, 2), matmul_attrs(a));
  if (!t) return t;
  // The kernel runs one GEMM: 2-D operands, or a batch of x against one w (rows folded).
  bool ta = a.get_int_or("transpose_a", 0) != 0;
  if (!(in[0].shape.size() == 2 && in[1].shape.size() == 2) && !(in[1].shape.size() == 2 && !ta))
    return make_error("needs 2-D operands, or a batch of x against a 2-D w (not transposed), got " +
                      shape_str(in[0].shape) + " and " + shape_str(in[1].shape));
  if (auto r = check_bias_act(in, a, (*t)[0].shape.back(), "N"); !r) return r.error();
  return t;
}

Result<Types> infer_conv2d_act(InTypes in, const Attrs& a) {
  if (in.size() < 2) return make_error("takes x, w and an optional bias");
  auto t = op_registry().find("conv2d")->infer(in.subspan(0, 2), without_act(a));
  if (!t) return t;
  if (auto r = check_bias_act(in, a, in[1].shape[0], "O"); !r) return r.error();
  return t;
}

// matmul or conv2d, the bias add, the activation: the last of them is the fused output.
TapeBuilder bias_act_tape(Emitter& e, std::span<const Ref> in, Ref result, const Attrs& a, bool conv) {
  TapeBuilder t(e, result);
  const std::string act = act_of(a);
  bool has_bias = in.size() == 3, has_act = act != "none";
  Ref y = conv ? t.add("conv2d", {in[0], in[1]}, without_act(a), !has_bias && !has_act)
               : t.add("matmul", {in[0], in[1]}, matmul_attrs(a), !has_bias && !has_act);
  if (has_bias) {
    Ref b = in[2];
    if (conv) {
      int64_t o = e.shape_of(b)[0];
      Shape bs{o, 1, 1};
      b = t.add("reshape", {b}, {{"shape", bs}}, false);
    }
    y = t.add("add", {y, b}, {}, !has_act);
  }
  if (has_act) {
    const auto [op, attrs] = act_op(a);
    t.add(op, {y}, attrs, true);
  }
  return t;
}

// matmul's or conv2d's reference, then the bias and the activation's reference.
std::vector<RefArray> bias_act_ref(std::span<const RefArray> in, const Attrs& a, bool conv) {
  RefArray y = conv ? ref_of("conv2d", {in[0], in[1]}, without_act(a)) : ref_of("matmul", {in[0], in[1]}, matmul_attrs(a));
  if (in.size() == 3) {
    RefArray b = in[2];
    if (conv) b.shape = {b.shape[0], 1, 1};
    y = ref_of("add", {y, b}, {});
  }
  if (epilogue_act_of(a) != EpilogueAct::None) {
    const auto [op, attrs] = act_op(a);
    y = ref_of(op, {y}, attrs);
  }
  return {y};
}

std::vector<OpSample> linear_act_samples() {
  auto s = [](std::vector<ValueType> in, int64_t ta, int64_t tb, const char* act, const char* note) {
    return sample(std::move(in), {{"transpose_a", ta}, {"transpose_b", tb}, {"act", std::string(act)}}, note);
  };
  return {s({f32({4, 5}), f32({5, 3}), f32({3})}, 0, 0, "relu", "bias + relu"),
          s({f32({4, 5}), f32({5, 3})}, 0, 0, "sigmoid", "no bias"),
          s({f32({5, 4}), f32({3, 5}), f32({3})}, 1, 1, "silu", "both transposed"),
          s({f32({4, 5}), f32({3, 5}), f32({3})}, 0, 1, "tanh", "w transposed"),
          s({f32({3, 6}), f32({6, 4}), f32({4})}, 0, 0, "gelu", "gelu"),
          s({f32({2, 3, 5}), f32({5, 4}), f32({4})}, 0, 0, "none", "batch of x, bias only")};
}

std::vector<OpSample> conv2d_act_samples() {
  auto s = [](Shape x, Shape w, bool bias, Attrs a, const char* act, const char* note) {
    a.set("act", std::string(act));
    std::vector<ValueType> in{f32(std::move(x)), f32(w)};
    if (bias) in.push_back(f32({w[0]}));
    return sample(std::move(in), a, note);
  };
  return {s({2, 3, 5, 5}, {4, 3, 3, 3}, true, {{"padding", std::vector<int64_t>{1, 1}}}, "relu",
            "stride 1, padded: the direct kernel"),
          s({2, 3, 6, 6}, {4, 3, 3, 3}, true, {{"stride", std::vector<int64_t>{2, 2}}}, "sigmoid",
            "stride 2: im2col + GEMM"),
          s({2, 4, 4, 4}, {6, 2, 3, 3}, true, {{"groups", int64_t{2}}}, "tanh", "two groups"),
          s({1, 3, 4, 4}, {5, 3, 1, 1}, true, {}, "gelu", "pointwise"),
          s({2, 2, 5, 5}, {3, 2, 3, 3}, false, {}, "silu", "no bias")};
}

}  // namespace

// [SECTION] Registration

void register_fused_ops(OpRegistry& reg) {
  reg.define({.name = "fused_elementwise",
              .num_inputs = -1,
              .attrs = {{"program", AttrKind::String}},
              .infer = infer_fused_elementwise,
              .vjp = [](const GradContext& c) { return elementwise_tape(c.e, c.inputs, c.out(0), c.attrs).vjp(c); },
              .jvp = [](const JvpContext& c) { return elementwise_tape(c.e, c.inputs, c.out(0), c.attrs).jvp(c); },
              .reference = fused_elementwise_ref,
              .samples = fused_elementwise_samples,
              .inplace = true,  // element i of every input is read before element i is written
              .doc = "an elementwise expression of its inputs (attr program, e.g. "
                     "\"relu(add(x0,x1))\") in one pass over memory; inputs broadcast. Made by "
                     "the elementwise fusion pass"});
  reg.define({.name = "linear_act",
              .num_inputs = -1,
              .attrs = {{"transpose_a", AttrKind::Int, false},
                        {"transpose_b", AttrKind::Int, false},
                        {"act", AttrKind::String, false}},
              .infer = infer_linear_act,
              .vjp = [](const GradContext& c) { return bias_act_tape(c.e, c.inputs, c.out(0), c.attrs, false).vjp(c); },
              .jvp = [](const JvpContext& c) { return bias_act_tape(c.e, c.inputs, c.out(0), c.attrs, false).jvp(c); },
              .reference = [](std::span<const RefArray> in, const Attrs& a) { return bias_act_ref(in, a, false); },
              .samples = linear_act_samples,
              .doc = "act(op(x) op(w) + bias): matmul, an optional bias [N] and an activation "
                     "(none, relu, sigmoid, tanh, gelu, silu) in one GEMM with an epilogue",
              .flops = matmul_flops});
  reg.define({.name = "conv2d_act",
              .num_inputs = -1,
              .attrs = {{"stride", AttrKind::Ints, false},
                        {"padding", AttrKind::Ints, false},
                        {"dilation", AttrKind::Ints, false},
                        {"groups", AttrKind::Int, false},
                        {"act", AttrKind::String, false}},
              .infer = infer_conv2d_act,
              .vjp = [](const GradContext& c) { return bias_act_tape(c.e, c.inputs, c.out(0), c.attrs, true).vjp(c); },
              .jvp = [](const JvpContext& c) { return bias_act_tape(c.e, c.inputs, c.out(0), c.attrs, true).jvp(c); },
              .reference = [](std::span<const RefArray> in, const Attrs& a) { return bias_act_ref(in, a, true); },
              .samples = conv2d_act_samples,
              .doc = "act(conv2d(x, w) + bias[O] per channel): a convolution whose bias and "
                     "activation run on each output block while it is in cache",
              .flops = conv_flops});
}

}  // namespace mls::ops
