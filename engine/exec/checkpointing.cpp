// Gradient checkpointing: recompute forward segments in the backward instead of keeping
// their activations alive from the forward to their backward use (declared in checkpointing.h).
//
// [SECTION] Analysis: the forward, its layers, what the backward reads
// [SECTION] Rewriting one segmentation
// [SECTION] Measuring candidate plans (no allocation)
// [SECTION] Choosing a segmentation: sqrt(n) or a byte budget
#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "engine/exec/checkpointing.h"
#include "engine/passes/rewriter.h"

namespace mls {

namespace {

// [SECTION] Analysis: the forward, its layers, what the backward reads

size_t value_bytes(const Graph& g, Ref r) {
  const ValueType t = g.type_of(r);
  return static_cast<size_t>(numel(t.shape)) * dtype_size(t.dtype);
}

struct Forward {
  size_t end = 0;                     // the forward is nodes [0, end): before the first backward node
  std::vector<size_t> layer_begin;    // layer l is nodes [layer_begin[l], layer_begin[l + 1]); back() == end
  std::vector<int32_t> layer_of;      // forward node -> layer
  std::vector<int32_t> producer;      // value -> node (-1: input, parameter, constant)
  std::vector<int32_t> last_reader;   // value -> the last forward node that reads it (-1: none)
  std::vector<bool> backward_reads;   // a forward value that a node of the backward reads
  std::vector<bool> clonable;         // node: pure, and reads nothing that an Update op mutates
  std::vector<bool> pinned;           // value: never recomputed (outputs, non-clonable producers)
  size_t layers() const { return layer_begin.empty() ? 0 : layer_begin.size() - 1; }
};

Forward analyse(const Graph& g) {
  Forward f;
  const auto& nodes = g.nodes();
  const size_t nv = g.values().size();
  f.end = nodes.size();
  for (size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k].backward) {
      f.end = k;
      break;
    }
  // A value that an Update op writes (a running statistic) changes during the step: a clone
  // placed after the update would read the new value, so its readers are never cloned.
  std::vector<bool> mutated(nv, false);
  for (const Node& n : nodes)
    if (n.op->kind == OpKind::Update)
      for (int i : n.op->mutated_inputs) mutated[static_cast<size_t>(n.inputs[static_cast<size_t>(i)].id)] = true;
  f.producer.assign(nv, -1);
  f.last_reader.assign(nv, -1);
  f.backward_reads.assign(nv, false);
  f.clonable.assign(nodes.size(), false);
  f.pinned.assign(nv, false);
  f.layer_of.assign(nodes.size(), -1);
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node& n = nodes[k];
    for (Ref o : n.outputs) f.producer[static_cast<size_t>(o.id)] = static_cast<int32_t>(k);
    if (k >= f.end) {
      for (Ref r : n.inputs) {
        int32_t p = f.producer[static_cast<size_t>(r.id)];
        if (p >= 0 && static_cast<size_t>(p) < f.end) f.backward_reads[static_cast<size_t>(r.id)] = true;
      }
      continue;
    }
    for (Ref r : n.inputs) f.last_reader[static_cast<size_t>(r.id)] = static_cast<int32_t>(k);
    // Fused or any other pure node is recomputable; Update ops run once per step.
    bool ok = n.op->kind != OpKind::Update;
    for (Ref r : n.inputs) ok = ok && !mutated[static_cast<size_t>(r.id)];
    f.clonable[k] = ok;
    if (!ok)
      for (Ref o : n.outputs) f.pinned[static_cast<size_t>(o.id)] = true;
    if (k == 0 || n.label != nodes[k - 1].label) f.layer_begin.push_back(k);
    f.layer_of[k] = static_cast<int32_t>(f.layer_begin.size() - 1);
  }
  if (!f.layer_begin.empty()) f.layer_begin.push_back(f.end);
  for (Ref r : g.outputs()) f.pinned[static_cast<size_t>(r.id)] = true;  // kept to the end anyway
  return f;
}

// [SECTION] Rewriting one segmentation

// Segment starts, as layer indices: {0, 5, 10, 15} cuts 20 layers into four of five.
using Segmentation = std::vector<size_t>;

Segmentation uniform(size_t layers, size_t per_segment) {
  Segmentation s;
  for (size_t l = 0; l < layers; l += per_segment) s.push_back(l);
  return s;
}

