// The CUDA backend (cuda_backend.h): opening a device, the caching allocator, copies through
// pinned staging memory, the stream and its CUDA graphs, and registration.
//
// [SECTION] Errors and handle owners
// [SECTION] Buffers: size classes, the buffer and its type
// [SECTION] Devices: listing and opening
// [SECTION] Memory: the block cache and copies
// [SECTION] The stream: launches, synchronisation, CUDA graphs
// [SECTION] Registration
#include "gpu/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engine/core/backend_registry.h"
#include "engine/core/op.h"
#include "gpu/cuda/cublas_api.h"
#include "gpu/cuda/cuda_kernels.h"

namespace mls::cuda {

// [SECTION] Errors and handle owners

void check(cudaError_t r, const char* what) {
  if (r == cudaSuccess) return;
  if (r == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it, the caller may free memory and go on
    throw std::bad_alloc();
  }
  std::fprintf(stderr, "mlstudio: cuda: %s failed: %s\n", what, cudaGetErrorString(r));
  std::abort();
}

void check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED) throw std::bad_alloc();
  std::fprintf(stderr, "mlstudio: cuda: %s failed: %s\n", what, cublas_api().status_string(s));
  std::abort();
}

// Releases ignore errors: they run in destructors, where a lost device has nothing left to say.
void StreamDeleter::operator()(cudaStream_t s) const {
  (void)cudaStreamDestroy(s);
}
void CublasDeleter::operator()(cublasHandle_t h) const {
  (void)cublas_api().destroy(h);
}
void GraphDeleter::operator()(cudaGraph_t g) const {
  (void)cudaGraphDestroy(g);
}
void GraphExecDeleter::operator()(cudaGraphExec_t g) const {
  (void)cudaGraphExecDestroy(g);
}
void DeviceMemoryDeleter::operator()(void* p) const {
  (void)cudaFree(p);
}
void PinnedMemoryDeleter::operator()(void* p) const {
  (void)cudaFreeHost(p);
}

namespace {

// [SECTION] Buffers: size classes, the buffer and its type

// The size class of an allocation: 256-byte steps up to 4 KiB, then four steps per power
// of two, so a freed block serves the next request of about its size (at most 25 % over).
size_t size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= 4096) return (bytes + 255) / 256 * 256;
  size_t p = 4096;
  while (p * 2 < bytes) p *= 2;
  const size_t step = p / 4;
  return (bytes + step - 1) / step * step;
}

constexpr size_t kMaxCachedBytes = size_t{1} << 30;
constexpr size_t kStagingBytes = size_t{16} << 20;
// cuBLAS's workspace: what NVIDIA recommends for Hopper (32 MiB; 4 MiB suffices before it).
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

// cudaMalloc in a capture's thread would invalidate the capture (ThreadLocal mode): a plan
// that allocates while it records (a kernel's first use of a size) allocates outside it.
cudaError_t malloc_outside_capture(void** p, size_t bytes) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  const cudaError_t r = cudaMalloc(p, bytes);
  (void)cudaThreadExchangeStreamCaptureMode(&mode);
  return r;
}

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(CudaBackend& b, size_t bytes, AllocTag tag)
      : Buffer(b, bytes, tag), block_(b.acquire_block(bytes)) {
    b.memory().on_alloc(tag, bytes);
  }
  ~CudaBuffer() override {
    auto& b = static_cast<CudaBackend&>(backend());
    b.memory().on_free(tag(), size());
    b.release_block(block_);
  }
  void* host_ptr() const override { return nullptr; }
  void* native_handle() const override { return block_.ptr; }

 private:
  CudaBackend::Block block_;
};

class CudaBufferType final : public BufferType {
 public:
  explicit CudaBufferType(CudaBackend& b) : backend_(b) {}
  std::string_view name() const override { return "cuda-device"; }
  // cudaMalloc's alignment; tensors placed at multiples of it keep vectorised loads aligned.
  size_t alignment() const override { return 256; }
  bool host_accessible() const override { return false; }
  std::unique_ptr<Buffer> allocate(size_t bytes, AllocTag tag) override {
    return std::make_unique<CudaBuffer>(backend_, bytes, tag);
  }

