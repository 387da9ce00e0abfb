// The operating system's wall around untrusted code (Linux): a child process that the
// kernel, not the code inside it, keeps in bounds.
//
//   jail::JailLimits limits;
//   limits.address_space_bytes = 4ull << 30;
//   limits.wall_seconds = 10;
//   limits.read_paths = {"/usr", script_dir};
//   limits.write_paths = {script_dir};
//   jail::JailResult r = jail::run_jailed(limits, [&] { return run_the_script(); });
//   if (!r.reason.empty()) fprintf(stderr, "stopped: %s\n", r.reason.c_str());
//
// The child applies, in this order: rlimits (address space, CPU, file size, no core
// dumps), PR_SET_NO_NEW_PRIVS, Landlock (files: read_paths read-only, write_paths read and
// write, nothing else; no TCP; no signals or abstract sockets outside) and a seccomp filter
// (no exec, no sockets, no new processes while threads stay allowed, no ptrace, mount,
// namespaces, modules, bpf, io_uring, TIOCSTI, no signals to other processes). The parent
// keeps the wall clock and SIGKILLs the child's process group at the deadline.
//
// A wall the kernel or the build lacks (Landlock before 5.13 or disabled, a build without
// libseccomp) is not applied, and Walls says so: callers print describe(), never skip in
// silence. A wall that exists but fails to apply stops the child before the callback runs.
//
// No Lua, Qt or engine code here: the classroom grader runs any submission with it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mls::jail {

struct JailLimits {
  uint64_t address_space_bytes = 0;      // RLIMIT_AS; 0: none
  double cpu_seconds = 0;                // RLIMIT_CPU, all threads together; 0: none
  double wall_seconds = 0;               // kept by the parent; 0: none
  uint64_t file_size_bytes = 0;          // RLIMIT_FSIZE (a write past it fails with EFBIG); 0: none
  std::vector<std::string> read_paths;   // files and folders the child may read
  std::vector<std::string> write_paths;  // ... and may also create, write and remove in
  bool allow_network = false;            // false: no sockets (socketpair stays allowed)
  // Descriptors the child keeps besides stdin, stdout and stderr (all others are closed).
  std::vector<int> keep_fds;
};

// What this kernel and build can enforce, and after a run, what was applied.
struct Walls {
  int landlock_abi = 0;  // 0: no Landlock (kernel too old, or not in its LSM list)
  bool seccomp = false;  // built with libseccomp and the kernel has seccomp filters
  bool rlimits = true;   // always
  std::vector<std::string> missing_paths;  // listed paths that do not exist (no rule added)
  // One line: "Landlock ABI 7 (files, TCP, signals), seccomp (no exec, no network, no new
  // processes), rlimits", with "NOT AVAILABLE" for what is missing.
  std::string describe() const;
};

// Asks the kernel (no child, no side effects).
Walls probe_walls();

struct JailResult {
  bool exited = false;     // the callback returned (or the child called exit)
  int exit_code = -1;      // when exited
  int signal = 0;          // the signal that ended the child, else 0
  bool timed_out = false;  // the parent killed it at wall_seconds
  // Why the child was stopped, for a message; empty when it exited on its own:
  // "time limit of 2 s reached", "CPU limit of 1 s reached (SIGXCPU)", "memory limit of
  // 4096 MiB reached", "killed by seccomp: execve", "killed by signal 11 (SIGSEGV)",
  // "sandbox setup failed: landlock_restrict_self: ...".
  std::string reason;
  double wall_seconds = 0;  // how long the child ran
  double cpu_seconds = 0;   // the CPU time it used, all threads
  Walls walls;              // what was applied
};

// A SQLite database in WAL mode that the child may write without the folder around it: the
// file and its -wal and -shm siblings, each created empty where missing (a Landlock rule
// names an existing file, and SQLite opens existing ones without creating; in WAL mode it
// never needs a -journal). For write_paths; on failure, empty with `error` naming the file.
std::vector<std::string> database_files(const std::string& db_path, std::string* error);

// Forks; the child applies the limits above, runs `body` and exits with what it returns
// (without running static destructors: the parent owns those). std::bad_alloc escaping
// `body` ends the child as "memory limit"; another exception ends it with exit code 1.
// The child's stdin, stdout and stderr are the caller's. Call it before starting threads
// that the child needs: only the calling thread exists in the child.
JailResult run_jailed(const JailLimits& limits, const std::function<int()>& body);

}  // namespace mls::jail
