// What data-parallel training needs from the ranks of a job, as an interface the engine
// trains through without knowing MPI. engine/dist implements it over MPI (MpiCollective,
// built when MPI is found); tests implement it between threads of one process.
//
//   Collective& c = ...;                    // rank c.rank() of c.size()
//   trainer.set_collective(&c);             // before init(): rank 0's parameters win
//   trainer.fit(in);                        // each rank reads its shard, gradients averaged
//
// A rank that dies or hangs must not hang the others: every blocking call gives up after
// timeout_seconds() and reports which ranks did not answer (CollectiveError), so a job stops
// within seconds, not a launcher's ten-minute default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The host each rank runs on (MPI_Get_processor_name), by rank.
  virtual const std::vector<std::string>& hosts() const = 0;

  // Rank 0's bytes to every rank (blocking, within the timeout).
  virtual Result<void> broadcast(void* data, size_t bytes) = 0;
  // Sums `count` doubles over the ranks, in place (blocking): metrics, sample counts.
  virtual Result<void> sum(double* data, size_t count) = 0;

  // Gradient buckets: start summing `count` floats over the ranks in place and return at
  // once (MPI_Iallreduce); the data must stay put until wait_all(). progress() lets the
  // library move started sums along (call it between kernels); wait_all() waits for every
  // started sum (within the timeout) and forgets them.
  virtual Result<void> start_sum(float* data, size_t count) = 0;
  virtual void progress() {}
  virtual Result<void> wait_all() = 0;

  // Text from `from` to `to` (blocking on both sides, within the timeout): a sweep's trials
  // handed out by rank 0 and their results sent back.
  virtual Result<void> send_text(int to, const std::string& text) = 0;
  virtual Result<std::string> recv_text(int from) = 0;
  // Waits for text from any rank; `from` gets who sent it. No timeout of its own beyond the
  // collective's: a rank whose trial takes longer sends heartbeats (empty texts) meanwhile.
  virtual Result<std::string> recv_text_any(int* from) = 0;

  // Every blocking call above gives up after this long (default 30 s), naming the ranks that
  // did not take part (a dead or hung rank) in the error message.
  virtual double timeout_seconds() const = 0;
  // Seconds spent inside this collective's calls so far (communication's share of a step).
  virtual double seconds() const = 0;
  // Ends the whole job at once with this exit code (MPI_Abort): after a rank died, nothing
  // else can finish cleanly. Never returns.
  [[noreturn]] virtual void abort_job(int code) = 0;
};

// A world of `size` ranks that never communicates: to compile and show the data-parallel
// training plan (`mlstudio graph P.mls --plan --ranks N`) without a job. Every call fails.
class PlanOnlyCollective final : public Collective {
 public:
  explicit PlanOnlyCollective(int size) : size_(size), hosts_(static_cast<size_t>(size)) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  Result<void> broadcast(void*, size_t) override { return refuse(); }
  Result<void> sum(double*, size_t) override { return refuse(); }
  Result<void> start_sum(float*, size_t) override { return refuse(); }
  Result<void> wait_all() override { return refuse(); }
  Result<void> send_text(int, const std::string&) override { return refuse(); }
  Result<std::string> recv_text(int) override { return refuse(); }
  Result<std::string> recv_text_any(int*) override { return refuse(); }
  double timeout_seconds() const override { return 0; }
  double seconds() const override { return 0; }
  [[noreturn]] void abort_job(int) override { std::abort(); }

 private:
  static Error refuse() { return make_error("a plan-only world of ranks cannot communicate"); }
  int size_;
  std::vector<std::string> hosts_;
};

// How a launcher told this process it is one of many ranks, read from the environment
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK + size, SLURM_NTASKS under srun): the world size
// it was launched with (1 when none), so a build without MPI can refuse to train N copies.
struct LaunchEnv {
  int size = 1, rank = 0;
  std::string launcher;  // "OpenMPI", "PMI", "Slurm" ("" when none)
};
LaunchEnv launch_env();

}  // namespace mls
