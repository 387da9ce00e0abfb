#include "engine/dist/mpi_collective.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

namespace mls {

namespace {

// Texts, and the pings that find a dead or hung rank, each on their own tag so that neither
// is ever taken for the other.
constexpr int kTagText = 11;
constexpr int kTagPing = 12;
constexpr int kTagPong = 13;
// One MPI call moves at most INT_MAX elements: larger buffers go in chunks of this many.
constexpr size_t kChunk = size_t{1} << 30;
// A wait polls flat out this long, yielding the core between polls, then sleeps between polls,
// doubling up to 1 ms, so an idle wait leaves the core to a rank that needs it. The spin is
// long because a non-blocking sum moves only inside MPI calls: OpenMPI's schedule for a large
// sum takes several rounds, each waiting for both sides' next MPI_Test, and a sleep of up to
// 1 ms per round made the MLP's 2-rank step wait milliseconds for a 0.5 MB sum.
constexpr double kSpinSeconds = 20e-3;
constexpr double kMaxSleepSeconds = 1e-3;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

// "1 double", "5 doubles"
std::string count_text(size_t n, const char* what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 10 ? "%.0f s" : "%.2g s", s);
  return buf;
}

// Adds a call's time to the collective's seconds() when it leaves.
class CallTimer {
 public:
  explicit CallTimer(double* total) : total_(total), start_(now()) {}
  ~CallTimer() { *total_ += now() - start_; }
  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

 private:
  double* total_;
  double start_;
};

}  // namespace

struct MpiCollective::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  // start_sum's requests until wait_all().
  std::vector<MPI_Request> pending;
  // Pongs on their way back (each buffer lives until its send completes).
  std::vector<std::pair<MPI_Request, std::unique_ptr<long long>>> pongs;
  long long ping_seq = 0;
  // Pings and their answers after a deadline: a send to a dead rank may never complete and a
  // cancelled receive may still be written, so their buffers outlive the requests (a few
  // numbers per failure; a deque never moves them).
  std::deque<long long> ping_buffers;
  std::string first_error;
};

MpiCollective::MpiCollective(std::unique_ptr<Impl> impl, bool owns_mpi, double timeout_s)
    : impl_(std::move(impl)), owns_mpi_(owns_mpi), timeout_s_(timeout_s) {}

Result<std::unique_ptr<MpiCollective>> MpiCollective::init(int* argc, char*** argv,
                                                           double timeout_s) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised)
    return make_error("MPI collective: MPI is already initialised in this process (init once)");
  int provided = 0;
  // SERIALIZED: any one thread at a time may call (OpenMPI gives it at FUNNELED's cost).
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS)
    return make_error("MPI collective: MPI_Init_thread: " + mpi_error_text(rc));
  auto impl = std::make_unique<Impl>();
  // A duplicate so that nothing else in the process can match our messages; errors come back
  // as codes (MPI_ERRORS_RETURN) instead of the default abort.
  rc = MPI_Comm_dup(MPI_COMM_WORLD, &impl->comm);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  if (rc != MPI_SUCCESS) return make_error("MPI collective: MPI_Comm_dup: " + mpi_error_text(rc));
  std::unique_ptr<MpiCollective> c(new MpiCollective(std::move(impl), true, timeout_s));
  if (provided < MPI_THREAD_FUNNELED)
    return make_error("MPI collective: this MPI gives thread level " + std::to_string(provided) +
                      ", below MPI_THREAD_FUNNELED");
  if (auto r = c->gather_hosts(); !r) return r.error();
  return c;
}

Result<std::unique_ptr<MpiCollective>> MpiCollective::duplicate(double timeout_s) {
  CallTimer timer(&seconds_);
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  auto impl = std::make_unique<Impl>();
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(impl_->comm, &impl->comm, &req);
  if (rc != MPI_SUCCESS)
    return fail(make_error("MPI collective: MPI_Comm_idup: " + mpi_error_text(rc)));
  if (auto r = wait_requests(&req, 1, "duplicate of the communicator"); !r) return r.error();
  MPI_Comm_set_errhandler(impl->comm, MPI_ERRORS_RETURN);
  std::unique_ptr<MpiCollective> c(new MpiCollective(std::move(impl), false, timeout_s));
  c->rank_ = rank_;
  c->size_ = size_;
  c->hosts_ = hosts_;
  c->ping_window_s_ = ping_window_s_;
  c->cancel_ = cancel_;
  return c;
}

