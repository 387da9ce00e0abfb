#include "engine/exec/compiled_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <new>
#include <numeric>
#include <sstream>

#include "engine/core/backend_registry.h"
#include "engine/exec/wave_schedule.h"

namespace mls {

namespace {
enum : int8_t { kExternal = 0, kArena = 1, kOwn = 2, kConst = 3, kAlias = 4 };

// A kernel whose operands are all smaller than this runs on one thread anyway (the CPU
// kernels split loops of 2 x 2^15 elements or more): such kernels of a wave run at once.
constexpr int64_t kSmallOperand = int64_t{1} << 16;
// Waking a pool thread costs some microseconds: a wave's small kernels run at once only when
// the work beside the largest of them (in elements of their largest operands) is this big.
constexpr int64_t kMinSharedWork = int64_t{1} << 14;
// A transfer step: copies a contiguous tensor between the device and the host (whichever
// way round), through the device backend's copies (each waits for the work before it).
void copy_between_kernel(const KernelCall& c) {
  const Tensor& src = *c.inputs[0];
  Tensor& dst = *c.outputs[0];
  MLS_CHECK(src.is_contiguous() && dst.is_contiguous() && src.nbytes() == dst.nbytes(), "transfer of unlike tensors");
  if (src.nbytes() == 0) return;
  if (src.buffer()->host_ptr() == nullptr) {
    src.backend().copy_to_host(*src.buffer(), src.byte_offset(), dst.data<char>(), src.nbytes());
  } else {
    dst.backend().copy_to_device(*dst.buffer(), dst.byte_offset(), src.data<char>(), src.nbytes());
  }
}
}  // namespace

Result<CompiledPlan> CompiledPlan::compile(const Graph& graph, Backend& backend, const PlanOptions& opt) {
  if (auto v = graph.verify(); !v) return v.error();
  CompiledPlan p;
  p.graph_ = std::make_shared<const Graph>(graph);
  p.backend_ = &backend;
  const Graph& g = *p.graph_;
  const size_t nv = g.values().size();
  Refs outputs = opt.outputs.empty() ? g.outputs() : opt.outputs;
  auto at = [](Ref r) { return static_cast<size_t>(r.id); };

  // Dead code never runs: schedule only what the outputs need.
  std::vector<bool> needed(nv, false);
  for (Ref r : outputs) needed[at(r)] = true;
  std::vector<bool> node_needed(g.nodes().size(), false);
  for (size_t k = g.nodes().size(); k-- > 0;) {
    const Node& n = g.nodes()[k];
    bool any = n.op->kind == OpKind::Update;  // in-place updates are their own purpose
    for (Ref o : n.outputs) any = any || needed[at(o)];
    if (!any) continue;
    node_needed[k] = true;
    for (Ref i : n.inputs) needed[at(i)] = true;
  }
  std::vector<int32_t> order;  // graph order
  for (size_t k = 0; k < g.nodes().size(); ++k)
    if (node_needed[k]) order.push_back(static_cast<int32_t>(k));
  p.on_host_.assign(g.nodes().size(), false);
  for (int32_t k : order) {
    const Node& n = g.nodes()[static_cast<size_t>(k)];
    std::vector<ValueType> in_t, out_t;
    for (Ref r : n.inputs) in_t.push_back(g.type_of(r));
    for (Ref r : n.outputs) out_t.push_back(g.type_of(r));
    DType kt = kernel_dtype(*n.op, in_t, out_t);
    const std::string what = n.op->name + " at " + std::string(dtype_name(kt)) + (n.label.empty() ? "" : " (" + n.label + ")");
    // Placed on the host by the caller (a project's per-node device): views stay views.
    if (backend.kind() != DeviceKind::CPU && !n.op->view && !opt.host_labels.empty() &&
        std::find(opt.host_labels.begin(), opt.host_labels.end(), n.label) != opt.host_labels.end()) {
      if (!p.host_) p.host_ = backend_registry().host();
      if (p.host_ && n.op->kernel(DeviceKind::CPU, kt)) {
        p.on_host_[static_cast<size_t>(k)] = true;
        p.placed_.push_back(what);
        continue;
      }
    }
    if (n.op->kernel(backend.kind(), kt)) continue;
    // A device without this kernel: the host runs the node, if it has one.
    if (backend.kind() != DeviceKind::CPU && !p.host_) p.host_ = backend_registry().host();
    if (p.host_ && !n.op->view && n.op->kernel(DeviceKind::CPU, kt)) {
      p.on_host_[static_cast<size_t>(k)] = true;
      p.fallbacks_.push_back(what);
      continue;
    }
    return make_error("node " + std::to_string(k) + " (" + n.op->name + (n.label.empty() ? "" : ", '" + n.label + "'") +
                      "): the " + std::string(backend.name()) + " backend has no " + std::string(dtype_name(kt)) +
                      " kernel for '" + n.op->name + "'" + (backend.kind() != DeviceKind::CPU ? ", nor has the host" : ""));
  }
  p.stats_.fallback_nodes = p.fallbacks_.size();
  p.stats_.placed_nodes = p.placed_.size();

  // Waves, and the schedule in wave order (graph order within a wave). Sequential: one
  // node per wave. From here on a "time" is a wave.
  std::vector<int32_t> wave(order.size());
  if (opt.concurrent)
    wave = assign_waves(g, order, opt.wave_window);
  else
    std::iota(wave.begin(), wave.end(), 0);
  std::vector<size_t> by_wave(order.size());
  std::iota(by_wave.begin(), by_wave.end(), size_t{0});
  std::stable_sort(by_wave.begin(), by_wave.end(), [&](size_t a, size_t b) { return wave[a] < wave[b]; });
  p.node_wave_.assign(g.nodes().size(), -1);
  for (size_t i : by_wave) {
    p.schedule_.push_back(order[i]);
    p.wave_.push_back(wave[i]);
    p.node_wave_[static_cast<size_t>(order[i])] = wave[i];
  }
  for (const PlanHook& h : opt.hooks) {
    int32_t w = -1;
    for (Ref r : h.after) {
      MLS_CHECK(r.valid() && at(r) < nv, "PlanHook: an unknown value");
      const Value& v = g.value(r);
      if (v.kind != ValueKind::Node) continue;  // inputs, params, constants: there from the start
      const int32_t nw = p.node_wave_[static_cast<size_t>(v.node)];
      if (nw < 0)
        return make_error("plan step '" + h.name + "' waits for " + g.value_name(r) +
                          ", which no output of the plan needs");
      w = std::max(w, nw);
    }
    p.hooks_.push_back(h);
    p.hook_wave_.push_back(w);
  }
  p.stats_.hooks = p.hooks_.size();

  p.alias_of_.assign(nv, -1);
  p.inplace_of_.assign(nv, -1);
  p.placement_.assign(nv, kExternal);
  p.offset_.assign(nv, 0);
  p.slots_.resize(nv);
  p.bound_.assign(nv, false);
  for (size_t i = 0; i < nv; ++i)
    if (g.values()[i].kind == ValueKind::Const) {
      p.placement_[i] = kConst;
      p.slots_[i] = g.values()[i].constant;
      // A constant built on another backend (the host, for a device plan) is copied here once.
      const Tensor& c = p.slots_[i];
      if (opt.allocate && c.defined() && c.backend().kind() != backend.kind()) {
        Tensor src = c.is_contiguous() ? c : c.contiguous();
        std::vector<char> bytes(src.nbytes());
        src.backend().copy_to_host(*src.buffer(), src.byte_offset(), bytes.data(), bytes.size());
        Tensor dev = Tensor::empty(backend, src.dtype(), src.shape(), AllocTag::Parameter);
        dev.fill_raw(bytes.data(), bytes.size());
        p.slots_[i] = std::move(dev);
      }
    }
  std::vector<AllocTag> own_tag(nv, AllocTag::Other);
  std::vector<bool> own(nv, false);
  for (auto [r, tag] : opt.own_buffers) {
    MLS_CHECK(r.valid() && at(r) < nv, "PlanOptions: own buffer for an unknown value");
    // An output that is a view (reshape) keeps its view; the value it views gets the buffer.
    r = g.viewed_value(r);
    if (g.value(r).kind != ValueKind::Node) continue;  // inputs, params and constants have storage
    own[at(r)] = true;
    own_tag[at(r)] = tag;
  }

  // Placement and liveness, wave by wave: a buffer lives from the wave that writes it to the
  // last wave that reads it (through any view of it).
  std::function<size_t(int32_t)> root = [&](int32_t v) {
    while (p.alias_of_[static_cast<size_t>(v)] >= 0) v = p.alias_of_[static_cast<size_t>(v)];
    return static_cast<size_t>(v);
  };
  std::vector<int32_t> first(nv, -1), last(nv, -1);
  for (size_t s = 0; s < p.schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(p.schedule_[s])];
    const int32_t t = p.wave_[s];
    for (Ref r : n.inputs) last[root(r.id)] = std::max(last[root(r.id)], t);
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      size_t o = at(n.outputs[k]);
      if (n.op->view && k == 0) {
        p.alias_of_[o] = n.inputs[0].id;
        p.placement_[o] = kAlias;
        continue;
      }
      p.placement_[o] = own[o] ? kOwn : kArena;
      first[o] = last[o] = t;
    }
  }
  const int32_t end_time = p.wave_.empty() ? 0 : p.wave_.back();
  std::vector<bool> is_output(nv, false);
  for (Ref r : outputs) {  // outputs outlive the schedule
    size_t rt = root(r.id);
    is_output[rt] = true;
    if (p.placement_[rt] == kArena) last[rt] = end_time;
  }

  // In-place reuse. A chain of such outputs shares one buffer: group[v] is its first value.
  std::vector<size_t> group(nv);
  std::iota(group.begin(), group.end(), size_t{0});
  if (opt.inplace) p.choose_inplace(root, last, is_output, group);

  // One buffer request per group: from its first value's wave to its last reader's.
  const size_t alignment = backend.default_buffer_type().alignment();
  const size_t small_alignment = backend.default_buffer_type().small_alignment();
  auto rounded = [&](size_t b) { return (std::max<size_t>(b, 1) + alignment - 1) / alignment * alignment; };
  std::vector<BufferRequest> reqs;
  std::vector<int32_t> req_of(nv, -1);
  for (size_t i = 0; i < nv; ++i) {
    if (p.placement_[i] != kArena) continue;
    const ValueType& t = g.values()[i].type;
    const size_t bytes = numel(t.shape) * dtype_size(t.dtype);
    p.stats_.unplanned_bytes += rounded(bytes);
    const int32_t lo = first[i], hi = std::max(first[i], last[i]);
    int32_t& q = req_of[group[i]];  // a group's first value has the lowest id (SSA order)
    if (q < 0) {
      q = static_cast<int32_t>(reqs.size());
      // Buffers smaller than the alignment (a loss, a bias's gradient) pack tightly where the
      // backend allows: PyTorch's allocator counts their bytes, not a cache line each.
      const size_t align =
          bytes < alignment ? std::min(alignment, std::max(small_alignment, dtype_size(t.dtype))) : alignment;
      reqs.push_back({bytes, lo, hi, align});
    } else {
      reqs[static_cast<size_t>(q)].first = std::min(reqs[static_cast<size_t>(q)].first, lo);
      reqs[static_cast<size_t>(q)].last = std::max(reqs[static_cast<size_t>(q)].last, hi);
    }
  }
  // The kernels' declared workspace: a request per step, for its wave alone.
  std::vector<int32_t> ws_req(p.schedule_.size(), -1);
  std::vector<size_t> ws_bytes(p.schedule_.size(), 0);
  for (size_t s = 0; s < p.schedule_.size() && opt.kernel_workspace; ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(p.schedule_[s])];
    if (n.op->view) continue;
    std::vector<ValueType> in_t, out_t;
    for (Ref r : n.inputs) in_t.push_back(g.type_of(r));
    for (Ref r : n.outputs) out_t.push_back(g.type_of(r));
    const bool host = p.on_host_[static_cast<size_t>(p.schedule_[s])];
    Backend& runs_on = host ? *p.host_ : backend;
    WorkspaceFn wf = n.op->workspace(runs_on.kind(), kernel_dtype(*n.op, in_t, out_t));
    const size_t bytes = wf ? wf(in_t, out_t, n.attrs, runs_on) : 0;
    if (bytes == 0) continue;
    ws_bytes[s] = bytes;
    p.stats_.workspace_bytes += bytes;
    if (host) continue;  // a host step's workspace is a host buffer (below)
    ws_req[s] = static_cast<int32_t>(reqs.size());
    reqs.push_back({bytes, p.wave_[s], p.wave_[s], alignment});
  }
  MemoryPlan mp = plan_memory(reqs, alignment);
  p.workspace_of_.assign(p.schedule_.size(), -1);
  for (size_t s = 0; s < p.schedule_.size(); ++s) {
    if (ws_req[s] < 0) continue;
    p.workspace_of_[s] = static_cast<int32_t>(p.workspaces_.size());
    p.workspaces_.push_back({p.schedule_[s], mp.offsets[static_cast<size_t>(ws_req[s])], ws_bytes[s], p.wave_[s]});
  }
  for (size_t i = 0; i < nv; ++i) {
    if (p.placement_[i] != kArena) continue;
    p.offset_[i] = mp.offsets[static_cast<size_t>(req_of[group[i]])];
    const ValueType& t = g.values()[i].type;
    Ref taken = p.inplace_of_[i] >= 0 ? Ref{p.inplace_of_[i]} : Ref{};
    p.placements_.push_back({Ref{static_cast<int32_t>(i)}, p.offset_[i], numel(t.shape) * dtype_size(t.dtype),
                             first[i], std::max(first[i], last[i]), taken});
  }
  p.stats_.scheduled_nodes = p.schedule_.size();
  p.stats_.arena_bytes = mp.peak_bytes;
  // A plan too large for this machine (a huge batch) is an expected failure with the figure,
  // not an abort.
  p.allocated_ = opt.allocate;
  if (!opt.allocate) {
    p.plan_batches(opt.concurrent);
    return p;
  }
  try {
    if (mp.peak_bytes > 0) p.arena_ = backend.allocate(mp.peak_bytes, AllocTag::Activation);
    // Host buffers for the nodes that run on the host: one per input and output, and the
    // workspace their host kernel declares.
    p.host_ins_.resize(p.schedule_.size());
    p.host_outs_.resize(p.schedule_.size());
    p.host_workspace_.resize(p.schedule_.size());
    for (size_t s = 0; s < p.schedule_.size(); ++s)
      if (ws_bytes[s] > 0 && ws_req[s] < 0) p.host_workspace_[s] = p.host_->allocate(ws_bytes[s], AllocTag::Workspace);
    for (size_t s = 0; s < p.schedule_.size(); ++s) {
      const Node& n = g.nodes()[static_cast<size_t>(p.schedule_[s])];
      if (!p.on_host_[static_cast<size_t>(p.schedule_[s])]) continue;
      for (Ref r : n.inputs) {
        const ValueType t = g.type_of(r);
        p.host_ins_[s].push_back(Tensor::empty(*p.host_, t.dtype, t.shape, AllocTag::Workspace));
        ++p.stats_.transfers;
        p.stats_.transfer_bytes += p.host_ins_[s].back().nbytes();
      }
      for (Ref r : n.outputs) {
        const ValueType t = g.type_of(r);
        p.host_outs_[s].push_back(Tensor::empty(*p.host_, t.dtype, t.shape, AllocTag::Workspace));
        ++p.stats_.transfers;
        p.stats_.transfer_bytes += p.host_outs_[s].back().nbytes();
      }
    }
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
  } catch (const std::bad_alloc&) {
    char figure[64];
    const double bytes = static_cast<double>(mp.peak_bytes);
    if (bytes >= 1e12)
      std::snprintf(figure, sizeof figure, "%.3g TB", bytes / 1e12);
    else
      std::snprintf(figure, sizeof figure, "%.3g GB", bytes / 1e9);
    return make_error(std::string("not enough memory for the compiled step: its planned arena is ") +
                      figure + " (" + std::to_string(mp.peak_bytes) +
                      " bytes); use a smaller batch size");
  }
  // Views of planned storage are final now (views of inputs wait for bind), so tensor()
  // of an output that is a view is valid before the first run.
  for (int32_t k : p.schedule_) {
    const Node& n = g.nodes()[static_cast<size_t>(k)];
    if (!n.op->view || p.placement_[at(n.outputs[0])] != kAlias) continue;
    const Tensor& src = p.slots_[at(n.inputs[0])];
    if (!src.defined()) continue;
    const ValueType t = g.type_of(n.outputs[0]);
    p.slots_[at(n.outputs[0])] = Tensor(src.buffer_ptr(), src.byte_offset(), t.dtype, t.shape);
  }
  p.plan_batches(opt.concurrent);
  return p;
}

