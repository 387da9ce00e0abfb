#include "engine/exec/eager.h"

#include "engine/core/backend_registry.h"

#include <array>
#include <bit>
#include <cstring>

namespace mls {

namespace {

constexpr uint64_t kMix = 0x9E3779B97F4A7C15ull;
uint64_t mix(uint64_t h, uint64_t x) { return (h ^ x) * kMix; }

// Shapes here have a few dimensions: a loop beats the library's memcmp call.
bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

bool same_name(const std::string& a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < b.size(); ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// Builders pass op names as string literals, so the same name arrives from the same address:
// a tiny direct-mapped cache keyed by that address skips the registry's string search. The
// name is compared too, so a different string at a reused address only misses.
const OpDef* find_op(std::string_view name) {
  struct Entry {
    const char* data = nullptr;
    const OpDef* op = nullptr;
  };
  thread_local std::array<Entry, 64> cache{};
  Entry& e = cache[(reinterpret_cast<uintptr_t>(name.data()) * kMix) >> 58];
  if (e.data == name.data() && same_name(e.op->name, name)) return e.op;
  const OpDef* op = op_registry().find(name);
  if (op == nullptr) {
    std::fprintf(stderr, "mlstudio: unknown op '%.*s'\n", static_cast<int>(name.size()), name.data());
    MLS_CHECK(false, "EagerSession: unknown op");
  }
  e = {name.data(), op};
  return op;
}

uint64_t hash_attrs(uint64_t h, const Attrs& attrs) {
  for (const auto& [name, v] : attrs.items()) {
    h = mix(h, v.index() + 1);
    if (const auto* i = std::get_if<int64_t>(&v)) h = mix(h, static_cast<uint64_t>(*i));
    else if (const auto* d = std::get_if<double>(&v)) h = mix(h, std::bit_cast<uint64_t>(*d));
    else if (const auto* is = std::get_if<std::vector<int64_t>>(&v))
      for (int64_t x : *is) h = mix(h, static_cast<uint64_t>(x));
    else h = mix(h, std::get<std::string>(v).size());
  }
  return h;
}

}  // namespace

struct EagerSession::Caches {
  // What type inference and the kernel lookup gave for (op, input types, attributes). Ops
  // infer from types and attributes alone, so the answer can be reused while they match.
  struct Inferred {
    const OpDef* op = nullptr;
    uint64_t key = 0;
    Attrs attrs;
    std::vector<ValueType> in, out;
    std::vector<size_t> out_bytes;
    KernelFn kernel = nullptr;
    KernelFn host_kernel = nullptr;  // the device has none: the host runs the op
    size_t workspace_bytes = 0;      // what the kernel declares (OpRegistry::register_workspace)
  };
  static constexpr int kInferBits = 7;
  std::vector<Inferred> inferred;  // direct-mapped by key, sized on first use

  // Free small buffers by size class: 64 << k bytes (k < kClasses).
  static constexpr int kClasses = 7;
  static_assert((size_t{64} << (kClasses - 1)) == kSmallBufferBytes);
  std::array<std::vector<std::shared_ptr<Buffer>>, kClasses> free;
  size_t cached_bytes = 0;

