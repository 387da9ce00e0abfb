// Two processes creating the same new run database at the same moment (two `--run`s started
// together, the GUI and a script): both must open it. Before the fix one of them failed with
// "database is locked" while switching to WAL in most races.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "store/run_store.h"
#include "tests/store/fixtures.h"

using namespace mls;
using namespace mls::store;
using namespace mls::store::test;

namespace {

// Forks `n` children that wait on a shared flag, then all open `path` and begin a run; the
// number of children that failed (their messages go to `errors`).
int race_to_create(const std::string& path, int n, std::string& errors) {
  // Shared memory: a start flag and one message slot per child.
  constexpr size_t kSlot = 512;
  void* mem = ::mmap(nullptr, 64 + kSlot * static_cast<size_t>(n), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mem != MAP_FAILED);
  auto* go = new (mem) std::atomic<int>(0);
  char* slots = static_cast<char*>(mem) + 64;
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      while (go->load() == 0) {
      }
      auto s = RunStore::open(path);
      std::string msg = s ? "" : s.error().message;
      if (s) {
        auto id = (*s)->begin_run({.name = "racer"});
        if (!id) msg = id.error().message;
      }
      msg.copy(slots + kSlot * static_cast<size_t>(i), kSlot - 1);
      std::_Exit(msg.empty() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  go->store(1);
  int failed = 0;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    REQUIRE(::waitpid(pids[i], &status, 0) == pids[i]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      errors += std::string(slots + kSlot * i) + "\n";
    }
  }
  ::munmap(mem, 64 + kSlot * static_cast<size_t>(n));
  return failed;
}

}  // namespace

TEST_CASE("run store: two processes creating the same new database at once both succeed, 20 races",
          "[store][race]") {
  TempDir dir;
  int failed = 0;
  std::string errors;
  for (int race = 0; race < 20; ++race) {
    const std::string path = dir.file("race-" + std::to_string(race) + ".db");
    failed += race_to_create(path, 2, errors);
    // Whatever the order, the file holds both runs.
    auto store = RunStore::open_read_only(path);
    REQUIRE(store.ok());
    auto runs = (*store)->list_runs();
    REQUIRE(runs.ok());
    CHECK(runs->size() == 2);
  }
  INFO(errors);
  CHECK(failed == 0);
}
