// The words source (datasets/words_dataset.h): which lines are kept, the samples of a word
// worked by hand, the split by word, the "words" block of a project's dataset section, and
// the message for a missing word list.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "datasets/dataset_spec.h"
#include "datasets/words_dataset.h"
#include "tests/common/temp_dir.h"

using Catch::Matchers::Contains;
using namespace mls;
using namespace mls::data;

namespace {

std::string write(const mls::test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// `count` distinct made-up words of 1..9 letters.
std::string many_words(int count) {
  std::string text;
  for (int i = 0; i < count; ++i) {
    std::string w;
    for (int k = i; w.empty() || k > 0; k /= 26) w.push_back(static_cast<char>('a' + k % 26));
    w += std::string(static_cast<size_t>(i % 7), 'q');
    text += w + "\n";
  }
  return text;
}

// The words a split's samples spell: a sample with an all-start context begins a word, whose
// letters are the labels up to the end token.
std::multiset<std::string> words_of(const Dataset& d, const std::vector<int64_t>& samples) {
  std::multiset<std::string> out;
  const int64_t t = d.sample_shape[0];
  std::string w;
  for (int64_t s : samples) {
    const float* ctx = d.floats.data() + s * t;
    if (std::all_of(ctx, ctx + t, [](float v) { return v == 0.0f; })) REQUIRE(w.empty());
    const int64_t label = d.labels[static_cast<size_t>(s)];
    if (label == 0) {
      out.insert(w);
      w.clear();
    } else {
      w.push_back(token_char(label));
    }
  }
  REQUIRE(w.empty());
  return out;
}

}  // namespace

TEST_CASE("words: the vocabulary is '.' then a-z", "[datasets][words]") {
  CHECK(word_token('.') == 0);
  CHECK(word_token('a') == 1);
  CHECK(word_token('z') == 26);
  CHECK(word_token('A') == -1);
  CHECK(word_token('\'') == -1);
  for (int64_t t = 0; t < kWordsVocabulary; ++t) CHECK(word_token(token_char(t)) == t);
  const auto names = word_token_names();
  REQUIRE(names.size() == 27);
  CHECK(names[0] == ".");
  CHECK(names[26] == "z");
}

TEST_CASE("words: only lines of a-z are kept, each once", "[datasets][words]") {
  mls::test::TempDir dir("mls_words");
  // Capitals, an apostrophe, an accent (UTF-8), a digit, a space; a CRLF line, a blank line,
  // a repeat.
  const std::string path =
      write(dir, "words.txt", "emma\nOlivia\nava\n\nit's\ncaf\xc3\xa9\nava\nbo\r\nr2d2\na b\nx\n");
  auto list = read_word_list(path);
  REQUIRE(list);
  CHECK(list->words == std::vector<std::string>{"emma", "ava", "bo", "x"});
  CHECK(list->lines == 10);
  CHECK(list->dropped == 5);  // Olivia, it's, café, r2d2, "a b"
  CHECK(list->duplicates == 1);
}

TEST_CASE("words: each word gives len + 1 samples, contexts padded with '.'", "[datasets][words]") {
  const Dataset d = words_to_dataset({"emma", "bo"}, 3);
  CHECK(d.count == 5 + 3);
  CHECK(d.sample_shape == Shape{3});
  CHECK(d.num_classes == 27);
  CHECK(d.class_names.size() == 27);
  // emma: ... -> e, ..e -> m, .em -> m, emm -> a, mma -> '.'
  const std::vector<std::vector<float>> ctx{{0, 0, 0},   {0, 0, 5}, {0, 5, 13}, {5, 13, 13},
                                            {13, 13, 1}, {0, 0, 0}, {0, 0, 2},  {0, 2, 15}};
  const std::vector<int64_t> labels{5, 13, 13, 1, 0, 2, 15, 0};
  CHECK(d.labels == labels);
  for (size_t s = 0; s < ctx.size(); ++s) {
    INFO(s);
    CHECK(std::vector<float>(d.floats.begin() + static_cast<long>(s * 3),
                             d.floats.begin() + static_cast<long>(s * 3 + 3)) == ctx[s]);
  }
  // A context longer than the word keeps its start tokens; a shorter one slides.
  const Dataset one = words_to_dataset({"abcd"}, 1);
  CHECK(one.floats == std::vector<float>{0, 1, 2, 3, 4});
  CHECK(one.labels == std::vector<int64_t>{1, 2, 3, 4, 0});
}

TEST_CASE("words: the splits are drawn by word and are disjoint", "[datasets][words]") {
  mls::test::TempDir dir("mls_words");
  const std::string path = write(dir, "words.txt", many_words(300));
  SplitPlan plan;
  plan.test_fraction = 0.1;
  plan.validation = 0.1;
  plan.seed = 3;
  auto w = load_words(path, 4, plan);
  REQUIRE(w);
  const int64_t words = static_cast<int64_t>(w->list.words.size());
  REQUIRE(words == 300);
  CHECK(w->word_splits.test.size() == 30);
  CHECK(w->word_splits.validation.size() == 27);  // 10% of the 270 left
  CHECK(w->word_splits.train.size() == 243);
  // Every sample in exactly one split.
  std::vector<int> seen(static_cast<size_t>(w->data.count), 0);
  for (const auto* split : {&w->splits.train, &w->splits.validation, &w->splits.test})
    for (int64_t s : *split) ++seen[static_cast<size_t>(s)];
  CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
  // The samples spell out whole words, and no word is in two splits.
  const auto train = words_of(w->data, w->splits.train);
  const auto val = words_of(w->data, w->splits.validation);
  const auto test = words_of(w->data, w->splits.test);
  CHECK(train.size() == 243);
  CHECK(val.size() == 27);
  CHECK(test.size() == 30);
  for (const std::string& v : val) CHECK(train.count(v) == 0);
  for (const std::string& t : test) CHECK((train.count(t) == 0 && val.count(t) == 0));
  std::multiset<std::string> all(w->list.words.begin(), w->list.words.end());
  std::multiset<std::string> back = train;
  back.insert(val.begin(), val.end());
  back.insert(test.begin(), test.end());
  CHECK(back == all);
  // Another seed draws other words.
  plan.seed = 4;
  auto w4 = load_words(path, 4, plan);
  REQUIRE(w4);
  CHECK(w4->word_splits.test != w->word_splits.test);
}

TEST_CASE("words: a missing or empty word list is named", "[datasets][words]") {
  mls::test::TempDir dir("mls_words");
  auto missing = read_word_list(dir.file("nope.txt"));
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error().message, Contains(dir.file("nope.txt") + ": no such file"));
  CHECK_THAT(missing.error().message, Contains("apt-get install wamerican"));
  auto folder = read_word_list(dir.str());
  REQUIRE_FALSE(folder);
  CHECK_THAT(folder.error().message, Contains("is a folder"));
  auto none = read_word_list(write(dir, "caps.txt", "Alice\nBOB\n"));
  REQUIRE_FALSE(none);
  CHECK_THAT(none.error().message, Contains("caps.txt: no words of lowercase letters a-z (2 "));
  auto block = load_words(write(dir, "ok.txt", "ok\n"), 0, {});
  REQUIRE_FALSE(block);
  CHECK_THAT(block.error().message, Contains("block_size 0 must be in [1, 1024]"));
}