void CompiledPlan::choose_inplace(const std::function<size_t(int32_t)>& root, const std::vector<int32_t>& last,
                                  const std::vector<bool>& is_output, std::vector<size_t>& group) {
  const Graph& g = *graph_;
  // How many kernels read each buffer in its last wave: only a sole reader may write over it
  // (another kernel of the wave may still be reading it).
  std::vector<int32_t> last_readers(g.values().size(), 0);
  std::vector<size_t> roots;
  for (size_t s = 0; s < schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(schedule_[s])];
    if (n.op->view) continue;
    roots.clear();
    for (Ref r : n.inputs) roots.push_back(root(r.id));
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    for (size_t rt : roots)
      if (last[rt] == wave_[s]) ++last_readers[rt];
  }
  for (size_t s = 0; s < schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(schedule_[s])];
    if (!n.op->inplace || n.op->view || placement_[static_cast<size_t>(n.outputs[0].id)] != kArena) continue;
    const auto o = static_cast<size_t>(n.outputs[0].id);
    const ValueType ot = g.type_of(n.outputs[0]);
    for (Ref r : n.inputs) {
      size_t rt = root(r.id);
      // Arena storage (not an input, parameter, constant or own buffer), read by no later
      // wave and by no other kernel of this one, not an output of the plan.
      if (placement_[rt] != kArena || is_output[rt] || last[rt] != wave_[s] || last_readers[rt] != 1) continue;
      // Element i of the input is element i of the output: the same type, so a broadcast
      // operand never qualifies; every view of the buffer that this kernel reads must agree.
      bool same = true;
      for (Ref q : n.inputs) same = same && (root(q.id) != rt || g.type_of(q) == ot);
      if (!same) continue;
      const ValueType& rtt = g.values()[rt].type;
      MLS_CHECK(numel(rtt.shape) * dtype_size(rtt.dtype) == numel(ot.shape) * dtype_size(ot.dtype),
                "in-place reuse of a buffer of another size");
      group[o] = group[rt];
      inplace_of_[o] = static_cast<int32_t>(rt);
      ++stats_.inplace_steps;
      break;
    }
  }
}

