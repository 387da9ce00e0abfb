#include "engine/exec/jit.h"

#include <optional>

#include "engine/autodiff/autodiff.h"
#include "engine/exec/default_passes.h"

namespace mls {

namespace {

// A contiguous copy in a buffer of its own (device to device, no host round trip).
Tensor copy_of(const Tensor& t, AllocTag tag) {
  if (!t.is_contiguous()) return t.contiguous(tag);
  Tensor out = Tensor::empty(t.backend(), t.dtype(), t.shape(), tag);
  if (t.nbytes() > 0) t.backend().copy_device(*t.buffer(), t.byte_offset(), *out.buffer(), 0, t.nbytes());
  return out;
}

// What a function is traced on: the Graph, except that a captured tensor is copied, so the
// trace keeps the contents it saw (constant folding may read them at trace time, and a
// plan that shared the tensor would see later writes: two different answers otherwise).
class TraceEmitter final : public Emitter {
 public:
  TraceEmitter(Graph& g, Backend& backend) : g_(g), backend_(backend) {}
  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override {
    return g_.emit(op, inputs, attrs);
  }
  ValueType type_of(Ref r) const override { return g_.type_of(r); }
  void set_scope(const std::string& label) override { g_.set_scope(label); }
  Ref constant(const Tensor& value) override {
    MLS_CHECK(value.defined() && &value.backend() == &backend_,
              "TracedFunction: a captured tensor lives on another backend");
    return g_.add_constant("captured" + std::to_string(captured_++), copy_of(value, AllocTag::Other));
  }

 private:
  Graph& g_;
  Backend& backend_;
  int captured_ = 0;
};

}  // namespace

struct TracedFunction::Entry {
  // The signature.
  std::vector<ValueType> types;
  std::vector<bool> requires_grad;  // one per input
  // What was traced and compiled.
  std::string traced_text, optimized_text;
  std::optional<CompiledPlan> plan;
  Refs inputs, outputs, grads;  // values of the compiled graph
  // The storage each input is bound to: the same tensor again needs no bind() (which would
  // make the plan rebuild its steps).
  std::vector<std::pair<const Buffer*, size_t>> bound;

  bool matches(std::span<const Tensor> in, const std::vector<bool>& rg) const {
    if (in.size() != types.size()) return false;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].dtype() != types[i].dtype || in[i].shape() != types[i].shape) return false;
      if ((!rg.empty() && rg[i]) != requires_grad[i]) return false;
    }
    return true;
  }
};

TracedFunction::TracedFunction(Backend& backend, Fn fn, TraceOptions options)
    : backend_(&backend), fn_(std::move(fn)), options_(std::move(options)) {}
TracedFunction::~TracedFunction() = default;
TracedFunction::TracedFunction(TracedFunction&&) noexcept = default;
TracedFunction& TracedFunction::operator=(TracedFunction&&) noexcept = default;

Result<std::unique_ptr<TracedFunction::Entry>> TracedFunction::trace(std::span<const Tensor> inputs,
                                                                     const std::vector<bool>& requires_grad) {
  auto e = std::make_unique<Entry>();
  Graph g(options_.name);
  Refs in;
  Refs wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    e->types.push_back({inputs[i].dtype(), inputs[i].shape()});
    e->requires_grad.push_back(!requires_grad.empty() && requires_grad[i]);
    in.push_back(g.add_input("x" + std::to_string(i), e->types.back()));
    if (e->requires_grad.back()) wrt.push_back(in.back());
  }
  TraceEmitter te(g, *backend_);
  Refs outs = fn_(te, in);
  const std::string where = "traced function '" + options_.name + "'";
  if (outs.empty()) return make_error(where + ": the function returned no outputs");
  for (Ref r : outs)
    if (!r.valid() || static_cast<size_t>(r.id) >= g.values().size())
      return make_error(where + ": the function returned a value that is not of its trace");
  Refs all = outs;
  if (!wrt.empty()) {
    auto grads = append_backward(g, outs[0], wrt);
    if (!grads) return make_error(where + ": " + grads.error().message);
    all.insert(all.end(), grads->begin(), grads->end());
  }
  g.set_outputs(all);
  e->traced_text = g.to_text();

  std::optional<Graph> optimized;
  if (options_.optimize) {
    auto stages = run_passes(g, *backend_, default_passes());
    if (!stages) return make_error(where + ": " + stages.error().message);
    optimized.emplace(std::move(stages->back().graph));
  }
  const Graph& cg = optimized ? *optimized : g;  // passes keep inputs and outputs in order
  e->optimized_text = cg.to_text();
  e->inputs = cg.inputs();
  e->outputs.assign(cg.outputs().begin(), cg.outputs().begin() + static_cast<std::ptrdiff_t>(outs.size()));
  e->grads.assign(cg.outputs().begin() + static_cast<std::ptrdiff_t>(outs.size()), cg.outputs().end());
  auto plan = CompiledPlan::compile(cg, *backend_);
  if (!plan) return make_error(where + ": " + plan.error().message);
  e->plan.emplace(std::move(*plan));
  e->bound.assign(inputs.size(), {nullptr, 0});
  return e;
}

Result<TracedFunction::Entry*> TracedFunction::entry_for(std::span<const Tensor> inputs,
                                                         const std::vector<bool>& requires_grad) {
  const std::string where = "traced function '" + options_.name + "'";
  if (!requires_grad.empty() && requires_grad.size() != inputs.size())
    return make_error(where + ": " + std::to_string(inputs.size()) + " inputs but " +
                      std::to_string(requires_grad.size()) + " requires_grad flags");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined() || &inputs[i].backend() != backend_)
      return make_error(where + ": input " + std::to_string(i) + " is undefined or on another backend");
  for (auto& e : entries_)
    if (e->matches(inputs, requires_grad)) {
      ++stats_.hits;
      return e.get();
    }
  auto e = trace(inputs, requires_grad);
  if (!e) return e.error();
  ++stats_.traces;
  entries_.push_back(std::move(*e));
  stats_.entries = entries_.size();
  return entries_.back().get();
}

Result<TracedCall> TracedFunction::call(std::span<const Tensor> inputs, const std::vector<bool>& requires_grad) {
  auto found = entry_for(inputs, requires_grad);
  if (!found) return found.error();
  Entry& e = **found;
  last_ = &e;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::pair<const Buffer*, size_t> storage{t.buffer(), t.byte_offset()};
    if (t.is_contiguous() && e.bound[i] == storage) continue;
    auto b = e.plan->bind(e.inputs[i], t.is_contiguous() ? t : t.contiguous(AllocTag::Input));
    if (!b) return b.error();
    e.bound[i] = t.is_contiguous() ? storage : std::pair<const Buffer*, size_t>{nullptr, 0};
  }
  e.plan->run();
  TracedCall out;
  for (Ref r : e.outputs) out.outputs.push_back(copy_of(e.plan->tensor(r), AllocTag::Activation));
  for (Ref r : e.grads) out.grads.push_back(copy_of(e.plan->tensor(r), AllocTag::Gradient));
  return out;
}

Result<std::vector<Tensor>> TracedFunction::operator()(std::span<const Tensor> inputs) {
  auto r = call(inputs);
  if (!r) return r.error();
  return std::move(r->outputs);
}

std::string TracedFunction::graph_text(bool optimized) const {
  if (!last_) return {};
  return optimized ? last_->optimized_text : last_->traced_text;
}

std::string TracedFunction::plan_text() const { return last_ ? last_->plan->to_text() : std::string(); }

void TracedFunction::clear() {
  entries_.clear();
  last_ = nullptr;
  stats_.entries = 0;
}

}  // namespace mls
