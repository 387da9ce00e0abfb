// A run database path that is not a regular file (a FIFO, a directory, /dev/zero) is
// refused at once by name: SQLite would otherwise block reading a FIFO's header forever.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "store/run_store.h"
#include "tests/common/deadline.h"
#include "tests/store/fixtures.h"

using namespace mls;
using namespace mls::store;
using namespace mls::store::test;

TEST_CASE("run store: a FIFO or a device as the database is refused at once, naming it",
          "[store][hostile]") {
  TempDir dir;
  const std::string fifo = dir.file("runs.db");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string rw, ro;
  REQUIRE(mls::test::finishes_within(std::chrono::seconds(5), [&] {
    auto s = RunStore::open(fifo);
    rw = s ? "" : s.error().message;
    auto r = RunStore::open_read_only(fifo);
    ro = r ? "" : r.error().message;
  }));
  CHECK(rw == fifo + ": is a FIFO, not a regular file (a run database must be one)");
  CHECK(ro == fifo + ": is a FIFO, not a regular file (a run database must be one)");
  struct stat st {};
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  auto z = RunStore::open_read_only("/dev/zero");
  REQUIRE_FALSE(z.ok());
  CHECK(z.error().message ==
        "/dev/zero: is a character device, not a regular file (a run database must be one)");
}
