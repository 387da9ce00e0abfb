// A notebook cell that trains (mls.train through the run session): its output names the run
// in the store (CellOutput::run_id, saved in P.outputs.json), and the host's live feed gets
// the run's points.
#include <catch2/catch.hpp>

#include <cstdio>

#include "engine/cpu/cpu_backend.h"
#include "scripting/notebook/outputs.h"
#include "scripting/notebook/session.h"
#include "scripting/runtime.h"
#include "store/run_store.h"
#include "tests/common/temp_dir.h"

using namespace mls;
using namespace mls::lua;

namespace {

nodes::Cell lua_cell(std::string id, std::string src) {
  nodes::Cell c;
  c.id = std::move(id);
  c.source = std::move(src);
  return c;
}

const char* kData =
    "mls.manual_seed(1)\n"
    "data = mls.data.open{source = 'synthetic', synthetic = {kind = 'blobs', samples = 120}}\n"
    "net = mls.nn.Sequential(mls.nn.Linear(2, 8), mls.nn.ReLU(), mls.nn.Linear(8, 3))";

}  // namespace

TEST_CASE("Notebook session: a cell that trains names its last run, others name none",
          "[notebook]") {
  test::TempDir dir("mls_cell_run");
  ScriptOptions o;
  o.sandbox = true;
  o.root = dir.str();
  o.db_path = dir.file("runs.db");
  NotebookSession s(cpu::backend(), o);
  std::vector<std::shared_ptr<Telemetry>> feeds;
  s.host().runtime().new_telemetry = [&] {
    feeds.push_back(std::make_shared<Telemetry>());
    return feeds.back();
  };
  s.set_cells({lua_cell("data", kData),
               lua_cell("train",
                        "r1 = mls.train{model = net, data = data, epochs = 1, batch_size = 40, "
                        "quiet = true}\n"
                        "r2 = mls.train{model = net, data = data, epochs = 2, batch_size = 40, "
                        "quiet = true}\n"
                        "print(r1.run_id, r2.run_id, r2.final_loss)"),
               lua_cell("bad", "mls.train{model = net, data = data, loss = 'nope'}"),
               lua_cell("plain", "print(1)")});
  s.run_all();
  const CellOutput* train = s.output("train");
  REQUIRE(train);
  INFO(train->error);
  REQUIRE(train->ok);
  long long id1 = 0, id2 = 0;
  double final_loss = 0;
  REQUIRE(std::sscanf(train->text.c_str(), "%lld %lld %lf", &id1, &id2, &final_loss) == 3);
  CHECK(id2 == id1 + 1);
  CHECK(train->run_id == id2);  // the last of its runs
  auto store = store::RunStore::open_read_only(o.db_path);
  REQUIRE(store.ok());
  CHECK((*store)->get_run(id2)->status == "finished");
  // One live feed per mls.train; the second has both epochs, the last one the final loss.
  REQUIRE(feeds.size() == 2);
  REQUIRE(feeds[1]->epochs.size() == 2);
  CHECK(feeds[1]->epochs[1].train_loss == Approx(final_loss).epsilon(1e-12));
  CHECK(feeds[1]->steps.size() == 6);  // 120 / 40, twice
  REQUIRE(s.output("bad"));
  CHECK_FALSE(s.output("bad")->ok);
  CHECK(s.output("bad")->run_id == 0);  // refused before a run began
  REQUIRE(s.output("plain"));
  CHECK(s.output("plain")->run_id == 0);

  // Saved and read back with its run.
  const std::string project = dir.file("lab.mls");
  SavedOutputs out{{"train", *train}};
  REQUIRE(save_outputs(project, out).ok());
  auto back = load_outputs(project);
  REQUIRE(back.ok());
  REQUIRE(back->has_value());
  CHECK((*back)->at("train").run_id == id2);
}
