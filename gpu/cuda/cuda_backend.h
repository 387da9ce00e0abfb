// The CUDA backend: device memory from a caching allocator, one non-blocking stream that
// every kernel, copy and cuBLAS call of the backend runs on, and CUDA graphs for replay.
//
//   mls::cuda::init();                                   // kernels + "cuda" in the registry
//   Result<Backend*> b = backend_registry().open("cuda"); // the first GPU; "cuda:1" the second
//   Tensor t = Tensor::empty(**b, DType::F32, {4}, AllocTag::Activation);
//
// Kernels enqueue on the stream (launch returns at once); synchronize() waits for it. A copy
// to or from the host goes through pinned staging memory and waits for the stream, so it
// sees the work queued before it; a copy between device buffers is queued like a kernel.
// Buffers never expose a host address (Buffer::host_ptr is null).
//
// A plan records its whole step once and replays it (begin_capture / replay): the stream is
// captured into a CUDA graph. Kernels therefore take their tables (dims, strides, programs)
// as kernel arguments, never as host-to-device copies, and never synchronise.
//
// Errors after the device opened are programming errors or a lost device: the failing call
// is printed and the process aborts, except running out of memory, which throws
// std::bad_alloc (the plan reports its size).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/backend.h"
#include "engine/core/result.h"

namespace mls::cuda {

// Registers the CUDA kernels and "cuda" in backend_registry() (once; the app and the tests
// call it). The device opens on first use, so a machine without a GPU or driver still
// starts; open() then says why.
void init();

// The GPUs the runtime reports, in order ("cuda:0" first), for `mlstudio devices` and the
// GUI. An error with the runtime's reason where there is no driver or no device.
struct DeviceInfo {
  std::string name;
  std::string type;  // "discrete GPU", "integrated GPU"
  uint64_t memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;  // 9.0 for H100
};
Result<std::vector<DeviceInfo>> list_devices();

// Owners of the runtime's handles (released in the destructor; see CudaBackend).
struct StreamDeleter {
  void operator()(cudaStream_t s) const;
};
struct CublasDeleter {
  void operator()(cublasHandle_t h) const;
};
struct GraphDeleter {
  void operator()(cudaGraph_t g) const;
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const;
};
struct DeviceMemoryDeleter {
  void operator()(void* p) const;
};
struct PinnedMemoryDeleter {
  void operator()(void* p) const;
};

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;
  static Result<std::unique_ptr<CudaBackend>> create(int index);

  std::string_view name() const override { return name_; }
  DeviceKind kind() const override { return DeviceKind::CUDA; }
  BufferType& default_buffer_type() override;
  void copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override;
  void copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) override;
  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset,
                   size_t bytes) override;
  void launch(KernelFn fn, const KernelCall& call) override;
  void synchronize() override;
  // device/elementwise.cu takes 8 input pointers in its kernel arguments (dev::kMaxInputs).
  size_t max_kernel_inputs() const override;

  // The device's name as the runtime gives it ("NVIDIA H100 80GB HBM3").
  const std::string& device_name() const { return device_name_; }
  int device_index() const { return index_; }

  // For kernels: the stream to enqueue on and the cuBLAS handle bound to it. Each entry
  // point makes this backend's device current first (another "cuda:N" may have run last).
  cudaStream_t stream() const { return stream_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  void make_current() const;

  // Recording a sequence of launches once and replaying it: between begin_capture() and
  // end_capture() the stream is captured into a CUDA graph, which replay() launches again
  // (the buffers it reads and writes must stay where they are). Returns an id.
  int begin_capture() override;
  void end_capture() override;
  void replay(int capture) override;
  void release_capture(int capture) override;
  bool capturing() const { return capturing_ >= 0; }
  // Kernels launched through launch() and graphs replayed (tests check a replayed step
  // launches nothing again).
  uint64_t launch_count() const { return launches_; }
  uint64_t replay_count() const { return replays_; }

  // The device's fp32 FMA peak in GFLOP/s, measured with independent FMA chains in every
  // thread of enough blocks to fill it (bench/matmul_backends).
  double measure_fma_peak_gflops();

  // Memory held by the buffer cache for reuse (freed blocks of the same size class).
  size_t cached_bytes() const;
  void release_cached();

  // Internals the buffer type uses.
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;  // the size class
  };
  Block acquire_block(size_t bytes);
  void release_block(Block b);

 private:
  CudaBackend() = default;
  // Pinned host memory for copies (16 MiB, made on the first copy); larger copies go in chunks.
  char* staging();

  std::string name_ = "cuda";
  std::string device_name_;
  int index_ = 0;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  // cuBLAS's workspace, given to it so that a captured GEMM allocates nothing (declared
  // before the handle, so the handle goes first).
  std::unique_ptr<void, DeviceMemoryDeleter> cublas_workspace_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
  std::unique_ptr<BufferType> buffer_type_;
  mutable std::mutex cache_mu_;
  std::unordered_map<size_t, std::vector<Block>> cache_;  // free blocks by size class
  size_t cached_bytes_ = 0;
  std::mutex staging_mu_;
  std::unique_ptr<void, PinnedMemoryDeleter> staging_;
  struct Capture {
    std::unique_ptr<CUgraph_st, GraphDeleter> graph;
    std::unique_ptr<CUgraphExec_st, GraphExecDeleter> exec;
  };
  std::vector<Capture> captures_;
  // The capture being recorded, or -1; read by buffers freed on other threads.
  std::atomic<int> capturing_{-1};
  uint64_t launches_ = 0, replays_ = 0;
};

}  // namespace mls::cuda
