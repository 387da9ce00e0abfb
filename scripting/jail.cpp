// The child process jail: rlimits, no_new_privs, Landlock and seccomp, and the parent's
// wall clock. See jail.h.
#include "scripting/jail.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#ifdef MLS_HAVE_SECCOMP
#include <seccomp.h>
#endif

namespace mls::jail {
namespace {

// Landlock rights newer than the system header (Debian 12's knows ABI 1 and 2); the
// values are the kernel's ABI and never change.
constexpr uint64_t kFsTruncate = 1ULL << 14;        // ABI 3
constexpr uint64_t kFsIoctlDev = 1ULL << 15;        // ABI 5
constexpr uint64_t kNetBindTcp = 1ULL << 0;         // ABI 4
constexpr uint64_t kNetConnectTcp = 1ULL << 1;      // ABI 4
constexpr uint64_t kScopeAbstractUnix = 1ULL << 0;  // ABI 6
constexpr uint64_t kScopeSignal = 1ULL << 1;        // ABI 6

// The ruleset attribute as of ABI 6; older kernels take a prefix of it (size by ABI).
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};

constexpr uint64_t kFsRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// Write includes creating, removing and renaming, but no device nodes (root could make a
// block device in the folder and write the disk through it), FIFOs or sockets.
constexpr uint64_t kFsWrite = kFsRead | LANDLOCK_ACCESS_FS_WRITE_FILE |
                              LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                              LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                              LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | kFsTruncate;
// The rights a rule on a file (not a folder) may carry.
constexpr uint64_t kFsFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                   LANDLOCK_ACCESS_FS_READ_FILE | kFsTruncate | kFsIoctlDev;

uint64_t handled_fs(int abi) {
  uint64_t h = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) h |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) h |= kFsTruncate;
  if (abi >= 5) h |= kFsIoctlDev;
  return h;
}

int landlock_abi() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

bool seccomp_available() {
#ifdef MLS_HAVE_SECCOMP
  // 0 when the kernel has seccomp (and this process is not in strict mode).
  return ::prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
#else
  return false;
#endif
}

// [SECTION] The child's side: what it tells the parent through a pipe.

int g_note_fd = -1;

void note(const char* text) {
  if (g_note_fd < 0) return;
  ssize_t unused = ::write(g_note_fd, text, std::strlen(text));
  (void)unused;
}

[[noreturn]] void fail_setup(const char* step) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "setup:%s: %s\n", step, std::strerror(errno));
  note(buf);
  ::_exit(125);
}

[[noreturn]] void fail_setup_because(const char* step, const std::string& why) {
  note(("setup:" + std::string(step) + ": " + why + "\n").c_str());
  ::_exit(125);
}

// Landlock and no_new_privs bind only the calling thread (seccomp's TSYNC covers the rest):
// a thread a fork handler started would run outside the file wall.
void require_one_thread() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) {
      const long n = std::strtol(line.c_str() + 8, nullptr, 10);
      if (n != 1)
        fail_setup_because(
            "threads", std::to_string(n) + " threads in the child before the walls (must be 1)");
      return;
    }
  fail_setup_because("threads", "cannot read Threads from /proc/self/status");
}

// Root keeps no capabilities: with CAP_SYS_RESOURCE it could raise its own hard limits,
// with CAP_FOWNER or CAP_CHOWN change files Landlock lets it read, with CAP_DAC_OVERRIDE
// pass file modes. It stays uid 0, so root-owned files stay as writable as their modes say.
void drop_capabilities() {
  if (::geteuid() != 0 && ::getuid() != 0) return;
  for (int cap = 0; cap <= 63; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      fail_setup("prctl(PR_CAPBSET_DROP)");
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) fail_setup("capset");
}

void set_limit(int resource, rlim_t soft, rlim_t hard, const char* name) {
  rlimit rl{soft, hard};
  if (::setrlimit(resource, &rl) != 0) fail_setup(name);
}