Result<void> MpiCollective::gather_hosts() {
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  std::vector<char> names(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
  char* mine = names.data() + static_cast<size_t>(rank_) * MPI_MAX_PROCESSOR_NAME;
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, names.data(), MPI_MAX_PROCESSOR_NAME,
                          MPI_CHAR, impl_->comm, &req);
  if (rc != MPI_SUCCESS)
    return fail(make_error("MPI collective: gathering the hosts: " + mpi_error_text(rc)));
  // Until the hosts are known, errors name ranks with an empty host.
  hosts_.assign(static_cast<size_t>(size_), "");
  if (auto r = wait_requests(&req, 1, "gathering each rank's host"); !r) return r;
  for (int i = 0; i < size_; ++i) {
    const char* s = names.data() + static_cast<size_t>(i) * MPI_MAX_PROCESSOR_NAME;
    hosts_[static_cast<size_t>(i)] = std::string(s, strnlen(s, MPI_MAX_PROCESSOR_NAME));
  }
  return {};
}

MpiCollective::~MpiCollective() {
  if (failed_) {
    // A rank is dead or hung: MPI_Finalize would wait for it. The owner should have called
    // abort_job with its own code; this is the fallback. A duplicate keeps its communicator
    // (requests on it may never complete) and leaves the job to the owner.
    if (owns_mpi_) MPI_Abort(impl_->comm, 1);
    return;
  }
  if (!impl_->pending.empty()) (void)wait_all();
  // Answers to pings still on their way: let go (a pinging rank that died never takes its).
  for (auto& [req, buf] : impl_->pongs) {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&req);
      (void)buf.release();  // MPI may still read it
    }
  }
  if (failed_) {
    if (owns_mpi_) MPI_Abort(impl_->comm, 1);
    return;
  }
  MPI_Comm_free(&impl_->comm);
  if (owns_mpi_) MPI_Finalize();
}

Error MpiCollective::fail(Error e) {
  if (!failed_) {
    const std::string prefix = "MPI collective: ";
    impl_->first_error = e.message.compare(0, prefix.size(), prefix) == 0
                             ? e.message.substr(prefix.size())
                             : e.message;
  }
  failed_ = true;
  return e;
}

void MpiCollective::answer_pings() {
  // Pongs already sent: forget those that completed.
  auto& pongs = impl_->pongs;
  pongs.erase(std::remove_if(pongs.begin(), pongs.end(),
                             [](auto& p) {
                               int done = 0;
                               MPI_Test(&p.first, &done, MPI_STATUS_IGNORE);
                               return done != 0;
                             }),
              pongs.end());
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagPing, impl_->comm, &flag, &st) != MPI_SUCCESS || !flag)
      return;
    long long seq = 0;
    // The ping has arrived (the probe saw it) and is one number: this returns at once.
    if (MPI_Recv(&seq, 1, MPI_LONG_LONG, st.MPI_SOURCE, kTagPing, impl_->comm, MPI_STATUS_IGNORE) !=
        MPI_SUCCESS)
      return;
    auto buf = std::make_unique<long long>(seq);
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Isend(buf.get(), 1, MPI_LONG_LONG, st.MPI_SOURCE, kTagPong, impl_->comm, &req) ==
        MPI_SUCCESS)
      pongs.emplace_back(req, std::move(buf));
  }
}

