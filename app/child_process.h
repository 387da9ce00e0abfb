// A child process whose stdout and stderr come back through pipes, and which dies with its
// parent (PR_SET_PDEATHSIG, SIGKILL): `mlstudio sweep` runs its workers so, and a killed
// coordinator leaves no worker training unseen.
//
//   auto c = ChildProcess::start(self_exe(), {"--run", "P.mls", "--json"});
//   std::optional<int> status;
//   while (!(status = c->reap())) { poll(c->fds() ...); c->pump(); }
//   std::string result = last_line(c->out());
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::app {

class ChildProcess {
 public:
  // Starts `exe args...` (no shell), with `env` as its whole environment when given (else
  // this process's). The error says what could not be made.
  static Result<ChildProcess> start(const std::string& exe, const std::vector<std::string>& args,
                                    const std::vector<std::string>* env = nullptr);
  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // closes the pipes; the process is left alone (reap it first)

  pid_t pid() const { return pid_; }
  // The pipes still open, to poll() for POLLIN.
  std::vector<int> fds() const;
  // Reads what the pipes hold now, without blocking.
  void pump();
  // Once the process has exited: its wait status, with the pipes read to the end.
  std::optional<int> reap();
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }  // its last 8 KiB or so

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;  // read ends; -1 once at EOF
  std::string out_, err_;
};

// This executable's path (for a child that runs mlstudio again).
std::string self_exe();
// The last line of `text` that holds more than blanks ("" none).
std::string last_line(const std::string& text);

}  // namespace mls::app
