// `mpirun -np N mlstudio --run P.mls`: data-parallel training as a user runs it. Two ranks of
// batch 64 end where one rank of batch 128 does; rank 0 alone records the one run; a rank killed
// mid-epoch stops the job within seconds, named, the run failed and resumable on one rank; and
// a job of one rank prints what a plain run prints. Built only where MPI is found
// (tests/CMakeLists.txt); the MPI-less build's refusal is tests/runner/ranks_test.cpp's.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "engine/train/checkpoint.h"
#include "mpi_util.h"
#include "store/run_store.h"
#include "store/sqlite.h"

using namespace mls::e2e;
using json = nlohmann::json;

namespace {

json last_json(const Output& o) {
  auto j = json::parse(last_line(o.out), nullptr, false);
  INFO(o.out << o.err);
  REQUIRE(j.is_object());
  return j;
}

// max |a - b| / max |b| over every parameter of two checkpoints of the same model.
double params_difference(const std::string& a_path, const std::string& b_path) {
  auto a = mls::read_checkpoint(a_path);
  auto b = mls::read_checkpoint(b_path);
  REQUIRE(a);
  REQUIRE(b);
  double diff = 0, scale = 0;
  int compared = 0;
  for (const mls::CheckpointTensor& t : b->tensors) {
    if (t.name.rfind("param/", 0) != 0) continue;
    const mls::CheckpointTensor* other = a->find(t.name);
    REQUIRE(other != nullptr);
    REQUIRE(other->bytes.size() == t.bytes.size());
    REQUIRE(t.dtype == mls::DType::F32);
    const auto* x = reinterpret_cast<const float*>(other->bytes.data());
    const auto* y = reinterpret_cast<const float*>(t.bytes.data());
    for (size_t i = 0; i < t.bytes.size() / sizeof(float); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
    }
    ++compared;
  }
  REQUIRE(compared == 6);  // the MLP's three weights and three biases
  return diff / scale;
}

std::string integrity(const std::string& db) {
  auto d = mls::store::Db::open_read_only(db, false);
  REQUIRE(d.ok());
  auto st = d->prepare("PRAGMA integrity_check");
  REQUIRE(st.ok());
  auto scope = st->scoped();
  auto row = st->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return st->column_text(0);
}

std::string fresh(const std::string& name) {
  const fs::path p = temp_dir() / name;
  fs::remove(p);
  fs::remove_all(fs::path(p).replace_extension(".checkpoints"));
  return p.string();
}

const std::string kSmall =
    "--run " + example() + " --epochs 1 --limit 6400 --test-limit 200 --threads 1 --json";

}  // namespace

