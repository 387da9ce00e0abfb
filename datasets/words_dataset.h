// A word list as a character-level language-modelling dataset, in the spirit of makemore:
// each word of lowercase letters gives one sample per next character, the context being the
// `block_size` characters before it (padded on the left with the start token '.').
//
//   Result<WordList> list = read_word_list("/usr/share/dict/words");  // ^[a-z]+$ lines only
//   Result<WordsData> w = load_words("/usr/share/dict/words", 16, plan);
//   w->data.sample_shape == Shape{16};   // token ids as floats (the Embedding node casts)
//   w->data.num_classes == 27;           // '.' = 0 (start and end), 'a'..'z' = 1..26
//   // "emma" -> contexts "................" -> 'e', ".............e" -> 'm', ... "emma" -> '.'
//
// The splits are drawn by word (SplitPlan over the word list), so no word has samples in two
// splits; `limit` and `test_limit` count words too. The words are first put in an order drawn
// from the split seed (shuffled_order(n, seed, 0x30d5), datasets/shuffle.h): a sorted list's
// first N words would all start with 'a'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/splits.h"
#include "engine/core/result.h"

namespace mls::data {

constexpr const char* kDefaultWordsPath = "/usr/share/dict/words";
constexpr int64_t kWordsVocabulary = 27;  // '.' and 'a'..'z'
constexpr int64_t kMaxWordsBlockSize = 1024;

// '.' -> 0, 'a'..'z' -> 1..26, anything else -> -1.
int64_t word_token(char c);
// 0 -> '.', 1..26 -> 'a'..'z', anything else -> '?'.
char token_char(int64_t token);
// ".", "a", ..., "z": the class names of the dataset.
std::vector<std::string> word_token_names();

struct WordList {
  std::vector<std::string> words;  // file order, each once
  int64_t lines = 0;               // non-empty lines read
  int64_t dropped = 0;             // lines that are not ^[a-z]+$ (capitals, apostrophes, accents)
  int64_t duplicates = 0;          // repeats of a word already kept
};

// Reads one word per line ('\n' or "\r\n"), keeping the lines of lowercase letters a-z.
// A missing file names the path and the Debian package that installs the default list.
Result<WordList> read_word_list(const std::string& path);

struct WordsData {
  Dataset data;        // every word's samples, word after word (in list.words' order)
  Splits splits;       // sample indices, drawn by word
  Splits word_splits;  // the word indices behind them (into list.words)
  WordList list;       // its words in the drawn order
};

// The samples of `words` for a context of `block_size` tokens: word w gives len(w) + 1
// samples, the i-th with the last block_size ids of ('.' x block_size + w[0..i)) and the
// label w[i] ('.' for i = len(w)).
Dataset words_to_dataset(const std::vector<std::string>& words, int64_t block_size);

// read_word_list, words_to_dataset and the split by word. Errors name the file.
Result<WordsData> load_words(const std::string& path, int64_t block_size, const SplitPlan& plan);

}  // namespace mls::data
