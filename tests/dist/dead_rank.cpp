// A rank killed by SIGKILL in the middle of a job, as the dead-rank test drives it
// (tests/dist/dead_rank_test.sh): `dead_rank deadline` or `dead_rank sigterm`, 2 ranks.
// Both ranks sum once; then rank 1 kills itself and rank 0 sums again, which must fail
// naming rank 1. Rank 0 prints "named: <error>" and "after: <seconds>", then ends the job
// with abort_job(3).
//   deadline: a 2 s timeout (run with mpirun --mca orte_abort_on_non_zero_status 0, which
//             leaves rank 0 alone until then);
//   sigterm:  a 30 s timeout under a plain mpirun, whose SIGTERM (1 s after the death) sets
//             the cancel flag: rank 0 must name rank 1 before the SIGKILL 1 s later.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "engine/dist/mpi_collective.h"

namespace {
std::atomic<bool> g_cancel{false};
void on_sigterm(int) {
  g_cancel = true;
}
}  // namespace

int main(int argc, char** argv) {
  const bool sigterm = argc > 1 && std::strcmp(argv[1], "sigterm") == 0;
  auto c = mls::MpiCollective::init(&argc, &argv, sigterm ? 30.0 : 2.0);
  if (!c) {
    std::fprintf(stderr, "%s\n", c.error().message.c_str());
    return 1;
  }
  mls::MpiCollective& w = **c;
  w.set_ping_window(1.0);
  std::signal(SIGTERM, on_sigterm);
  w.set_cancel_flag(&g_cancel);
  double x = 1;
  if (!w.sum(&x, 1) || x != w.size()) {
    std::fprintf(stderr, "the first sum failed\n");
    return 1;
  }
  if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = w.sum(&x, 1);
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("named: %s\nafter: %.2f\n",
              r ? "nothing (the sum succeeded)" : r.error().message.c_str(), after);
  std::fflush(stdout);
  w.abort_job(3);
}
