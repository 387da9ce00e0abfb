#include "runner/sweep_transfer.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/core/atomic_file.h"
#include "runner/checkpoints.h"

namespace mls::runner {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Pairs = std::vector<std::pair<std::string, std::string>>;

json value_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

Result<double> value_of(const json& j, const std::string& key) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "nan") return std::nan("");
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return make_error("a trial's message: metric " + key + " has a point that is not a number");
}

json pairs_json(const Pairs& ps) {
  json a = json::array();
  for (const auto& [k, v] : ps) a.push_back({k, v});
  return a;
}

Result<Pairs> pairs_of(const json& msg, const char* field) {
  Pairs out;
  if (!msg.contains(field)) return out;
  const json& a = msg[field];
  if (!a.is_array())
    return make_error(std::string("a trial's message: ") + field + " is not a list");
  for (const json& p : a) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return make_error(std::string("a trial's message: ") + field + " holds a bad pair");
    out.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return out;
}

std::string text_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

Result<json> run_message(store::RunStore& from, int64_t run_id, SentPoints& sent) {
  auto info = from.get_run(run_id);
  if (!info) return info.error();
  json run = {{"name", info->name},
              {"project_path", info->project_path},
              {"project_hash", info->project_hash},
              {"device", info->device},
              {"seed", info->seed},
              {"experiment", info->experiment},
              {"world_size", info->world_size},
              {"status", info->status},
              {"note", info->note}};
  json msg = {{"run", run}};
  if (!sent.described) {
    auto params = from.params(run_id);
    if (!params) return params.error();
    msg["params"] = pairs_json(*params);
    auto snap = from.snapshot(run_id);
    if (!snap) return snap.error();
    msg["snapshot"] =
        *snap ? json{{"kind", (*snap)->kind}, {"text", (*snap)->text}} : json(nullptr);
    auto sys = from.system_info(run_id);
    if (!sys) return sys.error();
    msg["system_info"] = pairs_json(*sys);
    sent.described = true;
  }
  auto tags = from.tags(run_id);
  if (!tags) return tags.error();
  msg["tags"] = pairs_json(*tags);
  auto arts = from.artifacts(run_id);
  if (!arts) return arts.error();
  json a = json::array();
  for (const store::ArtifactInfo& x : *arts) {
    json e = {{"path", from.resolve_path(x.path)}, {"kind", x.kind}};
    if (x.step) e["step"] = *x.step;
    a.push_back(std::move(e));
  }
  msg["artifacts"] = std::move(a);
  auto keys = from.metric_keys(run_id);
  if (!keys) return keys.error();
  json points = json::object();
  for (const std::string& key : *keys) {
    auto pts = from.metrics(run_id, key);
    if (!pts) return pts.error();
    size_t& done = sent.count[key];
    if (pts->size() <= done) continue;
    json list = json::array();
    for (size_t i = done; i < pts->size(); ++i)
      list.push_back({(*pts)[i].step, value_json((*pts)[i].value)});
    done = pts->size();
    points[key] = std::move(list);
  }
  msg["points"] = std::move(points);
  return msg;
}

