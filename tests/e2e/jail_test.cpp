// `mlstudio lua FILE` runs a sandboxed script in the OS jail (scripting/jail.h): what the
// Lua VM cannot interrupt (a backtracking pattern, a blocking read) is killed at the time
// limit from outside, with a message and exit code 1, and the walls are named on stderr.
#include <sys/stat.h>

#include <chrono>

#include "cli_util.h"

using namespace mls::e2e;

namespace {

struct Timed {
  Output o;
  double seconds = 0;
};

Timed timed_run(const std::string& args) {
  const auto start = std::chrono::steady_clock::now();
  Timed t;
  t.o = run(args);
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

fs::path script(const std::string& name, const std::string& text) {
  const fs::path dir = temp_dir() / "jail";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

}  // namespace

TEST_CASE("mlstudio lua: a script stuck in a string pattern is stopped by the VM's time limit",
          "[e2e][lua][jail]") {
  // Lazy repeats against a subject with no match backtrack for hours inside one C call,
  // where the VM's instruction hook never runs; the pattern matcher checks the limits
  // itself, so the VM stops it with a traceback before the jail's wall clock (the FIFO test
  // below is the one the VM cannot stop).
  const fs::path evil = script("pattern.lua",
                               "local s = string.rep('a', 200000)\n"
                               "print(string.find(s, '.-.-.-.-.-b'))\n");
  const Timed t = timed_run("lua --time-limit 1 " + evil.string());
  INFO(t.o.err);
  CHECK(t.o.code == 1);
  CHECK(t.o.err.find("pattern.lua:2: stopped: the script ran past its time limit of 1 s") !=
        std::string::npos);
  CHECK(t.o.err.find("stopped by the sandbox") == std::string::npos);
  CHECK(t.seconds < 8);
}

TEST_CASE("mlstudio lua: a script blocked reading a FIFO is killed by the jail's wall clock",
          "[e2e][lua][jail]") {
  // Its stdin is a FIFO it holds open itself: the read never returns and never fails.
  const fs::path fifo = temp_dir() / "jail-stdin";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const fs::path evil = script("read.lua", "print('reading')\nprint(io.read('l'))\n");
  const Timed t = timed_run("lua --time-limit 1 " + evil.string() + " 0<>" + fifo.string());
  INFO(t.o.err);
  CHECK(t.o.code == 1);
  CHECK(t.o.out == "reading\n");
  CHECK(t.o.err.find("stopped by the sandbox: the script ran past its time limit of 1 s") !=
        std::string::npos);
  CHECK(t.seconds < 8);
}

TEST_CASE("mlstudio lua: a sandboxed script names its walls, and still writes in its folder",
          "[e2e][lua][jail]") {
  const std::string out = (temp_dir() / "jail" / "written.txt").string();
  const fs::path ok = script("ok.lua", "local f = assert(io.open('" + out +
                                           "', 'w'))\n"
                                           "f:write('kept') f:close()\n"
                                           "print(io.open('" +
                                           out + "'):read('a'))\n");
  fs::remove(ok.parent_path() / "written.txt");
  const Output o = run("lua " + ok.string());
  INFO(o.err);
  CHECK(o.code == 0);
  CHECK(o.out == "kept\n");
  CHECK(read_file((ok.parent_path() / "written.txt").string()) == "kept");
  CHECK(o.err.find("mlstudio: sandbox: Landlock") != std::string::npos);
  CHECK(o.err.find("seccomp") != std::string::npos);
  CHECK(o.err.find("memory 4096 MiB") != std::string::npos);
  // --trust lifts the jail: no walls line.
  CHECK(run("lua --trust " + ok.string()).err.find("mlstudio: sandbox:") == std::string::npos);
}

TEST_CASE("mlstudio lua: a script past --memory-limit stops with a message", "[e2e][lua][jail]") {
  const fs::path hog = script("hog.lua", "local t = {}\nfor i = 1, 1e9 do t[i] = i end\n");
  const Timed t = timed_run("lua --memory-limit 256 " + hog.string());
  INFO(t.o.err);
  CHECK(t.o.code == 1);
  CHECK(t.o.err.find("memory") != std::string::npos);
  CHECK(t.seconds < 30);
}

TEST_CASE(
    "mlstudio lua: run from another folder, a sandboxed script still records to the run "
    "database there",
    "[e2e][lua][jail]") {
  // The default --db lies in the working folder; the jail grants its files, not the folder.
  const fs::path cwd = temp_dir() / "jail-cwd";
  fs::remove_all(cwd);
  fs::create_directories(cwd);
  const fs::path s = script("log.lua",
                            "mls.start_run{name = 'from-elsewhere'}\n"
                            "for i = 1, 3 do mls.log{loss = 1 / i} end\n"
                            "mls.end_run()\nprint('logged')\n");
  const fs::path before = fs::current_path();
  fs::current_path(cwd);
  const Output o = run("lua " + s.string());
  fs::current_path(before);
  INFO(o.err);
  CHECK(o.code == 0);
  CHECK(o.out == "logged\n");
  // Nothing left beside the database (the jailed SQLite cannot remove its -wal and -shm).
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(cwd)) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"mlstudio-runs.db"});
  const Output runs = run("runs list --db " + (cwd / "mlstudio-runs.db").string());
  INFO(runs.err);
  CHECK(runs.code == 0);
  CHECK(runs.out.find("from-elsewhere") != std::string::npos);
}

TEST_CASE("mlstudio lua: a sandboxed script writing past --file-limit stops with a message",
          "[e2e][lua][jail]") {
  const std::string big = (temp_dir() / "jail" / "big.bin").string();
  const fs::path s = script("big.lua", "local f = assert(io.open('" + big +
                                           "', 'wb'))\n"
                                           "assert(f:write(string.rep('x', 3 * 1024 * 1024)))\n"
                                           "assert(f:close())\n");
  const Output o = run("lua --file-limit 1 " + s.string());
  INFO(o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("File too large") != std::string::npos);
  CHECK(o.err.find("file size limit is 1 MiB (--file-limit)") != std::string::npos);
  CHECK(fs::file_size(big) <= (1u << 20));
}
