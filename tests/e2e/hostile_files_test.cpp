// Hostile files at the paths mlstudio writes and reads, as a user would meet them on the
// command line: a FIFO where a trace, an ONNX file, saved outputs or imported weights go is
// refused by name and stays a FIFO; a FIFO where weights or a checkpoint are read is
// refused at once instead of blocking forever. A run failed by a database lock reports what
// the database really holds.
#include <signal.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "store/run_store.h"
#include "store/sqlite.h"

using namespace mls::e2e;

namespace {

bool still_a_fifo(const fs::path& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

fs::path make_fifo(const std::string& name) {
  fs::path p = temp_dir() / name;
  fs::remove(p);
  REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  return p;
}

}  // namespace

TEST_CASE("a trace (--profile) into a FIFO is refused by name before training, and the FIFO stays", "[e2e][hostile]") {
  const fs::path fifo = make_fifo("trace.fifo");
  Output o = run("--run " + example() + " --epochs 1 --limit 64 --test-limit 32 --db " +
                 (temp_dir() / "hostile.db").string() + " --profile " + fifo.string());
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(fifo.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(o.err.find("epoch 1/1") == std::string::npos);  // refused before training, not after
  CHECK(still_a_fifo(fifo));
}

TEST_CASE("export --onnx and --save-outputs into a FIFO are refused by name and the FIFO stays",
          "[e2e][hostile]") {
  const fs::path fifo = make_fifo("model.fifo");
  Output o = run("export " + example() + " --onnx " + fifo.string() +
                 " --limit 64 --test-limit 32 --check-samples 8");
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(fifo.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(fifo));

  const fs::path outputs = make_fifo("outputs.fifo");
  const fs::path onnx = temp_dir() / "hostile.onnx";
  Output s = run("export " + example() + " --onnx " + onnx.string() + " --save-outputs " +
                 outputs.string() + " --limit 64 --test-limit 32 --check-samples 8");
  INFO(s.err);
  CHECK(s.code != 0);
  CHECK(s.err.find(outputs.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(outputs));
}

TEST_CASE("import -o --force whose weights path is a FIFO is refused and replaces nothing",
          "[e2e][hostile]") {
  const fs::path onnx = temp_dir() / "import-src.onnx";
  Output e = run("export " + example() + " --onnx " + onnx.string() +
                 " --limit 64 --test-limit 32 --check-samples 8");
  INFO(e.err);
  REQUIRE(e.code == 0);
  const fs::path project = temp_dir() / "imported.mls";
  std::ofstream(project) << "old project";
  const fs::path weights = make_fifo("imported.weights");
  Output o = run("import " + onnx.string() + " -o " + project.string() + " --force");
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.err.find(weights.string() + " is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(weights));
  CHECK(read_file(project.string()) == "old project");
}

namespace {

// Every reader test is bounded: a command that blocks on its FIFO is killed (exit 137).
Output run_bounded(const std::string& args) { return run(args, 60); }

}  // namespace

TEST_CASE("a FIFO given as the project or as the ONNX model to import is refused at once",
          "[e2e][hostile]") {
  const fs::path project = make_fifo("project.fifo");
  Output o = run_bounded("--run " + project.string() + " --epochs 1 --db " +
                         (temp_dir() / "fifo-project.db").string());
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.code != 137);  // killed by timeout: blocked on the FIFO
  CHECK(o.err.find(project.string() + ": is a FIFO, not a regular file") != std::string::npos);
  const fs::path model = make_fifo("model-in.fifo");
  Output i = run_bounded("import " + model.string() + " -o " + (temp_dir() / "fifo-import.mls").string());
  INFO(i.err);
  CHECK(i.code != 0);
  CHECK(i.code != 137);
  CHECK(i.err.find(model.string() + ": is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(project));
  CHECK(still_a_fifo(model));
}

TEST_CASE("a FIFO as the project's weights is refused at once by --run, naming it",
          "[e2e][hostile]") {
  const fs::path fifo = make_fifo("weights.fifo");
  const std::string project =
      variant("fifo-weights.mls", "\"nodes\": [", "\"weights\": \"weights.fifo\", \"nodes\": [");
  Output o = run_bounded("--run " + project + " --epochs 1 --limit 64 --test-limit 32 --db " +
                         (temp_dir() / "fifo-weights.db").string());
  INFO(o.err);
  CHECK(o.code != 0);
  CHECK(o.code != 137);  // killed by timeout: blocked on the FIFO
  CHECK(o.err.find(fifo.string() + ": is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(fifo));
}

TEST_CASE("a FIFO as a run's checkpoints is refused at once by --resume and eval",
          "[e2e][hostile]") {
  const fs::path db = temp_dir() / "fifo-ckpt.db";
  fs::remove(db);
  fs::remove_all(temp_dir() / "fifo-ckpt.checkpoints");
  const std::string common = " --limit 64 --test-limit 32 --db " + db.string();
  Output a = run("--run " + example() + " --epochs 2 --stop-after-epochs 1" + common);
  INFO(a.err);
  REQUIRE(a.code == 0);
  const fs::path dir = temp_dir() / "fifo-ckpt.checkpoints" / "run-1";
  REQUIRE(fs::exists(dir / "last.ckpt"));
  for (const char* name : {"last.ckpt", "best.ckpt"}) {
    fs::remove(dir / name);
    REQUIRE(::mkfifo((dir / name).c_str(), 0600) == 0);
  }
  Output r = run_bounded("--run " + example() + " --resume 1" + common);
  INFO(r.err);
  CHECK(r.code != 0);
  CHECK(r.code != 137);
  CHECK(r.err.find((dir / "last.ckpt").string() + ": is a FIFO, not a regular file") !=
        std::string::npos);
  Output e = run_bounded("eval " + example() + " --run 1 --db " + db.string());
  INFO(e.err);
  CHECK(e.code != 0);
  CHECK(e.code != 137);
  CHECK(e.err.find(": is a FIFO, not a regular file") != std::string::npos);
  CHECK(still_a_fifo(dir / "last.ckpt"));
}

TEST_CASE("a run failed by a database lock says what the database holds, not 'recorded as failed'",
          "[e2e][hostile][store]") {
  const fs::path db = temp_dir() / "locked.db", err = temp_dir() / "locked.err";
  fs::remove(db);
  const pid_t pid = start_run(db, err, "1000", "256");
  wait_for(err, "epoch 1/1000");
  // Another process's write lock, held past every busy timeout of the run's writes.
  auto holder = mls::store::Db::open(db.string());
  REQUIRE(holder.ok());
  REQUIRE(holder->exec("BEGIN EXCLUSIVE").ok());
  int status = 0;
  for (int i = 0; i < 600 && ::waitpid(pid, &status, WNOHANG) == 0; ++i) ::usleep(100 * 1000);
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    FAIL("the run did not stop within 60 s of the lock");
  }
  REQUIRE(holder->exec("ROLLBACK").ok());
  const std::string text = read_file(err.string());
  INFO(text);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(text.find("database is locked") != std::string::npos);
  // The message and the database agree: not recorded as failed, and interrupted once reopened.
  CHECK(text.find("(run 1 recorded as failed") == std::string::npos);
  CHECK(text.find("run 1 could not be recorded as failed in " + db.string()) != std::string::npos);
  auto ro = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(ro.ok());
  CHECK((*ro)->get_run(1)->status == "running");
  auto rw = mls::store::RunStore::open(db.string());
  REQUIRE(rw.ok());
  CHECK((*rw)->get_run(1)->status == "interrupted");
}

TEST_CASE("a file name that is not UTF-8 under --json: the failure as JSON and exit 1, no abort",
          "[e2e][hostile]") {
  // nlohmann's default dump throws on such bytes: this aborted with exit 134 (SIGABRT).
  const std::string bad = (temp_dir() / "missing\xff.mls").string();
  Output o = run("--run '" + bad + "' --json");
  INFO(o.out << o.err);
  CHECK(o.code == 1);
  const auto j = nlohmann::json::parse(last_line(o.out));
  CHECK(j["status"] == "failed");
  // The byte is shown as U+FFFD, the rest of the name as it is.
  CHECK(j["error"].get<std::string>().find("missing\xef\xbf\xbd.mls") != std::string::npos);
}