 private:
  CudaBackend& backend_;
};

std::string no_device(cudaError_t r) {
  (void)cudaGetLastError();
  return std::string("no CUDA device: ") + cudaGetErrorString(r);
}

}  // namespace

// [SECTION] Devices: listing and opening

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  if (cudaError_t r = cudaGetDeviceCount(&count); r != cudaSuccess) return make_error(no_device(r));
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaError_t r = cudaGetDeviceProperties(&p, i); r != cudaSuccess) {
      (void)cudaGetLastError();
      return make_error("cannot read CUDA device cuda:" + std::to_string(i) + ": " +
                        cudaGetErrorString(r));
    }
    out.push_back({p.name, p.integrated ? "integrated GPU" : "discrete GPU", p.totalGlobalMem,
                   p.major, p.minor});
  }
  return out;
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::create(int index) {
  int count = 0;
  if (cudaError_t r = cudaGetDeviceCount(&count); r != cudaSuccess) return make_error(no_device(r));
  if (count == 0) return make_error("no CUDA device: the runtime reports none");
  if (index < 0 || index >= count)
    return make_error("there " +
                      std::string(count == 1 ? "is 1 CUDA device"
                                             : "are " + std::to_string(count) + " CUDA devices") +
                      " (cuda:0" + (count > 1 ? " to cuda:" + std::to_string(count - 1) : "") +
                      ")");
  const std::string label = "cuda:" + std::to_string(index);
  auto failed = [&](const char* what, cudaError_t r) {
    (void)cudaGetLastError();
    return make_error("cannot open CUDA device " + label + ": " + what + ": " +
                      cudaGetErrorString(r));
  };
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->index_ = index;
  if (index > 0) b->name_ = label;
  if (cudaError_t r = cudaSetDevice(index); r != cudaSuccess) return failed("cudaSetDevice", r);
  cudaDeviceProp props{};
  if (cudaError_t r = cudaGetDeviceProperties(&props, index); r != cudaSuccess)
    return failed("cudaGetDeviceProperties", r);
  b->device_name_ = props.name;

  cudaStream_t stream = nullptr;
  if (cudaError_t r = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); r != cudaSuccess)
    return failed("cudaStreamCreateWithFlags", r);
  b->stream_.reset(stream);
  void* workspace = nullptr;
  if (cudaError_t r = cudaMalloc(&workspace, kCublasWorkspaceBytes); r != cudaSuccess)
    return failed("cudaMalloc (cuBLAS workspace)", r);
  b->cublas_workspace_.reset(workspace);
  std::string why;
  const CublasApi* blas = load_cublas(&why);
  if (!blas) return make_error("cannot open CUDA device " + label + ": " + why);
  cublasHandle_t handle = nullptr;
  if (cublasStatus_t s = blas->create(&handle); s != CUBLAS_STATUS_SUCCESS)
    return make_error("cannot open CUDA device " + label +
                      ": cublasCreate: " + blas->status_string(s));
  b->cublas_.reset(handle);
  // The stream first: cublasSetStream resets the workspace to cuBLAS's own pool. No TF32:
  // products are full f32, as the CPU's and the references.
  check(blas->set_stream(handle, stream), "cublasSetStream");
  check(blas->set_workspace(handle, workspace, kCublasWorkspaceBytes), "cublasSetWorkspace");
  check(blas->set_math_mode(handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  b->buffer_type_ = std::make_unique<CudaBufferType>(*b);
  return b;
}

CudaBackend::~CudaBackend() {
  if (!stream_) return;
  make_current();
  if (capturing_ >= 0) {  // abandon an unfinished capture
    cudaGraph_t g = nullptr;
    if (cudaStreamEndCapture(stream(), &g) == cudaSuccess && g) (void)cudaGraphDestroy(g);
  }
  (void)cudaStreamSynchronize(stream());
  captures_.clear();
  release_cached();
}

BufferType& CudaBackend::default_buffer_type() {
  return *buffer_type_;
}

size_t CudaBackend::max_kernel_inputs() const {
  return dev::kMaxInputs;
}

void CudaBackend::make_current() const {
  int current = -1;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current != index_) check(cudaSetDevice(index_), "cudaSetDevice");
}

