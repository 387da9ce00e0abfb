// `mlstudio runs list|show`: read the experiment database.
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "store/process_owner.h"
#include "store/run_store.h"

namespace mls::app {

namespace {

// A run left 'running' by a process that is gone is shown as what it is; the next command
// that writes to the database records it so (a reader changes nothing).
std::string shown_status(const store::RunInfo& r) {
  return r.status == "running" && store::owner_gone(r.owner) ? "interrupted" : r.status;
}

nlohmann::json run_json(const store::RunInfo& r) {
  return {{"id", r.id},
          {"name", r.name},
          {"status", shown_status(r)},
          {"started", r.started},
          {"ended", r.ended},
          {"device", r.device},
          {"seed", r.seed},
          {"project_path", r.project_path},
          {"project_hash", r.project_hash}};
}

}  // namespace

int runs_command(const RunsOptions& o) {
  if (!std::filesystem::exists(o.db))
    return fail(o.db + ": no run database here (train with `mlstudio --run P.mls --db " + o.db +
                "` first)");
  auto st = store::RunStore::open_read_only(o.db);  // `runs` only reads: a read-only file is fine
  if (!st) return fail(st.error().message);
  store::RunStore& s = **st;
  if (o.action == "list") {
    auto runs = s.list_runs();
    if (!runs) return fail(runs.error().message);
    if (o.json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& r : *runs) arr.push_back(run_json(r));
      std::printf("%s\n", arr.dump().c_str());
      return 0;
    }
    std::printf("%-5s %-12s %-25s %-8s %-10s %s\n", "id", "status", "started", "device", "test_acc",
                "name");
    for (const auto& r : *runs) {
      auto acc = s.metrics(r.id, "test/accuracy");
      std::string a = acc && !acc->empty() ? std::to_string(acc->back().value).substr(0, 6) : "-";
      std::printf("%-5lld %-12s %-25s %-8s %-10s %s\n", static_cast<long long>(r.id),
                  terminal_safe(shown_status(r)).c_str(), terminal_safe(r.started).c_str(),
                  terminal_safe(r.device).c_str(), a.c_str(), terminal_safe(r.name).c_str());
    }
    return 0;
  }
  auto r = s.get_run(o.run_id);
  if (!r) return fail(r.error().message);
  auto params = s.params(o.run_id);
  auto keys = s.metric_keys(o.run_id);
  if (!params) return fail(params.error().message);
  if (!keys) return fail(keys.error().message);
  nlohmann::json j = run_json(*r);
  for (const auto& [k, v] : *params) j["params"][k] = v;
  for (const std::string& k : *keys) {
    auto m = s.metrics(o.run_id, k);
    if (!m) return fail(m.error().message);
    if (m->empty()) continue;
    double mn = m->front().value, mx = mn;
    for (const auto& pt : *m) {
      mn = std::min(mn, pt.value);
      mx = std::max(mx, pt.value);
    }
    j["metrics"][k] = {{"last", m->back().value},
                       {"last_step", m->back().step},
                       {"min", mn},
                       {"max", mx},
                       {"count", m->size()}};
  }
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  // Everything here was read from the database, which a stranger may have written.
  auto safe = [](const std::string& s) { return terminal_safe(s); };
  std::printf("run %lld  %s  (%s)\n", static_cast<long long>(r->id), safe(r->name).c_str(),
              safe(r->status).c_str());
  std::printf("  project  %s  [%s]\n  started  %s\n  ended    %s\n  device   %s   seed %llu\n",
              safe(r->project_path).c_str(), safe(r->project_hash).c_str(),
              safe(r->started).c_str(), safe(r->ended).c_str(), safe(r->device).c_str(),
              static_cast<unsigned long long>(r->seed));
  std::printf("  params\n");
  for (const auto& [k, v] : *params)
    std::printf("    %-16s %s\n", safe(k).c_str(), safe(v).c_str());
  std::printf("  metrics %-22s %12s %12s %12s %8s\n", "", "last", "min", "max", "points");
  if (j.contains("metrics"))
    for (auto& [k, v] : j["metrics"].items())
      std::printf("    %-28s %12.6g %12.6g %12.6g %8zu\n", safe(k).c_str(), v["last"].get<double>(),
                  v["min"].get<double>(), v["max"].get<double>(), v["count"].get<size_t>());
  return 0;
}

}  // namespace mls::app
