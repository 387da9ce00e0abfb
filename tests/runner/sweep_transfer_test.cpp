// A sweep trial trained on another rank, carried into rank 0's database (runner/sweep_transfer.h):
// a run made in one database arrives in another as the sweep's trial with the same params,
// snapshot, system info, tags, note and every metric point (NaN and infinities included), sent
// in two parts as an epoch's message and the final one; its checkpoint lands beside rank 0's
// database; a bad message is refused with a message, not recorded.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "runner/checkpoints.h"
#include "runner/sweep_transfer.h"
#include "store/run_store.h"

using namespace mls;
using namespace mls::runner;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("mls_sweep_transfer_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::unique_ptr<store::RunStore> open_store(const fs::path& p) {
  auto s = store::RunStore::open(p.string());
  REQUIRE(s.ok());
  return std::move(*s);
}

}  // namespace

TEST_CASE("sweep transfer: a rank's run arrives in rank 0's database as the sweep's trial",
          "[sweep]") {
  const fs::path dir = fresh_dir("whole");
  auto local = open_store(dir / "rank-1.db");
  auto run = local->begin_run({.name = "spirals trial 2",
                               .project_path = "/p/spirals.mls",
                               .project_hash = "abc123",
                               .device = "cpu",
                               .seed = 7});
  REQUIRE(run.ok());
  REQUIRE(local->log_param(*run, "lr", "0.01").ok());
  REQUIRE(local->log_param(*run, "checkpoint_dir", "/tmp/rank-1.checkpoints/run-1").ok());
  REQUIRE(local->put_snapshot(*run, {"mls", "{\"nodes\": []}"}).ok());
  REQUIRE(local->set_system_info(*run, {{"host", "node7"}, {"cores", "2"}}).ok());
  local->log_metric("train/loss", 1, 0.9);
  local->log_metric("train/loss", 2, 0.7);
  local->log_metric("epoch/train_loss", 1, 0.8);
  REQUIRE(local->flush().ok());

  SentPoints sent;
  auto first = run_message(*local, *run, sent);
  REQUIRE(first.ok());
  CHECK((*first)["points"]["train/loss"].size() == 2);
  CHECK((*first)["run"]["status"] == "running");

  // Rank 0's database: the sweep and its trial exist before the rank reports.
  const fs::path db = dir / "runs.db";
  auto main = open_store(db);
  auto sweep =
      main->create_sweep({.name = "s", .project_path = "/p/spirals.mls", .spec_json = "{}"});
  REQUIRE(sweep.ok());
  REQUIRE(main->add_trial(*sweep, 2, "{\"lr\": 0.01}").ok());
  // The message crosses as text.
  const json across = json::parse(message_text(*first));
  auto rec = TrialRecorder::begin(db.string(), *sweep, 2, across, {{"sweep_rank", "1"}});
  REQUIRE(rec.ok());
  const int64_t id = (*rec)->run_id();

  // The rest of the run: a NaN and an infinity, a tag, a note, its checkpoint.
  local->log_metric("train/loss", 3, std::nan(""));
  local->log_metric("train/loss", 4, std::numeric_limits<double>::infinity());
  local->log_metric("epoch/train_loss", 2, 0.6);
  REQUIRE(local->set_tag(*run, "good").ok());
  REQUIRE(local->set_note(*run, "a note").ok());
  REQUIRE(local->end_run(*run, "finished").ok());
  auto last = run_message(*local, *run, sent);
  REQUIRE(last.ok());
  CHECK((*last)["points"]["train/loss"].size() == 2);  // only what is new
  CHECK_FALSE(last->contains("params"));               // sent once
  CHECK_FALSE(last->contains("snapshot"));
  CHECK((*last)["points"]["epoch/train_loss"].size() == 1);
  REQUIRE((*rec)->add(json::parse(message_text(*last))).ok());
  auto file = (*rec)->add_file("last.ckpt", "checkpoint", 4, std::string("CKPT\0bytes", 10));
  REQUIRE(file.ok());
  REQUIRE((*rec)->end("finished").ok());
  rec->reset();

  auto got = main->get_run(id);
  REQUIRE(got.ok());
  CHECK(got->name == "spirals trial 2");
  CHECK(got->project_hash == "abc123");
  CHECK(got->seed == 7);
  CHECK(got->status == "finished");
  CHECK(got->note == "a note");
  REQUIRE(got->sweep_id);
  CHECK(*got->sweep_id == *sweep);
  CHECK(*got->trial == 2);
  auto trials = main->trials(*sweep);
  REQUIRE(trials.ok());
  REQUIRE(trials->size() == 1);
  CHECK((*trials)[0].run_id == id);
  CHECK((*trials)[0].attempts == 1);

  auto params = main->params(id);
  REQUIRE(params.ok());
  REQUIRE(params->size() == 2);
  CHECK((*params)[0] ==
        std::pair<std::string, std::string>{"checkpoint_dir", checkpoint_dir(db.string(), id)});
  CHECK((*params)[1] == std::pair<std::string, std::string>{"lr", "0.01"});
  auto snap = main->snapshot(id);
  REQUIRE(snap.ok());
  REQUIRE(*snap);
  CHECK((*snap)->text == "{\"nodes\": []}");
  auto sys = main->system_info(id);
  REQUIRE(sys.ok());
  CHECK(*sys == std::vector<std::pair<std::string, std::string>>{
                    {"cores", "2"}, {"host", "node7"}, {"sweep_rank", "1"}});
  auto tags = main->tags(id);
  REQUIRE(tags.ok());
  REQUIRE(tags->size() == 1);
  CHECK((*tags)[0].first == "good");

  auto loss = main->metrics(id, "train/loss");
  REQUIRE(loss.ok());
  REQUIRE(loss->size() == 4);
  CHECK((*loss)[0].step == 1);
  CHECK((*loss)[0].value == 0.9);
  CHECK((*loss)[1].value == 0.7);
  CHECK(std::isnan((*loss)[2].value));
  CHECK(std::isinf((*loss)[3].value));
  auto epoch = main->metrics(id, "epoch/train_loss");
  REQUIRE(epoch.ok());
  REQUIRE(epoch->size() == 2);
  CHECK(epoch->back().value == 0.6);

  const std::string ckpt = checkpoint_path(db.string(), id, "last");
  CHECK(*file == ckpt);
  std::ifstream in(ckpt, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(bytes == std::string("CKPT\0bytes", 10));
  auto arts = main->artifacts(id);
  REQUIRE(arts.ok());
  REQUIRE(arts->size() == 1);
  CHECK((*arts)[0].kind == "checkpoint");
  CHECK((*arts)[0].bytes == 10);
  REQUIRE((*arts)[0].step);
  CHECK(*(*arts)[0].step == 4);
  fs::remove_all(dir);
}

TEST_CASE(
    "sweep transfer: a bad message or file name is refused, and a refused trial is a failed run",
    "[sweep]") {
  const fs::path dir = fresh_dir("bad");
  const fs::path db = dir / "runs.db";
  auto main = open_store(db);
  auto sweep = main->create_sweep({.name = "s", .spec_json = "{}"});
  REQUIRE(sweep.ok());
  REQUIRE(main->add_trial(*sweep, 0, "{}").ok());
  REQUIRE(main->add_trial(*sweep, 1, "{}").ok());

  auto none = TrialRecorder::begin(db.string(), *sweep, 0, json{{"points", json::object()}});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message ==
        "sweep " + std::to_string(*sweep) + " trial 0: the rank's message holds no run");

  auto rec = TrialRecorder::begin(db.string(), *sweep, 0, json{{"run", {{"name", "t0"}}}});
  REQUIRE(rec.ok());
  auto bad_point = (*rec)->add(json{{"points", {{"train/loss", {{1, "many"}}}}}});
  REQUIRE_FALSE(bad_point.ok());
  CHECK(bad_point.error().message ==
        "a trial's message: metric train/loss has a point that is not a number");
  for (const char* name : {"../escape.ckpt", "a/b.ckpt", "..", ""}) {
    auto f = (*rec)->add_file(name, "checkpoint", 1, "x");
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().message.find("not a plain file name") != std::string::npos);
  }
  CHECK_FALSE(fs::exists(dir / "escape.ckpt"));
  REQUIRE((*rec)->end("failed").ok());

  auto refused = TrialRecorder::record_refused(db.string(), *sweep, 1, "t1", "/p.mls", "",
                                               {{"lr", "0.5"}}, "no setting 'lr2'");
  REQUIRE(refused.ok());
  auto got = main->get_run(*refused);
  REQUIRE(got.ok());
  CHECK(got->status == "failed");
  CHECK(got->note == "no setting 'lr2'");
  CHECK(*got->trial == 1);
  fs::remove_all(dir);
}
