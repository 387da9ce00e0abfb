#include "engine/train/collective.h"

#include <cerrno>
#include <cstdlib>

namespace mls {

namespace {

// A non-negative integer from the environment, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* s = std::getenv(name);
  if (!s || !*s) return -1;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno || *end || v < 0 || v > 1 << 30) return -1;
  return static_cast<int>(v);
}

}  // namespace

// Each launcher's variables, most specific first. OpenMPI's mpirun sets OMPI_COMM_WORLD_*
// (and PMIX_RANK); MPICH's Hydra and Intel MPI set PMI_SIZE/PMI_RANK; Slurm's srun sets
// SLURM_NTASKS/SLURM_PROCID, but so does an sbatch script around it (one process), so Slurm's
// count only when SLURM_STEP_ID says this is a job step. A PMIx rank with no size anywhere
// gives size 0: launched by a launcher that did not say how many ranks it started.
LaunchEnv launch_env() {
  LaunchEnv env;
  auto take = [&](int size, int rank, const char* launcher) {
    if (size < 1) return false;
    env.size = size;
    env.rank = rank < 0 ? 0 : rank;
    env.launcher = launcher;
    return true;
  };
  if (take(env_int("OMPI_COMM_WORLD_SIZE"), env_int("OMPI_COMM_WORLD_RANK"), "OpenMPI")) return env;
  if (take(env_int("PMI_SIZE"), env_int("PMI_RANK"), "PMI")) return env;
  if (std::getenv("SLURM_STEP_ID")) {
    int n = env_int("SLURM_STEP_NUM_TASKS");
    if (n < 1) n = env_int("SLURM_NTASKS");
    if (take(n, env_int("SLURM_PROCID"), "Slurm")) return env;
  }
  if (int rank = env_int("PMIX_RANK"); rank >= 0) {
    env.size = 0;
    env.rank = rank;
    env.launcher = "PMIx";
  }
  return env;
}

}  // namespace mls
