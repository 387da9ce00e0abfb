#include "engine/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "engine/core/backend_registry.h"
#include "engine/core/host_memory.h"
#include "engine/cpu/kernels.h"

namespace mls::cpu {

namespace {

constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like

class CpuBuffer final : public Buffer {
 public:
  CpuBuffer(Backend& b, size_t bytes, AllocTag tag) : Buffer(b, bytes, tag) {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    // Linux may overcommit a buffer larger than the machine and kill us when it is touched;
    // one that RAM and swap can never back is refused here (see host_memory.h).
    if (rounded > static_cast<uint64_t>(host_allocation_limit())) throw std::bad_alloc();
    ptr_ = std::aligned_alloc(kAlignment, rounded);
    if (!ptr_) throw std::bad_alloc();
    b.memory().on_alloc(tag, bytes);
  }
  ~CpuBuffer() override {
    backend().memory().on_free(tag(), size());
    std::free(ptr_);
  }
  void* host_ptr() const override { return ptr_; }
  void* native_handle() const override { return ptr_; }

 private:
  void* ptr_;
};

class CpuBufferType final : public BufferType {
 public:
  explicit CpuBufferType(Backend& b) : backend_(b) {}
  std::string_view name() const override { return "cpu-host"; }
  size_t alignment() const override { return kAlignment; }
  // Kernels load vectors at any address (unaligned or masked loads).
  size_t small_alignment() const override { return 1; }
  bool host_accessible() const override { return true; }
  std::unique_ptr<Buffer> allocate(size_t bytes, AllocTag tag) override {
    return std::make_unique<CpuBuffer>(backend_, bytes, tag);
  }

 private:
  Backend& backend_;
};

int g_default_threads = 0;

}  // namespace

CpuBackend::CpuBackend(int threads)
    : pool_(threads), buffer_type_(std::make_unique<CpuBufferType>(*this)) {
  // GEMMs run on OpenBLAS's own threads; one budget for both pools, so --threads 1 means 1.
  // An explicit OPENBLAS_NUM_THREADS wins: the ThreadSanitizer run sets it to 1, because
  // OpenBLAS's threads are not instrumented and its joins look like races.
  const char* env = std::getenv("OPENBLAS_NUM_THREADS");
  if (env == nullptr || std::atoi(env) < 1) openblas_set_num_threads(std::max(threads, 1));
}

BufferType& CpuBackend::default_buffer_type() {
  return *buffer_type_;
}

void CpuBackend::copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) {
  MLS_CHECK(dst_offset + bytes <= dst.size(), "copy_to_device out of range");
  if (bytes == 0) return;  // an empty tensor's source may be null, which memcpy may not see
  char* to = static_cast<char*>(dst.host_ptr()) + dst_offset;
  // A training batch (LeNet's 401 KB) is copied in the pause between steps, where the pool's
  // threads wait anyway: split in two, the copy and the labels took 18-21 us a step instead
  // of 29 on the 2-core VM.
  constexpr size_t kPiece = 64 << 10;
  if (bytes < 4 * kPiece || pool_.size() == 1) return void(std::memcpy(to, src, bytes));
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  pool_.parallel_for(0, pieces, 1, [&](int64_t lo, int64_t hi) {
    const size_t a = static_cast<size_t>(lo) * kPiece,
                 b = std::min(bytes, static_cast<size_t>(hi) * kPiece);
    std::memcpy(to + a, static_cast<const char*>(src) + a, b - a);
  });
}

void CpuBackend::copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size(), "copy_to_host out of range");
  if (bytes == 0) return;
  std::memcpy(dst, static_cast<const char*>(src.host_ptr()) + src_offset, bytes);
}

void CpuBackend::copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset,
                             size_t bytes) {
  MLS_CHECK(src_offset + bytes <= src.size() && dst_offset + bytes <= dst.size(),
            "copy_device out of range");
  std::memmove(static_cast<char*>(dst.host_ptr()) + dst_offset,
               static_cast<const char*>(src.host_ptr()) + src_offset, bytes);
}

void set_default_threads(int threads) {
  g_default_threads = threads;
}

// The default pool: set_default_threads, else MLS_THREADS (a positive count), else one
// thread per hardware thread.
static int default_threads() {
  if (g_default_threads > 0) return g_default_threads;
  if (const char* env = std::getenv("MLS_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

CpuBackend& backend() {
  static CpuBackend b(default_threads());
  return b;
}

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    engine_init();
    register_kernels(op_registry());
    backend_registry().add({"cpu", DeviceKind::CPU, [](int index) -> Result<Backend*> {
                              if (index != 0)
                                return make_error("there is one CPU device: cpu (or cpu:0)");
                              return &backend();
                            }});
  });
}

void register_kernels(OpRegistry& reg) {
  register_elementwise_kernels(reg);
  register_reduce_kernels(reg);
  register_shape_kernels(reg);
  register_nn_kernels(reg);
  register_optimizer_kernels(reg);
  register_math_kernels(reg);
  register_layout_kernels(reg);
  register_conv_kernels(reg);
  register_norm_kernels(reg);
  register_lowp_kernels(reg);
  register_fused_kernels(reg);
  register_attention_kernels(reg);
}

}  // namespace mls::cpu
