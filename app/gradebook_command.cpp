// `mlstudio gradebook G.db`: the gradings in a gradebook, a per-student report and each
// goal's pass rate. Everything printed was read from a file that a stranger may have
// written (student names come from file names): text goes through terminal_safe, JSON is
// dumped with invalid UTF-8 replaced, CSV fields are quoted and never start a formula.
#include "app/gradebook_command.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/commands.h"
#include "app/text_out.h"
#include "store/gradebook.h"

namespace mls::app {

namespace {

using store::GoalDef;
using store::GoalRate;
using store::GoalResult;
using store::GradedSubmission;
using store::Grading;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string percent(int passed, int total) {
  return total > 0 ? fixed(100.0 * passed / total, 1) + "%" : "-";
}

// A table cell padded to `width` columns, counting UTF-8 code points (a name with an accent
// stays aligned); a wider one keeps a space after it.
std::string cell(const std::string& s, size_t width) {
  return text_columns(s) >= width ? s + " " : pad_columns(s, width);
}

// A submission's result for each of the lab's goals, in the lab's order. A goal it has no
// result for (it timed out, crashed, could not be read) is failed, the message saying why.
std::vector<GoalResult> per_goal(const GradedSubmission& s, const std::vector<GoalDef>& goals) {
  std::vector<GoalResult> out;
  for (const GoalDef& g : goals) {
    auto it = std::find_if(s.goals.begin(), s.goals.end(),
                           [&](const GoalResult& r) { return r.goal_id == g.id; });
    if (it != s.goals.end()) {
      out.push_back(*it);
    } else {
      std::string why = "not graded (" + s.status + (s.detail.empty() ? "" : ": " + s.detail) + ")";
      out.push_back({g.id, false, s.status == "graded" ? "no result" : why});
    }
  }
  return out;
}

nlohmann::json grading_json(const Grading& g) {
  return {{"id", g.id},
          {"lab_path", g.lab_path},
          {"lab_hash", g.lab_hash},
          {"lab_title", g.lab_title},
          {"started_at", g.started_at},
          {"wall_seconds", g.wall_seconds},
          {"submissions", g.submissions}};
}

struct Report {
  Grading grading;
  std::vector<GoalDef> goals;
  std::vector<GradedSubmission> subs;
  std::vector<GoalRate> rates;
  int best_over = 0;  // > 0: subs are each student's best over this many gradings of the lab
};

Result<Report> read_report(const store::Gradebook& gb, int64_t id) {
  Report r;
  Result<Grading> g = gb.grading(id);
  if (!g) return g.error();
  r.grading = *g;
  Result<std::vector<GoalDef>> goals = gb.goals(id);
  if (!goals) return goals.error();
  r.goals = std::move(*goals);
  Result<std::vector<GradedSubmission>> subs = gb.submissions(id);
  if (!subs) return subs.error();
  r.subs = std::move(*subs);
  Result<std::vector<GoalRate>> rates = gb.pass_rates(id);
  if (!rates) return rates.error();
  r.rates = std::move(*rates);
  return r;
}

void print_gradings(std::FILE* out, const std::string& path, const std::vector<Grading>& gs) {
  std::fprintf(out, "%s: %zu grading%s, newest first\n", terminal_safe(path).c_str(), gs.size(),
               gs.size() == 1 ? "" : "s");
  std::fprintf(out, "  %-6s %-25s %-12s %-10s %s\n", "id", "started", "submissions", "wall", "lab");
  for (const Grading& g : gs)
    std::fprintf(out, "  %-6lld %-25s %-12d %-10s %s (%s)\n", static_cast<long long>(g.id),
                 terminal_safe(g.started_at).c_str(), g.submissions,
                 (fixed(g.wall_seconds, 1) + " s").c_str(), terminal_safe(g.lab_title).c_str(),
                 terminal_safe(g.lab_path).c_str());
}

void print_report(std::FILE* out, const Report& r) {
  const Grading& g = r.grading;
  if (r.best_over > 0) {
    std::fprintf(out, "\n%s (%s, lab hash %s): each student's best over %d grading%s\n",
                 terminal_safe(g.lab_title).c_str(), terminal_safe(g.lab_path).c_str(),
                 terminal_safe(g.lab_hash).c_str(), r.best_over, r.best_over == 1 ? "" : "s");
  } else {
    std::fprintf(out, "\ngrading %lld: %s (%s, lab hash %s), started %s, %d submission%s, %s s\n",
                 static_cast<long long>(g.id), terminal_safe(g.lab_title).c_str(),
                 terminal_safe(g.lab_path).c_str(), terminal_safe(g.lab_hash).c_str(),
                 terminal_safe(g.started_at).c_str(), g.submissions, g.submissions == 1 ? "" : "s",
                 fixed(g.wall_seconds, 1).c_str());
  }
  size_t w = 8;
  for (const GradedSubmission& s : r.subs) w = std::max(w, terminal_safe(s.student).size() + 1);
  const int total = static_cast<int>(r.goals.size());
  std::fprintf(out, "\n  %s%-13s %-7s %-9s %s\n", cell("student", w).c_str(), "status", "goals",
               "tampered", "seconds");
  for (const GradedSubmission& s : r.subs) {
    const std::string goals = std::to_string(s.passed()) + "/" + std::to_string(total);
    const std::string tampered = s.tampered.empty() ? "-" : std::to_string(s.tampered.size());
    std::fprintf(out, "  %s%s%-7s %-9s %s\n", cell(terminal_safe(s.student), w).c_str(),
                 cell(terminal_safe(s.status), 14).c_str(), goals.c_str(), tampered.c_str(),
                 fixed(s.seconds, 2).c_str());
  }
  // Why a submission was not graded, and what it tampered with: one line each.
  bool header = false;
  for (const GradedSubmission& s : r.subs) {
    std::vector<std::string> lines;
    if (s.status != "graded" && !s.detail.empty()) lines.push_back(s.detail);
    for (const std::string& t : s.tampered) lines.push_back("tampered: " + t);
    for (const std::string& l : lines) {
      if (!header) std::fprintf(out, "\n  notes\n");
      header = true;
      std::fprintf(out, "  %s%s\n", cell(terminal_safe(s.student), w).c_str(),
                   terminal_safe(l).c_str());
    }
  }
  size_t idw = 5, textw = 5;
  for (const GoalRate& rate : r.rates) {
    idw = std::max(idw, terminal_safe(rate.goal_id).size() + 1);
    textw = std::max(textw, terminal_safe(rate.text).size() + (rate.hidden ? 10 : 1));
  }
  std::fprintf(out, "\n  %s%s%-8s %s\n", cell("goal", idw).c_str(), cell("", textw).c_str(),
               "passed", "rate");
  for (const GoalRate& rate : r.rates) {
    const std::string text = terminal_safe(rate.text) + (rate.hidden ? " (hidden)" : "");
    const std::string count = std::to_string(rate.passed) + "/" + std::to_string(rate.total);
    std::fprintf(out, "  %s%s%-8s %s\n", cell(terminal_safe(rate.goal_id), idw).c_str(),
                 cell(text, textw).c_str(), count.c_str(),
                 percent(rate.passed, rate.total).c_str());
  }
}

// Control characters come out as \xNN here too: a CSV is often looked at in a terminal.
void print_csv(std::FILE* out, const Report& r) {
  auto field = [](const std::string& s) { return csv_field(terminal_safe(s)); };
  std::fprintf(out, "student,goal,passed,message\n");
  for (const GradedSubmission& s : r.subs)
    for (const GoalResult& g : per_goal(s, r.goals))
      std::fprintf(out, "%s,%s,%d,%s\n", field(s.student).c_str(), field(g.goal_id).c_str(),
                   g.passed ? 1 : 0, field(g.message).c_str());
}

nlohmann::json report_json(const Report& r) {
  nlohmann::json j = grading_json(r.grading);
  j["submissions"] = nlohmann::json::array();
  for (const GradedSubmission& s : r.subs) {
    nlohmann::json goals = nlohmann::json::array();
    for (const GoalResult& g : per_goal(s, r.goals))
      goals.push_back({{"goal", g.goal_id}, {"passed", g.passed}, {"message", g.message}});
    j["submissions"].push_back({{"student", s.student},
                                {"path", s.path},
                                {"file_hash", s.file_hash},
                                {"status", s.status},
                                {"detail", s.detail},
                                {"seconds", s.seconds},
                                {"passed", s.passed()},
                                {"total", r.goals.size()},
                                {"tampered", s.tampered},
                                {"goals", goals}});
  }
  j["goals"] = nlohmann::json::array();
  for (const GoalRate& rate : r.rates)
    j["goals"].push_back({{"id", rate.goal_id},
                          {"text", rate.text},
                          {"hidden", rate.hidden},
                          {"passed", rate.passed},
                          {"total", rate.total},
                          {"rate", rate.total > 0 ? double(rate.passed) / rate.total : 0.0}});
  return j;
}

}  // namespace

std::string csv_field(const std::string& text) {
  std::string s = text;
  if (!s.empty() &&
      (s[0] == '=' || s[0] == '+' || s[0] == '-' || s[0] == '@' || s[0] == '\t' || s[0] == '\r'))
    s.insert(s.begin(), '\'');
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

int gradebook_command(const GradebookOptions& o, std::FILE* out) {
  auto failed = [&](const std::string& msg) {
    if (o.json) print_json_failure(msg);
    return fail(msg);
  };
  Result<store::Gradebook> gb = store::Gradebook::open_read_only(o.path);
  if (!gb) return failed(gb.error().message);
  Result<std::vector<Grading>> gs = gb->gradings();
  if (!gs) return failed(gs.error().message);
  if (gs->empty() && o.grading == 0) {
    if (o.json) {
      std::fprintf(
          out, "%s\n",
          terminal_json({{"gradebook", o.path}, {"gradings", nlohmann::json::array()}}).c_str());
    } else if (o.csv) {
      std::fprintf(out, "student,goal,passed,message\n");
    } else {
      std::fprintf(out, "%s: no gradings yet\n", terminal_safe(o.path).c_str());
    }
    return 0;
  }
  const int64_t id = o.grading != 0 ? o.grading : gs->front().id;
  Result<Report> r = read_report(*gb, id);
  if (!r) return failed(r.error().message);
  if (o.best) {
    // The same lab's goals (its hash covers them), each student's best submission.
    Result<std::vector<GradedSubmission>> best = gb->best_per_student(r->grading.lab_hash);
    if (!best) return failed(best.error().message);
    r->subs = std::move(*best);
    for (GoalRate& rate : r->rates) {
      rate.total = static_cast<int>(r->subs.size());
      rate.passed = 0;
      for (const GradedSubmission& s : r->subs)
        for (const GoalResult& res : s.goals)
          rate.passed += res.goal_id == rate.goal_id && res.passed;
    }
    int over = 0;
    for (const Grading& g : *gs) over += g.lab_hash == r->grading.lab_hash;
    r->best_over = over;
  }
  if (o.csv) {
    print_csv(out, *r);
  } else if (o.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const Grading& g : *gs) list.push_back(grading_json(g));
    nlohmann::json j = {{"gradebook", o.path}, {"gradings", list}};
    j[o.best ? "best" : "grading"] = report_json(*r);
    std::fprintf(out, "%s\n", terminal_json(j).c_str());
  } else {
    if (o.grading == 0 && !o.best) print_gradings(out, o.path, *gs);
    print_report(out, *r);
  }
  return 0;
}

CLI::App* add_gradebook_command(CLI::App& app, GradebookOptions& o) {
  CLI::App* c = app.add_subcommand(
      "gradebook", "Read a gradebook: gradings, a report per student and each goal's pass rate");
  c->add_option("gradebook", o.path, "The gradebook (SQLite) that `mlstudio grade` wrote")
      ->required();
  c->add_option("--grading", o.grading, "Which grading to report (default: the newest)")
      ->check(CLI::PositiveNumber);
  CLI::Option* csv =
      c->add_flag("--csv", o.csv, "One row per student and goal: student,goal,passed,message");
  c->add_flag("--json", o.json, "JSON output")->excludes(csv);
  c->add_flag("--best", o.best,
              "Each student's best result over every grading of the same lab (resubmissions)");
  return c;
}

}  // namespace mls::app
