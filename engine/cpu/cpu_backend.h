// The CPU backend: host memory, kernels that run at once on the calling thread and a pool.
// Its own target (mls_cpu) beside the GPU backends; init() registers it.
//
//   mls::cpu::init();                                   // ops, CPU kernels, "cpu" in the registry
//   Backend& cpu = mls::cpu::backend();
//   Tensor t = Tensor::empty(cpu, DType::F32, {4}, AllocTag::Activation);
//
// Only engine/cpu, the app and the tests include this header.
#pragma once

#include "engine/core/backend.h"
#include "engine/core/op.h"
#include "engine/cpu/thread_pool.h"

namespace mls::cpu {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads);
  std::string_view name() const override { return "cpu"; }
  DeviceKind kind() const override { return DeviceKind::CPU; }
  BufferType& default_buffer_type() override;
  void copy_to_device(Buffer& dst, size_t dst_offset, const void* src, size_t bytes) override;
  void copy_to_host(const Buffer& src, size_t src_offset, void* dst, size_t bytes) override;
  void copy_device(const Buffer& src, size_t src_offset, Buffer& dst, size_t dst_offset,
                   size_t bytes) override;
  void launch(KernelFn fn, const KernelCall& call) override { fn(call); }
  void synchronize() override {}
  // Each kernel on whichever pool thread is free; their own parallel loops run inline.
  void launch_concurrent(std::span<const KernelLaunch> ks) override {
    pool_.run_tasks(static_cast<int64_t>(ks.size()), [&](int64_t i) { launch_timed(ks[static_cast<size_t>(i)]); });
  }
  int num_threads() const override { return pool_.size(); }
  void expect_work() override { pool_.wake(); }
  ThreadPool& pool() { return pool_; }

 private:
  ThreadPool pool_;
  std::unique_ptr<BufferType> buffer_type_;
};

// The process-wide CPU backend. Its pool has set_default_threads() threads when that is
// called before first use, else one per hardware thread.
CpuBackend& backend();
void set_default_threads(int threads);

void register_kernels(OpRegistry& reg);

// Once per process (app/, the tests, the benchmarks): the engine's ops (engine_init), the CPU
// kernels, and "cpu" in backend_registry().
void init();

}  // namespace mls::cpu
