// `mlstudio runs fork|reproduce|diff`: a run's lineage.
//
//   runs fork 3 --step 400 --set lr=0.01     run 3's checkpoint at (or before) step 400,
//                                            continued as a child run with lr 0.01
//   runs fork 3 --project edited.mls         ... with another graph: parameters that still
//                                            fit are kept, the rest start afresh (named)
//   runs reproduce 3                         run 3 again from its snapshot, compared step by
//                                            step: "identical", or the first difference
//   runs diff 3 4                            the two runs' graphs and settings, node by node
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/text_out.h"
#include "engine/train/data_source.h"
#include "nodes/document_diff.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

using Snapshot = store::Snapshot;

struct RunRecord {
  store::RunInfo info;
  runner::Params params;
  nodes::Document doc;
};

// A run's recorded document (its snapshot), parsed; errors name the run and the database.
Result<RunRecord> read_record(store::RunStore& s, int64_t id) {
  RunRecord r;
  auto info = s.get_run(id);
  if (!info) return info.error();
  r.info = std::move(*info);
  auto params = s.params(id);
  if (!params) return params.error();
  r.params = std::move(*params);
  auto snap = s.snapshot(id);
  if (!snap) return snap.error();
  const std::string run = "run " + std::to_string(id);
  if (!*snap) return make_error(run + " in " + s.path() + " kept no snapshot of what it trained");
  if ((*snap)->kind != "mls")
    return make_error(run + " was trained by a Lua script (its snapshot is the script): fork and "
                            "reproduce work on project (.mls) runs; run the script again with "
                            "`mlstudio lua`");
  auto doc = nodes::parse_document((*snap)->text, run + "'s snapshot");
  if (!doc) return doc.error();
  r.doc = std::move(*doc);
  return r;
}

const std::string* param(const runner::Params& ps, const std::string& key) {
  for (const auto& [k, v] : ps)
    if (k == key) return &v;
  return nullptr;
}

// The run as `--run` would train it again: its own document, its data read from where its
// project was.
RunOptions rerun_options(const RunsOptions& o, const RunRecord& r) {
  RunOptions run;
  run.db = o.db;
  run.json = o.json;
  run.quiet = o.quiet;
  run.project.path = r.info.project_path;
  run.project.document = std::make_shared<nodes::Document>(r.doc);
  run.experiment = r.info.experiment;
  return run;
}

// Timing is measured, not computed: it differs on every run.
bool timing_metric(const std::string& key) {
  return key == "epoch/seconds" || key == "epoch/samples_per_s" || key == "epoch/data_wait_fraction";
}

}  // namespace

// [SECTION] fork

int runs_fork_command(const RunsOptions& o) {
  auto st = store::RunStore::open_read_only(o.db);
  if (!st) return fail(st.error().message);
  auto rec = read_record(**st, o.run_id);
  if (!rec) return fail(rec.error().message);
  const std::string run = "run " + std::to_string(o.run_id);
  // The epoch checkpoints the run kept, and a breakpoint's (the state before the step that
  // went wrong), by step.
  auto arts = (*st)->artifacts(o.run_id);
  if (!arts) return fail(arts.error().message);
  std::map<int64_t, std::string> kept;
  for (const store::ArtifactInfo& a : *arts) {
    const std::string path = (*st)->resolve_path(a.path);
    if (a.kind == "checkpoint" && a.step &&
        (std::filesystem::path(path).filename().string().rfind("epoch-", 0) == 0 ||
         std::filesystem::path(path).filename().string().rfind("break-step-", 0) == 0) &&
        std::filesystem::exists(path))
      kept[*a.step] = path;
  }
  if (kept.empty())
    return fail(run + " kept no epoch checkpoint to fork from (runs keep one per finished epoch; "
                      "this one finished none, or its files were removed)");
  auto at = kept.end();
  if (o.step) {
    at = kept.upper_bound(*o.step);
    if (at == kept.begin()) {
      std::string steps;
      for (const auto& [s, p] : kept) steps += (steps.empty() ? "" : ", ") + std::to_string(s);
      return fail(run + " has no checkpoint at or before step " + std::to_string(*o.step) +
                  " (it kept steps " + steps + ")");
    }
  }
  --at;
  const int64_t step = at->first;
  if (o.step && step != *o.step && !o.quiet)
    std::fprintf(stderr, "mlstudio: %s kept no checkpoint at step %lld; forking at step %lld, "
                         "the last one before it\n",
                 run.c_str(), static_cast<long long>(*o.step), static_cast<long long>(step));
  RunOptions child = rerun_options(o, *rec);
  if (!o.project.empty()) {
    auto doc = nodes::load_document(o.project);
    if (!doc) return fail(doc.error().message);
    child.project.path = o.project;
    child.project.document = std::make_shared<nodes::Document>(std::move(*doc));
  }
  child.project.sets = o.sets;
  child.project.epochs = o.epochs;
  // The data as the parent had it: its recorded limits.
  for (auto [key, value] : {std::pair{"limit", &child.project.limit},
                            std::pair{"test_limit", &child.project.test_limit}})
    if (const std::string* v = param(rec->params, key)) *value = std::stoll(*v);
  child.fork = runner::RunOptions::Fork{o.run_id, at->second};
  st->reset();  // the child run writes to the database
  return run_command(child);
}

