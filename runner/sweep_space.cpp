#include "runner/sweep_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <set>

namespace mls::runner {

namespace {

using json = nlohmann::json;

// [SECTION] parsing

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(sep, start);
    out.emplace_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

std::string trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string_view::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return std::string(s.substr(a, b - a + 1));
}

bool read_number(const std::string& text, double& v) {
  if (text.empty()) return false;
  char* end = nullptr;
  v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(v);
}

bool whole(double v) {
  return std::floor(v) == v && std::fabs(v) < 9.0e15;
}

// A choice's value: JSON when it reads as JSON (64, 0.5, true, "x"), else the word itself.
json choice_value(const std::string& text) {
  json v = json::parse(text, nullptr, false);
  if (v.is_discarded() || v.is_object() || v.is_array() || v.is_null()) return text;
  return v;
}

// [SECTION] the transformed space: log for log params, integers widened by half a step

struct Range {
  double lo, hi;  // in the space samples are drawn in
};

Range range_of(const SweepParam& p) {
  double lo = p.lo, hi = p.hi;
  if (p.integer) {
    lo -= 0.5;
    hi += 0.5;
  }
  return p.log ? Range{std::log(lo), std::log(hi)} : Range{lo, hi};
}

double to_space(const SweepParam& p, double v) {
  return p.log ? std::log(v) : v;
}

json from_space(const SweepParam& p, double x) {
  double v = p.log ? std::exp(x) : x;
  if (p.integer) {
    const double r = std::clamp(std::round(v), p.lo, p.hi);
    return static_cast<int64_t>(r);
  }
  return std::clamp(v, p.lo, p.hi);
}

std::mt19937_64 trial_rng(uint64_t seed, int64_t trial, uint64_t salt) {
  std::seed_seq seq{
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(trial),
      static_cast<uint32_t>(static_cast<uint64_t>(trial) >> 32), static_cast<uint32_t>(salt)};
  return std::mt19937_64(seq);
}

json draw_uniform(const SweepParam& p, std::mt19937_64& rng) {
  if (p.is_choice()) {
    std::uniform_int_distribution<size_t> pick(0, p.choices.size() - 1);
    return p.choices[pick(rng)];
  }
  const Range r = range_of(p);
  std::uniform_real_distribution<double> u(r.lo, r.hi);
  return from_space(p, u(rng));
}

// [SECTION] the Parzen estimator (one numeric parameter, in its transformed space)

constexpr double kPi = 3.14159265358979323846;

double normal_cdf(double z) {
  return 0.5 * std::erfc(-z / std::sqrt(2.0));
}

struct Parzen {
  std::vector<double> mu, sigma, weight;  // weights sum to 1
  Range r;

  // Optuna's default_weights: equal for the newest 25, a ramp down for older ones.
  static std::vector<double> ramp(size_t n) {
    std::vector<double> w(n, 1.0);
    if (n > 25) {
      const size_t k = n - 25;
      for (size_t i = 0; i < k; ++i)
        w[i] = k == 1 ? 1.0 / static_cast<double>(n)
                      : 1.0 / static_cast<double>(n) + (1.0 - 1.0 / static_cast<double>(n)) *
                                                           static_cast<double>(i) /
                                                           static_cast<double>(k - 1);
    }
    return w;
  }

  // `xs` in trial order (oldest first).
  Parzen(const std::vector<double>& xs, Range range, double prior_weight) : r(range) {
    const size_t n = xs.size();
    const double width = r.hi - r.lo;
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return xs[a] < xs[b]; });
    std::vector<double> sorted(n);
    for (size_t i = 0; i < n; ++i) sorted[i] = xs[order[i]];
    std::vector<double> s(n, width);
    for (size_t i = 0; i < n; ++i) {
      const double left = i == 0 ? sorted[i] - r.lo : sorted[i] - sorted[i - 1];
      const double right = i + 1 == n ? r.hi - sorted[i] : sorted[i + 1] - sorted[i];
      s[i] = std::max(left, right);
    }
    // consider_endpoints=False: the outermost kernels take their inner neighbour's distance.
    if (n >= 2) {
      s[0] = sorted[1] - sorted[0];
      s[n - 1] = sorted[n - 1] - sorted[n - 2];
    }
    // The "magic clip": no kernel narrower than the range over min(100, n + 1).
    const double min_sigma = width / std::min(100.0, 1.0 + static_cast<double>(n));
    std::vector<double> w = ramp(n);
    for (size_t i = 0; i < n; ++i) {
      mu.push_back(xs[order[i]]);
      sigma.push_back(std::clamp(s[i], min_sigma, width));
      weight.push_back(w[order[i]]);
    }
    mu.push_back(0.5 * (r.lo + r.hi));  // the prior: one wide kernel over the range
    sigma.push_back(width);
    weight.push_back(prior_weight);
    double total = 0;
    for (double v : weight) total += v;
    for (double& v : weight) v /= total;
  }

  double sample(std::mt19937_64& rng) const {
    std::discrete_distribution<size_t> pick(weight.begin(), weight.end());
    const size_t k = pick(rng);
    std::normal_distribution<double> g(mu[k], sigma[k]);
    for (int tries = 0; tries < 100; ++tries) {
      const double x = g(rng);
      if (x >= r.lo && x <= r.hi) return x;
    }
    return std::clamp(mu[k], r.lo, r.hi);
  }

  double log_density(double x) const {
    double best = -std::numeric_limits<double>::infinity();
    std::vector<double> terms(mu.size());
    for (size_t k = 0; k < mu.size(); ++k) {
      const double z = (x - mu[k]) / sigma[k];
      const double mass =
          normal_cdf((r.hi - mu[k]) / sigma[k]) - normal_cdf((r.lo - mu[k]) / sigma[k]);
      terms[k] = std::log(weight[k]) - 0.5 * z * z - std::log(sigma[k] * std::sqrt(2 * kPi)) -
                 std::log(std::max(mass, 1e-300));
      best = std::max(best, terms[k]);
    }
    double sum = 0;
    for (double t : terms) sum += std::exp(t - best);
    return best + std::log(sum);
  }
};