// The default: about sqrt(2n) segments of k, k - 1, ..., 1 layers. When segment s is
// recomputed, the s checkpoints before it are still alive, so shorter segments later keep
// every recomputation's peak alike: about sqrt(2n) layers' activations instead of the 2
// sqrt(n) of equal segments, with fewer recomputed layers as well.
Segmentation shrinking(size_t layers) {
  size_t k = 1;
  while (k * (k + 1) / 2 < layers) ++k;
  Segmentation s;
  for (size_t l = 0; l < layers && k > 0; l += k--) s.push_back(l);
  return s;
}

struct Rewritten {
  Graph graph;
  size_t recomputed = 0, checkpoints = 0;
};

Rewritten rewrite(const Graph& g, const Forward& f, const Segmentation& starts) {
  const auto& nodes = g.nodes();
  const size_t nv = g.values().size();
  const size_t segments = starts.size();
  auto segment_of = [&](int32_t node) {
    auto layer = static_cast<size_t>(f.layer_of[static_cast<size_t>(node)]);
    return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), layer) - starts.begin() - 1);
  };
  // Checkpoints: forward values that a forward node of a later segment reads.
  std::vector<bool> checkpoint(nv, false);
  Rewritten out;
  for (size_t v = 0; v < nv; ++v) {
    int32_t p = f.producer[v], r = f.last_reader[v];
    if (p < 0 || static_cast<size_t>(p) >= f.end || r < 0 || segment_of(r) == segment_of(p)) continue;
    checkpoint[v] = true;
    ++out.checkpoints;
  }
  auto recomputable = [&](size_t v) {
    int32_t p = f.producer[v];
    return p >= 0 && static_cast<size_t>(p) < f.end && !checkpoint[v] && !f.pinned[v];
  };
  // What each segment recomputes: the producers of the values the backward reads, back to
  // the checkpoints. The last segment is never recomputed: its backward comes first, while
  // its activations are still alive.
  std::vector<int32_t> trigger(nv, -1);     // value -> the segment whose clones it waits for
  std::vector<bool> cloned(nodes.size(), false);
  std::vector<int32_t> work;
  for (size_t v = 0; v < nv; ++v) {
    if (!f.backward_reads[v] || !recomputable(v)) continue;
    size_t s = segment_of(f.producer[v]);
    if (s + 1 == segments) continue;
    trigger[v] = static_cast<int32_t>(s);
    work.push_back(f.producer[v]);
  }
  while (!work.empty()) {
    int32_t k = work.back();
    work.pop_back();
    if (cloned[static_cast<size_t>(k)]) continue;
    cloned[static_cast<size_t>(k)] = true;
    for (Ref r : nodes[static_cast<size_t>(k)].inputs) {
      if (!recomputable(static_cast<size_t>(r.id))) continue;
      int32_t p = f.producer[static_cast<size_t>(r.id)];
      // A forward value read across a cut is a checkpoint, so this stays in the segment.
      MLS_CHECK(segment_of(p) == segment_of(k), "checkpointing: a recomputed value crosses a segment");
      work.push_back(p);
    }
  }
  std::vector<std::vector<int32_t>> clones(segments);
  for (size_t k = 0; k < f.end; ++k)
    if (cloned[k]) clones[segment_of(static_cast<int32_t>(k))].push_back(static_cast<int32_t>(k));

  Rewriter rw(g);
  for (size_t k = 0; k < f.end; ++k) rw.copy(nodes[k]);
  std::vector<bool> emitted(segments, false);
  for (size_t k = f.end; k < nodes.size(); ++k) {
    for (Ref r : nodes[k].inputs) {
      int32_t s = trigger[static_cast<size_t>(r.id)];
      if (s < 0 || emitted[static_cast<size_t>(s)]) continue;
      emitted[static_cast<size_t>(s)] = true;
      for (int32_t c : clones[static_cast<size_t>(s)]) {
        Node like = nodes[static_cast<size_t>(c)];
        like.label = like.label.empty() ? "(recompute)" : like.label + " (recompute)";
        like.backward = true;  // it runs in the backward
        Refs ins;
        for (Ref i : like.inputs) ins.push_back(rw.map(i));
        Refs outs = rw.emit(like, like.op->name, ins, like.attrs);
        // From here on the backward (and later clones) read the clones; checkpoints stay.
        for (size_t o = 0; o < outs.size(); ++o)
          if (recomputable(static_cast<size_t>(like.outputs[o].id))) rw.replace(like.outputs[o], outs[o]);
        ++out.recomputed;
      }
    }
    rw.copy(nodes[k]);
  }
  out.graph = rw.finish();
  return out;
}