Error MpiCollective::name_missing(const std::string& what, const std::string& why, int only,
                                  bool* anyone_missing) {
  const long long seq = ++impl_->ping_seq;
  const bool cancelled = cancel_ && cancel_->load();
  const double window = cancelled ? std::min(ping_window_s_, 0.25) : ping_window_s_;
  struct Peer {
    int rank;
    long long* pong;
    MPI_Request send, recv;
  };
  auto& buffers = impl_->ping_buffers;
  std::vector<Peer> peers;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || (only >= 0 && r != only)) continue;
    long long* ping = &buffers.emplace_back(seq);
    Peer p{r, &buffers.emplace_back(0), MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Isend(ping, 1, MPI_LONG_LONG, r, kTagPing, impl_->comm, &p.send);
    MPI_Irecv(p.pong, 1, MPI_LONG_LONG, r, kTagPong, impl_->comm, &p.recv);
    peers.push_back(p);
  }
  const double end = now() + window;
  size_t answered = 0;
  std::vector<bool> ok(peers.size(), false);
  // The whole window even when everyone has answered: a rank out of step pings back at its
  // own deadline, and must find this one still answering.
  while (now() < end) {
    for (size_t i = 0; i < peers.size(); ++i) {
      if (ok[i]) continue;
      int done = 0;
      if (MPI_Test(&peers[i].recv, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) continue;
      if (*peers[i].pong == seq) {
        ok[i] = true;
        ++answered;
      } else {  // an answer to an earlier ping: wait for this one's
        MPI_Irecv(peers[i].pong, 1, MPI_LONG_LONG, peers[i].rank, kTagPong, impl_->comm,
                  &peers[i].recv);
      }
    }
    answer_pings();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::vector<int> missing;
  for (size_t i = 0; i < peers.size(); ++i) {
    // What did not complete is cancelled and let go (its buffers stay in ping_buffers).
    if (!ok[i]) {
      MPI_Cancel(&peers[i].recv);
      MPI_Request_free(&peers[i].recv);
      missing.push_back(peers[i].rank);
    }
    int done = 0;
    MPI_Test(&peers[i].send, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&peers[i].send);
      MPI_Request_free(&peers[i].send);
    }
  }
  const std::string where = " (" + what + ", call " + std::to_string(calls_) + ")";
  if (anyone_missing) *anyone_missing = !missing.empty();
  if (missing.empty()) {
    const std::string who = only >= 0 ? "rank " + std::to_string(only) : "every other rank";
    // Cancelled with everyone alive (a Ctrl-C that reached every rank): nobody is to blame.
    const std::string verdict =
        cancelled ? "" : ": the ranks are out of step (one of them is in another call)";
    return make_error("MPI collective: the " + what + " did not complete " + why + ", although " +
                      who + " answers" + verdict + ", call " + std::to_string(calls_));
  }
  std::string names;
  for (size_t i = 0; i < missing.size(); ++i) {
    int r = missing[i];
    if (i) names += ", ";
    names += std::to_string(r);
    const std::string& host = hosts_[static_cast<size_t>(r)];
    if (!host.empty()) names += " (host " + host + ")";
  }
  const bool one = missing.size() == 1;
  return make_error("MPI collective: " + std::string(one ? "rank " : "ranks ") + names +
                    " did not answer " + why + ": " +
                    (one ? "it died or hangs" : "they died or hang") + where);
}

Result<void> MpiCollective::poll(const std::string& what, int only,
                                 const std::function<int(int*)>& test) {
  const double start = now();
  const double deadline = start + timeout_s_;
  double sleep_s = 10e-6;
  for (;;) {
    int done = 0;
    if (int rc = test(&done); rc != MPI_SUCCESS)
      return fail(name_missing(what, "after an MPI error (" + mpi_error_text(rc) + ")", only));
    if (done) return {};
    answer_pings();
    const double t = now();
    if (cancel_ && cancel_->load() && !cancel_answered_) {
      bool missing = false;
      Error e = name_missing(what, "before the wait was cancelled after " + seconds_text(t - start),
                             only, &missing);
      if (missing) return fail(std::move(e));
      // Every rank answers: a stop they were all told of (Ctrl-C on mpirun), not a death. The
      // call completes, and the trainer's stop flag ends every rank after the same step.
      cancel_answered_ = true;
    }
    if (t > deadline) return fail(name_missing(what, "within " + seconds_text(timeout_s_), only));
    if (t - start < kSpinSeconds) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(sleep_s));
    sleep_s = std::min(sleep_s * 2, kMaxSleepSeconds);
  }
}

Result<void> MpiCollective::wait_requests(void* requests, int n, const std::string& what,
                                          int only) {
  auto* reqs = static_cast<MPI_Request*>(requests);
  if (n == 0) return {};
  return poll(what, only,
              [&](int* done) { return MPI_Testall(n, reqs, done, MPI_STATUSES_IGNORE); });
}

Result<void> MpiCollective::broadcast(void* data, size_t bytes) {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  std::vector<MPI_Request> reqs;
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += kChunk) {
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_Ibcast(p + off, static_cast<int>(std::min(kChunk, bytes - off)), MPI_BYTE, 0,
                        impl_->comm, &req);
    if (rc != MPI_SUCCESS)
      return fail(make_error("MPI collective: broadcast: " + mpi_error_text(rc)));
    reqs.push_back(req);
  }
  return wait_requests(reqs.data(), static_cast<int>(reqs.size()),
                       "broadcast of " + count_text(bytes, "byte"));
}