// [SECTION] reproduce

int runs_reproduce_command(const RunsOptions& o) {
  RunRecord rec;
  std::map<std::string, std::vector<store::MetricPoint>> before;
  {
    auto st = store::RunStore::open_read_only(o.db);
    if (!st) return fail(st.error().message);
    auto r = read_record(**st, o.run_id);
    if (!r) return fail(r.error().message);
    rec = std::move(*r);
    auto keys = (*st)->metric_keys(o.run_id);
    if (!keys) return fail(keys.error().message);
    for (const std::string& k : *keys) {
      if (timing_metric(k)) continue;
      auto m = (*st)->metrics(o.run_id, k);
      if (!m) return fail(m.error().message);
      before[k] = std::move(*m);
    }
  }
  const std::string run = "run " + std::to_string(o.run_id);
  if (rec.info.parent_run_id && rec.info.fork_step)
    return fail(run + " is a fork of run " + std::to_string(*rec.info.parent_run_id) +
                ": reproduce its parent, then fork it again");
  RunOptions again = rerun_options(o, rec);
  again.json = false;
  for (auto [key, value] : {std::pair{"limit", &again.project.limit},
                            std::pair{"test_limit", &again.project.test_limit}})
    if (const std::string* v = param(rec.params, key)) *value = std::stoll(*v);
  if (const std::string* e = param(rec.params, "epochs")) again.project.epochs = std::stoll(*e);
  // The new run's id: the newest in the database once it ends.
  int64_t last_id = 0;
  {
    auto st = store::RunStore::open_read_only(o.db);
    if (!st) return fail(st.error().message);
    auto runs = (*st)->list_runs();
    if (!runs) return fail(runs.error().message);
    for (const auto& r : *runs) last_id = std::max(last_id, r.id);
  }
  if (int rc = run_command(again); rc != 0) return rc;
  auto st = store::RunStore::open(o.db);
  if (!st) return fail(st.error().message);
  auto runs = (*st)->list_runs();
  if (!runs) return fail(runs.error().message);
  int64_t id = 0;
  for (const auto& r : *runs)
    if (r.id > last_id) id = r.id;
  if (id == 0) return fail("the reproduced run was not recorded in " + o.db);
  if (auto r = (*st)->set_tag(id, "reproduces", std::to_string(o.run_id)); !r)
    return fail(r.error().message);

  // Step by step, every metric the run logged (timing aside): the first difference in step
  // order, across keys.
  struct Difference {
    int64_t step = 0;
    bool per_epoch = false;
    std::string key;
    double a = 0, b = 0;
    std::string what;
  };
  std::optional<Difference> first;
  int64_t compared = 0;
  for (const auto& [key, pa] : before) {
    auto m = (*st)->metrics(id, key);
    if (!m) return fail(m.error().message);
    const auto& pb = *m;
    const size_t n = std::min(pa.size(), pb.size());
    std::optional<Difference> d;
    for (size_t i = 0; i < n && !d; ++i) {
      ++compared;
      const bool same_value = pa[i].value == pb[i].value ||
                              (std::isnan(pa[i].value) && std::isnan(pb[i].value));
      if (pa[i].step != pb[i].step || !same_value)
        d = Difference{pa[i].step, metric_per_epoch(key), key, pa[i].value, pb[i].value, ""};
    }
    if (!d && pa.size() != pb.size())
      d = Difference{n < pa.size() ? pa[n].step : pb[n].step, metric_per_epoch(key), key, 0, 0,
                     std::to_string(pa.size()) + " points, now " + std::to_string(pb.size())};
    // Per-step keys first: an epoch's metric differs because a step did.
    if (d && (!first || (first->per_epoch && !d->per_epoch) ||
              (first->per_epoch == d->per_epoch && d->step < first->step)))
      first = d;
  }
  const std::string rid = "run " + std::to_string(id);
  if (!first) {
    std::printf("identical: %s reproduces %s exactly (%zu metrics, %lld values compared%s)\n",
                rid.c_str(), run.c_str(), before.size(), static_cast<long long>(compared),
                ", timing metrics aside");
    if (o.json)
      std::printf("%s\n", terminal_json(nlohmann::json{{"identical", true},
                                                       {"run_id", id},
                                                       {"of", o.run_id},
                                                       {"compared", compared}})
                              .c_str());
    return 0;
  }
  const Difference& d = *first;
  const std::string where = (d.per_epoch ? "epoch " : "step ") + std::to_string(d.step);
  if (!d.what.empty()) {
    std::printf("differs: %s's %s has %s (%s)\n", rid.c_str(), d.key.c_str(), d.what.c_str(),
                run.c_str());
  } else {
    const double abs = std::fabs(d.a - d.b);
    const double rel = abs / std::max(std::fabs(d.a), 1e-300);
    std::printf("differs: first at %s, %s: %.9g in %s, %.9g in %s (|difference| %.3g, relative %.3g)\n",
                where.c_str(), d.key.c_str(), d.a, run.c_str(), d.b, rid.c_str(), abs, rel);
  }
  std::printf("  (the project's data, the code or the machine changed since %s; the snapshot "
              "itself was the same)\n",
              run.c_str());
  if (o.json)
    std::printf("%s\n", terminal_json(nlohmann::json{{"identical", false},
                                                     {"run_id", id},
                                                     {"of", o.run_id},
                                                     {"metric", d.key},
                                                     {d.per_epoch ? "epoch" : "step", d.step},
                                                     {"before", d.a},
                                                     {"after", d.b}})
                            .c_str());
  return 1;
}

