#include "app/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <utility>

namespace mls::app {

namespace {

constexpr size_t kErrKeep = 8192;

// Reads what is there; closes the descriptor at EOF. `keep` > 0: only about the last `keep`
// bytes are kept.
void drain(int& fd, std::string& into, size_t keep) {
  if (fd < 0) return;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, static_cast<size_t>(n));
      if (keep && into.size() > 2 * keep) into.erase(0, into.size() - keep);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    ::close(fd);
    fd = -1;
    return;
  }
}

}  // namespace

Result<ChildProcess> ChildProcess::start(const std::string& exe,
                                         const std::vector<std::string>& args,
                                         const std::vector<std::string>* env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return make_error("cannot make a pipe for " + exe);
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    return make_error("cannot make a pipe for " + exe);
  }
  std::vector<std::string> all = {exe};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env_copy = env ? *env : std::vector<std::string>{};
  std::vector<char*> envp;
  for (auto& e : env_copy) envp.push_back(e.data());
  envp.push_back(nullptr);
  // This executable again through /proc/self/exe, the image this process runs: a rebuild or
  // an upgrade that replaced the file meanwhile does not make the workers fail to start (or
  // run another version than the coordinator). argv[0] keeps the path people read.
  const std::string file = exe == self_exe() ? std::string("/proc/self/exe") : exe;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return make_error("cannot start a process of " + exe);
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took hold
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (env)
      ::execve(file.c_str(), argv.data(), envp.data());
    else
      ::execv(file.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  for (int fd : {out[0], err[0]}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  ChildProcess c;
  c.pid_ = pid;
  c.out_fd_ = out[0];
  c.err_fd_ = err[0];
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      out_fd_(std::exchange(o.out_fd_, -1)),
      err_fd_(std::exchange(o.err_fd_, -1)),
      out_(std::move(o.out_)),
      err_(std::move(o.err_)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    for (int fd : {out_fd_, err_fd_})
      if (fd >= 0) ::close(fd);
    pid_ = std::exchange(o.pid_, -1);
    out_fd_ = std::exchange(o.out_fd_, -1);
    err_fd_ = std::exchange(o.err_fd_, -1);
    out_ = std::move(o.out_);
    err_ = std::move(o.err_);
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) ::close(fd);
}

std::vector<int> ChildProcess::fds() const {
  std::vector<int> out;
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) out.push_back(fd);
  return out;
}

void ChildProcess::pump() {
  drain(out_fd_, out_, 0);
  drain(err_fd_, err_, kErrKeep);
}

std::optional<int> ChildProcess::reap() {
  if (pid_ < 0) return {};
  pump();
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return {};
  pid_ = -1;
  // What is left in the pipes (the last line may come just before the exit); a grandchild
  // that kept them open is not waited for long.
  for (int tries = 0; tries < 50 && (out_fd_ >= 0 || err_fd_ >= 0); ++tries) {
    pump();
    if (out_fd_ >= 0 || err_fd_ >= 0) ::usleep(2000);
  }
  for (int* fd : {&out_fd_, &err_fd_})
    if (*fd >= 0) ::close(std::exchange(*fd, -1));
  return status;
}

std::string self_exe() {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "/proc/self/exe";
  // The file this process runs was replaced (a rebuild): the kernel says so after the path.
  std::string path = p.string();
  const std::string gone = " (deleted)";
  if (path.ends_with(gone)) path.resize(path.size() - gone.size());
  return path;
}

std::string last_line(const std::string& text) {
  const size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end - start + 1);
}

}  // namespace mls::app