  static int size_class(size_t bytes) {
    int k = 0;
    while ((size_t{64} << k) < bytes) ++k;
    return k;
  }
};

EagerSession::EagerSession(Backend& backend) : backend_(backend), caches_(std::make_unique<Caches>()) {}

EagerSession::~EagerSession() = default;

const EagerSession::Slot& EagerSession::slot(Ref r) const {
  MLS_CHECK(r.valid() && static_cast<size_t>(r.id) < count_, "EagerSession: unknown value");
  return slots_[static_cast<size_t>(r.id)];
}

Ref EagerSession::leaf(const Tensor& t, bool requires_grad) {
  MLS_CHECK(t.defined() && &t.backend() == &backend_, "EagerSession::leaf: tensor on another backend");
  Tensor packed = t.is_contiguous() ? Tensor() : t.contiguous(AllocTag::Activation);
  const Tensor& v = packed.defined() ? packed : t;
  if (slots_.size() == count_) {
    // Copied before the vector grows: `t` may be one of this session's values.
    Slot s{v, requires_grad};
    slots_.push_back(std::move(s));
  } else {
    slots_[count_].value = v;  // copy-assigning reuses the slot's shape storage
    slots_[count_].requires_grad = requires_grad;
  }
  ++count_;
  return Ref{static_cast<int32_t>(count_ - 1)};
}

ValueType EagerSession::type_of(Ref r) const {
  const Tensor& t = slot(r).value;
  return {t.dtype(), t.shape()};
}

const Tensor& EagerSession::value(Ref r) const { return slot(r).value; }

bool EagerSession::requires_grad(Ref r) const { return slot(r).requires_grad; }

Ref EagerSession::run(std::string_view op_name, std::span<const Ref> inputs, const Attrs& attrs,
                      size_t* num_outputs) {
  const OpDef* op = find_op(op_name);
  if (!error_.empty()) return fail(op, inputs, {}, num_outputs);
  MLS_CHECK(op->num_inputs < 0 || static_cast<size_t>(op->num_inputs) == inputs.size(),
            "EagerSession: wrong number of inputs");

  // Type inference and kernel, remembered.
  Caches& c = *caches_;
  if (c.inferred.empty()) c.inferred.resize(size_t{1} << Caches::kInferBits);
  uint64_t key = mix(reinterpret_cast<uintptr_t>(op), inputs.size());
  for (Ref r : inputs) {
    const Tensor& t = slot(r).value;
    key = mix(key, static_cast<uint64_t>(t.dtype()));
    for (int64_t d : t.shape()) key = mix(key, static_cast<uint64_t>(d));
  }
  key = hash_attrs(key, attrs);
  Caches::Inferred& inf = c.inferred[(key ^ (key >> 29)) >> (64 - Caches::kInferBits)];
  bool hit = inf.op == op && inf.key == key && inf.in.size() == inputs.size() && inf.attrs == attrs;
  for (size_t i = 0; hit && i < inputs.size(); ++i) {
    const Tensor& t = slots_[static_cast<size_t>(inputs[i].id)].value;
    hit = inf.in[i].dtype == t.dtype() && same_shape(inf.in[i].shape, t.shape());
  }
  if (!hit) {
    inf.op = nullptr;  // invalid until filled
    inf.in.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = slots_[static_cast<size_t>(inputs[i].id)].value;
      inf.in[i].dtype = t.dtype();
      inf.in[i].shape = t.shape();
    }
    auto out_t = op->infer(inf.in, attrs);
    if (!out_t && defer_errors_) return fail(op, inputs, out_t.error().message, num_outputs);
    if (!out_t) {
      std::fprintf(stderr, "mlstudio: %s: %s\n", op->name.c_str(), out_t.error().message.c_str());
      MLS_CHECK(false, "an eager op failed to type-check");
    }
    inf.out = std::move(*out_t);
    inf.out_bytes.resize(inf.out.size());
    for (size_t k = 0; k < inf.out.size(); ++k)
      inf.out_bytes[k] = static_cast<size_t>(numel(inf.out[k].shape)) * dtype_size(inf.out[k].dtype);
    const DType kt = kernel_dtype(*op, inf.in, inf.out);
    inf.kernel = op->kernel(backend_.kind(), kt);
    inf.host_kernel = nullptr;
    if (inf.kernel == nullptr && !op->view && backend_.kind() != DeviceKind::CPU && backend_registry().host())
      inf.host_kernel = op->kernel(DeviceKind::CPU, kt);
    inf.workspace_bytes = 0;
    if (inf.kernel)
      if (WorkspaceFn wf = op->workspace(backend_.kind(), kt)) inf.workspace_bytes = wf(inf.in, inf.out, attrs, backend_);
    if (inf.kernel == nullptr && inf.host_kernel == nullptr && !(op->view && inf.out.size() == 1) && defer_errors_)
      return fail(op, inputs, "no " + std::string(backend_.name()) + " kernel for these types", num_outputs);
    MLS_CHECK(inf.kernel != nullptr || inf.host_kernel != nullptr || (op->view && inf.out.size() == 1),
              "EagerSession: the backend has no kernel for this op and dtype");
    inf.attrs = attrs;
    inf.key = key;
    inf.op = op;
  }