// [SECTION] diff

int runs_diff_command(const RunsOptions& o) {
  if (o.ids.size() != 2) return fail("runs diff: give two run ids (runs diff A B)");
  auto st = store::RunStore::open_read_only(o.db);
  if (!st) return fail(st.error().message);
  auto a = read_record(**st, o.ids[0]);
  if (!a) return fail(a.error().message);
  auto b = read_record(**st, o.ids[1]);
  if (!b) return fail(b.error().message);
  nodes::DocumentDiff d = nodes::diff_documents(a->doc, b->doc);
  // What the documents do not hold: recorded params such as threads or the device.
  std::map<std::string, std::pair<std::string, std::string>> params;
  for (const auto& [k, v] : a->params) params[k].first = v;
  for (const auto& [k, v] : b->params) params[k].second = v;
  std::vector<std::string> lines;
  for (const nodes::DiffEntry& e : d.entries) lines.push_back(nodes::diff_line(e));
  std::vector<std::string> param_lines;
  // The training section's settings are the document diff's lines already.
  std::vector<std::string> shown = {"checkpoint_dir", "sets", "mode"};
  for (const auto& [k, v] : config_params(TrainConfig{})) shown.push_back(k);
  for (const auto& [k, v] : params)
    if (v.first != v.second && std::find(shown.begin(), shown.end(), k) == shown.end())
      param_lines.push_back("~ params." + k + ": " + (v.first.empty() ? "(none)" : v.first) +
                            " -> " + (v.second.empty() ? "(none)" : v.second));
  if (a->info.seed != b->info.seed)
    param_lines.push_back("~ seed: " + std::to_string(a->info.seed) + " -> " + std::to_string(b->info.seed));
  if (a->info.device != b->info.device)
    param_lines.push_back("~ device: " + a->info.device + " -> " + b->info.device);
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const nodes::DiffEntry& e : d.entries)
      j.push_back({{"kind", e.kind == nodes::DiffKind::Added     ? "added"
                            : e.kind == nodes::DiffKind::Removed ? "removed"
                                                                 : "changed"},
                   {"section", e.section},
                   {"node", e.node},
                   {"field", e.field},
                   {"before", e.before},
                   {"after", e.after}});
    std::printf("%s\n",
                terminal_json(
                    nlohmann::json{
                        {"a", o.ids[0]}, {"b", o.ids[1]}, {"document", j}, {"params", param_lines}})
                    .c_str());
    return 0;
  }
  std::printf("run %lld -> run %lld\n", static_cast<long long>(o.ids[0]),
              static_cast<long long>(o.ids[1]));
  if (lines.empty() && param_lines.empty()) std::printf("  no differences\n");
  for (const std::string& l : lines) std::printf("  %s\n", terminal_safe(l).c_str());
  for (const std::string& l : param_lines) std::printf("  %s\n", terminal_safe(l).c_str());
  return 0;
}

}  // namespace mls::app
