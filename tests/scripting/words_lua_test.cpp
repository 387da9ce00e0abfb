// resources/examples/words-transformer.lua on a small word file made here: it trains (the loss
// falls, the validation loss beats the training set's unigram entropy, computed here in double
// precision), follows words-transformer.mls's run step for step (same weights under the same
// seed, same batches), and mls.sample_words gives ten words of a-z.
#include <cmath>
#include <fstream>
#include <map>

#include "datasets/dataset_spec.h"
#include "datasets/words_dataset.h"
#include "nodes/document.h"
#include "nodes/lower.h"
#include "tests/common/temp_dir.h"
#include "tests/scripting/lua_test_util.h"

using namespace mls;
using mls::test::global_number;
using mls::test::global_string;
using mls::test::run_err;
using mls::test::run_ok;

namespace {

// 400 made-up words of two to four syllables: structure a small model learns in a few steps.
std::vector<std::string> made_up_words() {
  const char* syl[] = {"ba", "ko", "ri", "tun", "me", "sa", "lo", "vix"};
  std::vector<std::string> out;
  uint64_t s = 12345;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<unsigned>(s >> 33);
  };
  while (out.size() < 400) {
    std::string w;
    const unsigned n = 2 + next() % 3;
    for (unsigned i = 0; i < n; ++i) w += syl[next() % 8];
    out.push_back(w);
  }
  return out;
}

std::string write_words(const test::TempDir& dir) {
  const std::string path = dir.file("words");
  std::ofstream f(path);
  for (const std::string& w : made_up_words()) f << w << "\n";
  f << "Capital\nit's\n";  // dropped by the dataset (not ^[a-z]+$)
  return path;
}

// Runs the example with `args`, its mls.train made quiet and its result and printed lines kept
// in globals (result, printed).
void run_example(lua::LuaHost& h, const std::vector<std::string>& args) {
  run_ok(h, R"(
    printed = {}
    print = function(...)
      local parts = table.pack(...)
      for i = 1, parts.n do parts[i] = tostring(parts[i]) end
      printed[#printed + 1] = table.concat(parts, " ", 1, parts.n)
    end
    local train = mls.train
    mls.train = function(t) t.quiet = true; result = train(t); return result end
  )");
  auto r = h.run_file(MLS_SOURCE_DIR "/resources/examples/words-transformer.lua", args);
  if (!r) FAIL(r.error().message);
}

}  // namespace

TEST_CASE(
    "words-transformer.lua trains on a word file, beats the unigram entropy and samples words",
    "[lua][words]") {
  test::TempDir dir("mls_lua_words");
  const std::string words = write_words(dir);
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  run_example(h, {"3", words});
  run_ok(h, R"(
    loss1, loss3, val = result.epoch_losses[1], result.epoch_losses[3], result.val_loss
    samples = ""
    for _, line in ipairs(printed) do
      if line:sub(1, 9) == "samples: " then samples = line:sub(10) end
    end
  )");
  // The unigram entropy of the training split's labels, in nats (what a model that ignores
  // its context can reach at best).
  data::DatasetSpec spec;
  spec.source = "words";
  spec.path = words;
  spec.validation = 0.1;
  spec.test_fraction = 0.1;
  auto splits = data::open_dataset(spec, dir.str(), 7, false);
  REQUIRE(splits);
  std::map<int64_t, int64_t> counts;
  int64_t n = 0;
  HostBatch b;
  splits->train->start_epoch(0);
  while (splits->train->next(512, b))
    for (int64_t i = 0; i < b.size; ++i, ++n) ++counts[b.y[static_cast<size_t>(i)]];
  double entropy = 0;
  for (const auto& [k, c] : counts) {
    const double p = static_cast<double>(c) / static_cast<double>(n);
    entropy -= p * std::log(p);
  }
  INFO("unigram entropy " << entropy << ", validation loss " << global_number(h, "val"));
  CHECK(entropy > 2.0);  // eight syllables and '.': well above the model's final loss
  CHECK(global_number(h, "loss3") < global_number(h, "loss1"));
  CHECK(global_number(h, "val") < entropy - 0.5);
  // Ten words of a-z, each made by the sampler (at most 32 letters, at least one).
  const std::string s = global_string(h, "samples");
  INFO("samples: " << s);
  std::vector<std::string> ws;
  for (size_t i = 0, j; i <= s.size(); i = j + 1) {
    j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    ws.push_back(s.substr(i, j - i));
  }
  REQUIRE(ws.size() == 10);
  for (const std::string& w : ws) {
    CHECK(!w.empty());
    CHECK(w.size() <= 32);
    CHECK(w.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos);
  }
}

TEST_CASE("words-transformer.lua follows words-transformer.mls step for step", "[lua][words]") {
  test::TempDir dir("mls_lua_words_mls");
  const std::string words = write_words(dir);
  lua::ScriptOptions o;
  o.db_path = dir.file("runs.db");
  lua::LuaHost h(cpu::backend(), o);
  run_example(h, {"2", words});
  run_ok(h, "loss1, loss2, val = result.epoch_losses[1], result.epoch_losses[2], result.val_loss");

  auto doc = nodes::load_document(MLS_SOURCE_DIR "/resources/examples/words-transformer.mls");
  REQUIRE(doc);
  doc->training.epochs = 2;
  doc->dataset.path = words;
  auto splits = data::open_dataset(doc->dataset, MLS_SOURCE_DIR, doc->training.seed, true);
  REQUIRE(splits);
  const nodes::InferContext ctx{splits->sample_shape, splits->num_classes, Shape{}};
  ModelBuilder build = [&](int64_t batch, bool training) {
    return nodes::lower(*doc, ctx, batch, training, "words");
  };
  Trainer t(cpu::backend(), build, nodes::train_config(doc->training));
  auto r = t.fit(*splits->train, splits->validation.get(), nullptr);
  REQUIRE(r);
  CHECK(global_number(h, "loss1") == Approx(r->epoch_losses[0]).epsilon(1e-5));
  CHECK(global_number(h, "loss2") == Approx(r->epoch_losses[1]).epsilon(1e-5));
  CHECK(global_number(h, "val") == Approx(r->test.loss).epsilon(1e-5));
}

TEST_CASE("mls.sample_words: a model of the wrong width or one that fails is named",
          "[lua][words]") {
  lua::LuaHost h(cpu::backend());
  CHECK(run_err(h, "mls.sample_words(function(x) return mls.zeros{x:size(1), 10} end)")
            .find("logits for 10 contexts") != std::string::npos);
  CHECK(run_err(h, "mls.sample_words(function(x) error('no model here') end)")
            .find("no model here") != std::string::npos);
  CHECK(run_err(h, "mls.sample_words(function(x) return 3 end)").find("must return a tensor") !=
        std::string::npos);
  CHECK(run_err(h, "mls.sample_words(42)").find("a model") != std::string::npos);
  // A model that always prefers 'b' then '.': every word is "b".
  run_ok(h, R"(
    local calls = 0
    local w = mls.sample_words(function(x)
      calls = calls + 1
      local row = {}
      for k = 1, 27 do row[k] = -50 end
      row[calls == 1 and 3 or 1] = 50  -- 'b' (id 2) first, then '.'
      local rows = {}
      for i = 1, x:size(1) do rows[i] = row end
      return mls.tensor(rows)
    end, {count = 4, block_size = 3, seed = 1})
    words_b = table.concat(w, ",")
  )");
  CHECK(global_string(h, "words_b") == "b,b,b,b");
}
