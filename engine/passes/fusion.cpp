// Fusion passes: run after differentiation (default_passes, after CSE), so they see the
// training step whole, backward included.
//
// fuse_linear_activation: matmul -> add(bias) -> activation becomes one linear_act, and
// conv2d -> add(bias [O,1,1]) -> activation one conv2d_act, when nothing else reads the
// intermediates. The gradients of relu and leaky_relu read the activation's output, not its
// input (y > 0 exactly where x > 0), so in training the pre-activation has no second reader
// and the whole chain fuses.
// gelu and silu need their input in the backward pass: there only the bias fuses.
//
// fuse_elementwise: a maximal DAG of elementwise nodes of one output shape whose
// intermediates nobody else reads becomes one fused_elementwise node at the position of its
// last node. Operands of other shapes (per-channel, per-row) are leaves that broadcast;
// scalar fills and constants become literals in the program.
//
// [SECTION] Use counts and Update ops
// [SECTION] matmul/conv + bias + activation
// [SECTION] Elementwise groups
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "engine/ops/fused.h"
#include "engine/passes/passes.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

// [SECTION] Use counts and Update ops

struct Uses {
  std::vector<std::vector<int32_t>> readers;  // value -> the nodes that read it (each once)
  std::vector<bool> output;                   // the graph returns it
  explicit Uses(const Graph& g) : readers(g.values().size()), output(g.values().size(), false) {
    for (size_t i = 0; i < g.nodes().size(); ++i)
      for (Ref r : g.nodes()[i].inputs) {
        auto& v = readers[static_cast<size_t>(r.id)];
        if (v.empty() || v.back() != static_cast<int32_t>(i)) v.push_back(static_cast<int32_t>(i));
      }
    for (Ref r : g.outputs()) output[static_cast<size_t>(r.id)] = true;
  }
  const std::vector<int32_t>& of(Ref r) const { return readers[static_cast<size_t>(r.id)]; }
  bool escapes(Ref r) const { return output[static_cast<size_t>(r.id)]; }
};

// A fused node runs at the position of the last node it replaces, so the others move later.
// That is safe unless an Update op (a running statistic, an optimizer step) writes one of
// their inputs in between.
class Mutations {
 public:
  explicit Mutations(const Graph& g) {
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      for (int k : n.op->mutated_inputs) at_[n.inputs[static_cast<size_t>(k)].id].push_back(static_cast<int32_t>(i));
    }
  }
  bool moves_safely(const Node& n, int32_t from, int32_t to) const {
    for (Ref r : n.inputs) {
      auto it = at_.find(r.id);
      if (it == at_.end()) continue;
      for (int32_t p : it->second)
        if (p > from && p < to) return false;
    }
    return true;
  }

 private:
  std::unordered_map<int32_t, std::vector<int32_t>> at_;
};

int32_t producer(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  return v.kind == ValueKind::Node ? v.node : -1;
}

bool all_f32(const Graph& g, const Node& n) {
  for (Ref r : n.inputs)
    if (g.type_of(r).dtype != DType::F32) return false;
  for (Ref r : n.outputs)
    if (g.type_of(r).dtype != DType::F32) return false;
  return true;
}

// [SECTION] matmul/conv + bias + activation

// The shape `s` padded with leading 1s to `rank` axes.
Shape padded(const Shape& s, size_t rank) {
  Shape p(rank - std::min(rank, s.size()), 1);
  p.insert(p.end(), s.begin(), s.end());
  return p;
}

struct BiasActPlan {
  int32_t first = -1;  // the matmul or conv2d
  int32_t bias_add = -1;
  int32_t root = -1;   // the last node replaced: the fused node's output is its output
  Ref bias;            // a value of the source graph (any shape holding C values)
  int64_t channels = 0;
  std::string act = "none";
};

