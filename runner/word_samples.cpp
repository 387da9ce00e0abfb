#include "runner/word_samples.h"

#include <algorithm>
#include <cmath>

#include "datasets/words_dataset.h"
#include "engine/train/checkpoint.h"
#include "engine/train/rng.h"
#include "nodes/setting_path.h"

namespace mls::runner {

namespace {

// A draw from softmax(z[from..n)) (double precision, max subtracted): the token index.
int64_t draw(const float* z, int64_t from, int64_t n, Rng& rng) {
  double mx = -INFINITY;
  for (int64_t k = from; k < n; ++k) mx = std::max(mx, static_cast<double>(z[k]));
  std::vector<double> p(static_cast<size_t>(n), 0.0);
  double sum = 0;
  for (int64_t k = from; k < n; ++k)
    sum += p[static_cast<size_t>(k)] = std::exp(static_cast<double>(z[k]) - mx);
  double u = rng.uniform() * sum;
  for (int64_t k = from; k < n; ++k) {
    u -= p[static_cast<size_t>(k)];
    if (u < 0) return k;
  }
  return n - 1;  // u landed on the rounding at the top end
}

}  // namespace

Result<std::vector<std::string>> sample_words(const NextTokenLogits& model, const WordSampling& o) {
  if (o.block_size < 1) return make_error("sampling words: block_size must be >= 1");
  if (o.count < 1) return make_error("sampling words: count must be >= 1");
  if (o.max_length < 1) return make_error("sampling words: max_length must be >= 1");
  const int64_t vocab = data::kWordsVocabulary, t = o.block_size;
  HostBatch batch;
  batch.size = o.count;
  batch.x.assign(static_cast<size_t>(o.count * t), 0.0f);  // every context: T start tokens
  std::vector<std::string> words(static_cast<size_t>(o.count));
  std::vector<char> done(static_cast<size_t>(o.count), 0);
  Rng rng(mix_seed(o.seed, 0x5a3b1e));
  for (int64_t step = 0; step < o.max_length; ++step) {
    auto logits = model(batch);
    if (!logits) return logits.error();
    if (static_cast<int64_t>(logits->size()) != o.count * vocab)
      return make_error("sampling words: the model gives " + std::to_string(logits->size()) +
                        " logits for " + std::to_string(o.count) + " contexts; a words model " +
                        "ends in " + std::to_string(vocab) + " classes ('.' and a-z)");
    bool any = false;
    for (int64_t i = 0; i < o.count; ++i) {
      const auto r = static_cast<size_t>(i);
      if (done[r]) continue;
      // The first character is a letter: no word of the data is empty.
      const int64_t token = draw(logits->data() + i * vocab, step == 0 ? 1 : 0, vocab, rng);
      if (token == 0) {
        done[r] = 1;
        continue;
      }
      words[r].push_back(data::token_char(token));
      float* ctx = batch.x.data() + i * t;
      std::rotate(ctx, ctx + 1, ctx + t);
      ctx[t - 1] = static_cast<float>(token);
      any = true;
    }
    if (!any) break;
  }
  return words;
}

Result<std::vector<std::string>> sample_words(Trainer& trainer, const WordSampling& o) {
  return sample_words([&trainer](const HostBatch& b) { return trainer.predict(b); }, o);
}

Result<std::vector<std::string>> sample_run_words(const ProjectOptions& project,
                                                  const std::string& checkpoint,
                                                  std::optional<uint64_t> seed, int64_t count) {
  // The document alone says whether this is a words project (--set may name the source).
  nodes::Document doc;
  if (project.document) {
    doc = *project.document;
  } else {
    auto d = nodes::load_document(project.path);
    if (!d) return d.error();
    doc = std::move(*d);
  }
  for (const std::string& set : project.sets)
    if (auto r = nodes::apply_setting(doc, set); !r) return r.error();
  if (doc.dataset.source != "words") return std::vector<std::string>{};

  auto p = open_project(project);
  if (!p) return p.error();
  auto backend = open_backend(*p);
  if (!backend) return backend.error();
  Trainer trainer(**backend, p->builder(), p->train_config());
  auto ck = read_checkpoint(checkpoint);
  if (!ck) return ck.error();
  if (auto r = trainer.restore(*ck); !r) return make_error(checkpoint + ": " + r.error().message);
  WordSampling o;
  o.block_size = p->data.sample_shape.empty() ? 0 : p->data.sample_shape[0];
  o.count = count;
  o.seed = seed.value_or(p->doc.training.seed);
  return sample_words(trainer, o);
}

}  // namespace mls::runner
