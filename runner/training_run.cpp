#include "runner/training_run.h"

#include <filesystem>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "nodes/json_text.h"
#include "nodes/setting_path.h"
#include "runner/backends.h"
#include "runner/model_export.h"
#include "runner/ranks.h"
#include "store/file_hash.h"

namespace mls::runner {

namespace {

// A resumed run keeps the data it was started on: the recorded --limit / --test-limit
// apply unless given again, and a different value is refused.
Result<ProjectOptions> resume_options(const ProjectOptions& asked, const Resumed& was) {
  ProjectOptions o = asked;
  for (auto [key, flag, value] : {std::tuple{"limit", "--limit", &o.limit},
                                  std::tuple{"test_limit", "--test-limit", &o.test_limit}}) {
    const std::string* r = was.param(key);
    if (!r) continue;  // a run recorded before these were: the sample counts are checked later
    const int64_t recorded = std::stoll(*r);
    if (*value && **value != recorded)
      return make_error("run " + std::to_string(was.run_id) + " was started with " + flag + " " +
                        std::to_string(recorded) + "; resuming it with " + flag + " " +
                        std::to_string(**value) + " would train on different data (leave " + flag +
                        " out to resume as recorded, or start a new run)");
    *value = recorded;
  }
  // The --set settings it was started with apply again (given anew, they must agree: the
  // session compares every recorded setting).
  if (const std::string* sets = was.param("sets"); sets && o.sets.empty()) {
    auto list = nlohmann::json::parse(*sets, nullptr, false);
    if (list.is_array())
      for (const auto& s : list)
        if (s.is_string()) o.sets.push_back(s.get<std::string>());
  }
  return o;
}

// The editor's overlays after a run: time per node from the profiled plan, and each node's
// output on one batch of held-out data (test, else validation, else training).
void inspect_run(Trainer& trainer, const Project& p, RunOutcome& out) {
  if (out.mode == "static") {
    auto plan = trainer.training_plan(out.config.batch_size);
    if (plan) out.node_times = time_by_label(**plan);
  } else {
    out.inspect_note = "per-node times need the static mode (the run was " + out.mode + ")";
  }
  BatchSource* src = p.test ? p.test.get() : p.validation ? p.validation.get() : p.train.get();
  HostBatch batch;
  src->start_epoch(0);
  if (!src->next(std::min<int64_t>(256, src->num_samples()), batch) || batch.size == 0) return;
  auto model = p.builder()(batch.size, false);
  if (!model) {
    out.inspect_note = model.error().message;
    return;
  }
  auto stats = output_stats(trainer.backend(), std::move(*model), trainer.params(), batch);
  if (stats)
    out.node_outputs = std::move(*stats);
  else
    out.inspect_note = stats.error().message;
}

// The project as the session's model. `p` outlives the session.
Result<RunModel> project_model(Project& p, const RunRequest& o) {
  auto opened = open_backend(p);  // registered (open_project checked); a driver may still fail
  if (!opened) return opened.error();
  RunModel m;
  m.name = p.doc.name;
  m.source = p.path;
  m.source_path = p.file.empty() ? "" : std::filesystem::absolute(p.file).string();
  const std::string text = nodes::serialize_document(p.doc);
  m.snapshot = {"mls", text};
  // The file's bytes for a file (a resume warns when it was edited since); the document's
  // text for one held in memory.
  if (!o.project.document) {
    auto hash = store::file_hash_hex(p.file);
    if (!hash) return hash.error();
    m.source_hash = *hash;
  } else {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(store::fnv1a64(text)));
    m.source_hash = hex;
  }
  m.backend = *opened;
  m.builder = p.builder();
  m.train = p.train.get();
  m.validation = p.validation.get();
  m.test = p.test.get();
  m.config = p.train_config();
  m.mode = std::string(nodes::to_string(p.doc.training.mode));
  m.epochs_asked = bool(o.project.epochs);
  m.settings = {{"dataset", p.doc.dataset.source + ":" + p.doc.dataset.path},
                {"train_samples", std::to_string(p.train->num_samples())},
                {"validation_samples", std::to_string(p.validation ? p.validation->num_samples() : 0)},
                {"test_samples", std::to_string(p.test ? p.test->num_samples() : 0)}};
  // A --set of a node's parameter (or any setting the config's params leave out) is a param of
  // its own, under its key: what `runs list --columns params.fc1.out_features` shows.
  nlohmann::json sets = nlohmann::json::array();
  for (const std::string& set : o.project.sets) {
    sets.push_back(set);
    auto kv = nodes::parse_assignment(set);
    if (!kv) return kv.error();
    bool known = false;
    for (const auto& [k, v] : config_params(m.config)) known = known || k == kv->first;
    if (!known) m.settings.push_back({kv->first, nodes::setting_text(kv->second)});
  }
  m.notes = {{"threads", std::to_string(m.backend->num_threads())},
             {"limit", std::to_string(p.doc.dataset.limit)},
             {"test_limit", std::to_string(p.doc.dataset.test_limit)}};
  if (!sets.empty()) m.notes.push_back({"sets", nodes::json_text(sets)});
  const std::map<std::string, std::pair<const char*, bool>> flags = {
      {"batch_size", {"--batch-size", bool(o.project.batch_size)}},
      {"lr", {"--lr", bool(o.project.lr)}},
      {"precision", {"--precision", bool(o.project.precision)}},
      {"mode", {"--mode", bool(o.project.mode)}},
      {"seed", {"--seed", bool(o.project.seed)}}};
  m.explain_change = [flags, path = p.path](const std::string& key, const std::string& value) {
    const auto flag = flags.find(key);
    if (flag != flags.end() && flag->second.second)
      return std::string("resuming with ") + flag->second.first + " " + value;
    return path + " now has " + key + " " + value;
  };
  // An imported model starts from its own weights (the project's "weights" file).
  if (!p.doc.weights.empty())
    m.initial_weights = [&p](Trainer& t) { return apply_initial_weights(t, p); };
  if (o.inspect) m.after = [&p](Trainer& t, RunOutcome& out) { inspect_run(t, p, out); };
  m.resume_command = "--resume {id}";
  if (!p.file.empty()) {
    m.resume_command = "mlstudio --run " + p.file + " --resume {id}";
    m.eval_command = "mlstudio eval " + p.file + " --run {id}";
  }
  return m;
}

}  // namespace

