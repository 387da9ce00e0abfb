// Matrix products on every backend this build has, in GFLOP/s beside the device's measured
// fp32 FMA peak.
//
//   cmake --build build --target matmul_backends && build/bench/matmul_backends [repeats]
//
// The peak: the CPU's FMA chains on every hardware thread (bench/fma_chains.h); a Vulkan
// device's, a shader of 8 independent FMA chains per invocation over enough workgroups to
// fill it (on lavapipe that is the CPU again, through LLVM); a CUDA device's, a kernel of the
// same kind. Each product is the `matmul` op through an eager session on that backend (the
// kernel the plans run), timed to completion (synchronised), the median of `repeats` runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench/fma_chains.h"
#include "engine/core/backend_registry.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/exec/eager.h"
#include "gpu/backends.h"  // the Vulkan and CUDA backends' headers where this build has them

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double median_seconds(int repeats, F fn) {
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> t(static_cast<size_t>(repeats));
  for (double& v : t) {
    const auto t0 = Clock::now();
    fn();
    v = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + repeats / 2, t.end());
  return t[static_cast<size_t>(repeats / 2)];
}

// The device's fp32 FMA peak in GFLOP/s, or 0 where this program cannot measure it.
double device_peak(mls::Backend& b) {
  if (b.kind() == mls::DeviceKind::CPU)
    return mls::bench::fma_peak(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
#ifdef MLSTUDIO_HAVE_VULKAN
  if (b.kind() == mls::DeviceKind::Vulkan) {
    auto& vk = static_cast<mls::vulkan::VulkanBackend&>(b);
    const uint32_t groups = 4096, iters = vk.is_software() ? 2000 : 20000;
    mls::Tensor out = mls::Tensor::empty(vk, mls::DType::F32, {int64_t{groups} * 256}, mls::AllocTag::Workspace);
    struct {
      uint32_t iters;
    } p{iters};
    const double s = median_seconds(5, [&] {
      vk.dispatch(mls::vulkan::Shader::fma_peak, {&out}, p, groups);
      vk.synchronize();
    });
    return 2.0 * 8 * iters * groups * 256.0 / s / 1e9;
  }
#endif
#ifdef MLSTUDIO_HAVE_CUDA
  if (b.kind() == mls::DeviceKind::CUDA) return static_cast<mls::cuda::CudaBackend&>(b).measure_fma_peak_gflops();
#endif
  return 0;
}

struct Product {
  const char* what;
  int64_t m, n, k;
  bool ta, tb;
};

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  mls::gpu::init_backends();
  const Product products[] = {
      {"MLP fc1 forward", 128, 256, 784, false, false}, {"MLP fc1 dW", 784, 256, 128, true, false},
      {"square 512", 512, 512, 512, false, false},      {"square 1024", 1024, 1024, 1024, false, false},
      {"square 2048", 2048, 2048, 2048, false, false},
  };
  for (const std::string& name : mls::backend_registry().names()) {
    auto opened = mls::backend_registry().open(name);
    if (!opened) {
      std::printf("%s: not measured: %s\n\n", name.c_str(), opened.error().message.c_str());
      continue;
    }
    mls::Backend& b = **opened;
    std::string device = name;
#ifdef MLSTUDIO_HAVE_VULKAN
    if (b.kind() == mls::DeviceKind::Vulkan) device += " (" + static_cast<mls::vulkan::VulkanBackend&>(b).device_name() + ")";
#endif
    const double peak = device_peak(b);
    std::printf("%s: fp32 FMA peak %.1f GFLOP/s (measured)\n", device.c_str(), peak);
    std::printf("  %-16s %-16s %10s %10s %8s\n", "product", "m x n x k", "ms", "GFLOP/s", "of peak");
    for (const Product& p : products) {
      // The largest products take seconds on a software device: fewer repeats there.
      const double flop = 2.0 * static_cast<double>(p.m * p.n * p.k);
      const int reps = flop > 4e9 && b.kind() != mls::DeviceKind::CUDA ? std::max(3, repeats / 5) : repeats;
      std::vector<float> va(static_cast<size_t>(p.m * p.k)), vb(static_cast<size_t>(p.k * p.n));
      for (size_t i = 0; i < va.size(); ++i) va[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
      for (size_t i = 0; i < vb.size(); ++i) vb[i] = static_cast<float>((i * 104729) % 1000) * 1e-3f - 0.5f;
      mls::Tensor a = mls::Tensor::from_f32(b, p.ta ? mls::Shape{p.k, p.m} : mls::Shape{p.m, p.k}, va);
      mls::Tensor bt = mls::Tensor::from_f32(b, p.tb ? mls::Shape{p.n, p.k} : mls::Shape{p.k, p.n}, vb);
      mls::EagerSession s(b);
      const double secs = median_seconds(reps, [&] {
        s.reset();
        (void)mls::matmul(s, s.leaf(a), s.leaf(bt), p.ta, p.tb);
        b.synchronize();
      });
      const double gflops = flop / secs / 1e9;
      char dims[48];
      std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", static_cast<long long>(p.m), static_cast<long long>(p.n),
                    static_cast<long long>(p.k));
      std::printf("  %-16s %-16s %10.3f %10.1f %7.1f%%\n", p.what, dims, secs * 1e3, gflops,
                  peak > 0 ? 100 * gflops / peak : 0.0);
    }
    std::printf("\n");
  }
  return 0;
}
