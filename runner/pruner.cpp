#include "runner/pruner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>

#include "store/sqlite.h"

namespace mls::runner {

namespace {

using json = nlohmann::json;

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

// Lower is better after this: maximised values are negated, NaN is the worst.
double loss_of(const PruneRule& rule, double v) {
  if (std::isnan(v)) return std::numeric_limits<double>::infinity();
  return rule.maximize ? -v : v;
}

std::string trials(size_t n) {
  return std::to_string(n) + " other trial" + (n == 1 ? "" : "s");
}

}  // namespace

nlohmann::json PruneRule::to_json() const {
  return {{"method", method}, {"objective", objective},   {"maximize", maximize},
          {"warmup", warmup}, {"min_trials", min_trials}, {"r_min", r_min},
          {"eta", eta}};
}

Result<PruneRule> PruneRule::from_json(const nlohmann::json& j) {
  PruneRule r;
  if (!j.is_object()) return make_error("early_stop: expected an object, got " + j.dump());
  if (j.contains("method")) {
    if (!j["method"].is_string()) return make_error("early_stop.method: expected a word");
    r.method = j["method"].get<std::string>();
  }
  if (r.method != "none" && r.method != "median" && r.method != "asha")
    return make_error("early_stop.method: '" + r.method + "' is not none, median or asha");
  if (j.contains("objective") && j["objective"].is_string()) r.objective = j["objective"];
  if (j.contains("maximize") && j["maximize"].is_boolean()) r.maximize = j["maximize"];
  for (auto [name, field, least] :
       {std::tuple{"warmup", &r.warmup, int64_t{0}},
        std::tuple{"min_trials", &r.min_trials, int64_t{1}},
        std::tuple{"r_min", &r.r_min, int64_t{1}}, std::tuple{"eta", &r.eta, int64_t{2}}}) {
    if (!j.contains(name)) continue;
    if (!j[name].is_number_integer() || j[name].get<int64_t>() < least)
      return make_error(std::string("early_stop.") + name + ": expected a whole number >= " +
                        std::to_string(least) + ", got " + j[name].dump());
    *field = j[name].get<int64_t>();
  }
  return r;
}

std::string default_objective(bool has_validation) {
  return has_validation ? "val/loss" : "epoch/train_loss";
}

std::optional<std::string> median_prune(const PruneRule& rule, int64_t epoch, double value,
                                        const std::vector<double>& others) {
  if (epoch < rule.warmup || static_cast<int64_t>(others.size()) < rule.min_trials) return {};
  std::vector<double> v;
  for (double o : others) v.push_back(loss_of(rule, o));
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  if (!(loss_of(rule, value) > median)) return {};
  const double shown = rule.maximize ? -median : median;
  return rule.objective + " " + num(value) + " at epoch " + std::to_string(epoch) +
         " is worse than the median " + num(shown) + " of " + trials(n);
}

bool asha_rung(const PruneRule& rule, int64_t epoch) {
  for (int64_t r = rule.r_min; r <= epoch; r *= rule.eta)
    if (r == epoch) return true;
  return false;
}

std::optional<std::string> asha_prune(const PruneRule& rule, int64_t epoch, double value,
                                      const std::vector<double>& others) {
  if (!asha_rung(rule, epoch)) return {};
  std::vector<double> v;
  for (double o : others) v.push_back(loss_of(rule, o));
  v.push_back(loss_of(rule, value));
  const int64_t n = static_cast<int64_t>(v.size());
  if (n < rule.eta) return {};
  const int64_t keep = n / rule.eta;  // the top 1/eta go on
  std::sort(v.begin(), v.end());
  const double bar = v[static_cast<size_t>(keep - 1)];
  if (loss_of(rule, value) <= bar) return {};
  return rule.objective + " " + num(value) + " at epoch " + std::to_string(epoch) +
         " is not in the top " + std::to_string(keep) + " of " + std::to_string(n) +
         " at this rung (the cut is " + num(rule.maximize ? -bar : bar) + ")";
}

std::optional<std::string> prune_decision(const PruneRule& rule, int64_t epoch, double value,
                                          const std::vector<double>& others) {
  if (rule.method == "median") return median_prune(rule, epoch, value, others);
  if (rule.method == "asha") return asha_prune(rule, epoch, value, others);
  return {};
}

Result<std::vector<double>> sweep_values_at(const std::string& db, int64_t sweep_id,
                                            int64_t except_run, const std::string& key,
                                            int64_t epoch) {
  auto d = store::Db::open_read_only(db, false);
  if (!d) return d.error();
  // Each trial's latest attempt only (sweep_trials.run_id): a failed try retried is not a
  // second trial.
  auto st = d->prepare(
      "SELECT t.trial, m.value FROM sweep_trials t JOIN metrics m ON m.run_id = t.run_id "
      "WHERE t.sweep_id = ?1 AND t.run_id <> ?2 AND m.key = ?3 AND m.step = ?4");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, sweep_id).bind_int(2, except_run).bind_text(3, key).bind_int(4, epoch);
  std::map<int64_t, double> by_trial;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    by_trial[st->column_int(0)] = st->column_is_null(1) ? std::nan("") : st->column_double(1);
  }
  std::vector<double> out;
  for (const auto& [trial, v] : by_trial) out.push_back(v);
  return out;
}

