// The character-level transformer example (resources/examples/words-transformer.mls) made
// tiny: trained by `mlstudio --run` on a word list the test writes, its validation loss must
// beat the unigram entropy of its own training split (float64, computed here from the same
// split), and it prints ten made-up words of a-z. A missing word list is named.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "datasets/words_dataset.h"
#include "engine/train/rng.h"

using namespace mls::e2e;

namespace {

std::string example_words() {
  return std::string(MLS_SOURCE_DIR) + "/resources/examples/words-transformer.mls";
}

// Words of 1-4 consonant-vowel syllables ("bari", "tomeku"): a letter's successor depends on
// it (a consonant is always followed by a vowel), which a unigram model cannot see.
std::string syllable_words(int count, uint64_t seed) {
  const std::string consonants = "bdkmrst", vowels = "aeiou";
  mls::Rng r(seed);
  std::set<std::string> seen;
  std::string text;
  while (static_cast<int>(seen.size()) < count) {
    std::string w;
    const auto syllables = 1 + r.below(4);
    for (uint64_t s = 0; s < syllables; ++s) {
      w.push_back(consonants[r.below(consonants.size())]);
      w.push_back(vowels[r.below(vowels.size())]);
    }
    if (seen.insert(w).second) text += w + "\n";
  }
  return text;
}

// The example with a small width, context and schedule, on `words`.
std::string tiny_project(const std::string& words, const std::string& name) {
  nlohmann::json doc = nlohmann::json::parse(read_file(example_words()));
  doc["dataset"]["path"] = words;
  doc["dataset"]["words"] = {{"block_size", 8}};
  for (auto& n : doc["model"]["nodes"]) {
    const std::string id = n["id"];
    if (id == "tok_emb") n["params"]["embedding_dim"] = 32;
    if (n["type"] == "mls.multi_head_attention") n["params"]["num_heads"] = 2;
    if (id.ends_with("_fc1")) n["params"]["out_features"] = 64;
    if (id.ends_with("_fc2")) n["params"]["out_features"] = 32;
  }
  doc["training"]["epochs"] = 6;
  doc["training"]["batch_size"] = 32;
  doc["training"]["optimizer"]["lr"] = 0.003;
  doc["training"]["schedule"] = {{"type", "cosine"}, {"warmup_steps", 20}};
  const fs::path p = temp_dir() / name;
  std::ofstream(p) << doc.dump(2);
  return p.string();
}

}  // namespace

TEST_CASE("words transformer: a tiny one beats the unigram entropy and makes up ten words",
          "[e2e][words]") {
  const fs::path words = temp_dir() / "syllables.txt";
  std::ofstream(words) << syllable_words(400, 11);
  const std::string project = tiny_project(words.string(), "tiny-words.mls");

  // The unigram entropy of the training split's next characters, from the split the project
  // draws (its validation and test fractions and split seed), in float64.
  const nlohmann::json doc = nlohmann::json::parse(read_file(project));
  mls::data::SplitPlan plan;
  plan.validation = doc["dataset"]["validation"];
  plan.test_fraction = doc["dataset"]["test_fraction"];
  plan.seed = doc["dataset"].value("split_seed", 0);
  plan.limit = doc["dataset"].value("limit", 0);
  plan.test_limit = doc["dataset"].value("test_limit", 0);
  auto w = mls::data::load_words(words.string(), 8, plan);
  REQUIRE(w);
  std::map<int64_t, double> counts;
  for (int64_t s : w->splits.train) counts[w->data.labels[static_cast<size_t>(s)]] += 1;
  const auto n = static_cast<double>(w->splits.train.size());
  double unigram = 0;
  for (const auto& [token, c] : counts) unigram -= c / n * std::log(c / n);
  INFO("unigram entropy " << unigram << " nats over " << n << " training samples");
  REQUIRE(unigram > 2.0);  // 12 letters and the end, far from uniform but not degenerate

  const fs::path db = temp_dir() / "words.db";
  Output o = run("--run " + project + " --json --db " + db.string(), 120);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const std::string line = last_line(o.out);
  const auto j = nlohmann::json::parse(line);
  INFO(line);
  CHECK(j["steps"].get<int64_t>() >= 300);
  const double val = j["val_loss"];
  CHECK(std::isfinite(val));
  CHECK(val < unigram);
  REQUIRE(j.contains("samples"));
  REQUIRE(j["samples"].size() == 10);
  for (const auto& s : j["samples"]) {
    const std::string word = s;
    INFO(word);
    CHECK(!word.empty());
    CHECK(word.size() <= 32);
    CHECK(word.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos);
  }

  // Without --json the words are a line of their own on stdout.
  Output again = run("--run " + project + " --epochs 1 --limit 50 --db " + db.string(), 120);
  INFO(again.err);
  REQUIRE(again.code == 0);
  CHECK(again.out.rfind("samples: ", 0) == 0);
  CHECK(std::count(again.out.begin(), again.out.end(), ' ') == 10);
}

TEST_CASE("words transformer: a missing word list names the file and the package", "[e2e][words]") {
  const std::string project = tiny_project((temp_dir() / "no-such-words").string(), "none.mls");
  Output o = run("--run " + project + " --db " + (temp_dir() / "none.db").string(), 60);
  CHECK(o.code != 0);
  CHECK(o.err.find("no-such-words: no such file") != std::string::npos);
  CHECK(o.err.find("apt-get install wamerican") != std::string::npos);
}

TEST_CASE("words transformer: the example itself trains a few steps and makes up ten words",
          "[e2e][words]") {
  // The example itself, on the packaged word list, for a few steps.
  if (!fs::exists(mls::data::kDefaultWordsPath)) {
    WARN(mls::data::kDefaultWordsPath << " is missing (apt-get install wamerican): skipped");
    return;
  }
  Output o =
      run("--run " + example_words() + " --epochs 1 --limit 200 --test-limit 50 --json --db " +
              (temp_dir() / "example.db").string(),
          120);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const auto j = nlohmann::json::parse(last_line(o.out));
  CHECK(j["samples"].size() == 10);
}