TEST_CASE(
    "mpirun -np 2: 50 steps of batch 64 a rank give 1 rank's batch-128 parameters, recorded once",
    "[mpi]") {
  const std::string db2 = fresh("dp2.db"), db1 = fresh("dp1.db");
  Output two = run_mpi(2, kSmall + " --batch-size 64 --db " + db2, 120);
  INFO(two.err);
  REQUIRE(two.code == 0);
  Output one = run(kSmall + " --batch-size 128 --db " + db1);
  REQUIRE(one.code == 0);
  const json j2 = last_json(two), j1 = last_json(one);
  CHECK(j2["steps"] == 50);
  CHECK(j1["steps"] == 50);
  CHECK(j2["world_size"] == 2);
  CHECK(j2["global_batch_size"] == 128);
  CHECK(j2["hosts"].size() == 2);
  const double comm = j2["comm_fraction"].get<double>();
  CHECK(comm > 0);
  CHECK(comm < 1);
  CHECK_FALSE(j1.contains("world_size"));
  // The same parameters up to the order of floating-point sums.
  const double rel = params_difference(j2["checkpoint"], j1["checkpoint"]);
  CHECK(rel <= 1e-5);
  WARN("2 ranks x 64 vs 1 rank x 128 after 50 steps: parameters differ by " << rel << " relative");
  CHECK(std::fabs(j2["final_loss"].get<double>() - j1["final_loss"].get<double>()) < 1e-4);

  // Rank 0 spoke for the job: one start line, one summary, the job's rate and comm share.
  auto count = [&](const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(two.err, "mlstudio: run 1: ") == 1);
  CHECK(count(two.err, "run 1 finished in") == 1);
  CHECK(two.err.find("2 ranks (communication ") != std::string::npos);
  CHECK(std::regex_search(two.err,
                          std::regex("epoch 1/1  loss [0-9.]+  [0-9]+ samples/s  comm [0-9]+%")));
  CHECK(count(two.out, "{") == 1);  // one JSON line
  CHECK(two.err.find("rank 1 (") == std::string::npos);

  // The store: one run of world size 2, each step's loss once, the file whole.
  auto st = mls::store::RunStore::open_read_only(db2);
  REQUIRE(st);
  auto runs = (*st)->list_runs();
  REQUIRE(runs);
  REQUIRE(runs->size() == 1);
  CHECK((*runs)[0].world_size == 2);
  CHECK((*runs)[0].status == "finished");
  std::map<std::string, std::string> params;
  auto ps = (*st)->params(1);
  REQUIRE(ps);
  for (const auto& [k, v] : *ps) params[k] = v;
  CHECK(params["world_size"] == "2");
  CHECK(params["global_batch_size"] == "128");
  CHECK(params["batch_size"] == "64");
  CHECK_FALSE(params["hosts"].empty());
  auto loss = (*st)->metrics(1, "train/loss");
  REQUIRE(loss);
  CHECK(loss->size() == 50);
  std::set<int64_t> steps;
  for (const auto& p : *loss) steps.insert(p.step);
  CHECK(steps.size() == 50);
  CHECK(integrity(db2) == "ok");
}

TEST_CASE(
    "mpirun -np 2: kill -9 of rank 1 mid-epoch stops rank 0 within seconds, naming it, and the "
    "failed run resumes on one rank",
    "[mpi]") {
  const std::string settings =
      "--run " + example() + " --epochs 3 --test-limit 1000 --threads 1 --json --dist-timeout 10";
  // The same settings, uninterrupted.
  const std::string ref_db = fresh("ref.db");
  Output ref = run_mpi(2, settings + " --db " + ref_db, 120);
  INFO(ref.err);
  REQUIRE(ref.code == 0);
  const double ref_accuracy = last_json(ref)["test_accuracy"].get<double>();

  const std::string db = fresh("killed.db");
  // After a rank dies, mpirun sends the others SIGTERM, then SIGKILL: 1 s apart by default (rank
  // 0 exits about 2 s after the kill here, the run recorded), 5 s apart in this test, so that a
  // CI machine busy with other tests cannot turn a slow SQLite write into a flake. Rank 0's path
  // is the same: the signal cuts its wait short, it names the rank, records, ends the job.
  Job job = start_mpi(2, settings + " --db " + db, "killed", "--mca odls_base_sigkill_timeout 5");
  // Epoch 1's checkpoint is kept: rank 1 dies in epoch 2.
  const fs::path kept = fs::path(db).replace_extension(".checkpoints") / "run-1" / "epoch-1.ckpt";
  for (int i = 0; i < 3000 && !fs::exists(kept); ++i) ::usleep(20 * 1000);
  REQUIRE(fs::exists(kept));
  const pid_t victim = rank_pid(db, 1);
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = job.wait(60);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string err = read_file(job.err.string());
  INFO(err);
  CHECK(code != 0);
  CHECK(code != -2);  // it ended on its own
  CHECK(took < 30);
  WARN("rank 0 ended the job " << took << " s after rank 1 was killed");
  CHECK(std::regex_search(err, std::regex("rank 1 \\(host [^)]+\\) did not answer")));
  CHECK(err.find("(run 1 recorded as failed in " + db + "; its last checkpoint ") !=
        std::string::npos);
  CHECK(err.find("continues with mlstudio --run " + example() + " --resume 1)") !=
        std::string::npos);
  {
    auto st = mls::store::RunStore::open_read_only(db);
    REQUIRE(st);
    auto run = (*st)->get_run(1);
    REQUIRE(run);
    CHECK(run->status == "failed");
  }

  // One rank finishes it, taking the whole global batch, to the accuracy of the uninterrupted
  // run.
  Output resumed = run("--run " + example() + " --resume 1 --threads 1 --json --db " + db);
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  const json r = last_json(resumed);
  CHECK(r["status"] == "finished");
  CHECK(r["first_epoch"] == 2);
  CHECK(resumed.err.find("each of 1 now takes 256, the same 256 samples an update") !=
        std::string::npos);
  CHECK(std::fabs(r["test_accuracy"].get<double>() - ref_accuracy) <= 0.005);
  CHECK(integrity(db) == "ok");
}