void apply_rlimits(const JailLimits& l) {
  if (l.address_space_bytes > 0)
    set_limit(RLIMIT_AS, l.address_space_bytes, l.address_space_bytes, "setrlimit(RLIMIT_AS)");
  if (l.cpu_seconds > 0) {
    // The soft limit sends SIGXCPU; one second later the hard limit sends SIGKILL, in case
    // the child catches or ignores SIGXCPU.
    const auto s = static_cast<rlim_t>(std::ceil(l.cpu_seconds));
    set_limit(RLIMIT_CPU, s, s + 1, "setrlimit(RLIMIT_CPU)");
  }
  if (l.file_size_bytes > 0) {
    // A write past the limit fails with EFBIG (so the writer reports it) instead of
    // killing the child with SIGXFSZ.
    ::signal(SIGXFSZ, SIG_IGN);
    set_limit(RLIMIT_FSIZE, l.file_size_bytes, l.file_size_bytes, "setrlimit(RLIMIT_FSIZE)");
  }
  set_limit(RLIMIT_CORE, 0, 0, "setrlimit(RLIMIT_CORE)");
}

void add_path_rule(int ruleset, const std::string& path, uint64_t access, uint64_t handled) {
  const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
  if (fd < 0) return;  // the parent reported it in missing_paths
  struct stat st {};
  if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFsFileRights;
  landlock_path_beneath_attr rule{};
  rule.allowed_access = access & handled;
  rule.parent_fd = fd;
  if (::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0)
    fail_setup(("landlock_add_rule(" + path + ")").c_str());
  ::close(fd);
}

void apply_landlock(const JailLimits& l, int abi) {
  if (abi <= 0) return;
  RulesetAttr attr;
  attr.handled_access_fs = handled_fs(abi);
  size_t size = sizeof(uint64_t);
  if (abi >= 4) {
    // No TCP unless asked for (seccomp also refuses the socket; this holds without it).
    if (!l.allow_network) attr.handled_access_net = kNetBindTcp | kNetConnectTcp;
    size = 2 * sizeof(uint64_t);
  }
  if (abi >= 6) {
    // No signals to processes outside the jail, no abstract Unix sockets out of it.
    attr.scoped = kScopeAbstractUnix | kScopeSignal;
    size = sizeof attr;
  }
  const int ruleset = static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) fail_setup("landlock_create_ruleset");
  for (const auto& p : l.read_paths) add_path_rule(ruleset, p, kFsRead, attr.handled_access_fs);
  for (const auto& p : l.write_paths) add_path_rule(ruleset, p, kFsWrite, attr.handled_access_fs);
  if (::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) fail_setup("landlock_restrict_self");
  ::close(ruleset);
}

#ifdef MLS_HAVE_SECCOMP
// A forbidden call that names itself: the handler tells the parent which call it was, then
// dies of SIGSYS. A child that installs its own SIGSYS handler still never gets the call.
void on_sigsys(int, siginfo_t* info, void*) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "seccomp:%d\n", info->si_syscall);
  note(buf);
  ::signal(SIGSYS, SIG_DFL);
  ::raise(SIGSYS);
}

void rule(scmp_filter_ctx ctx, uint32_t action, const char* name, unsigned count = 0,
          const scmp_arg_cmp* args = nullptr) {
  const int nr = seccomp_syscall_resolve_name(name);
  if (nr == __NR_SCMP_ERROR) return;  // a call this libseccomp does not know: nothing to deny
  if (seccomp_rule_add_array(ctx, action, nr, count, args) != 0) {
    errno = EINVAL;
    fail_setup((std::string("seccomp_rule_add(") + name + ")").c_str());
  }
}

// A condition on argument `arg` (libseccomp's SCMP_A0..5 are C99 compound literals, which
// C++ compilers warn about): `op` against a, or, for SCMP_CMP_MASKED_EQ, (value & a) == b.
scmp_arg_cmp arg_cmp(unsigned arg, scmp_compare op, scmp_datum_t a, scmp_datum_t b = 0) {
  return scmp_arg_cmp{.arg = arg, .op = op, .datum_a = a, .datum_b = b};
}

