// mls.train and mls.nn against the batch mode; mls.project edits through the undo stack.
#include <atomic>

#include "nodes/document.h"
#include "nodes/edit.h"
#include "nodes/lower.h"
#include "scripting/runtime.h"
#include "store/run_store.h"
#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::global_string;
using mls::test::run_err;
using mls::test::run_ok;

TEST_CASE("A Lua MLP trained by mls.train follows the node graph's run step for step", "[lua][train]") {
  test::TempDir dir("mls_lua_train");
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  run_ok(h, R"(
    mls.manual_seed(42)
    local nn = mls.nn
    local model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                                nn.Linear(128, 10))
    local data = mls.data.fashion_mnist{limit = 2000, test_limit = 500}
    local r = mls.train{model = model, data = data, quiet = true, epochs = 2, batch_size = 128, seed = 42,
                        optimizer = mls.optim.SGD(model:parameters(), {lr = 0.05, momentum = 0.9}),
                        schedule = {type = "cosine"}}
    loss1, loss2, acc, run = r.epoch_losses[1], r.epoch_losses[2], r.test_accuracy, r.run_id
    -- the trained weights came back into the model: its eager accuracy matches
    local correct = 0
    model:eval()
    mls.no_grad(function()
      for x, y in data:batches("test", 500) do correct = correct + model(x):argmax(2):eq(y):float():sum():item() end
    end)
    eager_acc = correct / 500
  )");
  // The same model as the project file, through the batch mode's own code path.
  auto doc = nodes::load_document(MLS_SOURCE_DIR "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc);
  doc->training.epochs = 2;
  doc->dataset.limit = 2000;
  doc->dataset.test_limit = 500;
  auto splits = data::open_dataset(doc->dataset, MLS_SOURCE_DIR, doc->training.seed, true);
  REQUIRE(splits);
  const nodes::InferContext ctx{splits->sample_shape, splits->num_classes, Shape{}};
  ModelBuilder build = [&](int64_t batch, bool training) { return nodes::lower(*doc, ctx, batch, training, "mlp"); };
  Trainer t(cpu::backend(), build, nodes::train_config(doc->training));
  auto r = t.fit(*splits->train, splits->test.get(), nullptr);
  REQUIRE(r);
  CHECK(global_number(h, "loss1") == Approx(r->epoch_losses[0]).epsilon(1e-6));
  CHECK(global_number(h, "loss2") == Approx(r->epoch_losses[1]).epsilon(1e-6));
  CHECK(global_number(h, "acc") == Approx(r->test.accuracy).margin(1e-9));
  CHECK(global_number(h, "eager_acc") == Approx(r->test.accuracy).margin(1e-9));
  CHECK(global_number(h, "run") == 1);
  auto db = store::RunStore::open(dir.file("runs.db"));
  REQUIRE(db);
  auto info = (*db)->get_run(1);
  REQUIRE(info);
  CHECK(info->status == "finished");
  auto m = (*db)->metric_keys(1);
  REQUIRE(m);
  CHECK_FALSE(m->empty());
}

TEST_CASE("A model's forward error inside mls.train names the line and marks nothing as trained", "[lua][train]") {
  test::TempDir dir("mls_lua_train_err");
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  const std::string e = run_err(h, R"(
    local nn = mls.nn
    local Bad = nn.Module:extend("Bad")
    function Bad:init() self.fc = nn.Linear(10, 3) end
    function Bad:forward(x) return self.fc(x) end   -- x is [N, 2]: wrong width
    local data = mls.data.open{source = "synthetic", synthetic = {kind = "spirals", samples = 200}}
    mls.train{model = Bad(), data = data, quiet = true, epochs = 1})");
  CHECK(e.find("matmul") != std::string::npos);
  CHECK(e.find("test:7:") != std::string::npos);  // the mls.train call (forward was a tail call)
  CHECK(e.find("[128,2] x [10,3]") != std::string::npos);
}