// [SECTION] Measuring candidate plans (no allocation)

// A backend that plans but never runs: buffers have no memory, so measuring dozens of
// candidate plans neither allocates nor moves the allocator's peak.
class NullBuffer final : public Buffer {
 public:
  using Buffer::Buffer;
  void* host_ptr() const override { return nullptr; }
  void* native_handle() const override { return nullptr; }
};

class MeasuringBackend final : public Backend {
 public:
  explicit MeasuringBackend(Backend& real)
      : real_(real),
        type_(*this, real.default_buffer_type().alignment(), real.default_buffer_type().small_alignment()) {}
  std::string_view name() const override { return real_.name(); }
  DeviceKind kind() const override { return real_.kind(); }
  BufferType& default_buffer_type() override { return type_; }
  // A plan copies constants built on another backend to its own: here they go nowhere.
  void copy_to_device(Buffer&, size_t, const void*, size_t) override {}
  void copy_to_host(const Buffer&, size_t, void*, size_t) override { unreachable(); }
  void copy_device(const Buffer&, size_t, Buffer&, size_t, size_t) override { unreachable(); }
  void launch(KernelFn, const KernelCall&) override { unreachable(); }
  void synchronize() override {}
  int num_threads() const override { return real_.num_threads(); }  // in case planning asks

 private:
  static void unreachable() { MLS_CHECK(false, "checkpointing: a measuring plan was asked to run"); }
  class Type final : public BufferType {
   public:
    Type(Backend& b, size_t alignment, size_t small_alignment)
        : backend_(b), alignment_(alignment), small_alignment_(small_alignment) {}
    std::string_view name() const override { return "measure"; }
    size_t alignment() const override { return alignment_; }
    size_t small_alignment() const override { return small_alignment_; }
    bool host_accessible() const override { return false; }
    std::unique_ptr<Buffer> allocate(size_t bytes, AllocTag tag) override {
      return std::make_unique<NullBuffer>(backend_, bytes, tag);
    }

   private:
    Backend& backend_;
    size_t alignment_, small_alignment_;
  };
  Backend& real_;
  Type type_;
};

PlanOptions own_node_outputs(const Graph& g) {
  PlanOptions po;
  for (Ref r : g.outputs())
    if (g.value(r).kind == ValueKind::Node) po.own_buffers.emplace_back(r, AllocTag::Gradient);
  return po;
}

Result<size_t> planned_arena(const Graph& g, Backend& measure, const CheckpointPlanOptions& options) {
  auto plan = CompiledPlan::compile(g, measure, options ? options(g) : own_node_outputs(g));
  if (!plan) return make_error("checkpointing: measuring a plan: " + plan.error().message);
  return plan->stats().arena_bytes;
}

// [SECTION] Choosing a segmentation: sqrt(n) or a byte budget

std::vector<size_t> segment_sizes(const Segmentation& s, size_t layers) {
  std::vector<size_t> sizes;
  for (size_t i = 0; i < s.size(); ++i) sizes.push_back((i + 1 < s.size() ? s[i + 1] : layers) - s[i]);
  return sizes;
}

std::string shape_of(const std::vector<size_t>& sizes) {
  bool equal = true, shrinking = true;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    equal = equal && sizes[i] == sizes[0];
    shrinking = shrinking && sizes[i + 1] <= sizes[i];
  }
  if (equal && sizes.back() <= sizes[0]) return "every " + std::to_string(sizes[0]) + " layers";
  return shrinking ? "shrinking segments" : "uneven segments";
}

CheckpointReport report_of(const Rewritten& r, const Segmentation& s, size_t layers) {
  CheckpointReport rep;
  rep.layers = layers;
  rep.segments = segment_sizes(s, layers);
  rep.recomputed_nodes = r.recomputed;
  rep.checkpoints = r.checkpoints;
  rep.scheme = shape_of(rep.segments);
  return rep;
}

