#include "engine/train/breakpoints.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace mls {

namespace {

// A number that is all of `text` and finite; nullopt otherwise.
std::optional<double> number(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Result<Breakpoints> parse_breakpoints(const std::string& text) {
  Breakpoints b;
  const char* kinds = "nan, spike[:K], dead-relu[:SHARE], grad-norm[:MAX[:MIN]], window:STEPS or none";
  std::stringstream in(text);
  std::string part;
  bool none = false, some = false;
  while (std::getline(in, part, ',')) {
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (part.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ps(part);
    for (std::string x; std::getline(ps, x, ':');) f.push_back(x);
    const std::string& name = f[0];
    auto bad = [&](const std::string& why) -> Error {
      return Error{"breakpoint '" + part + "': " + why + " (one of: " + kinds + ")"};
    };
    auto arg = [&](size_t i, double dflt) -> std::optional<double> {
      if (f.size() <= i) return dflt;
      return number(f[i]);
    };
    if (name == "none") {
      if (f.size() > 1) return bad("'none' takes no value");
      none = true;
      continue;
    }
    some = true;
    if (name == "nan" || name == "inf") {
      if (f.size() > 1) return bad("'nan' takes no value");
      b.nan = true;
    } else if (name == "spike") {
      auto k = arg(1, 10.0);
      if (f.size() > 2 || !k || *k <= 1) return bad("the factor must be a number above 1");
      b.spike = *k;
    } else if (name == "dead-relu") {
      auto s = arg(1, 0.9);
      if (f.size() > 2 || !s || *s <= 0 || *s > 1) return bad("the share must be in (0, 1]");
      b.dead_relu = *s;
    } else if (name == "grad-norm") {
      auto hi = arg(1, 1e3);
      auto lo = arg(2, 0.0);
      if (f.size() > 3 || !hi || !lo || *hi < 0 || *lo < 0 || (*hi > 0 && *lo >= *hi))
        return bad("give MAX (and MIN below it), both non-negative");
      b.grad_norm_max = *hi;
      b.grad_norm_min = *lo;
    } else if (name == "window") {
      auto w = arg(1, -1);
      if (f.size() != 2 || !w || *w < 2 || *w != std::floor(*w) || *w > 1e7)
        return bad("the window is a whole number of steps, 2 or more");
      b.window = static_cast<int64_t>(*w);
    } else {
      return bad("unknown kind");
    }
  }
  if (none && some) return Error{"breakpoints '" + text + "': 'none' cannot be combined with others"};
  return b;
}

std::string breakpoints_text(const Breakpoints& b) {
  std::string s;
  auto add = [&](const std::string& p) { s += (s.empty() ? "" : ",") + p; };
  if (b.nan) add("nan");
  if (b.spike > 0) add("spike:" + short_number(b.spike));
  if (b.dead_relu > 0) add("dead-relu:" + short_number(b.dead_relu));
  if (b.grad_norm_max > 0 || b.grad_norm_min > 0)
    add("grad-norm:" + short_number(b.grad_norm_max) +
        (b.grad_norm_min > 0 ? ":" + short_number(b.grad_norm_min) : ""));
  if (!s.empty() && b.window != Breakpoints{}.window) add("window:" + std::to_string(b.window));
  return s;
}

const char* phase_name(FaultSite::Phase p) {
  switch (p) {
    case FaultSite::Phase::Input: return "input";
    case FaultSite::Phase::Parameter: return "parameter";
    case FaultSite::Phase::Forward: return "forward";
    case FaultSite::Phase::Backward: return "backward";
  }
  return "?";
}

const char* break_kind_name(BreakHit::Kind k) {
  switch (k) {
    case BreakHit::Kind::NonFinite: return "nan";
    case BreakHit::Kind::Spike: return "spike";
    case BreakHit::Kind::DeadRelu: return "dead-relu";
    case BreakHit::Kind::GradNormHigh:
    case BreakHit::Kind::GradNormLow: return "grad-norm";
  }
  return "?";
}

}  // namespace mls
