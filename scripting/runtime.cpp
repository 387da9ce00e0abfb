#include "scripting/runtime.h"

#include <algorithm>

namespace mls::lua {

// [SECTION] Trace

Trace::Trace(uint32_t id, std::string name, Backend& backend)
    : id(id), graph_(std::move(name)), target_(&graph_), backend_(backend) {}

Trace::Trace(uint32_t id, Emitter& external, Backend& backend)
    : id(id), target_(&external), backend_(backend) {}

Refs Trace::placeholders(std::string_view op) {
  if (!placeholder_.valid()) {
    // An f32 [0] constant: what failed ops "return" until the binding raises the error.
    placeholder_ = target_->constant(Tensor::zeros(backend_, DType::F32, {0}, AllocTag::Other));
  }
  const OpDef* def = op_registry().find(op);
  return Refs(static_cast<size_t>(std::max(def ? def->num_outputs : 1, 1)), placeholder_);
}

Refs Trace::emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) {
  if (!error.empty()) return placeholders(op);
  if (owns_graph()) {
    auto r = graph_.add_node(op, inputs, attrs);
    if (!r) {
      error = r.error().message;
      return placeholders(op);
    }
    return std::move(*r);
  }
  // Another emitter asserts on a type error: check first.
  const OpDef* def = op_registry().find(op);
  std::string types;
  std::vector<ValueType> in;
  for (Ref r : inputs) {
    in.push_back(target_->type_of(r));
    types += (types.empty() ? "" : ", ") + std::string(dtype_name(in.back().dtype)) +
             shape_str(in.back().shape);
  }
  if (def == nullptr) {
    error = "unknown op '" + std::string(op) + "'";
    return placeholders(op);
  }
  if (def->num_inputs >= 0 && static_cast<size_t>(def->num_inputs) != inputs.size()) {
    error = std::string(op) + ": takes " + std::to_string(def->num_inputs) + " inputs";
    return placeholders(op);
  }
  auto out = def->infer(in, attrs);
  if (!out) {
    error = std::string(op) + ": " + out.error().message + " (inputs " + types + ")";
    return placeholders(op);
  }
  return target_->emit(op, inputs, attrs);
}

Ref Trace::constant(const Tensor& value) {
  return owns_graph() ? graph_.add_constant("const", value) : target_->constant(value);
}

std::string Trace::value_name(Ref r) const {
  return owns_graph() ? graph_.value_name(r) : "%" + std::to_string(r.id);
}

Trace::Captured* Trace::find_captured(const Tensor& v) {
  auto it = captured_.find({v.buffer(), v.byte_offset()});
  if (it == captured_.end()) return nullptr;
  for (Captured& c : it->second)
    if (c.value.dtype() == v.dtype() && c.value.shape() == v.shape() &&
        c.value.strides() == v.strides())
      return &c;
  return nullptr;
}

Ref Trace::register_param(LuaTensor& t, const std::string& name, bool trainable) {
  if (Captured* c = find_captured(t.value)) return c->ref;
  Ref r = graph_.add_param(name, {t.value.dtype(), t.value.shape()}, t.init, trainable);
  params.push_back(&t);
  captured_[{t.value.buffer(), t.value.byte_offset()}].push_back({t.value, r});
  return r;
}

Ref Trace::capture(LuaTensor& t) {
  if (Captured* c = find_captured(t.value)) return c->ref;
  const Tensor& v = t.value;
  if (owns_graph() && capture_params && t.is_leaf && t.requires_grad)
    return register_param(t, "p" + std::to_string(params.size()), true);
  Ref r = constant(v.is_contiguous() ? v : v.contiguous());
  captured_[{v.buffer(), v.byte_offset()}].push_back({v, r});
  return r;
}

// [SECTION] Runtime

Runtime::Runtime(Backend& b) : backend(b), session(b) {
  session.set_deferred_errors(true);
}

Runtime::~Runtime() {
  end_run("finished");
}

Result<store::RunStore*> Runtime::open_store() {
  if (!store) {
    auto s = store::RunStore::open(db_path);
    if (!s) return s.error();
    store = std::move(*s);
  }
  return store.get();
}