void CompiledPlan::plan_batches(bool concurrent) {
  // Per wave: the large kernels one at a time (each splits its work across the cores),
  // then the small ones at once, longest first so the threads finish together.
  const Graph& g = *graph_;
  auto hooks_after = [&](int32_t wave) {
    for (size_t h = 0; h < hooks_.size(); ++h) {
      if (hook_wave_[h] != wave) continue;
      batches_.push_back({static_cast<uint32_t>(run_order_.size()), static_cast<uint32_t>(run_order_.size() + 1), false});
      run_order_.push_back(-1 - static_cast<int32_t>(h));
    }
  };
  hooks_after(-1);
  std::vector<int32_t> small;
  for (size_t a = 0, b; a < schedule_.size(); a = b) {
    for (b = a; b < schedule_.size() && wave_[b] == wave_[a];) ++b;
    small.clear();
    bool runs = false;
    for (size_t s = a; s < b; ++s) {
      const Node& n = g.nodes()[static_cast<size_t>(schedule_[s])];
      if (n.op->view && placement_[static_cast<size_t>(n.outputs[0].id)] == kAlias) continue;
      runs = true;
      if (concurrent && !on_host_[static_cast<size_t>(schedule_[s])] && largest_operand(g, n) < kSmallOperand) {
        small.push_back(static_cast<int32_t>(s));
        continue;
      }
      batches_.push_back({static_cast<uint32_t>(run_order_.size()), static_cast<uint32_t>(run_order_.size() + 1), false});
      run_order_.push_back(static_cast<int32_t>(s));
    }
    stats_.waves += runs ? 1 : 0;
    std::stable_sort(small.begin(), small.end(), [&](int32_t x, int32_t y) {
      return largest_operand(g, g.nodes()[static_cast<size_t>(schedule_[static_cast<size_t>(x)])]) >
             largest_operand(g, g.nodes()[static_cast<size_t>(schedule_[static_cast<size_t>(y)])]);
    });
    int64_t beside_largest = 0;  // small is sorted: the largest first
    for (size_t i = 1; i < small.size(); ++i)
      beside_largest += largest_operand(g, g.nodes()[static_cast<size_t>(schedule_[static_cast<size_t>(small[i])])]);
    const bool together = small.size() >= 2 && beside_largest >= kMinSharedWork;
    if (together) {
      batches_.push_back({static_cast<uint32_t>(run_order_.size()), static_cast<uint32_t>(run_order_.size() + small.size()), true});
      ++stats_.concurrent_waves;
      stats_.concurrent_steps += small.size();
    }
    for (int32_t s : small) {
      if (!together)
        batches_.push_back({static_cast<uint32_t>(run_order_.size()), static_cast<uint32_t>(run_order_.size() + 1), false});
      run_order_.push_back(s);
    }
    hooks_after(wave_[a]);
  }
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
  for (int32_t k : schedule_) {
    const Node& n = g.nodes()[static_cast<size_t>(k)];
    for (Ref r : n.inputs) {
      const Value& v = g.value(r);
      if (v.kind == ValueKind::Input || v.kind == ValueKind::Param)
        MLS_CHECK(bound_[static_cast<size_t>(r.id)], "CompiledPlan::run: an input or parameter is not bound");
    }
    if (n.op->view && placement_[static_cast<size_t>(n.outputs[0].id)] == kAlias) {
      // A view shares its input's storage; the input's slot is final by now (wave order).
      const Tensor& src = slots_[static_cast<size_t>(n.inputs[0].id)];
      const ValueType t = g.type_of(n.outputs[0]);
      slots_[static_cast<size_t>(n.outputs[0].id)] = Tensor(src.buffer_ptr(), src.byte_offset(), t.dtype, t.shape);
    }
  }
  steps_.clear();
  std::vector<uint32_t> first_step;  // per run_order_ position
  static const Attrs kNoAttrs;
  hook_args_.assign(hooks_.size(), {});
  for (int32_t s : run_order_) {
    first_step.push_back(static_cast<uint32_t>(steps_.size()));
    if (s < 0) {  // a PlanHook: its arguments are the slots of the values it waits for
      const auto h = static_cast<size_t>(-1 - s);
      for (Ref r : hooks_[h].after) hook_args_[h].push_back(&slots_[static_cast<size_t>(r.id)]);
      steps_.push_back({.fn = nullptr, .attrs = &kNoAttrs, .backend = backend_, .entry = -1, .hook = static_cast<int32_t>(h)});
      continue;
    }
    const size_t k = static_cast<size_t>(schedule_[static_cast<size_t>(s)]);
    const Node& n = g.nodes()[k];
    const bool host = on_host_[k];
    Step st;
    st.entry = s;
    st.backend = host ? host_ : backend_;
    std::vector<ValueType> in_t, out_t;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Tensor* dev = &slots_[static_cast<size_t>(n.inputs[i].id)];
      in_t.push_back(g.type_of(n.inputs[i]));
      if (!host) {
        st.ins.push_back(dev);
        continue;
      }
      Tensor* h = &host_ins_[static_cast<size_t>(s)][i];
      steps_.push_back({.fn = copy_between_kernel, .attrs = &kNoAttrs, .ins = {dev}, .outs = {h}, .backend = backend_,
                        .entry = s, .transfer = "to_host"});
      st.ins.push_back(h);
    }
    std::vector<Step> back;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Tensor* dev = &slots_[static_cast<size_t>(n.outputs[i].id)];
      out_t.push_back(g.type_of(n.outputs[i]));
      if (!host) {
        st.outs.push_back(dev);
        continue;
      }
      Tensor* h = &host_outs_[static_cast<size_t>(s)][i];
      st.outs.push_back(h);
      back.push_back({.fn = copy_between_kernel, .attrs = &kNoAttrs, .ins = {h}, .outs = {dev}, .backend = backend_,
                      .entry = s, .transfer = "to_device"});
    }
    st.fn = n.op->kernel(host ? DeviceKind::CPU : backend_->kind(), kernel_dtype(*n.op, in_t, out_t));
    st.attrs = &n.attrs;
    if (host && host_workspace_[static_cast<size_t>(s)]) {
      st.workspace = host_workspace_[static_cast<size_t>(s)].get();
      st.workspace_bytes = st.workspace->size();
    } else if (workspace_of_[static_cast<size_t>(s)] >= 0) {
      const WorkspacePlacement& w = workspaces_[static_cast<size_t>(workspace_of_[static_cast<size_t>(s)])];
      st.workspace = arena_.get();
      st.workspace_offset = w.offset;
      st.workspace_bytes = w.bytes;
    }
    // An Update op on the host writes its inputs' host copies: they go back to the device.
    if (host)
      for (int m : n.op->mutated_inputs)
        back.push_back({.fn = copy_between_kernel, .attrs = &kNoAttrs, .ins = {st.ins[static_cast<size_t>(m)]},
                        .outs = {&slots_[static_cast<size_t>(n.inputs[static_cast<size_t>(m)].id)]},
                        .backend = backend_, .entry = s, .transfer = "to_device"});
    steps_.push_back(std::move(st));
    for (Step& b : back) steps_.push_back(std::move(b));
  }
  first_step.push_back(static_cast<uint32_t>(steps_.size()));
  step_batches_.clear();
  for (const Batch& b : batches_) step_batches_.push_back({first_step[b.begin], first_step[b.end], b.concurrent});
  stats_.skipped_views = schedule_.size() - (run_order_.size() - hooks_.size());
  if (profiling_ && step_times_.size() != steps_.size()) {
    step_times_.clear();
    for (const Step& step : steps_) {
      if (step.hook >= 0) {
        const PlanHook& h = hooks_[static_cast<size_t>(step.hook)];
        StepTime st{.op = h.name, .label = h.label, .backward = true};
        st.wave = std::max(hook_wave_[static_cast<size_t>(step.hook)], 0);
        step_times_.push_back(std::move(st));
        continue;
      }
      const int32_t s = step.entry;
      const auto k = static_cast<size_t>(schedule_[static_cast<size_t>(s)]);
      const Node& n = g.nodes()[k];
      StepTime st{.op = step.transfer ? step.transfer : n.op->name, .label = n.label, .backward = n.backward};
      st.node = static_cast<int32_t>(k);
      st.wave = wave_[static_cast<size_t>(s)];
      if (!step.transfer) {
        std::vector<ValueType> in_t, out_t;
        for (Ref r : n.inputs) in_t.push_back(g.type_of(r));
        for (Ref r : n.outputs) out_t.push_back(g.type_of(r));
        st.flops = op_flops(*n.op, in_t, out_t, n.attrs);
      }
      step_times_.push_back(std::move(st));
    }
    timings_.assign(step_times_.size(), KernelTiming{});
  }
  // The calls point into steps_ (and the launches into calls_): both are complete now.
  calls_.clear();
  launches_.clear();
  calls_.reserve(steps_.size());
  for (const Step& st : steps_)
    calls_.push_back(KernelCall{*st.attrs, std::span<const Tensor* const>(st.ins.data(), st.ins.size()),
                                std::span<Tensor* const>(st.outs.data(), st.outs.size()), *st.backend,
                                st.workspace, st.workspace_offset, st.workspace_bytes});
  for (size_t i = 0; i < steps_.size(); ++i)
    launches_.push_back({steps_[i].fn, &calls_[i], profiling_ ? &timings_[i] : nullptr});
  dirty_ = false;
}