void apply_seccomp(const JailLimits& l) {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  if (::sigaction(SIGSYS, &sa, nullptr) != 0) fail_setup("sigaction(SIGSYS)");

  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) fail_setup("seccomp_init");
  // Every thread of the child, should a fork handler have started one before the walls.
  if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) != 0) fail_setup("seccomp TSYNC");
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  // No new programs: the jail's walls are this process's, an exec'd setuid helper or
  // shell would start outside the seccomp policy's intent.
  rule(ctx, SCMP_ACT_TRAP, "execve");
  rule(ctx, SCMP_ACT_TRAP, "execveat");
  // No new processes, but threads (the engine's thread pool): clone without CLONE_THREAD
  // is a fork. clone3 passes its flags in memory that seccomp cannot read, so it answers
  // ENOSYS and glibc falls back to clone. RLIMIT_NPROC would not do: root ignores it.
  rule(ctx, eperm, "fork");
  rule(ctx, eperm, "vfork");
  const scmp_arg_cmp not_thread = arg_cmp(0, SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0);
  rule(ctx, eperm, "clone", 1, &not_thread);
  rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3");
  // Signals only to itself: kill(-1, SIGKILL) as root would end every process.
  const pid_t self = ::getpid();
  const scmp_arg_cmp other_pid = arg_cmp(0, SCMP_CMP_NE, static_cast<scmp_datum_t>(self));
  rule(ctx, eperm, "kill", 1, &other_pid);
  rule(ctx, eperm, "tgkill", 1, &other_pid);
  rule(ctx, eperm, "rt_sigqueueinfo", 1, &other_pid);
  rule(ctx, eperm, "rt_tgsigqueueinfo", 1, &other_pid);
  rule(ctx, eperm, "tkill");
  rule(ctx, eperm, "pidfd_send_signal");
  rule(ctx, eperm, "pidfd_getfd");
  // Typing into the terminal the parent reads from.
  const scmp_arg_cmp tiocsti = arg_cmp(1, SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
  rule(ctx, eperm, "ioctl", 1, &tiocsti);
  // No changing what Landlock lets it read or write: modes (a setuid bit), owners, extended
  // attributes; and no raising its own limits. Reading a limit stays (glibc's getrlimit is
  // prlimit64 with no new limit). SQLite's fchown/fchmod calls take EPERM in their stride.
  for (const char* name :
       {"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
        "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
        "setxattrat", "removexattrat", "setrlimit", "capset"})
    rule(ctx, eperm, name);
  const scmp_arg_cmp sets_limit = arg_cmp(2, SCMP_CMP_NE, 0);
  rule(ctx, eperm, "prlimit64", 1, &sets_limit);
  if (!l.allow_network) {
    // No sockets at all (Unix ones included: a root-owned daemon's socket, Docker's, is a
    // way out that Landlock does not guard). socketpair stays: it reaches nobody.
    for (const char* name : {"socket", "connect", "bind", "listen", "accept", "accept4"})
      rule(ctx, eperm, name);
  }
  // Debugging, mounting, namespaces, kernel modules and other ways around the walls.
  for (const char* name : {"ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "mount",
                           "umount2",
                           "pivot_root",
                           "chroot",
                           "unshare",
                           "setns",
                           "fsopen",
                           "fsmount",
                           "fspick",
                           "move_mount",
                           "open_tree",
                           "mount_setattr",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "bpf",
                           "perf_event_open",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "userfaultfd",
                           "reboot",
                           "swapon",
                           "swapoff",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "io_uring_setup",
                           "io_uring_enter",
                           "io_uring_register",
                           "syslog",
                           "acct",
                           "quotactl",
                           "settimeofday",
                           "clock_settime",
                           "clock_adjtime",
                           "adjtimex",
                           "iopl",
                           "ioperm",
                           "personality",
                           "vhangup",
                           "lookup_dcookie",
                           "fanotify_init"})
    rule(ctx, eperm, name);
  if (seccomp_load(ctx) != 0) fail_setup("seccomp_load");
  seccomp_release(ctx);
}
#endif