void Runtime::end_run(const std::string& status) {
  if (run_id == 0 || !store) return;
  auto r = store->end_run(run_id, status);
  (void)r;  // a failure to close the record leaves it 'running'; nothing better to do here
  run_id = 0;
  log_step = 0;
}

Ref Runtime::eager_ref(LuaTensor& t) {
  if (t.gen == gen) return t.ref;
  // A leaf that requires grad stays one in every generation; an op output from an older
  // generation becomes a constant leaf (its graph was freed, as after PyTorch's backward).
  const bool rg = t.is_leaf && t.requires_grad;
  t.ref = session.leaf(t.value, rg);
  t.gen = gen;
  t.counted = false;
  if (rg) {
    t.leaf_slot = static_cast<int32_t>(grad_leaves.size());
    grad_leaves.push_back(&t);
  } else {
    t.leaf_slot = -1;
  }
  return t.ref;
}

void Runtime::adopt_output(LuaTensor& t, Ref r) {
  const Tensor& v = session.value(r);  // contiguous: the session makes every value so
  if (!spare.empty()) {
    t.value = std::move(spare.back());
    spare.pop_back();
  }
  t.value.reset_contiguous(v.buffer_ptr(), v.byte_offset(), v.dtype(), v.shape());
  t.ref = r;
  t.gen = gen;
  t.requires_grad = grad_enabled && session.requires_grad(r);
  t.is_leaf = !t.requires_grad;  // as PyTorch: a tensor no gradient flows through is a leaf
  t.counted = t.requires_grad;
  if (t.counted) ++live_outputs;
}

void Runtime::memory_exceeded() {
  if (stop.empty()) stop = "memory limit of " + std::to_string(memory_limit >> 20) + " MiB reached";
  error = stop;
}

bool Runtime::charge(LuaTensor& t) {
  uncharge(t);
  const int64_t bytes = t.value.defined() ? static_cast<int64_t>(t.value.nbytes()) : 0;
  if (!fits(bytes)) {
    t.value = Tensor();
    memory_exceeded();
    return false;
  }
  t.charged = bytes;
  tensor_bytes += bytes;
  return true;
}

void Runtime::forget(LuaTensor& t) {
  if (t.gen != gen) return;
  if (t.counted) {
    t.counted = false;
    if (--live_outputs == 0) gc_hint = true;
  }
  if (t.leaf_slot >= 0 && static_cast<size_t>(t.leaf_slot) < grad_leaves.size() &&
      grad_leaves[static_cast<size_t>(t.leaf_slot)] == &t)
    grad_leaves[static_cast<size_t>(t.leaf_slot)] = nullptr;
  t.leaf_slot = -1;
  t.gen = 0;
}

void Runtime::before_op() {
  const size_t n = session.num_values();
  if (n < reset_values) return;
  if (session.tape_size() == 0 || live_outputs == 0) new_generation();
}

bool Runtime::want_collect() {
  const size_t n = session.num_values();
  if (n < reset_values || n < next_reset_try_) return false;
  next_reset_try_ = n + reset_retry;
  return true;
}

void Runtime::new_generation() {
  next_reset_try_ = 0;
  for (LuaTensor* t : grad_leaves)
    if (t) t->leaf_slot = -1;
  grad_leaves.clear();
  session.reset();
  session.clear_error();
  ++gen;
  live_outputs = 0;
  gc_hint = false;
}

Trace& Runtime::begin_trace(const std::string& name) {
  traces_.push_back(std::make_unique<Trace>(next_trace_id_++, name, backend));
  return *traces_.back();
}

Trace& Runtime::begin_trace(Emitter& external) {
  traces_.push_back(std::make_unique<Trace>(next_trace_id_++, external, backend));
  return *traces_.back();
}

void Runtime::end_trace(Trace& t) {
  auto it =
      std::find_if(traces_.begin(), traces_.end(), [&](const auto& p) { return p.get() == &t; });
  if (it != traces_.end()) traces_.erase(it);
}

Trace* Runtime::find_trace(uint32_t id) {
  for (auto& t : traces_)
    if (t->id == id) return t.get();
  return nullptr;
}

}  // namespace mls::lua