// Whether `n` adds a bias to `y` (one value per output column, or per channel for conv2d),
// returning the bias operand.
Ref bias_operand(const Graph& g, const Node& n, Ref y, bool conv) {
  if (n.op->name != "add" || !all_f32(g, n)) return {};
  Ref b = n.inputs[0] == y ? n.inputs[1] : n.inputs[1] == y ? n.inputs[0] : Ref{};
  if (!b.valid() || b == y) return {};
  const Shape ys = g.type_of(y).shape, bs = g.type_of(b).shape;
  if (g.type_of(n.outputs[0]).shape != ys || bs.size() > ys.size()) return {};
  Shape want(ys.size(), 1);
  if (conv) want[1] = ys[1];
  else want.back() = ys.back();
  return padded(bs, ys.size()) == want ? b : Ref{};
}

std::string activation_name(const Node& n) {
  auto act = epilogue_act_of_op(n.op->name, n.attrs);
  return act ? std::string(epilogue_act_name(*act)) : std::string();
}

// The kernel runs one GEMM: 2-D operands, or a batch of x against one 2-D w, not transposed.
bool one_gemm(const Graph& g, const Node& n) {
  size_t ra = g.type_of(n.inputs[0]).shape.size(), rb = g.type_of(n.inputs[1]).shape.size();
  return (ra == 2 && rb == 2) || (rb == 2 && n.attrs.get_int("transpose_a") == 0);
}

std::optional<BiasActPlan> plan_bias_act(const Graph& g, const Uses& u, const Mutations& mut, int32_t i) {
  const Node& n = g.nodes()[static_cast<size_t>(i)];
  bool conv = n.op->name == "conv2d";
  if ((!conv && n.op->name != "matmul") || !all_f32(g, n)) return std::nullopt;
  if (!conv && !one_gemm(g, n)) return std::nullopt;
  BiasActPlan p{.first = i, .root = i};
  Ref cur = n.outputs[0];
  auto single_reader = [&](Ref r) -> const Node* {
    if (u.escapes(r) || u.of(r).size() != 1) return nullptr;
    return &g.nodes()[static_cast<size_t>(u.of(r)[0])];
  };
  if (const Node* a = single_reader(cur)) {
    if (Ref b = bias_operand(g, *a, cur, conv); b.valid()) {
      p.bias = b;
      p.bias_add = u.of(cur)[0];
      p.root = p.bias_add;
      p.channels = conv ? g.type_of(cur).shape[1] : g.type_of(cur).shape.back();
      cur = a->outputs[0];
    }
  }
  if (const Node* a = single_reader(cur)) {
    std::string act = activation_name(*a);
    if (!act.empty() && a->inputs[0] == cur && all_f32(g, *a)) {
      p.act = act;
      p.root = u.of(cur)[0];
    }
  }
  if (p.root == i) return std::nullopt;
  if (!mut.moves_safely(n, i, p.root)) return std::nullopt;
  if (p.bias_add >= 0 && !mut.moves_safely(g.nodes()[static_cast<size_t>(p.bias_add)], p.bias_add, p.root))
    return std::nullopt;
  return p;
}

}  // namespace

FusionSupport FusionSupport::of(const Backend& b) {
  auto has = [&](const char* op) {
    const OpDef* d = op_registry().find(op);
    return d && b.supports(*d, DType::F32);
  };
  return {has("linear_act"), has("conv2d_act"), has("fused_elementwise"), b.max_kernel_inputs(),
          has("attention") && has("attention_backward"),
          has("batch_norm_act") && has("batch_norm_backward"), has("batch_norm_pool_backward"),
          has("max_pool2d_relu_backward"), has("conv2d_pool_backward_weight")};
}

