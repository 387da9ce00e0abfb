// The word sampler (runner/word_samples.h) over made-up next-token models: it feeds each word
// its own sliding context, stops at '.', never starts with '.', caps the length, draws in
// proportion to softmax(logits) and names a model of the wrong width.
#include "runner/word_samples.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>

namespace mls::runner {
namespace {

constexpr int64_t kVocab = 27;

// A model that answers each context by `next(context)`: logit 0 there, -1e9 elsewhere.
NextTokenLogits deterministic(int64_t t, std::function<int64_t(const float*)> next) {
  return [t, next](const HostBatch& b) -> Result<std::vector<float>> {
    REQUIRE(static_cast<int64_t>(b.x.size()) == b.size * t);
    std::vector<float> z(static_cast<size_t>(b.size * kVocab), -1e9f);
    for (int64_t i = 0; i < b.size; ++i)
      z[static_cast<size_t>(i * kVocab + next(b.x.data() + i * t))] = 0.0f;
    return z;
  };
}

}  // namespace

TEST_CASE("word samples: each word follows its own context and ends at '.'", "[runner][words]") {
  // Next after the last token k: k + 1 up to 'c' (3), then '.'; so every word is "abc".
  const int64_t t = 4;
  std::vector<std::vector<float>> seen;
  auto model = [&](const HostBatch& b) {
    seen.emplace_back(b.x.begin(), b.x.begin() + t);  // word 0's context
    return deterministic(t, [t](const float* ctx) {
      const auto last = static_cast<int64_t>(ctx[t - 1]);
      return last < 3 ? last + 1 : int64_t{0};
    })(b);
  };
  WordSampling o;
  o.block_size = t;
  o.count = 3;
  auto words = sample_words(model, o);
  REQUIRE(words);
  CHECK(*words == std::vector<std::string>{"abc", "abc", "abc"});
  // The contexts slid: "....", "...a", "..ab", ".abc" (then all words ended).
  REQUIRE(seen.size() == 4);
  CHECK(seen[0] == std::vector<float>{0, 0, 0, 0});
  CHECK(seen[1] == std::vector<float>{0, 0, 0, 1});
  CHECK(seen[3] == std::vector<float>{0, 1, 2, 3});
}

TEST_CASE("word samples: no empty word, and the length is capped", "[runner][words]") {
  // A model that always says '.': the first draw is among the letters only.
  auto stop = deterministic(2, [](const float*) { return int64_t{0}; });
  WordSampling o;
  o.block_size = 2;
  o.count = 5;
  auto words = sample_words(stop, o);
  REQUIRE(words);
  for (const std::string& w : *words) CHECK(w.size() == 1);
  // A model that never says '.': words stop at max_length.
  auto go = deterministic(2, [](const float*) { return int64_t{26}; });
  o.max_length = 7;
  words = sample_words(go, o);
  REQUIRE(words);
  for (const std::string& w : *words) CHECK(w == "zzzzzzz");
}

TEST_CASE("word samples: draws follow softmax(logits) and repeat for a seed", "[runner][words]") {
  // First letter: 'a' with logit log 3, 'b' with log 1, the rest -inf-ish: p(a) = 0.75.
  auto model = [](const HostBatch& b) -> Result<std::vector<float>> {
    std::vector<float> z(static_cast<size_t>(b.size * kVocab), -1e9f);
    for (int64_t i = 0; i < b.size; ++i) {
      float* row = z.data() + i * kVocab;
      if (b.x[static_cast<size_t>(i)] == 0.0f) {  // the first step: context "."
        row[1] = static_cast<float>(std::log(3.0));
        row[2] = 0.0f;
      } else {
        row[0] = 0.0f;  // then end
      }
    }
    return z;
  };
  WordSampling o;
  o.block_size = 1;
  o.count = 4000;
  o.seed = 3;
  auto words = sample_words(model, o);
  REQUIRE(words);
  std::map<std::string, int> counts;
  for (const std::string& w : *words) ++counts[w];
  CHECK(counts.size() == 2);
  // Binomial(4000, 0.75): sd 27.4, so +-5 sd is +-137.
  CHECK(std::abs(counts["a"] - 3000) < 137);
  CHECK(sample_words(model, o)->at(17) == words->at(17));
  o.seed = 4;
  CHECK(*sample_words(model, o) != *words);
}

TEST_CASE("word samples: a model of the wrong width and bad options are named", "[runner][words]") {
  auto ten = [](const HostBatch& b) -> Result<std::vector<float>> {
    return std::vector<float>(static_cast<size_t>(b.size * 10), 0.0f);
  };
  WordSampling o;
  auto r = sample_words(ten, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().message ==
        "sampling words: the model gives 100 logits for 10 contexts; a words model ends in 27 "
        "classes ('.' and a-z)");
  o.count = 0;
  r = sample_words(ten, o);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "sampling words: count must be >= 1");
}

}  // namespace mls::runner
