#include "engine/exec/compiled_plan.h"

#include <algorithm>
#include <chrono>
#include <sstream>

namespace mls {

namespace {
enum : int8_t { kExternal = 0, kArena = 1, kOwn = 2, kConst = 3, kAlias = 4 };
}

Result<CompiledPlan> CompiledPlan::compile(const Graph& graph, Backend& backend, const PlanOptions& opt) {
  if (auto v = graph.verify(); !v) return v.error();
  CompiledPlan p;
  p.graph_ = std::make_shared<const Graph>(graph);
  p.backend_ = &backend;
  const Graph& g = *p.graph_;
  const size_t nv = g.values().size();
  Refs outputs = opt.outputs.empty() ? g.outputs() : opt.outputs;

  // Dead code never runs: schedule only what the outputs need.
  std::vector<bool> needed(nv, false);
  for (Ref r : outputs) needed[static_cast<size_t>(r.id)] = true;
  std::vector<bool> node_needed(g.nodes().size(), false);
  for (size_t k = g.nodes().size(); k-- > 0;) {
    const Node& n = g.nodes()[k];
    bool any = n.op->kind == OpKind::Update;  // in-place updates are their own purpose
    for (Ref o : n.outputs) any = any || needed[static_cast<size_t>(o.id)];
    if (!any) continue;
    node_needed[k] = true;
    for (Ref i : n.inputs) needed[static_cast<size_t>(i.id)] = true;
  }
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (node_needed[k]) p.schedule_.push_back(static_cast<int32_t>(k));

  p.alias_of_.assign(nv, -1);
  p.placement_.assign(nv, kExternal);
  p.offset_.assign(nv, 0);
  p.slots_.resize(nv);
  p.bound_.assign(nv, false);
  for (size_t i = 0; i < nv; ++i)
    if (g.values()[i].kind == ValueKind::Const) {
      p.placement_[i] = kConst;
      p.slots_[i] = g.values()[i].constant;
    }
  std::vector<AllocTag> own_tag(nv, AllocTag::Other);
  std::vector<bool> own(nv, false);
  for (auto [r, tag] : opt.own_buffers) {
    MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < nv, "PlanOptions: own buffer for an unknown value");
    // An output that is a view (reshape) keeps its view; the value it views gets the buffer.
    for (;;) {
      const Value& v = g.value(r);
      if (v.kind != ValueKind::Node) break;
      const Node& n = g.nodes()[static_cast<size_t>(v.node)];
      if (!n.op->view || v.output_index != 0) break;
      r = n.inputs[0];
    }
    if (g.value(r).kind != ValueKind::Node) continue;  // inputs, params and constants have storage
    own[static_cast<size_t>(r.id)] = true;
    own_tag[static_cast<size_t>(r.id)] = tag;
  }

