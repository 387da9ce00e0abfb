// MpiCollective's latency between the ranks of a job, beside MPI's own blocking calls:
//   mpirun -np 2 --oversubscribe build/bench/dist_latency [repeats]
// (add --allow-run-as-root as root). Rank 0 prints, per call, the median and the 90th
// percentile of `repeats` calls (default 2000 small, 200 large), each after a barrier, from
// the last rank's start to the last rank's end.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "engine/dist/mpi_collective.h"

using namespace mls;

namespace {

struct Stat {
  double median_us, p90_us;
};

// From the last rank's start to the last rank's end of each call (the ranks share a host, so
// steady_clock is one clock for all of them): what a call costs once everyone is in it.
Stat time_it(int repeats, const std::function<void()>& call, int rank1_late_us = 0) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1 && rank1_late_us)
      std::this_thread::sleep_for(std::chrono::microseconds(rank1_late_us));
    double t[2];
    t[0] = std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
    call();
    t[1] = std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now().time_since_epoch())
               .count();
    MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    us.push_back(t[1] - t[0]);
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us[us.size() * 9 / 10]};
}

void must(const Result<void>& r) {
  if (!r) {
    std::fprintf(stderr, "%s\n", r.error().message.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto c = MpiCollective::init(&argc, &argv);
  if (!c) {
    std::fprintf(stderr, "%s\n", c.error().message.c_str());
    return 1;
  }
  MpiCollective& w = **c;
  const int small = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int large = std::max(10, small / 10);
  std::vector<float> mib(262144, 1.0f);
  float one = 1;
  double d = 1;
  struct Row {
    const char* what;
    Stat s;
  };
  std::vector<Row> rows;
  rows.push_back({"sum(1 double)", time_it(small, [&] { must(w.sum(&d, 1)); })});
  rows.push_back({"start_sum(1 float) + wait_all", time_it(small, [&] {
                    must(w.start_sum(&one, 1));
                    must(w.wait_all());
                  })});
  rows.push_back({"MPI_Allreduce(1 float), blocking", time_it(small, [&] {
                    MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                  })});
  rows.push_back({"start_sum(1 MiB of floats) + wait_all", time_it(large, [&] {
                    must(w.start_sum(mib.data(), mib.size()));
                    must(w.wait_all());
                  })});
  rows.push_back({"4 x start_sum(256 KiB) + wait_all", time_it(large, [&] {
                    for (int b = 0; b < 4; ++b) must(w.start_sum(mib.data() + b * 65536, 65536));
                    must(w.wait_all());
                  })});
  // Ranks rarely arrive together: rank 1 starts 2 ms late (its sleep is before its start
  // time), so rank 0 has been waiting, sleeping between polls, when the sum can move.
  rows.push_back(
      {"the same, rank 0 waiting 2 ms for rank 1", time_it(
                                                       large,
                                                       [&] {
                                                         must(w.start_sum(mib.data(), mib.size()));
                                                         must(w.wait_all());
                                                       },
                                                       2000)});
  rows.push_back({"MPI_Allreduce(1 MiB of floats), blocking", time_it(large, [&] {
                    MPI_Allreduce(MPI_IN_PLACE, mib.data(), static_cast<int>(mib.size()), MPI_FLOAT,
                                  MPI_SUM, MPI_COMM_WORLD);
                  })});
  rows.push_back({"MPI_Iallreduce(1 MiB of floats) + MPI_Wait", time_it(large, [&] {
                    MPI_Request req;
                    MPI_Iallreduce(MPI_IN_PLACE, mib.data(), static_cast<int>(mib.size()),
                                   MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
                    MPI_Wait(&req, MPI_STATUS_IGNORE);
                  })});
  if (w.rank() == 0) {
    std::printf("%d ranks on %s; median and p90 of each call, microseconds\n", w.size(),
                w.hosts()[0].c_str());
    for (auto& r : rows) std::printf("  %-42s %9.1f %9.1f\n", r.what, r.s.median_us, r.s.p90_us);
  }
  return 0;
}