// [SECTION] Memory: the block cache and copies

CudaBackend::Block CudaBackend::acquire_block(size_t bytes) {
  const size_t cls = size_class(bytes);
  {
    std::lock_guard lock(cache_mu_);
    auto it = cache_.find(cls);
    if (it != cache_.end() && !it->second.empty()) {
      Block b = it->second.back();
      it->second.pop_back();
      cached_bytes_ -= cls;
      return b;
    }
  }
  make_current();
  Block b;
  b.size = cls;
  cudaError_t r = malloc_outside_capture(&b.ptr, cls);
  if (r == cudaErrorMemoryAllocation && capturing_ < 0) {
    (void)cudaGetLastError();
    release_cached();  // what the cache holds may be enough
    r = malloc_outside_capture(&b.ptr, cls);
  }
  check(r, "cudaMalloc");
  return b;
}

void CudaBackend::release_block(Block b) {
  // Work queued before the release may still use the block: the next acquire of it queues
  // after that work on the same stream, so in-order execution keeps reuse safe.
  {
    std::lock_guard lock(cache_mu_);
    // While a capture records, memory cannot be freed (cudaFree waits for the device): keep it.
    if (cached_bytes_ + b.size <= kMaxCachedBytes || capturing_ >= 0) {
      cache_[b.size].push_back(b);
      cached_bytes_ += b.size;
      return;
    }
  }
  make_current();
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  check(cudaFree(b.ptr), "cudaFree");
}

size_t CudaBackend::cached_bytes() const {
  std::lock_guard lock(cache_mu_);
  return cached_bytes_;
}

void CudaBackend::release_cached() {
  if (capturing_ >= 0) return;  // see release_block
  make_current();
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  std::lock_guard lock(cache_mu_);
  for (auto& [cls, blocks] : cache_)
    for (Block& b : blocks) check(cudaFree(b.ptr), "cudaFree");
  cache_.clear();
  cached_bytes_ = 0;
}

char* CudaBackend::staging() {
  if (!staging_) {
    void* p = nullptr;
    check(cudaMallocHost(&p, kStagingBytes), "cudaMallocHost (staging)");
    staging_.reset(p);
  }
  return static_cast<char*>(staging_.get());
}

void CudaBackend::copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) {
  MLS_CHECK(dst_offset + bytes <= dst.size(), "copy_to_device out of range");
  MLS_CHECK(capturing_ < 0, "copy_to_device inside a capture");
  if (bytes == 0) return;
  make_current();
  std::lock_guard lock(staging_mu_);
  char* stage = staging();
  char* to = static_cast<char*>(dst.native_handle()) + dst_offset;
  const char* from = static_cast<const char*>(src);
  // In order after the queued work (which may still read what this overwrites); each chunk
  // waits for its transfer before the staging memory takes the next.
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    std::memcpy(stage, from + done, n);
    check(cudaMemcpyAsync(to + done, stage, n, cudaMemcpyHostToDevice, stream()),
          "cudaMemcpyAsync (to device)");
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
    done += n;
  }
}

void CudaBackend::copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size(), "copy_to_host out of range");
  MLS_CHECK(capturing_ < 0, "copy_to_host inside a capture");
  if (bytes == 0) return;
  make_current();
  std::lock_guard lock(staging_mu_);
  char* stage = staging();
  const char* from = static_cast<const char*>(src.native_handle()) + src_offset;
  char* to = static_cast<char*>(dst);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    check(cudaMemcpyAsync(stage, from + done, n, cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (to host)");
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
    std::memcpy(to + done, stage, n);
    done += n;
  }
}

