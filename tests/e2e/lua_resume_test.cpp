// A Lua training run goes through the run session: it writes a checkpoint every epoch, and
// killed with -9 it resumes (`mlstudio lua FILE --resume ID`) and continues bit for bit, as
// the run that was never killed.
#include <signal.h>
#include <sys/wait.h>

#include <fstream>

#include "store/run_store.h"
#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

namespace {

// arg[1]: epochs, arg[2]: batch size. Dropout makes the steps depend on the step count too.
constexpr const char* kScript = R"lua(
local nn = mls.nn
mls.manual_seed(7)
local epochs = tonumber(arg[1]) or 30
local batch = tonumber(arg[2]) or 128
local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2),
                            nn.Linear(128, 10))
local data = mls.data.fashion_mnist{limit = 4000, test_limit = 200}
local r = mls.train{model = model, data = data,
  optimizer = mls.optim.Adam(model:parameters(), {lr = 0.001}),
  schedule = {type = "cosine"}, epochs = epochs, batch_size = batch, seed = 7, name = "resumable"}
print("run", r.run_id, r.final_loss)
)lua";

// Where the run session keeps a run's checkpoints (runner/checkpoints.h): beside the database.
fs::path last_checkpoint(const fs::path& db, int64_t run) {
  return db.parent_path() / (db.stem().string() + ".checkpoints") / ("run-" + std::to_string(run)) /
         "last.ckpt";
}

std::vector<mls::store::MetricPoint> losses(const fs::path& db, int64_t run) {
  auto store = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(store.ok());
  auto l = (*store)->metrics(run, "train/loss");
  REQUIRE(l.ok());
  return *l;
}

}  // namespace

TEST_CASE("a Lua run killed with -9 resumes with --resume and continues bit for bit",
          "[e2e][resume][lua]") {
  const fs::path dir = temp_dir() / "lua-resume";
  fs::create_directories(dir);
  const fs::path script = dir / "train.lua";
  std::ofstream(script) << kScript;
  const fs::path ref_db = dir / "ref.db", db = dir / "kill.db", err = dir / "kill.err";
  const std::string epochs = "30";

  // The run nobody kills.
  Output ref = run("lua " + script.string() + " " + epochs + " --db " + ref_db.string());
  REQUIRE(ref.code == 0);

  // The same run, killed once its first checkpoint is on disk.
  pid_t pid = spawn({"lua", script.string(), epochs, "--db", db.string()}, err);
  const fs::path ckpt = last_checkpoint(db, 1);
  for (int i = 0; i < 600 && !fs::exists(ckpt); ++i) ::usleep(20 * 1000);
  REQUIRE(fs::exists(ckpt));
  ::usleep(150 * 1000);
  ::kill(pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSIGNALED(status));
  const size_t steps_before = losses(db, 1).size();
  const size_t all_steps = losses(ref_db, 1).size();
  INFO("killed after " << steps_before << " of " << all_steps << " steps");
  REQUIRE(all_steps == 30u * 32u);  // ceil(4000 / 128) = 32 steps per epoch
  REQUIRE(steps_before < all_steps);  // the kill landed while it trained

  // A changed setting is refused, naming it.
  Output changed = run("lua " + script.string() + " " + epochs + " 64 --db " + db.string() + " --resume 1");
  CHECK(changed.code != 0);
  CHECK(changed.err.find("run 1 was recorded with batch_size 128, but the script now trains with "
                         "batch_size 64") != std::string::npos);

  Output resumed = run("lua " + script.string() + " " + epochs + " --db " + db.string() + " --resume 1");
  INFO(resumed.err);
  REQUIRE(resumed.code == 0);
  CHECK(resumed.err.find("resuming run 1 from ") != std::string::npos);

  // Every step as the run that was never killed: same count, same losses bit for bit, and
  // the same final checkpoint, byte for byte.
  const auto a = losses(ref_db, 1), b = losses(db, 1);
  REQUIRE(b.size() == a.size());
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i].step == b[i].step && a[i].value == b[i].value;
  CHECK(same == a.size());
  CHECK(read_file(ckpt.string()) == read_file(last_checkpoint(ref_db, 1)));
  auto store = mls::store::RunStore::open_read_only(db.string());
  REQUIRE(store.ok());
  CHECK((*store)->get_run(1)->status == "finished");
}
