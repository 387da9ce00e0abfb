// Collective (engine/train/collective.h) over MPI: the ranks of an `mpirun`/`srun` job.
// Built only where CMake finds MPI (target mls_dist, MLS_HAVE_MPI=1).
//
//   auto c = MpiCollective::init(&argc, &argv);  // MPI_Init_thread, once per process
//   if (!c) { std::cerr << c.error().message; return 1; }
//   (*c)->set_cancel_flag(&sigterm_seen);  // optional: a cut-short wait names who is missing
//   trainer.set_collective(c->get());
//   ...                                    // failed? record it, then (*c)->abort_job(2)
//
// Every call is non-blocking underneath (MPI_Ibcast, MPI_Iallreduce, MPI_Isend/Irecv) and
// polled with MPI_Test against a deadline, because OpenMPI's blocking calls never time out.
// While it polls, a rank also answers "are you alive" pings (their own tag); at the deadline
// it pings every other rank and names those that do not answer within a couple of seconds:
//   "rank 1 (host n07) did not answer within 30 s: it died or hangs (sum of 1 double, call 57)"
// A peer whose process is gone never showed up as an MPI error here (shared memory or TCP):
// the request simply never completes; an error code, where an MPI gives one, is reported the
// same way. After a failure the job cannot finish cleanly: call abort_job(code) once the
// failure is recorded; the destructor of a failed collective aborts with code 1 rather than
// finalise (MPI_Finalize would wait for the dead rank).
//
// What Debian's OpenMPI 4.1.4 `mpirun` does when one rank gets kill -9 (measured, 2 ranks on
// one host; T = MCA odls_base_sigkill_timeout, default 1 s):
//   - default: SIGTERM to every surviving rank T after the death, SIGKILL T later (1 s and
//     2 s); mpirun exits 137. A survivor that catches SIGTERM has T to record the failure:
//     a cancel flag set by the handler cuts the wait short and the pings take ~0.25 s.
//     `--mca odls_base_sigkill_timeout 3` stretches both (measured: SIGTERM at +3 s, SIGKILL
//     at +6 s).
//   - `--mca orte_abort_on_non_zero_status 0`: the survivors are left alone, find the dead rank
//     at their deadline and name it; but the job must then end with MPI_Abort (abort_job):
//     a survivor that exits or finalises instead leaves mpirun waiting forever with no
//     processes left. mpirun then exits 137.
//   - `--enable-recovery`: survivors left alone too, but mpirun exits 0 whatever the ranks
//     return, even after MPI_Abort(3) or a rank's kill -9: a failed job looks successful.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/collective.h"

namespace mls {

class MpiCollective final : public Collective {
 public:
  // MPI_Init_thread (MPI_THREAD_SERIALIZED: one thread at a time calls MPI; an MPI that
  // gives only FUNNELED is accepted, and then only the main thread may call), a duplicate of
  // MPI_COMM_WORLD with MPI_ERRORS_RETURN, and every rank's host gathered once. Once per
  // process (MPI cannot be initialised twice).
  static Result<std::unique_ptr<MpiCollective>> init(int* argc, char*** argv,
                                                     double timeout_s = 30);
  ~MpiCollective() override;
  MpiCollective(const MpiCollective&) = delete;
  MpiCollective& operator=(const MpiCollective&) = delete;

  // Another collective over the same ranks (a duplicate communicator, its own timeout): a
  // failure in it leaves this one usable. Collective: every rank must call it.
  Result<std::unique_ptr<MpiCollective>> duplicate(double timeout_s);

  // When *cancel turns true (a SIGTERM handler), a wait stops at once and pings the others: it
  // fails naming the ranks that did not answer, or, when every rank answers (a Ctrl-C that
  // mpirun passed to every rank), goes on to complete, so the trainer's stop flag ends every
  // rank after the same step. nullptr: no cancel flag.
  void set_cancel_flag(const std::atomic<bool>* cancel) {
    cancel_ = cancel;
    cancel_answered_ = false;
  }
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  // How long a rank waits for answers to its pings after a deadline (default 2 s; 0.25 s
  // after a cancel, since mpirun's SIGKILL follows its SIGTERM by 1 s).
  void set_ping_window(double seconds) { ping_window_s_ = seconds; }
  // True once a call has failed: the job cannot finish cleanly (see abort_job).
  bool failed() const { return failed_; }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }

  Result<void> broadcast(void* data, size_t bytes) override;
  Result<void> sum(double* data, size_t count) override;
  Result<void> start_sum(float* data, size_t count) override;
  void progress() override;
  Result<void> wait_all() override;
  Result<void> send_text(int to, const std::string& text) override;
  Result<std::string> recv_text(int from) override;
  Result<std::string> recv_text_any(int* from) override;

  double timeout_seconds() const override { return timeout_s_; }
  double seconds() const override { return seconds_; }
  [[noreturn]] void abort_job(int code) override;

 private:
  struct Impl;
  MpiCollective(std::unique_ptr<Impl> impl, bool owns_mpi, double timeout_s);
  Result<void> gather_hosts();
  // Polls `n` requests until all complete, the deadline passes, MPI reports an error or the
  // cancel flag is set; answers pings meanwhile. `what` names the call in errors.
  Result<void> wait_requests(void* requests, int n, const std::string& what, int only = -1);
  // The same loop around any test (MPI_Testall, MPI_Improbe): `only` >= 0 pings just that
  // rank after a failure.
  Result<void> poll(const std::string& what, int only, const std::function<int(int*)>& test);
  Result<std::string> receive(int source, int* from);
  // After a failed wait: pings every other rank (or just `only`), and says who did not answer.
  Error name_missing(const std::string& what, const std::string& why, int only = -1,
                     bool* anyone_missing = nullptr);
  void answer_pings();
  Error fail(Error e);

  std::unique_ptr<Impl> impl_;
  bool owns_mpi_;
  double timeout_s_;
  double ping_window_s_ = 2.0;
  const std::atomic<bool>* cancel_ = nullptr;
  bool cancel_answered_ = false;  // a cancel with every rank alive: waits go on
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  double seconds_ = 0;
  long calls_ = 0;
  bool failed_ = false;
};

}  // namespace mls
