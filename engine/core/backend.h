// The backend interface: one per device kind (CPU always; Vulkan, CUDA later).
//
//   Backend& cpu = cpu_backend();                          // from engine/cpu
//   auto buf = cpu.allocate(1024, AllocTag::Activation);   // tagged, counted
//   cpu.copy_to_device(*buf, 0, host_data, 1024);          // explicit copies in and out
//   cpu.launch(kernel, call);                              // asynchronous where the device is
//   cpu.synchronize();                                     // the synchronisation point
//
// Nothing above this interface may assume that device memory has a host address: code
// that needs the bytes copies them out. Kernels of a backend see their own buffers'
// native handles. The layering follows ggml: backend (device) -> buffer type -> buffer.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "engine/core/dtype.h"
#include "engine/core/memory.h"

namespace mls {

class Backend;
class Tensor;
class Attrs;
struct OpDef;

enum class DeviceKind : uint8_t { CPU, Vulkan, CUDA };
inline constexpr int kNumDeviceKinds = 3;
std::string_view device_kind_name(DeviceKind k);

// A block of device memory. Freed (and reported to the tracker) by its destructor.
class Buffer {
 public:
  Buffer(Backend& backend, size_t bytes, AllocTag tag) : backend_(backend), size_(bytes), tag_(tag) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  size_t size() const { return size_; }
  AllocTag tag() const { return tag_; }
  Backend& backend() const { return backend_; }
  // The host address of the memory, or nullptr where the host cannot address it.
  virtual void* host_ptr() const = 0;
  // The backend's own handle (a pointer, a VkBuffer, a CUdeviceptr) for its kernels.
  virtual void* native_handle() const = 0;

 private:
  Backend& backend_;
  size_t size_;
  AllocTag tag_;
};

// How a backend allocates (device-local, host-visible, ...).
class BufferType {
 public:
  virtual ~BufferType() = default;
  virtual std::string_view name() const = 0;
  virtual size_t alignment() const = 0;
  // Where a tensor smaller than alignment() bytes may start: at a multiple of this or of its
  // element size, whichever is larger. A compiled plan packs its small buffers (losses,
  // biases' gradients) this tightly; a device whose buffer offsets must stay aligned keeps
  // the default.
  virtual size_t small_alignment() const { return alignment(); }
  virtual bool host_accessible() const = 0;
  virtual std::unique_ptr<Buffer> allocate(size_t bytes, AllocTag tag) = 0;
};

// One kernel invocation: the op's attributes, its inputs and outputs as strided views.
struct KernelCall {
  const Attrs& attrs;
  std::span<const Tensor* const> inputs;
  std::span<Tensor* const> outputs;
  Backend& backend;
  // Scratch memory the kernel declared (OpRegistry::register_workspace), placed by the
  // compiled plan in its arena (AllocTag::Workspace) or allocated by the eager session for
  // the call: on the kernel's own device. Empty where the caller gives none; the kernel then
  // finds its own.
  Buffer* workspace = nullptr;
  size_t workspace_offset = 0, workspace_bytes = 0;
};
using KernelFn = void (*)(const KernelCall& call);

// Profiling: where launch_timed writes a kernel's time (synchronised, so devices with queues
// report kernel time, not submission time).
struct KernelTiming {
  double seconds = 0;        // summed over every timed launch
  int64_t start_ns = 0;      // the last launch, steady_clock nanoseconds
  int64_t end_ns = 0;
  int32_t thread = 0;        // the host thread that ran it (trace rows), numbered from 0
};

// A small number for the calling thread, stable for its life (a trace's thread id).
int32_t trace_thread_id();

// One kernel of a group handed to Backend::launch_concurrent.
struct KernelLaunch {
  KernelFn fn = nullptr;
  const KernelCall* call = nullptr;
  KernelTiming* timing = nullptr;  // profiling
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual DeviceKind kind() const = 0;
  virtual BufferType& default_buffer_type() = 0;
  std::shared_ptr<Buffer> allocate(size_t bytes, AllocTag tag) {
    return std::shared_ptr<Buffer>(default_buffer_type().allocate(bytes, tag));
  }
  virtual void copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) = 0;
  virtual void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset,
                           size_t bytes) = 0;
  // The backend is one in-order queue (a stream): launches run in submission order, and
  // synchronize() waits for all of them. Devices with queues return from launch at once;
  // the CPU runs the kernel before returning.
  virtual void launch(KernelFn fn, const KernelCall& call) = 0;
  virtual void synchronize() = 0;
  // Kernels independent of each other (none reads or writes what another writes): a
  // backend may overlap them (the CPU runs them on its pool's threads). By default they
  // run in turn.
  virtual void launch_concurrent(std::span<const KernelLaunch> ks) {
    for (const KernelLaunch& k : ks) launch_timed(k);
  }
  void launch_timed(const KernelLaunch& k) {
    if (!k.timing) return launch(k.fn, *k.call);
    const auto t0 = std::chrono::steady_clock::now();
    launch(k.fn, *k.call);
    synchronize();
    const auto t1 = std::chrono::steady_clock::now();
    k.timing->seconds += std::chrono::duration<double>(t1 - t0).count();
    k.timing->start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    k.timing->end_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
    k.timing->thread = trace_thread_id();
  }
  // Threads the backend's kernels may use (CPU) or 1.
  virtual int num_threads() const { return 1; }
  // Launches follow soon after a pause (a training step, while its batch is copied in): a
  // backend whose threads sleep when idle may get them up now (the CPU's pool).
  virtual void expect_work() {}
  // Recording a sequence of launches once and replaying it (a device's command buffer or
  // graph): between begin_capture() and end_capture() launches record instead of running;
  // replay() runs them again on the same buffers. -1 from begin_capture: not supported, and
  // the caller launches as usual. A compiled plan records its step once this way.
  virtual int begin_capture() { return -1; }
  virtual void end_capture() {}
  virtual void replay(int capture) { (void)capture; }
  virtual void release_capture(int capture) { (void)capture; }
  // The most inputs a fused_elementwise kernel takes here: the fusion pass makes no node
  // with more.
  virtual size_t max_kernel_inputs() const { return SIZE_MAX; }
  // Whether this backend has a kernel for `op` at `dtype` (the scheduler asks before
  // placing a node here; see OpDef::kernel).
  bool supports(const OpDef& op, DType dtype) const;
  MemoryTracker& memory() { return memory_; }

 private:
  MemoryTracker memory_;
};

}  // namespace mls