Result<void> MpiCollective::sum(double* data, size_t count) {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  std::vector<MPI_Request> reqs;
  for (size_t off = 0; off < count; off += kChunk) {
    MPI_Request req = MPI_REQUEST_NULL;
    int rc =
        MPI_Iallreduce(MPI_IN_PLACE, data + off, static_cast<int>(std::min(kChunk, count - off)),
                       MPI_DOUBLE, MPI_SUM, impl_->comm, &req);
    if (rc != MPI_SUCCESS) return fail(make_error("MPI collective: sum: " + mpi_error_text(rc)));
    reqs.push_back(req);
  }
  return wait_requests(reqs.data(), static_cast<int>(reqs.size()),
                       "sum of " + count_text(count, "double"));
}

Result<void> MpiCollective::start_sum(float* data, size_t count) {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  for (size_t off = 0; off < count; off += kChunk) {
    MPI_Request req = MPI_REQUEST_NULL;
    int rc =
        MPI_Iallreduce(MPI_IN_PLACE, data + off, static_cast<int>(std::min(kChunk, count - off)),
                       MPI_FLOAT, MPI_SUM, impl_->comm, &req);
    if (rc != MPI_SUCCESS)
      return fail(make_error("MPI collective: start_sum of " + std::to_string(count) +
                             " floats: " + mpi_error_text(rc)));
    impl_->pending.push_back(req);
  }
  return {};
}

void MpiCollective::progress() {
  if (failed_ || impl_->pending.empty()) return;
  CallTimer timer(&seconds_);
  // Testall drives the library's progress engine; completed requests become MPI_REQUEST_NULL
  // only when all are done, which wait_all() then sees at once.
  int done = 0;
  MPI_Testall(static_cast<int>(impl_->pending.size()), impl_->pending.data(), &done,
              MPI_STATUSES_IGNORE);
  answer_pings();
}

Result<void> MpiCollective::wait_all() {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  auto& pending = impl_->pending;
  auto r = wait_requests(pending.data(), static_cast<int>(pending.size()),
                         "wait for " + count_text(pending.size(), "gradient sum"));
  // After a failure the requests stay: MPI may still write into their buffers.
  if (r) pending.clear();
  return r;
}

Result<void> MpiCollective::send_text(int to, const std::string& text) {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  if (to < 0 || to >= size_ || to == rank_)
    return make_error("MPI collective: send_text to rank " + std::to_string(to) + " from rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_));
  if (text.size() > static_cast<size_t>(INT_MAX))
    return make_error("MPI collective: send_text of " + std::to_string(text.size()) +
                      " bytes: more than one message holds");
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Isend(text.data(), static_cast<int>(text.size()), MPI_CHAR, to, kTagText,
                     impl_->comm, &req);
  if (rc != MPI_SUCCESS)
    return fail(make_error("MPI collective: send_text to rank " + std::to_string(to) + ": " +
                           mpi_error_text(rc)));
  const std::string what =
      "text of " + std::to_string(text.size()) + " bytes to rank " + std::to_string(to);
  return wait_requests(&req, 1, what, to);
}

Result<std::string> MpiCollective::recv_text(int from) {
  if (from < 0 || from >= size_ || from == rank_)
    return make_error("MPI collective: recv_text from rank " + std::to_string(from) + " on rank " +
                      std::to_string(rank_) + " of " + std::to_string(size_));
  return receive(from, nullptr);
}

Result<std::string> MpiCollective::recv_text_any(int* from) {
  return receive(-1, from);
}

Result<std::string> MpiCollective::receive(int source, int* from) {
  CallTimer timer(&seconds_);
  ++calls_;
  if (failed_) return make_error("MPI collective: failed earlier: " + impl_->first_error);
  const std::string what =
      source < 0 ? "text from any rank" : "text from rank " + std::to_string(source);
  MPI_Message msg = MPI_MESSAGE_NULL;
  MPI_Status st;
  // The message's size is known once it is matched (MPI_Improbe), then it is received.
  auto probed = poll(what, source, [&](int* done) {
    return MPI_Improbe(source < 0 ? MPI_ANY_SOURCE : source, kTagText, impl_->comm, done, &msg,
                       &st);
  });
  if (!probed) return probed.error();
  int count = 0;
  MPI_Get_count(&st, MPI_CHAR, &count);
  std::string text(static_cast<size_t>(count), '\0');
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Imrecv(text.data(), count, MPI_CHAR, &msg, &req);
  if (rc != MPI_SUCCESS)
    return fail(make_error("MPI collective: receiving " + what + ": " + mpi_error_text(rc)));
  if (auto r = wait_requests(&req, 1, what, st.MPI_SOURCE); !r) return r.error();
  if (from) *from = st.MPI_SOURCE;
  return text;
}

void MpiCollective::abort_job(int code) {
  MPI_Abort(impl_->comm, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace mls