  // Placement and liveness, step by step.
  auto root = [&](int32_t v) {
    while (p.alias_of_[static_cast<size_t>(v)] >= 0) v = p.alias_of_[static_cast<size_t>(v)];
    return v;
  };
  std::vector<int32_t> first(nv, -1), last(nv, -1);
  for (size_t s = 0; s < p.schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(p.schedule_[s])];
    std::string where = "node " + std::to_string(p.schedule_[s]) + " (" + n.op->name +
                        (n.label.empty() ? "" : ", '" + n.label + "'") + ")";
    std::vector<ValueType> in_t, out_t;
    for (Ref r : n.inputs) in_t.push_back(g.type_of(r));
    for (Ref r : n.outputs) out_t.push_back(g.type_of(r));
    DType kt = kernel_dtype(*n.op, in_t, out_t);
    if (!n.op->kernel(backend.kind(), kt))
      return make_error(where + ": the " + std::string(backend.name()) + " backend has no " +
                        std::string(dtype_name(kt)) + " kernel for '" + n.op->name + "'");
    auto step = static_cast<int32_t>(s);
    for (Ref r : n.inputs) {
      int32_t rt = root(r.id);
      last[static_cast<size_t>(rt)] = std::max(last[static_cast<size_t>(rt)], step);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      auto o = static_cast<size_t>(n.outputs[k].id);
      if (n.op->view && k == 0) {
        p.alias_of_[o] = n.inputs[0].id;
        p.placement_[o] = kAlias;
        continue;
      }
      p.placement_[o] = own[o] ? kOwn : kArena;
      first[o] = last[o] = step;
    }
  }
  auto end_step = static_cast<int32_t>(p.schedule_.empty() ? 0 : p.schedule_.size() - 1);
  for (Ref r : outputs) {  // outputs outlive the schedule
    int32_t rt = root(r.id);
    if (p.placement_[static_cast<size_t>(rt)] == kArena) last[static_cast<size_t>(rt)] = end_step;
  }

  std::vector<BufferRequest> reqs;
  std::vector<size_t> req_value;
  for (size_t i = 0; i < nv; ++i) {
    if (p.placement_[i] != kArena) continue;
    const ValueType& t = g.values()[i].type;
    reqs.push_back({numel(t.shape) * dtype_size(t.dtype), first[i], std::max(first[i], last[i])});
    req_value.push_back(i);
  }
  MemoryPlan mp = plan_memory(reqs, backend.default_buffer_type().alignment());
  for (size_t k = 0; k < reqs.size(); ++k) {
    p.offset_[req_value[k]] = mp.offsets[k];
    p.placements_.push_back({Ref{static_cast<int32_t>(req_value[k])}, mp.offsets[k], reqs[k].bytes,
                             reqs[k].first, reqs[k].last});
  }
  p.stats_.scheduled_nodes = p.schedule_.size();
  p.stats_.arena_bytes = mp.peak_bytes;
  p.stats_.unplanned_bytes = mp.sum_bytes;
  if (mp.peak_bytes > 0) p.arena_ = backend.allocate(mp.peak_bytes, AllocTag::Activation);
  for (size_t i = 0; i < nv; ++i) {
    if (p.placement_[i] == kArena) {
      const ValueType& t = g.values()[i].type;
      p.slots_[i] = Tensor(p.arena_, p.offset_[i], t.dtype, t.shape);
    } else if (p.placement_[i] == kOwn) {
      const ValueType& t = g.values()[i].type;
      p.slots_[i] = Tensor::empty(backend, t.dtype, t.shape, own_tag[i]);
      p.stats_.own_buffer_bytes += p.slots_[i].nbytes();
    }
  }
  // Views of planned storage are final now (views of inputs wait for bind), so tensor()
  // of an output that is a view is valid before the first run.
  for (int32_t k : p.schedule_) {
    const Node& n = g.nodes()[static_cast<size_t>(k)];
    if (!n.op->view || p.placement_[static_cast<size_t>(n.outputs[0].id)] != kAlias) continue;
    const Tensor& src = p.slots_[static_cast<size_t>(n.inputs[0].id)];
    if (!src.defined()) continue;
    const ValueType t = g.type_of(n.outputs[0]);
    p.slots_[static_cast<size_t>(n.outputs[0].id)] = Tensor(src.buffer_ptr(), src.byte_offset(), t.dtype, t.shape);
  }
  return p;
}

Result<void> CompiledPlan::bind(Ref value, const Tensor& t) {
  const Graph& g = *graph_;
  if (!value.valid() || static_cast<size_t>(value.id) >= g.values().size())
    return make_error("bind: not a value of graph '" + g.name() + "'");
  const Value& v = g.value(value);
  if (v.kind != ValueKind::Input && v.kind != ValueKind::Param)
    return make_error("bind: " + g.value_name(value) + " is not an input or a parameter");
  if (t.dtype() != v.type.dtype || t.shape() != v.type.shape)
    return make_error("bind: " + g.value_name(value) + " is " + type_str(v.type) + ", got " +
                      type_str({t.dtype(), t.shape()}));
  if (&t.backend() != backend_)
    return make_error("bind: " + g.value_name(value) + " lives on another backend");
  if (!t.is_contiguous()) return make_error("bind: " + g.value_name(value) + " must be contiguous");
  slots_[static_cast<size_t>(value.id)] = t;
  bound_[static_cast<size_t>(value.id)] = true;
  dirty_ = true;
  return {};
}

