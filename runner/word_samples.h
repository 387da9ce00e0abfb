// New words from a trained character-level model (a project on a "words" dataset,
// datasets/words_dataset.h): every word starts from block_size start tokens '.', the next
// character is drawn from softmax(logits) with a seeded generator, and the word ends at '.'
// or at max_length letters. One implementation for every front end: `mlstudio --run` prints
// its words, Lua binds sample_words.
//
//   runner::WordSampling o;  o.block_size = 16;  o.count = 10;  o.seed = 7;
//   Result<std::vector<std::string>> w = runner::sample_words(trainer, o);   // a trained model
//   // or, after `--run`, from the project and the run's last checkpoint:
//   Result<std::vector<std::string>> v = runner::sample_run_words(options,
//   outcome.last_checkpoint);
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/result.h"
#include "engine/train/data_source.h"
#include "engine/train/trainer.h"
#include "runner/project.h"

namespace mls::runner {

struct WordSampling {
  int64_t block_size = 16;  // the model's context: its Input's sample shape [block_size]
  int64_t count = 10;
  int64_t max_length = 32;  // letters; a word that reaches it ends there
  uint64_t seed = 0;
};

// The model as sampling sees it: contexts [size, block_size] of token ids (as floats, the way
// the dataset feeds them) -> logits [size, 27], row-major.
using NextTokenLogits = std::function<Result<std::vector<float>>(const HostBatch& contexts)>;

// The `count` words are drawn side by side, one batch of `count` contexts per character. The
// first character is drawn among the letters only (every word of the data has one). Errors:
// bad options, or the model's (a logits row that is not 27 wide names the width).
Result<std::vector<std::string>> sample_words(const NextTokenLogits& model, const WordSampling& o);
// The trainer's model (trained, or restored from a checkpoint) through Trainer::predict.
Result<std::vector<std::string>> sample_words(Trainer& trainer, const WordSampling& o);

// For a finished run: opens the project as `project` says (the options the run was started
// with), restores `checkpoint` and samples with the project's block size and, unless
// `o.seed` is given, its training seed. Not a words project: an empty list, nothing opened
// beyond the document.
Result<std::vector<std::string>> sample_run_words(const ProjectOptions& project,
                                                  const std::string& checkpoint,
                                                  std::optional<uint64_t> seed = std::nullopt,
                                                  int64_t count = 10);

}  // namespace mls::runner
