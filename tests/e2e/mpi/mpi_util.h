// Running mlstudio as the ranks of an MPI job from tests, as a user would:
//
//   Output o = run_mpi(2, "--run " + example() + " --json --db " + db, /*kill_after_s=*/60);
//   Job j = start_mpi(2, args);  ...  kill(rank_pid(db, 1), SIGKILL);  int code = j.wait();
//
// Built only where MPI is found (tests/CMakeLists.txt: MLS_MPIEXEC is its launcher).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "../cli_util.h"

namespace mls::e2e {

// `mpirun -np N` as the tests run it: --oversubscribe (2 ranks on fewer cores), and
// --allow-run-as-root where the tests run as root (OpenMPI refuses root without it).
inline std::string mpirun(int ranks) {
  return std::string(MLS_MPIEXEC) + " -np " + std::to_string(ranks) + " --oversubscribe" +
         (::getuid() == 0 ? " --allow-run-as-root" : "");
}

// mlstudio ARGS as `ranks` ranks of one job, killed after `kill_after_s` (exit 137) so that a
// hung job fails the test instead of hanging it.
inline Output run_mpi(int ranks, const std::string& args, int kill_after_s) {
  return run_shell("timeout -s KILL " + std::to_string(kill_after_s) + " " + mpirun(ranks) + " " +
                       MLS_EXE + " " + args,
                   temp_dir() / "mpi_stderr.txt");
}

// A job started in the background: its launcher's pid, and where its output goes.
struct Job {
  pid_t pid = -1;
  fs::path out, err;
  // Waits for the launcher (at most `limit_s`, then kills it): its exit status, -1 on a signal.
  int wait(double limit_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        return -2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

// `launcher` goes to mpirun itself ("--mca NAME VALUE").
inline Job start_mpi(int ranks, const std::string& args, const std::string& name,
                     const std::string& launcher = "") {
  Job j;
  j.out = temp_dir() / (name + ".out");
  j.err = temp_dir() / (name + ".err");
  const std::string cmd = "exec " + mpirun(ranks) + " " + launcher + " " + MLS_EXE + " " + args +
                          " >" + j.out.string() + " 2>" + j.err.string();
  j.pid = ::fork();
  REQUIRE(j.pid >= 0);
  if (j.pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return j;
}

// The pid of rank `rank` of the mlstudio job whose command line names `marker` (its --db),
// found by its launcher's environment; -1 when there is none.
inline pid_t rank_pid(const std::string& marker, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file((entry.path() / "cmdline").string());
    if (cmdline.find("mlstudio") == std::string::npos || cmdline.find(marker) == std::string::npos)
      continue;
    const std::string env = read_file((entry.path() / "environ").string());
    size_t at = 0;
    while (at < env.size()) {
      const size_t end = env.find('\0', at);
      if (env.compare(at, (end == std::string::npos ? env.size() : end) - at, want) == 0)
        return static_cast<pid_t>(std::stol(name));
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  return -1;
}

}  // namespace mls::e2e
