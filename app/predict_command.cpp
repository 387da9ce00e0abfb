// `mlstudio predict P.mls --run ID --input FILE`: a trained run's answer for new samples.
// The file (an image, CSV rows or an NPY array) is prepared exactly as the training data
// was (the dataset's InputEncoder: same size, normalisation, categories).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"
#include "runner/checkpoints.h"

namespace mls::app {

namespace {

std::vector<double> softmax_row(const float* z, int64_t n) {
  std::vector<double> p(static_cast<size_t>(n));
  double mx = *std::max_element(z, z + n), sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += p[static_cast<size_t>(i)] = std::exp(static_cast<double>(z[i]) - mx);
  for (double& v : p) v /= sum;
  return p;
}

// The model answers any numbers with a class; a NaN or an infinity in the input is no sample,
// so it is refused, named where it is, before anything runs.
Result<void> check_inputs(const HostBatch& b, const std::string& input) {
  if (b.size < 1) return make_error(input + ": no rows to predict for");
  const size_t per = b.x.size() / static_cast<size_t>(b.size);
  for (size_t i = 0; i < b.x.size(); ++i)
    if (!std::isfinite(b.x[i]))
      return make_error(input + ": sample " + std::to_string(i / per) + ", value " +
                        std::to_string(i % per) + " is " + (std::isnan(b.x[i]) ? "nan" : "inf") +
                        "; predict needs finite inputs");
  return {};
}

}  // namespace

int predict_command(const PredictOptions& o) {
  if (o.top < 1) return fail("--top must be >= 1");
  auto project = open_project(o.project);
  if (!project) return fail(project.error().message);
  Project& p = *project;
  if (!p.encoder) return fail(p.path + ": this dataset source cannot prepare prediction inputs");
  auto batch = p.encoder->encode(o.input);
  if (!batch) return fail(batch.error().message);
  if (auto c = check_inputs(*batch, o.input); !c) return fail(c.error().message);
  auto backend = runner::open_backend(p);
  if (!backend) return fail(backend.error().message);
  Trainer trainer(**backend, p.builder(), p.train_config());
  auto used = runner::restore_run(trainer, o.db, o.run_id, o.checkpoint);
  if (!used) return fail(used.error().message);
  Shape shape;
  auto out = trainer.predict(*batch, &shape);
  if (!out) return fail(o.input + ": " + out.error().message);
  const int64_t rows = batch->size, cols = rows > 0 ? static_cast<int64_t>(out->size()) / rows : 0;
  nlohmann::json all = nlohmann::json::array();
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = out->data() + r * cols;
    nlohmann::json j{{"sample", r}};
    if (trainer.regression()) {
      j["prediction"] = std::vector<float>(z, z + cols);
      if (!o.json) {
        std::printf("sample %lld:", static_cast<long long>(r));
        for (int64_t c = 0; c < cols; ++c) std::printf(" %.6g", static_cast<double>(z[c]));
        std::printf("\n");
      }
    } else {
      std::vector<double> prob = softmax_row(z, cols);
      std::vector<int64_t> order(static_cast<size_t>(cols));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)];
      });
      auto name = [&](int64_t k) {
        return k < static_cast<int64_t>(p.class_names.size())
                   ? p.class_names[static_cast<size_t>(k)]
                   : std::to_string(k);
      };
      // Class names come from the data (a CSV's values, folder names).
      auto shown = [&](int64_t k) { return terminal_safe(name(k)); };
      j["class"] = order[0];
      j["label"] = name(order[0]);
      nlohmann::json top = nlohmann::json::array();
      for (int64_t i = 0; i < std::min(o.top, cols); ++i) {
        int64_t k = order[static_cast<size_t>(i)];
        top.push_back(
            {{"class", k}, {"label", name(k)}, {"probability", prob[static_cast<size_t>(k)]}});
      }
      j["top"] = top;
      if (!o.json) {
        std::printf("sample %lld: %s (class %lld, p=%.3f)", static_cast<long long>(r),
                    shown(order[0]).c_str(), static_cast<long long>(order[0]),
                    prob[static_cast<size_t>(order[0])]);
        for (int64_t i = 1; i < std::min(o.top, cols); ++i) {
          int64_t k = order[static_cast<size_t>(i)];
          std::printf("; %s %.3f", shown(k).c_str(), prob[static_cast<size_t>(k)]);
        }
        std::printf("\n");
      }
    }
    all.push_back(j);
  }
  if (o.json)
    std::printf("%s\n", terminal_json(nlohmann::json{{"run_id", o.run_id},
                                                     {"checkpoint", *used},
                                                     {"predictions", all}})
                            .c_str());
  return 0;
}

}  // namespace mls::app