// Only stdin, stdout, stderr, the notes pipe and what the caller lists stay open: a file
// the parent opened for writing would otherwise be a way past Landlock, which checks opens.
void close_other_fds(const JailLimits& l) {
  std::vector<int> keep = {0, 1, 2, g_note_fd};
  keep.insert(keep.end(), l.keep_fds.begin(), l.keep_fds.end());
  std::sort(keep.begin(), keep.end());
  int from = 0;
  for (const int fd : keep) {
    if (fd > from && ::syscall(SYS_close_range, from, fd - 1, 0) != 0)
      for (int f = from; f < fd; ++f) ::close(f);  // a kernel before 5.9
    from = std::max(from, fd + 1);
  }
  if (::syscall(SYS_close_range, from, ~0U, 0) != 0)
    for (int f = from; f < 65536; ++f) ::close(f);
}

// A script that reads the terminal must own it: in its own process group but in the
// background, its first read would stop it (SIGTTIN) until the wall clock ends it.
bool holds_terminal() {
  return ::isatty(STDIN_FILENO) && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

void hand_terminal_to(pid_t pgrp) {
  sigset_t ttou, old;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);  // a background group may not set the foreground otherwise
  ::sigprocmask(SIG_BLOCK, &ttou, &old);
  ::tcsetpgrp(STDIN_FILENO, pgrp);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
}

[[noreturn]] void child_main(const JailLimits& l, const Walls& walls,
                             const std::function<int()>& body, pid_t parent) {
  // Its own process group, so the parent's kill reaches anything it started; and it dies
  // with the parent, so a killed supervisor leaves no script running.
  const bool terminal = holds_terminal();
  ::setpgid(0, 0);
  if (terminal) hand_terminal_to(::getpid());
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail_setup("prctl(PR_SET_PDEATHSIG)");
  if (::getppid() != parent) ::_exit(125);
  close_other_fds(l);
  require_one_thread();
  apply_rlimits(l);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail_setup("prctl(PR_SET_NO_NEW_PRIVS)");
  apply_landlock(l, walls.landlock_abi);
  // After Landlock: opening the rules' paths may need root's DAC override.
  drop_capabilities();
#ifdef MLS_HAVE_SECCOMP
  if (walls.seccomp) apply_seccomp(l);
#endif
  int code = 1;
  try {
    code = body();
  } catch (const std::bad_alloc&) {
    note("oom\n");
    code = 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    code = 1;
  }
  // _exit, not exit: the static destructors and atexit handlers belong to the parent.
  std::fflush(nullptr);
  ::_exit(code);
}

// [SECTION] The parent's side.

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("signal ") + std::to_string(sig) +
         (abbrev ? " (SIG" + std::string(abbrev) + ")" : "");
}

std::string syscall_name(int nr) {
#ifdef MLS_HAVE_SECCOMP
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  if (name) {
    std::string s = name;
    std::free(name);
    return s;
  }
#endif
  return "system call " + std::to_string(nr);
}

std::string read_notes(int fd) {
  std::string s;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

std::string explain(const JailLimits& l, const JailResult& r, const std::string& notes) {
  const auto mib = [&] { return std::to_string(l.address_space_bytes >> 20) + " MiB"; };
  if (r.timed_out) return "time limit of " + seconds_text(l.wall_seconds) + " s reached";
  if (auto at = notes.find("setup:"); at != std::string::npos) {
    const auto end = notes.find('\n', at);
    return "sandbox setup failed: " + notes.substr(at + 6, end - at - 6);
  }
  if (auto at = notes.find("seccomp:"); at != std::string::npos)
    return "killed by seccomp: " + syscall_name(std::atoi(notes.c_str() + at + 8));
  if (notes.find("oom") != std::string::npos) return "memory limit of " + mib() + " reached";
  // SIGKILL at the hard limit when the child ignored SIGXCPU.
  if (r.signal == SIGXCPU ||
      (r.signal == SIGKILL && l.cpu_seconds > 0 && r.cpu_seconds >= std::ceil(l.cpu_seconds)))
    return "CPU limit of " + seconds_text(std::ceil(l.cpu_seconds)) + " s reached (SIGXCPU)";
  if (r.signal == SIGSYS) return "killed by seccomp";
  if (r.signal == SIGINT) return "interrupted (SIGINT)";  // Ctrl-C: it owns the terminal
  if (r.signal != 0) {
    std::string s = "killed by " + signal_name(r.signal);
    // Out of address space, libraries fail in their own ways: a segfault on a stack or
    // guard page, abort() from a library that cannot go on.
    if ((r.signal == SIGSEGV || r.signal == SIGBUS || r.signal == SIGABRT) &&
        l.address_space_bytes > 0)
      s += " (perhaps out of memory: the address-space limit is " + mib() + ")";
    return s;
  }
  return "";
}

}  // namespace