void CudaBackend::copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset,
                              size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size(),
            "copy_device out of range");
  if (bytes == 0) return;
  make_current();
  check(cudaMemcpyAsync(static_cast<char*>(dst.native_handle()) + dst_offset,
                        static_cast<const char*>(src.native_handle()) + src_offset, bytes,
                        cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpyAsync (device to device)");
}

// [SECTION] The stream: launches, synchronisation, CUDA graphs

void CudaBackend::launch(KernelFn fn, const KernelCall& call) {
  make_current();
  ++launches_;
  fn(call);
}

void CudaBackend::synchronize() {
  MLS_CHECK(capturing_ < 0, "CudaBackend::synchronize inside a capture");
  make_current();
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

int CudaBackend::begin_capture() {
  MLS_CHECK(capturing_ < 0, "CudaBackend: nested capture");
  make_current();
  // ThreadLocal: a call that would break the graph (a cudaMalloc, a synchronising copy)
  // from this thread fails the capture instead of recording something that replays wrong.
  check(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture");
  int id = -1;
  for (size_t i = 0; i < captures_.size() && id < 0; ++i)
    if (!captures_[i].exec) id = static_cast<int>(i);
  if (id < 0) {
    id = static_cast<int>(captures_.size());
    captures_.emplace_back();
  }
  capturing_ = id;
  return id;
}

void CudaBackend::end_capture() {
  MLS_CHECK(capturing_ >= 0, "CudaBackend::end_capture without begin_capture");
  make_current();
  Capture& c = captures_[static_cast<size_t>(capturing_.load())];
  capturing_ = -1;
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream(), &graph), "cudaStreamEndCapture");
  c.graph.reset(graph);
  cudaGraphExec_t exec = nullptr;
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  c.exec.reset(exec);
}

void CudaBackend::replay(int capture) {
  MLS_CHECK(capture >= 0 && static_cast<size_t>(capture) < captures_.size() &&
                captures_[static_cast<size_t>(capture)].exec,
            "CudaBackend::replay of an unknown capture");
  make_current();
  check(cudaGraphLaunch(captures_[static_cast<size_t>(capture)].exec.get(), stream()),
        "cudaGraphLaunch");
  ++replays_;
  synchronize();
}

void CudaBackend::release_capture(int capture) {
  if (capture < 0 || static_cast<size_t>(capture) >= captures_.size()) return;
  Capture& c = captures_[static_cast<size_t>(capture)];
  c.exec.reset();
  c.graph.reset();
}

// [SECTION] Registration

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    engine_init();
    register_kernels(op_registry());
    backend_registry().add({"cuda", DeviceKind::CUDA, open_once([](int index) -> Result<std::unique_ptr<Backend>> {
                              auto b = CudaBackend::create(index);
                              if (!b) return b.error();
                              return std::unique_ptr<Backend>(std::move(*b));
                            })});
  });
}

double CudaBackend::measure_fma_peak_gflops() {
  make_current();
  int sms = 1;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index_), "cudaDeviceGetAttribute");
  const int32_t blocks = sms * 32, iters = 100000;
  Block out = acquire_block(static_cast<size_t>(blocks) * dev::kThreads * sizeof(float));
  double best = 0;
  for (int attempt = 0; attempt < 4; ++attempt) {
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "cudaEventCreate");
    check(cudaEventCreate(&t1), "cudaEventCreate");
    check(cudaEventRecord(t0, stream()), "cudaEventRecord");
    dev::fma_peak(static_cast<float*>(out.ptr), blocks, iters, stream());
    check(cudaEventRecord(t1, stream()), "cudaEventRecord");
    check(cudaEventSynchronize(t1), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    if (attempt > 0) best = std::max(best, 2.0 * 8 * iters * static_cast<double>(blocks) * dev::kThreads / (ms * 1e-3) / 1e9);
  }
  release_block(out);
  return best;
}

}  // namespace mls::cuda
