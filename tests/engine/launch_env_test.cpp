// launch_env(): how a launcher told this process it is one rank of many
// (engine/train/collective.h).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "engine/train/collective.h"

using namespace mls;

namespace {

// Clears every launcher variable launch_env reads, sets the given ones, and puts the
// process's own values back when it goes (the suite may itself run under mpirun or srun).
class LauncherEnv {
 public:
  using Vars = std::initializer_list<std::pair<const char*, const char*>>;
  LauncherEnv() : LauncherEnv(Vars{}) {}
  explicit LauncherEnv(Vars set) {
    for (const char* name : kNames) {
      const char* v = std::getenv(name);
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(name);
    }
    for (const auto& [k, v] : set) setenv(k, v, 1);
  }
  ~LauncherEnv() {
    for (const auto& [k, v] : saved_) {
      if (v)
        setenv(k.c_str(), v->c_str(), 1);
      else
        unsetenv(k.c_str());
    }
  }
  LauncherEnv(const LauncherEnv&) = delete;
  LauncherEnv& operator=(const LauncherEnv&) = delete;

 private:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_SIZE",
                                           "OMPI_COMM_WORLD_RANK",
                                           "PMI_SIZE",
                                           "PMI_RANK",
                                           "PMIX_RANK",
                                           "SLURM_NTASKS",
                                           "SLURM_PROCID",
                                           "SLURM_STEP_ID",
                                           "SLURM_STEP_NUM_TASKS"};
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace

TEST_CASE("launch_env: no launcher is one rank", "[launch_env]") {
  LauncherEnv env;
  LaunchEnv e = launch_env();
  CHECK(e.size == 1);
  CHECK(e.rank == 0);
  CHECK(e.launcher.empty());
}

TEST_CASE("launch_env: OpenMPI's mpirun, ahead of the PMIx rank it also sets", "[launch_env]") {
  LauncherEnv env(
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"PMIX_RANK", "3"}});
  LaunchEnv e = launch_env();
  CHECK(e.size == 4);
  CHECK(e.rank == 3);
  CHECK(e.launcher == "OpenMPI");
}

TEST_CASE("launch_env: MPICH's and Intel MPI's PMI", "[launch_env]") {
  LauncherEnv env({{"PMI_SIZE", "8"}, {"PMI_RANK", "5"}});
  LaunchEnv e = launch_env();
  CHECK(e.size == 8);
  CHECK(e.rank == 5);
  CHECK(e.launcher == "PMI");
}

TEST_CASE("launch_env: Slurm counts inside srun, not in the batch script around it",
          "[launch_env]") {
  SECTION("an sbatch script: one process, whatever SLURM_NTASKS says") {
    LauncherEnv env({{"SLURM_NTASKS", "16"}, {"SLURM_PROCID", "0"}});
    LaunchEnv e = launch_env();
    CHECK(e.size == 1);
    CHECK(e.launcher.empty());
  }
  SECTION("a job step of srun") {
    LauncherEnv env({{"SLURM_NTASKS", "16"}, {"SLURM_PROCID", "7"}, {"SLURM_STEP_ID", "0"}});
    LaunchEnv e = launch_env();
    CHECK(e.size == 16);
    CHECK(e.rank == 7);
    CHECK(e.launcher == "Slurm");
  }
  SECTION("the step's own task count wins over the allocation's") {
    LauncherEnv env({{"SLURM_NTASKS", "16"},
                     {"SLURM_STEP_NUM_TASKS", "2"},
                     {"SLURM_PROCID", "1"},
                     {"SLURM_STEP_ID", "3"}});
    LaunchEnv e = launch_env();
    CHECK(e.size == 2);
    CHECK(e.rank == 1);
  }
}

TEST_CASE("launch_env: a PMIx rank with no size anywhere is a world of unknown size",
          "[launch_env]") {
  LauncherEnv env({{"PMIX_RANK", "2"}});
  LaunchEnv e = launch_env();
  CHECK(e.size == 0);
  CHECK(e.rank == 2);
  CHECK(e.launcher == "PMIx");
}

TEST_CASE("launch_env: a variable that is not a count is ignored", "[launch_env]") {
  LauncherEnv env({{"OMPI_COMM_WORLD_SIZE", "two"}, {"PMI_SIZE", "2"}, {"PMI_RANK", "1"}});
  LaunchEnv e = launch_env();
  CHECK(e.size == 2);
  CHECK(e.launcher == "PMI");
}