  bool rg = false;
  for (Ref r : inputs) rg = rg || slots_[static_cast<size_t>(r.id)].requires_grad;
  rg = rg && op->kind == OpKind::Compute;

  // Output slots first: growing slots_ moves the tensors, so pointers are taken after.
  const size_t first = count_;
  const size_t nout = inf.out.size();
  while (slots_.size() < first + nout) slots_.emplace_back();
  if (op->view) {  // a view: no kernel, no copy
    const Tensor& src = slots_[static_cast<size_t>(inputs[0].id)].value;
    slots_[first].value.reset_contiguous(src.buffer_ptr(), src.byte_offset(), inf.out[0].dtype, inf.out[0].shape);
  } else {
    for (size_t k = 0; k < nout; ++k) {
      const ValueType& t = inf.out[k];
      const size_t bytes = inf.out_bytes[k];
      std::shared_ptr<Buffer> buf;
      if (bytes <= kSmallBufferBytes) {
        auto& list = c.free[static_cast<size_t>(Caches::size_class(bytes))];
        if (!list.empty()) {
          buf = std::move(list.back());
          list.pop_back();
          c.cached_bytes -= buf->size();
        } else {
          buf = backend_.allocate(size_t{64} << Caches::size_class(bytes), AllocTag::Activation);
        }
      } else {
        buf = backend_.allocate(bytes, AllocTag::Activation);
      }
      slots_[first + k].value.reset_contiguous(std::move(buf), 0, t.dtype, t.shape);
    }
    ins_.clear();
    for (Ref r : inputs) ins_.push_back(&slots_[static_cast<size_t>(r.id)].value);
    outs_.clear();
    for (size_t k = 0; k < nout; ++k) outs_.push_back(&slots_[first + k].value);
    if (inf.kernel && inf.workspace_bytes > 0) {
      // The session's workspace buffer only grows; the calls use it in turn (a device's
      // stream keeps them in order).
      if (!workspace_ || workspace_->size() < inf.workspace_bytes)
        workspace_ = backend_.allocate(inf.workspace_bytes, AllocTag::Workspace);
      backend_.launch(inf.kernel, KernelCall{attrs, ins_, outs_, backend_, workspace_.get(), 0, inf.workspace_bytes});
    } else if (inf.kernel)
      backend_.launch(inf.kernel, KernelCall{attrs, ins_, outs_, backend_});
    else
      run_on_host(*op, inf.host_kernel, attrs);
  }
  for (size_t k = 0; k < nout; ++k) slots_[first + k].requires_grad = rg;
  count_ += nout;