CheckpointResult unchanged(const Graph& g, std::string why, size_t layers, size_t peak) {
  CheckpointResult r{g, {}};
  r.report.scheme = "none (" + std::move(why) + ")";
  r.report.layers = layers;
  r.report.peak_before = r.report.peak_after = peak;
  return r;
}

// Bytes of what the backward reads from each layer, and of what a cut before each layer
// keeps; the budget search uses them to propose segmentations (CompiledPlan measures).
struct LayerBytes {
  std::vector<size_t> saved, cut;
};

LayerBytes layer_bytes(const Graph& g, const Forward& f) {
  const size_t m = f.layers();
  LayerBytes b{std::vector<size_t>(m, 0), std::vector<size_t>(m + 1, 0)};
  std::vector<int64_t> diff(m + 2, 0);
  for (size_t v = 0; v < g.values().size(); ++v) {
    int32_t p = f.producer[v];
    if (p < 0 || static_cast<size_t>(p) >= f.end) continue;
    const Node& n = g.nodes()[static_cast<size_t>(p)];
    // A view's storage is its input's: count bytes once.
    size_t bytes = n.op->view && g.value(Ref{static_cast<int32_t>(v)}).output_index == 0
                       ? 0
                       : value_bytes(g, Ref{static_cast<int32_t>(v)});
    auto lp = static_cast<size_t>(f.layer_of[static_cast<size_t>(p)]);
    if (f.backward_reads[v] && !f.pinned[v]) b.saved[lp] += bytes;
    int32_t r = f.last_reader[v];
    if (r < 0) continue;
    auto lr = static_cast<size_t>(f.layer_of[static_cast<size_t>(r)]);
    if (lr > lp) {  // crosses the cuts before layers lp + 1 .. lr
      diff[lp + 1] += static_cast<int64_t>(bytes);
      diff[lr + 1] -= static_cast<int64_t>(bytes);
    }
  }
  int64_t run = 0;
  for (size_t l = 0; l <= m; ++l) b.cut[l] = static_cast<size_t>(run += diff[l]);
  return b;
}

// Greedy from the front: a segment grows while the checkpoints before it plus what its
// backward reads stay under `target`. Later segments are shorter, since more checkpoints
// are alive when they are recomputed.
Segmentation greedy(const LayerBytes& b, size_t target) {
  Segmentation s{0};
  size_t kept = 0, open = 0;
  for (size_t l = 0; l < b.saved.size(); ++l) {
    if (l > s.back() && kept + open + b.saved[l] > target) {
      s.push_back(l);
      kept += b.cut[l];
      open = 0;
    }
    open += b.saved[l];
  }
  return s;
}

std::string bytes_text(size_t b) {
  std::ostringstream os;
  os << b << " bytes";
  if (b >= 10 * 1024) os << " (" << (b + 512) / 1024 << " KiB)";
  return os.str();
}

}  // namespace

std::string CheckpointReport::summary() const {
  std::ostringstream os;
  os << "gradient checkpointing: " << scheme;
  if (!segments.empty()) {
    os << ", " << layers << " layers in " << segments.size() << " segments (";
    for (size_t i = 0; i < segments.size(); ++i) os << (i ? "+" : "") << segments[i];
    os << "), " << recomputed_nodes << " nodes recomputed, " << checkpoints << " checkpoints";
  }
  if (peak_before > 0 || peak_after > 0)
    os << "; planned arena " << bytes_text(peak_before) << " -> " << bytes_text(peak_after);
  return os.str();
}

Result<CheckpointResult> checkpoint_every(const Graph& g, size_t layers) {
  if (layers == 0) return make_error("checkpointing: segments need at least one layer");
  Forward f = analyse(g);
  if (f.end == g.nodes().size()) return unchanged(g, "no backward nodes", f.layers(), 0);
  Segmentation s = uniform(f.layers(), layers);
  Rewritten r = rewrite(g, f, s);
  if (auto v = r.graph.verify(); !v) return make_error("checkpointing: " + v.error().message);
  CheckpointReport rep = report_of(r, s, f.layers());
  return CheckpointResult{std::move(r.graph), std::move(rep)};
}