void CompiledPlan::set_profiling(bool on) {
  profiling_ = on;
  dirty_ = true;  // materialise() sizes the table
}

void CompiledPlan::launch_steps() {
  for (const Batch& b : step_batches_) {
    if (b.concurrent) {
      backend_->launch_concurrent(std::span<const KernelLaunch>(launches_.data() + b.begin, b.end - b.begin));
      continue;
    }
    for (uint32_t i = b.begin; i < b.end; ++i) {
      if (steps_[i].hook >= 0) {
        run_hook(i);
        continue;
      }
      steps_[i].backend->launch_timed(launches_[i]);
    }
  }
}

void CompiledPlan::run_hook(size_t step) {
  const auto h = static_cast<size_t>(steps_[step].hook);
  KernelTiming* t = launches_[step].timing;
  const auto t0 = std::chrono::steady_clock::now();
  hooks_[h].run(std::span<const Tensor* const>(hook_args_[h].data(), hook_args_[h].size()));
  if (!t) return;
  const auto t1 = std::chrono::steady_clock::now();
  t->seconds += std::chrono::duration<double>(t1 - t0).count();
  t->start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
  t->end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
  t->thread = trace_thread_id();
}

void CompiledPlan::run() {
  MLS_CHECK(allocated_, "CompiledPlan::run: the plan was compiled with allocate = false");
  if (dirty_) {
    materialise();
    capture_.reset();
    capture_tried_ = false;
  }
  // A device that records command buffers records the step once and replays it: the
  // bindings are fixed until the next bind(). Not while profiling (each kernel is timed) nor
  // with host steps between the device's.
  if (!profiling_ && stats_.fallback_nodes + stats_.placed_nodes == 0 && hooks_.empty()) {
    if (capture_.id >= 0) {
      backend_->replay(capture_.id);
      return;
    }
    if (!capture_tried_) {
      capture_tried_ = true;
      capture_.backend = backend_;
      capture_.id = backend_->begin_capture();
      if (capture_.id >= 0) {
        launch_steps();
        backend_->end_capture();
        backend_->replay(capture_.id);
        return;
      }
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  launch_steps();
  backend_->synchronize();
  if (!profiling_) return;
  run_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < step_times_.size(); ++i) {
    StepTime& st = step_times_[i];
    ++st.runs;
    st.seconds = timings_[i].seconds;
    st.last = timings_[i];
  }
}

const Tensor& CompiledPlan::tensor(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < slots_.size(), "CompiledPlan::tensor: bad value");
  return slots_[static_cast<size_t>(r.id)];
}