void CompiledPlan::materialise() {
  const Graph& g = *graph_;
  steps_.clear();
  for (int32_t k : schedule_) {
    const Node& n = g.nodes()[static_cast<size_t>(k)];
    for (Ref r : n.inputs) {
      const Value& v = g.value(r);
      if (v.kind == ValueKind::Input || v.kind == ValueKind::Param)
        MLS_CHECK(bound_[static_cast<size_t>(r.id)], "CompiledPlan::run: an input or parameter is not bound");
    }
    if (n.op->view && placement_[static_cast<size_t>(n.outputs[0].id)] == kAlias) {
      // A view shares its input's storage; the input's slot is final by now (schedule order).
      const Tensor& src = slots_[static_cast<size_t>(n.inputs[0].id)];
      const ValueType t = g.type_of(n.outputs[0]);
      slots_[static_cast<size_t>(n.outputs[0].id)] = Tensor(src.buffer_ptr(), src.byte_offset(), t.dtype, t.shape);
      continue;
    }
    Step st;
    std::vector<ValueType> in_t, out_t;
    for (Ref r : n.inputs) {
      st.ins.push_back(&slots_[static_cast<size_t>(r.id)]);
      in_t.push_back(g.type_of(r));
    }
    for (Ref r : n.outputs) {
      st.outs.push_back(&slots_[static_cast<size_t>(r.id)]);
      out_t.push_back(g.type_of(r));
    }
    st.fn = n.op->kernel(backend_->kind(), kernel_dtype(*n.op, in_t, out_t));
    st.attrs = &n.attrs;
    steps_.push_back(std::move(st));
  }
  stats_.skipped_views = schedule_.size() - steps_.size();
  if (profiling_ && step_times_.size() != steps_.size()) {
    step_times_.clear();
    for (int32_t k : schedule_) {
      const Node& n = g.nodes()[static_cast<size_t>(k)];
      if (n.op->view && placement_[static_cast<size_t>(n.outputs[0].id)] == kAlias) continue;
      step_times_.push_back({n.op->name, n.label + (n.backward ? " (backward)" : ""), 0, 0});
    }
  }
  dirty_ = false;
}

void CompiledPlan::set_profiling(bool on) {
  profiling_ = on;
  dirty_ = true;  // materialise() sizes the table
}

void CompiledPlan::run() {
  if (dirty_) materialise();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    KernelCall call{*s.attrs, std::span<const Tensor* const>(s.ins.data(), s.ins.size()),
                    std::span<Tensor* const>(s.outs.data(), s.outs.size()), *backend_};
    if (!profiling_) {
      backend_->launch(s.fn, call);
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    backend_->launch(s.fn, call);
    backend_->synchronize();
    step_times_[i].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++step_times_[i].runs;
  }
  backend_->synchronize();
}

const Tensor& CompiledPlan::tensor(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < slots_.size(), "CompiledPlan::tensor: bad value");
  return slots_[static_cast<size_t>(r.id)];
}

std::string CompiledPlan::to_text() const {
  const Graph& g = *graph_;
  std::ostringstream os;
  os << "plan " << g.name() << ": " << stats_.scheduled_nodes << " nodes, arena " << stats_.arena_bytes
     << " bytes (" << stats_.unplanned_bytes << " without reuse)\n";
  for (size_t s = 0; s < schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(schedule_[s])];
    os << "  " << s << ": " << n.op->name;
    if (!n.label.empty()) os << " [" << n.label << "]";
    for (Ref o : n.outputs) {
      auto i = static_cast<size_t>(o.id);
      os << "  " << g.value_name(o) << " " << type_str(g.type_of(o));
      switch (placement_[i]) {
        case kArena: os << " @arena+" << offset_[i]; break;
        case kOwn: os << " (own buffer)"; break;
        case kAlias: os << " (view)"; break;
        default: break;
      }
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace mls