Result<RunOutcome> run_training(const RunRequest& o, const RunEvents& events) {
  std::optional<Project> project;
  auto factory = [&](const Resumed* was) -> Result<RunModel> {
    ProjectOptions options = o.project;
    if (was) {
      auto resumed = resume_options(o.project, *was);
      if (!resumed) return resumed.error();
      options = std::move(*resumed);
    }
    auto opened = open_project(options);
    if (!opened) return opened.error();
    project = std::move(*opened);
    Project& p = *project;
    // In a job of several ranks each takes its own device of the kind asked for, where the host
    // has several (rank r: GPU r mod count); rank 0 keeps the one asked for.
    if (Collective* job = o.collective; job && job->size() > 1) {
      std::string& device = p.doc.training.device;
      device = rank_device(device, job->rank(), device_count(device));
    }
    // A validation share that leaves less than one batch to train on is almost surely a typo
    // (0.9999999 for 0.1): the run goes on, but says so.
    if (const double v = p.doc.dataset.validation;
        v > 0 && p.train->num_samples() < p.doc.training.batch_size) {
      const int64_t n = p.train->num_samples();
      if (events.warning)
        events.warning(p.path + ": /dataset/validation " + nlohmann::json(v).dump() + " leaves " +
                       std::to_string(n) + " training sample" + (n == 1 ? "" : "s") +
                       ", fewer than one batch (" + std::to_string(p.doc.training.batch_size) + ")");
    }
    return project_model(p, o);
  };
  return run_session(o, factory, events);
}

}  // namespace mls::runner