std::string CompiledPlan::to_text() const {
  const Graph& g = *graph_;
  std::vector<bool> together(schedule_.size(), false);
  for (const Batch& b : batches_)
    for (uint32_t i = b.begin; b.concurrent && i < b.end; ++i) together[static_cast<size_t>(run_order_[i])] = true;
  std::ostringstream os;
  os << "plan " << g.name() << ": " << stats_.scheduled_nodes << " nodes, arena " << stats_.arena_bytes
     << " bytes (" << stats_.unplanned_bytes << " without reuse), " << stats_.inplace_steps << " in place, "
     << stats_.waves << " waves (" << stats_.concurrent_waves << " run " << stats_.concurrent_steps
     << " kernels at once, marked *)";
  if (stats_.fallback_nodes + stats_.placed_nodes)
    os << ", " << stats_.fallback_nodes + stats_.placed_nodes << " on the host with " << stats_.transfers
       << " transfers (" << stats_.transfer_bytes << " bytes)";
  os << "\n";
  if (!hooks_.empty()) os << "  " << hooks_.size() << " host steps between the kernels (+)\n";
  auto hook_lines = [&](int32_t wave) {
    for (size_t h = 0; h < hooks_.size(); ++h) {
      if (hook_wave_[h] != wave) continue;
      os << "  + after w" << wave << ": " << hooks_[h].name;
      if (!hooks_[h].label.empty()) os << " [" << hooks_[h].label << "]";
      os << "\n";
    }
  };
  hook_lines(-1);
  for (size_t s = 0; s < schedule_.size(); ++s) {
    const Node& n = g.nodes()[static_cast<size_t>(schedule_[s])];
    if (s > 0 && wave_[s] != wave_[s - 1]) hook_lines(wave_[s - 1]);
    os << "  " << s << " w" << wave_[s] << (together[s] ? "*" : "") << ": " << n.op->name;
    if (!n.label.empty()) os << " [" << n.label << "]";
    if (on_host_[static_cast<size_t>(schedule_[s])])
      os << " {on " << host_->name() << ": inputs to_host, outputs to_device}";
    for (Ref o : n.outputs) {
      auto i = static_cast<size_t>(o.id);
      os << "  " << g.value_name(o) << " " << type_str(g.type_of(o));
      switch (placement_[i]) {
        case kArena: os << " @arena+" << offset_[i]; break;
        case kOwn: os << " (own buffer)"; break;
        case kAlias: os << " (view)"; break;
        default: break;
      }
      if (inplace_of_[i] >= 0) os << " (in place of " << g.value_name(Ref{inplace_of_[i]}) << ")";
    }
    os << "\n";
  }
  if (!wave_.empty()) hook_lines(wave_.back());
  return os.str();
}

}  // namespace mls
