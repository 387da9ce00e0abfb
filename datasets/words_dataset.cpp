#include "datasets/words_dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_set>

#include "datasets/shuffle.h"
#include "engine/core/check.h"

namespace mls::data {

namespace {

// The stream of the split seed that orders the words (datasets/splits.cpp draws the hold-outs
// from two others).
constexpr int64_t kWordOrderStream = 0x30d5;

bool lowercase_word(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

// The sample indices of the words in `word_indices` (each word's run of len + 1 samples).
std::vector<int64_t> samples_of(const std::vector<int64_t>& word_indices,
                                const std::vector<int64_t>& first_sample,
                                const std::vector<std::string>& words) {
  std::vector<int64_t> out;
  for (int64_t w : word_indices) {
    const auto k = static_cast<size_t>(w);
    const auto n = static_cast<int64_t>(words[k].size()) + 1;
    for (int64_t i = 0; i < n; ++i) out.push_back(first_sample[k] + i);
  }
  return out;
}

}  // namespace

int64_t word_token(char c) {
  if (c == '.') return 0;
  if (c >= 'a' && c <= 'z') return c - 'a' + 1;
  return -1;
}

char token_char(int64_t token) {
  if (token == 0) return '.';
  if (token >= 1 && token <= 26) return static_cast<char>('a' + token - 1);
  return '?';
}

std::vector<std::string> word_token_names() {
  std::vector<std::string> names;
  for (int64_t t = 0; t < kWordsVocabulary; ++t) names.emplace_back(1, token_char(t));
  return names;
}

Result<WordList> read_word_list(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec))
    return make_error(path + ": no such file (the default word list, " +
                      std::string(kDefaultWordsPath) +
                      ", comes with Debian's wamerican package: apt-get install wamerican)");
  if (fs::is_directory(path, ec))
    return make_error(path + ": is a folder; a words dataset reads one word per line from a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot be read");
  WordList list;
  std::unordered_set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    ++list.lines;
    if (!lowercase_word(line)) {
      ++list.dropped;
      continue;
    }
    if (!seen.insert(line).second) {
      ++list.duplicates;
      continue;
    }
    list.words.push_back(line);
  }
  if (in.bad()) return make_error(path + ": read error");
  if (list.words.empty())
    return make_error(path + ": no words of lowercase letters a-z (" + std::to_string(list.lines) +
                      " non-empty lines read); a words dataset keeps only lines matching ^[a-z]+$");
  return list;
}

Dataset words_to_dataset(const std::vector<std::string>& words, int64_t block_size) {
  MLS_CHECK(block_size >= 1, "words_to_dataset needs block_size >= 1");
  Dataset d;
  d.sample_shape = {block_size};
  d.num_classes = kWordsVocabulary;
  d.class_names = word_token_names();
  int64_t count = 0;
  for (const std::string& w : words) count += static_cast<int64_t>(w.size()) + 1;
  d.count = count;
  d.floats.reserve(static_cast<size_t>(count * block_size));
  d.labels.reserve(static_cast<size_t>(count));
  std::vector<float> context(static_cast<size_t>(block_size));
  for (const std::string& w : words) {
    std::fill(context.begin(), context.end(), 0.0f);  // block_size start tokens
    for (size_t i = 0; i <= w.size(); ++i) {
      const int64_t label = i < w.size() ? word_token(w[i]) : 0;
      MLS_CHECK(label >= 0, "words_to_dataset takes words of a-z only");
      d.floats.insert(d.floats.end(), context.begin(), context.end());
      d.labels.push_back(label);
      // Slide the window: drop the oldest token, append this character.
      std::rotate(context.begin(), context.begin() + 1, context.end());
      context.back() = static_cast<float>(label);
    }
  }
  check_dataset(d);
  return d;
}

Result<WordsData> load_words(const std::string& path, int64_t block_size, const SplitPlan& plan) {
  if (block_size < 1 || block_size > kMaxWordsBlockSize)
    return make_error(path + ": block_size " + std::to_string(block_size) + " must be in [1, " +
                      std::to_string(kMaxWordsBlockSize) + "]");
  auto list = read_word_list(path);
  if (!list) return list.error();
  WordsData out;
  out.list = std::move(*list);
  // The word list is sorted, so its first N words (a `limit`) would all start with 'a': the
  // words are put in an order drawn from the split seed first.
  std::vector<int64_t> order;
  shuffled_order(static_cast<int64_t>(out.list.words.size()), plan.seed, kWordOrderStream, order);
  std::vector<std::string> shuffled;
  shuffled.reserve(order.size());
  for (int64_t k : order) shuffled.push_back(std::move(out.list.words[static_cast<size_t>(k)]));
  out.list.words = std::move(shuffled);
  const std::vector<std::string>& words = out.list.words;
  out.data = words_to_dataset(words, block_size);
  std::vector<int64_t> first(words.size());
  int64_t at = 0;
  for (size_t k = 0; k < words.size(); ++k) {
    first[k] = at;
    at += static_cast<int64_t>(words[k].size()) + 1;
  }
  out.word_splits = split_indices(static_cast<int64_t>(words.size()), plan);
  out.splits.train = samples_of(out.word_splits.train, first, words);
  out.splits.validation = samples_of(out.word_splits.validation, first, words);
  out.splits.test = samples_of(out.word_splits.test, first, words);
  return out;
}

}  // namespace mls::data