TEST_CASE("words: the dataset section opens a words source", "[datasets][words]") {
  mls::test::TempDir dir("mls_words");
  const std::string path = write(dir, "list.txt", many_words(100));
  auto spec = parse_dataset_spec(
      nlohmann::json::parse(R"({"source": "words", "path": "list.txt", "validation": 0.2,
                                "test_fraction": 0.1, "words": {"block_size": 5}})"),
      "P.mls: /dataset");
  REQUIRE(spec);
  CHECK(spec->words.block_size == 5);
  // It round-trips.
  auto again = parse_dataset_spec(nlohmann::json::parse(dataset_spec_to_json(*spec).dump()), "x");
  REQUIRE(again);
  CHECK(*again == *spec);

  auto s = open_dataset(*spec, dir.str(), 0, false);
  REQUIRE(s);
  CHECK(s->sample_shape == Shape{5});
  CHECK(s->num_classes == 27);
  CHECK(s->class_names[1] == "a");
  REQUIRE(s->validation);
  REQUIRE(s->test);
  const Dataset whole = words_to_dataset(read_word_list(path)->words, 5);
  CHECK(s->train->num_samples() + s->validation->num_samples() + s->test->num_samples() ==
        whole.count);
  // The token ids come through unnormalised.
  HostBatch b;
  s->test->start_epoch(0);
  REQUIRE(s->test->next(4, b));
  CHECK(b.x[0] == 0.0f);  // a word's first context is all start tokens
  for (float v : b.x) CHECK((v == std::floor(v) && v >= 0 && v <= 26));

  // No path: the packaged word list.
  auto def = parse_dataset_spec(nlohmann::json::parse(R"({"source": "words"})"), "P.mls: /dataset");
  REQUIRE(def);
  CHECK(def->path == kDefaultWordsPath);
  CHECK(def->words.block_size == 16);
}

TEST_CASE("words: bad dataset sections name the key", "[datasets][words]") {
  auto error = [](const char* text) {
    auto s = parse_dataset_spec(nlohmann::json::parse(text), "P.mls: /dataset");
    REQUIRE_FALSE(s);
    return s.error().message;
  };
  CHECK(error(R"({"source": "words", "words": {"block_size": 0}})") ==
        "P.mls: /dataset/words/block_size: must be an integer in [1, 1024]");
  CHECK(error(R"({"source": "words", "words": {"block_size": 5000}})") ==
        "P.mls: /dataset/words/block_size: must be an integer in [1, 1024]");
  CHECK_THAT(error(R"({"source": "words", "words": {"context": 8}})"),
             Contains("P.mls: /dataset/words/context: unknown key 'context'"));
  CHECK_THAT(error(R"({"source": "csv", "path": "a.csv", "words": {"block_size": 8}})"),
             Contains("P.mls: /dataset/words: only used with source 'words'"));
  CHECK_THAT(error(R"({"source": "words", "transforms": [{"type": "normalize"}]})"),
             Contains("P.mls: /dataset/transforms/0: normalize is not used with source 'words'"));
}

TEST_CASE("words: the packaged word list, when installed", "[datasets][words]") {
  if (!std::filesystem::exists(kDefaultWordsPath)) {
    WARN(kDefaultWordsPath << " is missing (apt-get install wamerican): skipped");
    return;
  }
  auto list = read_word_list(kDefaultWordsPath);
  REQUIRE(list);
  // wamerican 2020.12.07 keeps 63875 of its 104334 lines; other versions differ a little.
  CHECK(list->words.size() > 50000);
  CHECK(list->dropped > 20000);  // names, possessives
  for (const std::string& w : list->words)
    REQUIRE(w.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos);
}