TEST_CASE("mls.train stops after its current step when the host interrupts it, and records the run as interrupted",
          "[lua][train]") {
  test::TempDir dir("mls_lua_train_stop");
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  std::vector<std::string> lines;
  std::atomic<bool> stop{false};
  h.runtime().report = [&](const std::string& l) {
    lines.push_back(l);
    if (l.rfind("epoch 2/", 0) == 0) stop.store(true);  // as the editor's Stop would
  };
  h.set_interrupt(&stop);
  const std::string e = run_err(h, R"(
    mls.manual_seed(3)
    local data = mls.data.open{source = "synthetic", synthetic = {kind = "spirals", samples = 512}}
    local net = mls.nn.Sequential(mls.nn.Linear(2, 16), mls.nn.Tanh(), mls.nn.Linear(16, 2))
    mls.train{model = net, data = data, epochs = 1000, batch_size = 64}
  )");
  CHECK(e.find("mls.train: interrupted after") != std::string::npos);
  CHECK(e.find("recorded as interrupted") != std::string::npos);
  // The lines went to the host, not to stderr: the start line and epochs 1 and 2.
  REQUIRE(lines.size() >= 3);
  CHECK(lines[0].find("run 1:") != std::string::npos);
  CHECK(lines[1].rfind("epoch 1/1000: train loss", 0) == 0);
  auto db = store::RunStore::open(dir.file("runs.db"));
  REQUIRE(db);
  auto info = (*db)->get_run(1);
  REQUIRE(info);
  CHECK(info->status == "interrupted");
}

TEST_CASE("mls.log records metrics in the current run, mls.nn modules walk their parameters in order", "[lua]") {
  test::TempDir dir("mls_lua_log");
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  {
    lua::LuaHost h(cpu::backend(), o);
    run_ok(h, R"(
      mls.start_run{name = "sweep", params = {lr = 0.5}}
      for i = 1, 3 do mls.log{loss = 1 / i, acc = i / 10} end
      mls.end_run()
      local nn = mls.nn
      local Net = nn.Module:extend("Net")
      function Net:init() self.a = nn.Linear(2, 3); self.b = nn.BatchNorm1d(3); self.c = nn.Linear(3, 1) end
      local names = {}
      for _, nv in ipairs(Net():named_parameters()) do names[#names + 1] = nv[1] end
      order = table.concat(names, ",")
      bufs = #Net():named_buffers()
    )");
    CHECK(global_string(h, "order") == "a.weight,a.bias,b.weight,b.bias,c.weight,c.bias");
    CHECK(global_number(h, "bufs") == 2);
  }
  auto db = store::RunStore::open(dir.file("runs.db"));
  REQUIRE(db);
  auto pts = (*db)->metrics(1, "loss");
  REQUIRE(pts);
  REQUIRE(pts->size() == 3);
  CHECK((*pts)[2].value == Approx(1.0 / 3));
  CHECK((*pts)[2].step == 2);
}

TEST_CASE("mls.project edits through the undo stack and refuses bad edits with the reason", "[lua]") {
  test::TempDir dir("mls_lua_project");
  lua::LuaHost h(cpu::backend());
  run_ok(h, R"(
    local p = mls.project.open(")" MLS_SOURCE_DIR R"(/resources/examples/fashion-mnist-mlp.mls")
    n0 = #p:nodes()
    before = p:text()
    p:add_node("fc4", "mls.linear", {out_features = 64})
    p:disconnect("relu2:out", "fc3:in")
    p:connect("relu2:out", "fc4:in")
    ok, err = pcall(function() p:connect("fc4:out", "relu2:in") end)
    n1 = #p:nodes()
    p:undo(); p:undo(); p:undo()
    same = p:text() == before
    local hist, at = p:history()
    nhist, at0 = #hist, at
  )");
  CHECK(global_number(h, "n1") == global_number(h, "n0") + 1);
  CHECK(global_string(h, "err").find("relu2:in") != std::string::npos);
  lua_getglobal(h.state(), "same");
  CHECK(lua_toboolean(h.state(), -1));
  lua_pop(h.state(), 1);
  CHECK(global_number(h, "nhist") == 3);
  CHECK(global_number(h, "at0") == 0);
}

TEST_CASE("mls.project.current edits the host's open project through the host's history", "[lua]") {
  lua::LuaHost h(cpu::backend());
  CHECK_THAT(run_err(h, "mls.project.current()"), Catch::Contains("no project is open"));
  auto doc = nodes::load_document(std::string(MLS_SOURCE_DIR) + "/resources/examples/fashion-mnist-mlp.mls");
  REQUIRE(doc.ok());
  nodes::OwnedHistory host(*doc);
  h.runtime().project = &host;
  run_ok(h, R"(
    local p = mls.project.current()
    p:add_node("drop", "mls.dropout", {p = 0.25})
    n = #p:nodes()
    ok, err = pcall(p.connect, p, "drop:out", "nowhere:in")
  )");
  CHECK(global_number(h, "n") == 10);
  CHECK_THAT(global_string(h, "err"), Catch::Contains("nowhere"));
  // The edit is the host's: its document has the node and its history can undo it.
  REQUIRE(host.doc().nodes.size() == 10);
  CHECK(host.doc().nodes.back().params["p"] == 0.25);
  REQUIRE(host.history().size() == 1);
  CHECK(host.undo());
  CHECK(host.doc() == *doc);
}