// Probabilities of each choice: the prior weight spread evenly, plus each trial's weight.
std::vector<double> choice_weights(const SweepParam& p, const std::vector<const Observation*>& obs,
                                   const std::vector<double>& w, double prior_weight) {
  std::vector<double> out(p.choices.size(), prior_weight / static_cast<double>(p.choices.size()));
  for (size_t i = 0; i < obs.size(); ++i) {
    const json* v = obs[i]->params.contains(p.name) ? &obs[i]->params[p.name] : nullptr;
    if (!v) continue;
    for (size_t c = 0; c < p.choices.size(); ++c)
      if (p.choices[c] == *v) out[c] += w[i];
  }
  double total = 0;
  for (double v : out) total += v;
  for (double& v : out) v /= total;
  return out;
}

}  // namespace

Result<SweepParam> parse_sweep_param(std::string_view text) {
  const std::string given(text);
  const auto bad = [&](const std::string& why) {
    return make_error("--param '" + given + "': " + why);
  };
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    return bad(
        "expected NAME=SPEC (lr=1e-3:1e-1:log, dropout=0:0.5, units=32:256:int, "
        "batch_size=64,128)");
  SweepParam p;
  p.name = trim(text.substr(0, eq));
  p.spec = trim(text.substr(eq + 1));
  if (p.name.empty()) return bad("no name before '='");
  if (p.spec.empty()) return bad("no values after '='");
  if (p.spec.find(':') != std::string::npos) {
    const std::vector<std::string> parts = split(p.spec, ':');
    if (parts.size() < 2) return bad("a range is LO:HI[:log][:int]");
    const std::string lo = trim(parts[0]), hi = trim(parts[1]);
    if (!read_number(lo, p.lo)) return bad("'" + lo + "' is not a number (the range's low end)");
    if (!read_number(hi, p.hi)) return bad("'" + hi + "' is not a number (the range's high end)");
    for (size_t i = 2; i < parts.size(); ++i) {
      const std::string flag = trim(parts[i]);
      bool* which = flag == "log" ? &p.log : flag == "int" ? &p.integer : nullptr;
      if (!which) return bad("'" + flag + "' is not a range option (log or int)");
      if (*which) return bad("'" + flag + "' given twice");
      *which = true;
    }
    if (!(p.lo < p.hi)) return bad("the low end " + lo + " must be less than the high end " + hi);
    if (p.integer && (!whole(p.lo) || !whole(p.hi)))
      return bad("an int range needs whole numbers, got " + lo + ":" + hi);
    if (p.log && p.lo <= 0) return bad("a log range needs a low end > 0, got " + lo);
    return p;
  }
  std::set<std::string> seen;
  for (const std::string& raw : split(p.spec, ',')) {
    const std::string item = trim(raw);
    if (item.empty()) return bad("an empty choice (two commas, or one at an end)");
    if (!seen.insert(item).second) return bad("'" + item + "' given twice");
    p.choices.push_back(choice_value(item));
  }
  return p;
}

Result<std::vector<SweepParam>> parse_sweep_space(const std::vector<std::string>& texts) {
  std::vector<SweepParam> out;
  if (texts.empty())
    return make_error("give at least one --param NAME=SPEC (lr=1e-3:1e-1:log, batch_size=64,128)");
  for (const std::string& t : texts) {
    auto p = parse_sweep_param(t);
    if (!p) return p.error();
    for (const SweepParam& q : out)
      if (q.name == p->name)
        return make_error("--param '" + t + "': '" + p->name + "' is already swept (--param '" +
                          q.name + "=" + q.spec + "')");
    out.push_back(std::move(*p));
  }
  return out;
}

std::string sweep_setting(const std::string& key, const nlohmann::json& value) {
  return key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
}