Result<std::optional<double>> run_value_at(const std::string& db, int64_t run_id,
                                           const std::string& key, int64_t epoch) {
  auto d = store::Db::open_read_only(db, false);
  if (!d) return d.error();
  auto st = d->prepare("SELECT value FROM metrics WHERE run_id = ?1 AND key = ?2 AND step = ?3");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, run_id).bind_text(2, key).bind_int(3, epoch);
  std::optional<double> out;
  for (;;) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out = st->column_is_null(0) ? std::nan("") : st->column_double(0);
  }
  return out;
}

Result<std::optional<std::string>> sweep_prune(const std::string& db, int64_t sweep_id,
                                               int64_t run_id, const PruneRule& rule, int64_t epoch,
                                               double value) {
  if (rule.method == "none") return std::optional<std::string>{};
  if (rule.method == "median" && epoch < rule.warmup) return std::optional<std::string>{};
  if (rule.method == "asha" && !asha_rung(rule, epoch)) return std::optional<std::string>{};
  auto others = sweep_values_at(db, sweep_id, run_id, rule.objective, epoch);
  if (!others) return others.error();
  return prune_decision(rule, epoch, value, *others);
}

Result<PruneRule> sweep_rule(const std::string& db, int64_t sweep_id) {
  auto d = store::Db::open_read_only(db, false);
  if (!d) return d.error();
  auto st = d->prepare("SELECT spec FROM sweeps WHERE id = ?1");
  if (!st) return st.error();
  auto scope = st->scoped();
  st->bind_int(1, sweep_id);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return make_error("no sweep " + std::to_string(sweep_id) + " in " + db);
  const json spec = json::parse(st->column_text(0), nullptr, false);
  if (!spec.is_object())
    return make_error("sweep " + std::to_string(sweep_id) + " in " + db + ": its spec is not JSON");
  if (!spec.contains("early_stop")) return PruneRule{};
  auto r = PruneRule::from_json(spec["early_stop"]);
  if (!r)
    return make_error("sweep " + std::to_string(sweep_id) + " in " + db + ": " + r.error().message);
  return r;
}

namespace {

// The report's value of a per-epoch key, when it holds it.
std::optional<double> reported(const std::string& key, const EpochReport& rep) {
  if (key == "epoch/train_loss") return rep.train_loss;
  if (!rep.has_validation || key.rfind("val/", 0) != 0) return {};
  const EvalResult& v = rep.validation;
  const std::string k = key.substr(4);
  if (k == "loss") return v.loss;
  if (v.regression) {
    if (k == "mae") return v.values.mae;
    if (k == "rmse") return v.values.rmse;
    if (k == "r2") return v.values.r2;
  } else {
    if (k == "accuracy") return v.accuracy;
    if (k == "macro_f1") return v.macro_f1;
  }
  return {};
}

}  // namespace

Result<PruneFn> sweep_pruner(const std::string& db, int64_t sweep_id) {
  auto rule = sweep_rule(db, sweep_id);
  if (!rule) return rule.error();
  if (rule->method == "none") return PruneFn{};
  return PruneFn([db, sweep_id, rule = *rule](
                     int64_t run_id, const EpochReport& rep) -> std::optional<std::string> {
    std::optional<double> value = reported(rule.objective, rep);
    if (!value) {
      auto v = run_value_at(db, run_id, rule.objective, rep.epoch);
      if (!v || !*v) return {};
      value = **v;
    }
    auto why = sweep_prune(db, sweep_id, run_id, rule, rep.epoch, *value);
    if (!why) return {};
    return *why;
  });
}

}  // namespace mls::runner