  if (rg && recording_) {
    if (tape_.size() == tape_count_) tape_.emplace_back();
    TapeEntry& e = tape_[tape_count_++];  // reused: its vectors keep their storage
    e.op = op;
    e.attrs = attrs;
    e.inputs.assign(inputs.begin(), inputs.end());
    e.outputs.resize(nout);
    for (size_t k = 0; k < nout; ++k) e.outputs[k] = Ref{static_cast<int32_t>(first + k)};
    e.label.clear();
  }
  *num_outputs = nout;
  return Ref{static_cast<int32_t>(first)};
}

void EagerSession::run_on_host(const OpDef& op, KernelFn kernel, const Attrs& attrs) {
  Backend& host = *backend_registry().host();
  std::vector<Tensor> hin, hout;
  std::vector<std::vector<char>> bytes;
  auto to_host = [&](const Tensor& dev) {
    Tensor src = dev.is_contiguous() ? dev : dev.contiguous();
    Tensor h = Tensor::empty(host, src.dtype(), src.shape(), AllocTag::Workspace);
    if (src.nbytes()) backend_.copy_to_host(*src.buffer(), src.byte_offset(), h.data<char>(), src.nbytes());
    return h;
  };
  for (const Tensor* t : ins_) hin.push_back(to_host(*t));
  for (const Tensor* t : outs_) hout.push_back(Tensor::empty(host, t->dtype(), t->shape(), AllocTag::Workspace));
  std::vector<const Tensor*> in_p;
  std::vector<Tensor*> out_p;
  for (const Tensor& t : hin) in_p.push_back(&t);
  for (Tensor& t : hout) out_p.push_back(&t);
  host.launch(kernel, KernelCall{attrs, in_p, out_p, host});
  auto back = [&](const Tensor& h, const Tensor& dev) {
    if (h.nbytes()) backend_.copy_to_device(*dev.buffer(), dev.byte_offset(), h.data<char>(), h.nbytes());
  };
  for (size_t k = 0; k < outs_.size(); ++k) back(hout[k], *outs_[k]);
  for (int m : op.mutated_inputs) back(hin[static_cast<size_t>(m)], *ins_[static_cast<size_t>(m)]);
}

Ref EagerSession::fail(const OpDef* op, std::span<const Ref> inputs, const std::string& message,
                       size_t* num_outputs) {
  if (error_.empty()) {
    std::string types;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = slot(inputs[i]).value;
      types += (i ? ", " : "") + std::string(dtype_name(t.dtype())) + shape_str(t.shape());
    }
    error_ = op->name + ": " + message + (types.empty() ? "" : " (inputs " + types + ")");
  }
  if (!placeholder_) placeholder_ = backend_.allocate(64, AllocTag::Other);
  const size_t n = static_cast<size_t>(std::max(op->num_outputs, 1));
  const size_t first = count_;
  while (slots_.size() < first + n) slots_.emplace_back();
  for (size_t k = 0; k < n; ++k) {
    slots_[first + k].value.reset_contiguous(placeholder_, 0, DType::F32, Shape{0});
    slots_[first + k].requires_grad = false;
  }
  count_ += n;
  *num_outputs = n;
  return Ref{static_cast<int32_t>(first)};
}

Refs EagerSession::emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) {
  size_t n = 0;
  Ref first = run(op, inputs, attrs, &n);
  Refs outs(n);
  for (size_t k = 0; k < n; ++k) outs[k] = Ref{first.id + static_cast<int32_t>(k)};
  return outs;
}

Ref EagerSession::emit_first(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) {
  size_t n = 0;
  Ref first = run(op, inputs, attrs, &n);
  MLS_CHECK(n > 0, "EagerSession: the op has no outputs");
  return first;
}

Refs EagerSession::grad(Ref loss, std::span<const Ref> wrt, bool create_graph) {
  // A copy: with create_graph, backprop records onto tape_ while it walks the tape.
  std::vector<TapeEntry> tape(tape_.begin(), tape_.begin() + static_cast<std::ptrdiff_t>(tape_count_));
  bool saved = recording_;
  recording_ = create_graph;
  Refs g = backprop(*this, tape, loss, wrt);
  recording_ = saved;
  return g;
}

void EagerSession::recycle(std::shared_ptr<Buffer> b) {
  Caches& c = *caches_;
  if (!b || b.use_count() != 1 || b->tag() != AllocTag::Activation || &b->backend() != &backend_) return;
  const size_t size = b->size();
  if (size > kSmallBufferBytes || c.cached_bytes + size > kMaxCachedBytes) return;
  const int k = Caches::size_class(size);
  if ((size_t{64} << k) != size) return;  // not one of ours: sizes are exact classes
  c.free[static_cast<size_t>(k)].push_back(std::move(b));
  c.cached_bytes += size;
}

void EagerSession::reset() {
  // A buffer shared by several values (a view and its base) is seen once per holder: the
  // last one to let go finds itself alone and caches it.
  for (size_t i = 0; i < count_; ++i) recycle(slots_[i].value.release_buffer());
  count_ = 0;
  tape_count_ = 0;
}

size_t EagerSession::cached_bytes() const { return caches_->cached_bytes; }

void EagerSession::release_cached_buffers() {
  workspace_.reset();
  for (auto& list : caches_->free) list.clear();
  caches_->cached_bytes = 0;
}

}  // namespace mls