Graph fuse_linear_activation(const Graph& g, const FusionSupport& s) {
  if (!s.linear_act && !s.conv2d_act) return g;
  Uses u(g);
  Mutations mut(g);
  std::vector<int32_t> skip(g.nodes().size(), 0);
  std::unordered_map<int32_t, BiasActPlan> at_root;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (skip[i]) continue;
    auto p = plan_bias_act(g, u, mut, static_cast<int32_t>(i));
    if (!p) continue;
    const bool conv = g.nodes()[static_cast<size_t>(p->first)].op->name == "conv2d";
    if (conv ? !s.conv2d_act : !s.linear_act) continue;
    skip[static_cast<size_t>(p->first)] = 1;
    if (p->bias_add >= 0) skip[static_cast<size_t>(p->bias_add)] = 1;
    skip[static_cast<size_t>(p->root)] = 2;
    at_root[p->root] = *p;
  }
  Rewriter rw(g);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (skip[i] == 0) rw.copy(n);
    if (skip[i] != 2) continue;
    const BiasActPlan& p = at_root.at(static_cast<int32_t>(i));
    const Node& first = g.nodes()[static_cast<size_t>(p.first)];
    Refs in{rw.map(first.inputs[0]), rw.map(first.inputs[1])};
    if (p.bias.valid()) {
      // A bias reshaped for broadcasting ([O] -> [O,1,1]) is read at its source.
      Ref src = p.bias;
      int32_t rp = producer(g, src);
      if (rp >= 0 && g.nodes()[static_cast<size_t>(rp)].op->name == "reshape" &&
          g.type_of(g.nodes()[static_cast<size_t>(rp)].inputs[0]).shape == Shape{p.channels})
        src = g.nodes()[static_cast<size_t>(rp)].inputs[0];
      Ref b = rw.map(src);
      if (rw.graph().shape_of(b) != Shape{p.channels})
        b = rw.emit(first, "reshape", {b}, {{"shape", Shape{p.channels}}})[0];
      in.push_back(b);
    }
    Attrs a = first.attrs;
    a.set("act", p.act);
    Refs out = rw.emit(first, first.op->name == "conv2d" ? "conv2d_act" : "linear_act", in, a);
    rw.replace(n.outputs[0], out[0]);
  }
  return rw.finish();
}

namespace {

// [SECTION] Elementwise groups

constexpr size_t kMaxGroup = 32;  // nodes per fused node: keeps programs readable

bool elementwise(const Graph& g, const Node& n) {
  return n.outputs.size() == 1 && n.op->kind == OpKind::Compute && all_f32(g, n) &&
         FusedProgram::instr_of(n.op->name, n.attrs).has_value();
}

// A scalar that can be written into the program: a fill or a constant of one f32 element.
std::optional<double> literal(const Graph& g, Ref r) {
  const Value& v = g.value(r);
  if (v.type.dtype != DType::F32 || numel(v.type.shape) != 1) return std::nullopt;
  if (v.kind == ValueKind::Const) return v.constant.to_f64()[0];
  if (v.kind != ValueKind::Node) return std::nullopt;
  const Node& n = g.nodes()[static_cast<size_t>(v.node)];
  if (n.op->name != "fill") return std::nullopt;
  return static_cast<double>(static_cast<float>(n.attrs.get_float("value")));  // what the fill holds
}

// The nodes that fuse into `root`: producers of the root's shape join while every reader of
// their output is already in the group; repeated until none joins (readers inside a DAG).
std::vector<int32_t> grow_group(const Graph& g, const Uses& u, const Mutations& mut,
                                const std::vector<int32_t>& taken, int32_t root) {
  const Shape shape = g.type_of(g.nodes()[static_cast<size_t>(root)].outputs[0]).shape;
  std::vector<int32_t> group{root};
  auto in_group = [&](int32_t n) { return std::find(group.begin(), group.end(), n) != group.end(); };
  for (bool grew = true; grew && group.size() < kMaxGroup;) {
    grew = false;
    for (size_t m = 0; m < group.size() && group.size() < kMaxGroup; ++m)
      for (Ref v : g.nodes()[static_cast<size_t>(group[m])].inputs) {
        int32_t p = producer(g, v);
        if (p < 0 || taken[static_cast<size_t>(p)] >= 0 || in_group(p) || u.escapes(v)) continue;
        const Node& pn = g.nodes()[static_cast<size_t>(p)];
        if (!elementwise(g, pn) || g.type_of(v).shape != shape) continue;
        if (!std::all_of(u.of(v).begin(), u.of(v).end(), in_group)) continue;
        if (!mut.moves_safely(pn, p, root)) continue;
        group.push_back(p);
        grew = true;
        if (group.size() >= kMaxGroup) break;
      }
  }
  std::sort(group.begin(), group.end());
  return group;
}

struct Group {
  Refs leaves;  // values of the source graph, in the order of the program's inputs
  FusedProgram program;
};

Group build_program(const Graph& g, const std::vector<int32_t>& members) {
  Group out;
  std::unordered_map<int32_t, int32_t> instr;  // source value -> instruction
  auto is_member = [&](Ref r) {
    int32_t p = producer(g, r);
    return p >= 0 && std::binary_search(members.begin(), members.end(), p);
  };
  for (int32_t m : members)
    for (Ref r : g.nodes()[static_cast<size_t>(m)].inputs)
      if (!is_member(r) && !literal(g, r) && std::find(out.leaves.begin(), out.leaves.end(), r) == out.leaves.end())
        out.leaves.push_back(r);
  FusedProgram& p = out.program;
  p.num_inputs = static_cast<int>(out.leaves.size());
  for (size_t k = 0; k < out.leaves.size(); ++k) {
    instr[out.leaves[k].id] = static_cast<int32_t>(k);
    p.code.push_back({.code = FusedCode::Input, .p0 = static_cast<double>(k)});
  }
  auto operand = [&](Ref r) {
    if (auto it = instr.find(r.id); it != instr.end()) return it->second;
    p.code.push_back({.code = FusedCode::Const, .p0 = *literal(g, r)});
    return instr[r.id] = static_cast<int32_t>(p.code.size() - 1);
  };
  for (int32_t m : members) {
    const Node& n = g.nodes()[static_cast<size_t>(m)];
    FusedInstr in = *FusedProgram::instr_of(n.op->name, n.attrs);
    in.a = operand(n.inputs[0]);
    // scale(x, 1) is x, bit for bit (simplify_algebra can leave one behind when it merges
    // two scales); the result keeps its instruction so the program computes something.
    if (in.code == FusedCode::Scale && in.p0 == 1.0 && m != members.back()) {
      instr[n.outputs[0].id] = in.a;
      continue;
    }
    if (n.inputs.size() > 1) in.b = operand(n.inputs[1]);
    p.code.push_back(in);
    instr[n.outputs[0].id] = static_cast<int32_t>(p.code.size() - 1);
  }
  return out;
}

// The fused node must give the root's type (a literal of shape [1] where a backward op wants
// its operand's exact type would not): otherwise the group stays unfused.
bool type_checks(const Graph& g, const Group& grp, Ref root) {
  std::vector<ValueType> in;
  for (Ref r : grp.leaves) in.push_back(g.type_of(r));
  auto t = op_registry().find("fused_elementwise")->infer(in, {{"program", grp.program.to_text()}});
  return t && (*t)[0] == g.type_of(root);
}

}  // namespace