TEST_CASE("mpirun -np 2: Ctrl-C on mpirun stops every rank after the same step, the run interrupted",
          "[mpi]") {
  const std::string db = fresh("ctrl_c.db");
  // mpirun waits this long between its SIGTERM and SIGKILL (1 s by default): room for a busy CI
  // machine to finish the step and record the run.
  Job job = start_mpi(2, "--run " + example() + " --epochs 50 --threads 1 --db " + db, "ctrl_c",
                      "--mca odls_base_sigkill_timeout 3");
  // Mid-run (an epoch's checkpoint is there), the user presses Ctrl-C: mpirun passes it on.
  const fs::path kept = fs::path(db).replace_extension(".checkpoints") / "run-1" / "last.ckpt";
  for (int i = 0; i < 3000 && !fs::exists(kept); ++i) ::usleep(20 * 1000);
  REQUIRE(fs::exists(kept));
  REQUIRE(::kill(job.pid, SIGINT) == 0);
  const int code = job.wait(60);
  const std::string err = read_file(job.err.string());
  INFO(err);
  CHECK(code != -2);
  // Every rank alive: nobody is named dead, the job is not aborted, the run can go on.
  CHECK(err.find("did not answer") == std::string::npos);
  CHECK(err.find("MPI_ABORT") == std::string::npos);
  CHECK(err.find("interrupted after") != std::string::npos);
  auto st = mls::store::RunStore::open_read_only(db);
  REQUIRE(st);
  auto run = (*st)->get_run(1);
  REQUIRE(run);
  CHECK(run->status == "interrupted");
}

TEST_CASE("mpirun -np 1: a job of one rank prints and records what a plain run does", "[mpi]") {
  const std::string db_mpi = fresh("np1.db"), db_plain = fresh("plain.db");
  const std::string args =
      "--run " + example() + " --epochs 1 --limit 1000 --test-limit 200 --threads 1 --json --db ";
  Output job = run_mpi(1, args + db_mpi, 60);
  Output plain = run(args + db_plain);
  REQUIRE(job.code == 0);
  REQUIRE(plain.code == 0);
  // The same lines, figures and the database's name aside.
  auto shape = [](std::string s, const std::string& db) {
    for (size_t at = s.find(db); at != std::string::npos; at = s.find(db))
      s.replace(at, db.size(), "DB");
    return std::regex_replace(s, std::regex("[0-9]+(\\.[0-9]+)?"), "N");
  };
  CHECK(shape(job.err, db_mpi) == shape(plain.err, db_plain));
  std::set<std::string> keys_job, keys_plain;
  const json j_job = last_json(job), j_plain = last_json(plain);
  for (const auto& [k, v] : j_job.items()) keys_job.insert(k);
  for (const auto& [k, v] : j_plain.items()) keys_plain.insert(k);
  CHECK(keys_job == keys_plain);
  auto st = mls::store::RunStore::open_read_only(db_mpi);
  REQUIRE(st);
  auto run1 = (*st)->get_run(1);
  REQUIRE(run1);
  CHECK(run1->world_size == 1);
  auto ps = (*st)->params(1);
  REQUIRE(ps);
  for (const auto& [k, v] : *ps) CHECK(k != "world_size");

  // The option that bounds a job's wait for a dead rank is documented.
  Output help = run("--help");
  CHECK(help.out.find("--dist-timeout") != std::string::npos);
}
