// `mlstudio eval P.mls --run ID`: reload a trained run from its checkpoint and score it on
// the project's test (or validation) split: metrics, and for classifiers the confusion
// matrix with per-class precision, recall and F1.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"
#include "runner/checkpoints.h"

namespace mls::app {

int eval_command(const EvalOptions& o) {
  if (o.split != "test" && o.split != "validation")
    return fail("--split must be test or validation, got '" + o.split + "'");
  auto project = open_project(o.project);
  if (!project) return fail(project.error().message);
  Project& p = *project;
  BatchSource* data = o.split == "test" ? p.test.get() : p.validation.get();
  if (!data)
    return fail(
        p.path + ": the dataset has no " + o.split + " split" +
        (o.split == "validation" ? " (set dataset.validation to a fraction such as 0.1)" : ""));
  auto backend = runner::open_backend(p);
  if (!backend) return fail(backend.error().message);
  Trainer trainer(**backend, p.builder(), p.train_config());
  auto used = runner::restore_run(trainer, o.db, o.run_id, o.checkpoint);
  if (!used) return fail(used.error().message);
  auto ev = trainer.evaluate(*data);
  if (!ev) return fail(ev.error().message);
  if (o.json) {
    nlohmann::json j{
        {"run_id", o.run_id}, {"checkpoint", *used},    {"epoch", trainer.epochs_done()},
        {"split", o.split},   {"samples", ev->samples}, {"loss", ev->loss}};
    if (ev->regression) {
      j["mae"] = ev->values.mae;
      j["rmse"] = ev->values.rmse;
      j["r2"] = ev->values.r2;
    } else {
      j["accuracy"] = ev->accuracy;
      j["macro_f1"] = ev->macro_f1;
      j["top5_accuracy"] = ev->top5;
      nlohmann::json rows = nlohmann::json::array();
      for (int64_t t = 0; t < ev->confusion.classes(); ++t) {
        nlohmann::json row = nlohmann::json::array();
        for (int64_t q = 0; q < ev->confusion.classes(); ++q) row.push_back(ev->confusion.at(t, q));
        rows.push_back(row);
      }
      j["confusion"] = rows;
      j["classes"] = p.class_names;
    }
    std::printf("%s\n", terminal_json(j).c_str());
    return 0;
  }
  std::printf("run %lld, %s (epoch %lld), %s split: %lld samples\n",
              static_cast<long long>(o.run_id), used->c_str(),
              static_cast<long long>(trainer.epochs_done()), o.split.c_str(),
              static_cast<long long>(ev->samples));
  if (ev->regression) {
    std::printf("loss %.4f  MAE %.4f  RMSE %.4f  R² %.4f\n", ev->loss, ev->values.mae,
                ev->values.rmse, ev->values.r2);
    return 0;
  }
  std::printf("loss %.4f  accuracy %.4f  macro F1 %.4f  top-5 %.4f\n\n", ev->loss, ev->accuracy,
              ev->macro_f1, ev->top5);
  std::printf("%s", terminal_safe(ev->confusion.to_text(p.class_names)).c_str());
  return 0;
}

}  // namespace mls::app