Graph fuse_elementwise(const Graph& g, const FusionSupport& s) {
  if (!s.elementwise) return g;
  Uses u(g);
  Mutations mut(g);
  const auto count = static_cast<int32_t>(g.nodes().size());
  std::vector<int32_t> taken(g.nodes().size(), -1);  // node -> the root of its group
  std::unordered_map<int32_t, Group> programs;
  for (int32_t r = count - 1; r >= 0; --r) {
    if (taken[static_cast<size_t>(r)] >= 0 || !elementwise(g, g.nodes()[static_cast<size_t>(r)])) continue;
    std::vector<int32_t> members = grow_group(g, u, mut, taken, r);
    if (members.size() < 2) continue;
    Group grp = build_program(g, members);
    if (grp.leaves.size() > s.max_inputs) continue;
    if (!type_checks(g, grp, g.nodes()[static_cast<size_t>(r)].outputs[0])) continue;
    for (int32_t m : members) taken[static_cast<size_t>(m)] = r;
    programs.emplace(r, std::move(grp));
  }
  Rewriter rw(g);
  for (int32_t i = 0; i < count; ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (taken[static_cast<size_t>(i)] < 0) {
      rw.copy(n);
      continue;
    }
    if (taken[static_cast<size_t>(i)] != i) continue;  // runs inside its group's node
    const Group& grp = programs.at(i);
    Refs in;
    for (Ref r : grp.leaves) in.push_back(rw.map(r));
    Refs out = rw.emit(n, "fused_elementwise", in, {{"program", grp.program.to_text()}});
    rw.replace(n.outputs[0], out[0]);
  }
  return rw.finish();
}

}  // namespace mls
