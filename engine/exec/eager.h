// The dynamic (define-by-run) path: ops run as soon as they are emitted, on the same
// kernels as the static plan, and a tape records them for backward.
//
//   EagerSession s(cpu);
//   Ref w = s.leaf(w_tensor, /*requires_grad=*/true);
//   Ref x = s.leaf(x_tensor);
//   Ref loss = mean(s, relu(s, matmul(s, x, w)), {}, false);   // computed now
//   Refs g = s.grad(loss, {w});                                  // walks the tape
//   s.value(g[0]).to_f64();
//   s.reset();                                                   // next step
//
// A session keeps every value until reset(), because backward may need any of them; a long
// loop resets it every so often. reset() keeps the session's capacity, so a warm session
// runs a tiny op with no heap allocation at all (bench/eager_overhead: tens of ns per op):
//  - value slots and tape entries are reused, with the storage of their shapes;
//  - type inference and the kernel lookup are remembered per (op, input types, attributes);
//  - buffers of at most kSmallBufferBytes that no one else holds when reset() runs go to a
//    small-buffer cache and back out to the next ops. They stay allocated, so the memory
//    tracker keeps counting them (tag Activation) while cached: cached_bytes() says how
//    many; release_cached_buffers() or the destructor frees them.
// Ops with no input that requires grad record no tape entry. Not thread-safe. An op the
// backend (a GPU) has no kernel for runs on the host: its inputs are copied there and its
// outputs back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/autodiff/autodiff.h"
#include "engine/core/tensor.h"
#include "engine/ir/emitter.h"

namespace mls {

class EagerSession final : public Emitter {
 public:
  // Buffers up to this size are recycled by reset(); at most kMaxCachedBytes of them wait.
  static constexpr size_t kSmallBufferBytes = 4096;
  static constexpr size_t kMaxCachedBytes = size_t{1} << 20;

  explicit EagerSession(Backend& backend);
  ~EagerSession() override;
  EagerSession(const EagerSession&) = delete;
  EagerSession& operator=(const EagerSession&) = delete;

  Ref leaf(const Tensor& t, bool requires_grad = false);
  Refs emit(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override;
  Ref emit_first(std::string_view op, std::span<const Ref> inputs, const Attrs& attrs) override;
  Ref constant(const Tensor& value) override { return leaf(value); }
  ValueType type_of(Ref r) const override;
  const Tensor& value(Ref r) const;
  bool requires_grad(Ref r) const;

  // Reverse mode over the tape. With create_graph the gradient ops are recorded too, so
  // the result can be differentiated again.
  Refs grad(Ref loss, std::span<const Ref> wrt, bool create_graph = false);
  // Drops every value and the tape; tensors still referenced elsewhere stay alive.
  void reset();
  size_t num_values() const { return count_; }
  size_t tape_size() const { return tape_count_; }
  // The ops recorded since the last reset(), in the order they ran (the teaching figures
  // draw them).
  std::span<const TapeEntry> tape() const { return {tape_.data(), tape_count_}; }
  size_t cached_bytes() const;
  void release_cached_buffers();
  // Hands back a small buffer that its last holder is done with (a script's tensor that was
  // collected), for the next ops to reuse; others are simply released.
  void recycle(std::shared_ptr<Buffer> buffer);
  Backend& backend() { return backend_; }

  // Off: ops run but record no tape entry (a `no_grad` region of a script).
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }

  // For callers that run ops on user input (the Lua bindings): an op whose inputs do not
  // type-check, or that has no kernel here, records a message naming the op and its input
  // types instead of aborting. From then on every op runs no kernel and yields empty f32
  // [0] placeholders, until clear_error(); so a composite builder that fails half way
  // returns normally and its caller reports error().
  void set_deferred_errors(bool on) { defer_errors_ = on; }
  const std::string& error() const { return error_; }
  bool failed() const { return !error_.empty(); }
  void clear_error() { error_.clear(); }

 private:
  struct Slot {
    Tensor value;
    bool requires_grad = false;
  };
  struct Caches;  // type inference memo and small-buffer cache (eager.cpp)

  // Runs one op; its outputs are the `*num_outputs` values from the returned Ref on.
  Ref run(std::string_view op_name, std::span<const Ref> inputs, const Attrs& attrs, size_t* num_outputs);
  void run_on_host(const OpDef& op, KernelFn kernel, const Attrs& attrs);
  const Slot& slot(Ref r) const;
  // Placeholder outputs for an op that cannot run (deferred errors).
  Ref fail(const OpDef* op, std::span<const Ref> inputs, const std::string& message, size_t* num_outputs);

  Backend& backend_;
  std::unique_ptr<Caches> caches_;
  std::vector<Slot> slots_;  // the first count_ hold this session's values
  size_t count_ = 0;
  std::vector<TapeEntry> tape_;  // the first tape_count_ are recorded
  size_t tape_count_ = 0;
  bool recording_ = true;
  bool defer_errors_ = false;
  std::string error_;
  std::shared_ptr<Buffer> workspace_;  // kernels' declared scratch, grown as needed
  std::shared_ptr<Buffer> placeholder_;  // backs the f32 [0] placeholders
  std::vector<const Tensor*> ins_;  // scratch for a kernel call
  std::vector<Tensor*> outs_;
};

}  // namespace mls