std::string params_text(const std::vector<SweepParam>& space, const nlohmann::json& params) {
  std::string out;
  for (const SweepParam& p : space) {
    if (!params.contains(p.name)) continue;
    const json& v = params[p.name];
    std::string text;
    if (v.is_number_float()) {
      char b[32];
      std::snprintf(b, sizeof b, "%.4g", v.get<double>());
      text = b;
    } else {
      text = v.is_string() ? v.get<std::string>() : v.dump();
    }
    out += (out.empty() ? "" : " ") + p.name + "=" + text;
  }
  return out;
}

Result<std::vector<nlohmann::json>> grid_trials(const std::vector<SweepParam>& space, int points,
                                                int64_t max_trials) {
  if (points < 1) return make_error("--grid-points must be at least 1");
  std::vector<std::vector<json>> axes;
  double total = 1;
  for (const SweepParam& p : space) {
    std::vector<json> axis;
    if (p.is_choice()) {
      axis = p.choices;
    } else {
      const double a = to_space(p, p.lo), b = to_space(p, p.hi);
      for (int i = 0; i < points; ++i) {
        const double x = points == 1 ? 0.5 * (a + b) : a + (b - a) * i / (points - 1);
        json v = from_space(p, x);
        if (std::find(axis.begin(), axis.end(), v) == axis.end()) axis.push_back(std::move(v));
      }
    }
    total *= static_cast<double>(axis.size());
    axes.push_back(std::move(axis));
  }
  if (total > static_cast<double>(max_trials))
    return make_error("the grid has " + std::to_string(static_cast<int64_t>(total)) +
                      " combinations, more than " + std::to_string(max_trials) +
                      " (fewer --grid-points, or --method random)");
  std::vector<json> out(1, json::object());
  for (size_t a = 0; a < axes.size(); ++a) {
    std::vector<json> next;
    for (const json& base : out)
      for (const json& v : axes[a]) {
        json t = base;
        t[space[a].name] = v;
        next.push_back(std::move(t));
      }
    out = std::move(next);
  }
  return out;
}

nlohmann::json random_trial(const std::vector<SweepParam>& space, uint64_t seed, int64_t trial) {
  std::mt19937_64 rng = trial_rng(seed, trial, 1);
  json out = json::object();
  for (const SweepParam& p : space) out[p.name] = draw_uniform(p, rng);
  return out;
}

nlohmann::json tpe_trial(const std::vector<SweepParam>& space,
                         const std::vector<Observation>& ended, uint64_t seed, int64_t trial,
                         const TpeOptions& options) {
  if (static_cast<int64_t>(ended.size()) < options.n_startup)
    return random_trial(space, seed, trial);
  // Finished trials by value, then pruned ones; ties by age. The best gamma(n) are good.
  std::vector<size_t> order(ended.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) {
    const double v =
        std::isnan(ended[i].value) ? std::numeric_limits<double>::infinity() : ended[i].value;
    return std::tuple(ended[i].pruned, v, i);
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  const size_t n = ended.size();
  const size_t n_good =
      std::min<size_t>(static_cast<size_t>(std::ceil(0.1 * static_cast<double>(n))), 25);
  std::vector<size_t> good(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n_good));
  std::vector<size_t> bad(order.begin() + static_cast<std::ptrdiff_t>(n_good), order.end());
  // Kernels keep trial order (their weights ramp by age).
  std::sort(good.begin(), good.end());
  std::sort(bad.begin(), bad.end());

  std::mt19937_64 rng = trial_rng(seed, trial, 2);
  json out = json::object();
  for (const SweepParam& p : space) {
    std::vector<const Observation*> g, b;
    for (size_t i : good)
      if (ended[i].params.contains(p.name)) g.push_back(&ended[i]);
    for (size_t i : bad)
      if (ended[i].params.contains(p.name)) b.push_back(&ended[i]);
    if (p.is_choice()) {
      const std::vector<double> lg =
          choice_weights(p, g, Parzen::ramp(g.size()), options.prior_weight);
      const std::vector<double> lb =
          choice_weights(p, b, Parzen::ramp(b.size()), options.prior_weight);
      std::discrete_distribution<size_t> pick(lg.begin(), lg.end());
      size_t best = pick(rng);
      double best_score = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < options.n_candidates; ++c) {
        const size_t k = c == 0 ? best : pick(rng);
        const double score = std::log(lg[k]) - std::log(lb[k]);
        if (score > best_score) best = k, best_score = score;
      }
      out[p.name] = p.choices[best];
      continue;
    }
    auto xs = [&](const std::vector<const Observation*>& obs) {
      std::vector<double> v;
      for (const Observation* o : obs) {
        const json& x = o->params[p.name];
        if (x.is_number()) v.push_back(to_space(p, std::clamp(x.get<double>(), p.lo, p.hi)));
      }
      return v;
    };
    const Range r = range_of(p);
    const Parzen lg(xs(g), r, options.prior_weight), lb(xs(b), r, options.prior_weight);
    double best = lg.sample(rng), best_score = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < options.n_candidates; ++c) {
      const double x = c == 0 ? best : lg.sample(rng);
      const double score = lg.log_density(x) - lb.log_density(x);
      if (score > best_score) best = x, best_score = score;
    }
    out[p.name] = from_space(p, best);
  }
  return out;
}

}  // namespace mls::runner