std::string Walls::describe() const {
  std::string s;
  if (landlock_abi > 0) {
    s = "Landlock ABI " + std::to_string(landlock_abi) + " (files";
    if (landlock_abi >= 4) s += ", TCP";
    if (landlock_abi >= 6) s += ", signals";
    s += ")";
  } else {
    s = "Landlock NOT AVAILABLE (files guarded only by the caller's own checks)";
  }
  s += seccomp ? ", seccomp (no exec, no sockets, no new processes)"
               : ", seccomp NOT AVAILABLE (exec, sockets and new processes not blocked)";
  s += ", rlimits";
  if (!missing_paths.empty()) {
    s += "; missing paths:";
    for (const auto& p : missing_paths) s += " " + p;
  }
  return s;
}

Walls probe_walls() {
  Walls w;
  w.landlock_abi = landlock_abi();
  w.seccomp = seccomp_available();
  return w;
}

std::vector<std::string> database_files(const std::string& db_path, std::string* error) {
  std::vector<std::string> files;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string f = db_path + suffix;
    const int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      if (error) *error = f + ": " + std::strerror(errno);
      return {};
    }
    ::close(fd);
    files.push_back(f);
  }
  return files;
}

JailResult run_jailed(const JailLimits& limits, const std::function<int()>& body) {
  JailResult r;
  r.walls = probe_walls();
  for (const auto* list : {&limits.read_paths, &limits.write_paths})
    for (const auto& p : *list)
      if (struct stat st{}; ::stat(p.c_str(), &st) != 0) r.walls.missing_paths.push_back(p);

  int notes[2];
  if (::pipe2(notes, O_CLOEXEC) != 0) {
    r.reason = std::string("sandbox setup failed: pipe: ") + std::strerror(errno);
    return r;
  }
  std::fflush(nullptr);  // what the caller buffered is printed once, not by both processes
  // With SIGCHLD ignored the kernel reaps the child itself and wait4 could never report how
  // it ended: the default for the run, the caller's disposition back after.
  struct sigaction dfl {};
  struct sigaction old_chld {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &dfl, &old_chld);
  const pid_t parent = ::getpid();
  const bool terminal = holds_terminal();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    r.reason = std::string("sandbox setup failed: fork: ") + std::strerror(errno);
    ::sigaction(SIGCHLD, &old_chld, nullptr);
    ::close(notes[0]);
    ::close(notes[1]);
    return r;
  }
  if (pid == 0) {
    ::close(notes[0]);
    g_note_fd = notes[1];
    child_main(limits, r.walls, body, parent);
  }
  ::close(notes[1]);
  ::setpgid(pid, pid);  // both sides set it: no window where a kill misses the group
  if (terminal) hand_terminal_to(pid);

  // The wall clock: poll, since a blocked child (a FIFO, a backtracking pattern) never
  // reports. 5 ms is well under any limit a user gives and costs nothing measurable.
  int status = 0;
  rusage usage{};
  std::string lost;  // why the child's end could not be known
  const auto deadline = start + std::chrono::duration<double>(limits.wall_seconds);
  for (;;) {
    const pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      lost = std::string("lost the child: wait4: ") + std::strerror(errno);
      break;
    }
    if (limits.wall_seconds > 0 && std::chrono::steady_clock::now() >= deadline && !r.timed_out) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Anything left in its group (there should be nothing: no new processes) goes too.
  ::kill(-pid, SIGKILL);
  if (terminal) hand_terminal_to(::getpgrp());
  ::sigaction(SIGCHLD, &old_chld, nullptr);

  ::fcntl(notes[0], F_SETFL, O_NONBLOCK);
  const std::string text = read_notes(notes[0]);
  ::close(notes[0]);
  if (!lost.empty()) {
    // Nothing is known of how it ended: never a clean exit.
  } else if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  r.reason = lost.empty() ? explain(limits, r, text) : lost;
  return r;
}

}  // namespace mls::jail