Result<CheckpointResult> checkpoint_activations(const Graph& g, Backend& backend, int64_t budget_bytes,
                                                const CheckpointPlanOptions& plan_options) {
  if (budget_bytes < 0) return make_error("checkpointing: the budget must be >= 0 bytes (0: the sqrt(n) scheme)");
  Forward f = analyse(g);
  const size_t m = f.layers();
  if (f.end == g.nodes().size()) return unchanged(g, "no backward nodes", m, 0);
  MeasuringBackend measure(backend);
  auto before = planned_arena(g, measure, plan_options);
  if (!before) return before.error();
  if (m < 2) return unchanged(g, "one layer", m, *before);
  const auto budget = static_cast<size_t>(budget_bytes);
  if (budget > 0 && *before <= budget) return unchanged(g, "the plan fits the budget already", m, *before);

  auto measured = [&](const Segmentation& s) -> Result<std::pair<Rewritten, size_t>> {
    Rewritten r = rewrite(g, f, s);
    auto peak = planned_arena(r.graph, measure, plan_options);
    if (!peak) return peak.error();
    return std::pair<Rewritten, size_t>{std::move(r), *peak};
  };
  auto finish = [&](std::pair<Rewritten, size_t> best, const Segmentation& s) -> Result<CheckpointResult> {
    if (auto v = best.first.graph.verify(); !v) return make_error("checkpointing: " + v.error().message);
    CheckpointReport rep = report_of(best.first, s, m);
    rep.scheme = (budget > 0 ? "budget " + bytes_text(budget) : std::string("sqrt(n)")) + ": " + rep.scheme;
    rep.peak_before = *before;
    rep.peak_after = best.second;
    return CheckpointResult{std::move(best.first.graph), std::move(rep)};
  };

  if (budget == 0) {
    Segmentation s = shrinking(m);
    auto r = measured(s);
    if (!r) return r.error();
    // Recomputing only to end up with a larger plan helps nobody (a small or branchy net).
    if (r->second >= *before) return unchanged(g, "the sqrt(n) scheme would not lower the planned arena", m, *before);
    return finish(std::move(*r), s);
  }

  // Candidates: uniform segments of every length, and the greedy segmentations for a sweep
  // of targets; the one with the fewest recomputed nodes that fits wins (ties: the smaller
  // arena).
  std::set<Segmentation> candidates;
  for (size_t k = 1; k < m; ++k) candidates.insert(uniform(m, k));
  candidates.insert(shrinking(m));
  LayerBytes lb = layer_bytes(g, f);
  size_t lo = *std::max_element(lb.saved.begin(), lb.saved.end()), hi = 0;
  for (size_t b : lb.saved) hi += b;
  constexpr size_t kSteps = 64;
  for (size_t i = 0; i <= kSteps; ++i) candidates.insert(greedy(lb, lo + (hi - lo) * i / kSteps));
  std::optional<std::pair<Rewritten, size_t>> best;
  Segmentation best_s, smallest_s;
  size_t smallest = *before;
  for (const Segmentation& s : candidates) {
    if (s.size() < 2) continue;  // one segment: nothing is recomputed
    auto r = measured(s);
    if (!r) return r.error();
    if (r->second < smallest) {
      smallest = r->second;
      smallest_s = s;
    }
    if (r->second > budget) continue;
    if (!best || r->first.recomputed < best->first.recomputed ||
        (r->first.recomputed == best->first.recomputed && r->second < best->second)) {
      best_s = s;
      best.emplace(std::move(*r));
    }
  }
  // Below the floor: an error rather than a plan over budget, so that a budget is a promise.
  if (!best) {
    std::string how;
    for (size_t n : segment_sizes(smallest_s, m)) how += (how.empty() ? "" : "+") + std::to_string(n);
    return make_error("checkpointing: no segmentation of the " + std::to_string(m) + " layers fits a budget of " +
                      bytes_text(budget) + "; the smallest planned arena is " + bytes_text(smallest) +
                      (how.empty() ? "" : " (segments of " + how + " layers)") + ", without checkpointing " +
                      bytes_text(*before));
  }
  return finish(std::move(*best), best_s);
}

NamedPass checkpoint_pass(int64_t budget_bytes, CheckpointPlanOptions plan_options) {
  return {"gradient checkpointing", [budget_bytes, plan_options](const Graph& g, Backend& b) -> Result<Graph> {
            auto r = checkpoint_activations(g, b, budget_bytes, plan_options);
            if (!r) return r.error();
            return std::move(r->graph);
          }};
}

}  // namespace mls