std::string message_text(const json& msg) {
  return msg.dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<std::unique_ptr<TrialRecorder>> TrialRecorder::begin(const std::string& db, int64_t sweep,
                                                            int64_t trial, const json& msg,
                                                            const Pairs& extra_info) {
  if (!msg.is_object() || !msg.contains("run") || !msg["run"].is_object())
    return make_error("sweep " + std::to_string(sweep) + " trial " + std::to_string(trial) +
                      ": the rank's message holds no run");
  const json& run = msg["run"];
  auto opened = store::RunStore::open(db);
  if (!opened) return opened.error();
  std::unique_ptr<TrialRecorder> r(new TrialRecorder);
  r->store_ = std::move(*opened);
  r->db_ = db;
  store::NewRun nr;
  nr.name = text_of(run, "name");
  nr.project_path = text_of(run, "project_path");
  nr.project_hash = text_of(run, "project_hash");
  nr.device = text_of(run, "device");
  nr.seed =
      run.contains("seed") && run["seed"].is_number_unsigned() ? run["seed"].get<uint64_t>() : 0;
  nr.experiment = text_of(run, "experiment");
  nr.world_size = run.contains("world_size") && run["world_size"].is_number_integer()
                      ? run["world_size"].get<int64_t>()
                      : 1;
  nr.sweep_id = sweep;
  nr.trial = trial;
  auto id = r->store_->begin_run(nr);
  if (!id) return id.error();
  r->run_id_ = *id;
  store::RunStore& st = *r->store_;
  auto params = pairs_of(msg, "params");
  if (!params) return params.error();
  for (auto& [k, v] : *params) {
    // The rank's folder was temporary: the run's checkpoints are rank 0's now.
    if (k == "checkpoint_dir") v = checkpoint_dir(db, *id);
    if (auto e = st.log_param(*id, k, v); !e) return e.error();
  }
  if (msg.contains("snapshot") && msg["snapshot"].is_object()) {
    store::Snapshot snap{text_of(msg["snapshot"], "kind"), text_of(msg["snapshot"], "text")};
    if (!snap.text.empty())
      if (auto e = st.put_snapshot(*id, snap); !e) return e.error();
  }
  auto sys = pairs_of(msg, "system_info");
  if (!sys) return sys.error();
  sys->insert(sys->end(), extra_info.begin(), extra_info.end());
  if (!sys->empty())
    if (auto e = st.set_system_info(*id, *sys); !e) return e.error();
  if (auto e = r->add(msg); !e) return e.error();
  return r;
}

Result<int64_t> TrialRecorder::record_refused(const std::string& db, int64_t sweep, int64_t trial,
                                              const std::string& name, const std::string& project,
                                              const std::string& experiment, const Pairs& params,
                                              const std::string& why) {
  auto opened = store::RunStore::open(db);
  if (!opened) return opened.error();
  store::RunStore& st = **opened;
  store::NewRun nr;
  nr.name = name;
  nr.project_path = project;
  nr.experiment = experiment;
  nr.sweep_id = sweep;
  nr.trial = trial;
  auto id = st.begin_run(nr);
  if (!id) return id.error();
  for (const auto& [k, v] : params)
    if (auto e = st.log_param(*id, k, v); !e) return e.error();
  if (auto e = st.set_note(*id, why); !e) return e.error();
  if (auto e = st.end_run(*id, "failed"); !e) return e.error();
  return *id;
}

Result<void> TrialRecorder::add(const json& msg) {
  if (msg.contains("points")) {
    const json& points = msg["points"];
    if (!points.is_object()) return make_error("a trial's message: points is not an object");
    for (const auto& [key, list] : points.items()) {
      if (!list.is_array())
        return make_error("a trial's message: metric " + key + " is not a list");
      for (const json& p : list) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_integer())
          return make_error("a trial's message: metric " + key + " holds a bad point");
        auto v = value_of(p[1], key);
        if (!v) return v.error();
        store_->log_metric(key, p[0].get<int64_t>(), *v);
      }
    }
  }
  auto tags = pairs_of(msg, "tags");
  if (!tags) return tags.error();
  for (const auto& [k, v] : *tags)
    if (auto e = store_->set_tag(run_id_, k, v); !e) return e.error();
  if (msg.contains("run") && msg["run"].is_object()) {
    const std::string note = text_of(msg["run"], "note");
    if (!note.empty())
      if (auto e = store_->set_note(run_id_, note); !e) return e.error();
  }
  return store_->flush();
}

Result<std::string> TrialRecorder::add_file(const std::string& rel, const std::string& kind,
                                            int64_t step, const std::string& bytes) {
  if (rel.empty() || rel == "." || rel == ".." || rel.find('/') != std::string::npos ||
      rel.find('\0') != std::string::npos)
    return make_error("a trial's message names the file '" + rel + "': not a plain file name");
  const fs::path dir = checkpoint_dir(db_, run_id_);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot make " + dir.string() + ": " + ec.message());
  const std::string path = (dir / rel).lexically_normal().string();
  if (auto w = write_text_atomically(path, bytes); !w)
    return make_error("cannot save " + path + ": " + w.error().message);
  auto id =
      store_->add_artifact(run_id_, kind, fs::absolute(path).lexically_normal().string(), step);
  if (!id) return id.error();
  return path;
}

Result<void> TrialRecorder::end(const std::string& status) {
  return store_->end_run(run_id_, status);
}

}  // namespace mls::runner
