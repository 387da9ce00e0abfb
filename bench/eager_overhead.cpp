// Per-op overhead of the eager path: a tiny `add` of two f32 [4] tensors in an
// EagerSession, so the arithmetic (4 floats) is nothing and the bookkeeping is all.
//
//   cmake --build build --target eager_overhead && build/bench/eager_overhead [ops] [rounds] [--json]
//
// Issue 3 asks for <= ~90 ns per op (a tenth of PyTorch's ~0.9 us for torch.add from
// Python; bench/eager_overhead_torch.py measures that beside this program).
//
// Modes:
//   no grad   neither input requires grad: type inference, an output tensor, the kernel.
//   tape      one input requires grad: the same plus a tape entry per op.
//   relu      a unary op with no grad, for comparison.
// An EagerSession keeps every value until reset() (backward may need any of them), so the
// loop resets the session every kResetEvery ops and re-adds its two leaves; that cost is
// included, spread over the ops. Each figure is the median over rounds of ns per op, in
// wall-clock time and in this thread's CPU time: on a machine shared with other work the
// wall clock also counts the time the thread waited for a core, the CPU time does not.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/exec/eager.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kResetEvery = 1000;

enum class Mode { NoGrad, Tape, Relu };

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct PerOp {
  double wall_ns = 0, cpu_ns = 0;
};

// Runs `ops` ops in mode `m`; returns ns per op. `sink` keeps the work observable.
PerOp run_round(mls::Backend& cpu, Mode m, int64_t ops, double& sink) {
  using namespace mls;
  Tensor a = Tensor::from_f32(cpu, {4}, {1, 2, 3, 4}, AllocTag::Input);
  Tensor b = Tensor::from_f32(cpu, {4}, {0.5f, -1, 2, 0.25f}, AllocTag::Input);
  EagerSession s(cpu);
  const auto t0 = Clock::now();
  const double c0 = thread_cpu_ns();
  for (int64_t done = 0; done < ops;) {
    s.reset();
    Ref ra = s.leaf(a, m == Mode::Tape);
    Ref rb = s.leaf(b);
    const int64_t n = std::min(kResetEvery, ops - done);
    Ref last;
    for (int64_t i = 0; i < n; ++i) last = m == Mode::Relu ? relu(s, ra) : add(s, ra, rb);
    sink += static_cast<double>(s.value(last).data<float>()[0]);
    done += n;
  }
  const double cpu_ns = thread_cpu_ns() - c0;
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  return {ns / static_cast<double>(ops), cpu_ns / static_cast<double>(ops)};
}

double median(std::vector<PerOp> v, double PerOp::*field) {
  std::sort(v.begin(), v.end(), [&](const PerOp& a, const PerOp& b) { return a.*field < b.*field; });
  return v[v.size() / 2].*field;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t ops = 1'000'000;
  int rounds = 5;
  bool json = false;
  int pos = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (pos++ == 0) {
      ops = std::max<int64_t>(1, std::atoll(argv[i]));
    } else {
      rounds = std::max(1, std::atoi(argv[i]));
    }
  }
  mls::cpu::set_default_threads(1);  // tiny ops never use the pool; say so explicitly
  mls::cpu::init();
  mls::Backend& cpu = mls::cpu::backend();
  double sink = 0;
  const std::pair<Mode, const char*> modes[] = {
      {Mode::NoGrad, "add_no_grad"}, {Mode::Tape, "add_tape"}, {Mode::Relu, "relu_no_grad"}};
  std::vector<std::vector<PerOp>> times(3);
  run_round(cpu, Mode::NoGrad, std::min<int64_t>(ops, 100'000), sink);  // warm-up
  for (int r = 0; r < rounds; ++r)  // modes interleaved, so each sees the same load
    for (size_t k = 0; k < 3; ++k) times[k].push_back(run_round(cpu, modes[k].first, ops, sink));
  const mls::MemoryStats ms = cpu.memory().stats();
  if (json) {
    std::printf("{");
    for (size_t k = 0; k < 3; ++k)
      std::printf("\"%s_ns\": %.2f, \"%s_cpu_ns\": %.2f, ", modes[k].second, median(times[k], &PerOp::wall_ns),
                  modes[k].second, median(times[k], &PerOp::cpu_ns));
    std::printf("\"ops\": %lld, \"rounds\": %d, \"alloc_count\": %llu, \"peak_bytes\": %lld}\n",
                static_cast<long long>(ops), rounds, static_cast<unsigned long long>(ms.alloc_count),
                static_cast<long long>(ms.total_peak));
  } else {
    std::printf("eager overhead: f32 [4] ops, %lld per round, median of %d rounds, reset every %lld ops\n",
                static_cast<long long>(ops), rounds, static_cast<long long>(kResetEvery));
    std::printf("  %-14s %12s %12s\n", "mode", "wall ns/op", "cpu ns/op");
    for (size_t k = 0; k < 3; ++k)
      std::printf("  %-14s %12.1f %12.1f\n", modes[k].second, median(times[k], &PerOp::wall_ns),
                  median(times[k], &PerOp::cpu_ns));
    std::printf("  allocations %llu, peak %lld bytes\n", static_cast<unsigned long long>(ms.alloc_count),
                static_cast<long long>(ms.total_peak));
  }
  return sink == 12345.678 ? 1 : 0;  // never true; keeps the results alive
}
