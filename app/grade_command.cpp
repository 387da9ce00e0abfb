// `mlstudio grade`: each submission in its own jailed process, the goals streamed back
// through a pipe, the class's report and the gradebook.
#include "app/grade_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "app/commands.h"
#include "app/text_out.h"
#include "engine/cpu/cpu_backend.h"
#include "nodes/edit.h"
#include "scripting/notebook/session.h"
#include "scripting/runtime.h"
#include "store/file_hash.h"

namespace mls::app {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// [SECTION] the child: the graded notebook, results as JSON lines on a pipe

void send(int fd, const json& line) {
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;  // the grader is gone: nothing to tell
    done += static_cast<size_t>(n);
  }
}

json goal_json(const lua::GoalState& g) {
  return {{"goal", g.id}, {"passed", g.passed}, {"message", g.message}, {"reported", g.reported}};
}

int child(const nodes::Document& lab, const nodes::Document& sub, const std::string& path,
          const lua::ScriptOptions& so, bool hidden, int fd) {
  // What the submission prints is not the grader's output.
  if (int null = ::open("/dev/null", O_WRONLY); null >= 0) {
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::close(null);
  }
  if (::chdir(so.root.c_str()) != 0) return 3;
  nodes::Notebook nb = nodes::graded_notebook(lab, sub);
  if (!hidden)
    std::erase_if(nb.cells, [](const nodes::Cell& c) { return c.role == nodes::CellRole::HiddenCheck; });
  nodes::OwnedHistory history(sub);
  lua::NotebookSession s(cpu::backend(), so);
  s.set_lab(lab.lab);
  s.set_project_text(nodes::model_text(sub));
  auto& rt = s.host().runtime();
  rt.project = &history;
  rt.project_path = fs::absolute(path).string();
  s.on_goal = [fd](const lua::GoalState& g) { send(fd, goal_json(g)); };
  s.on_cell_finished = [fd](const lua::CellOutput& out) {
    if (!out.ok) send(fd, {{"cell", out.cell_id}, {"error", out.error.substr(0, out.error.find('\n'))}});
  };
  s.set_cells(nb.cells);
  // For the grader's own test (tests/e2e/grade_test.cpp): the named student's process dies
  // as a faulty native library would make it, to show that a crash fails one submission.
  if (const char* crash = std::getenv("MLSTUDIO_GRADE_CRASH");
      crash && fs::path(path).stem().string() == crash)
    std::raise(SIGSEGV);
  s.run_all();
  json goals = json::array();
  for (const auto& g : s.lab_goals()) goals.push_back(goal_json(g));
  send(fd, {{"done", true}, {"goals", goals}});
  return 0;
}

// [SECTION] the parent: one submission

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// "time limit", "memory limit" or "" from a cell's error (the VM's own limits).
std::string limit_in(const std::string& error) {
  if (error.find("time limit") != std::string::npos) return "time limit";
  if (error.find("instructions") != std::string::npos &&
      error.find("limit") != std::string::npos)
    return "instruction limit";
  if (error.find("memory limit") != std::string::npos ||
      error.find("not enough memory") != std::string::npos)
    return "memory limit";
  return "";
}

}  // namespace

store::GradedSubmission grade_one(const nodes::Document& lab, const std::string& path,
                                  const GradeLimits& limits, bool hidden) {
  const auto t0 = std::chrono::steady_clock::now();
  store::GradedSubmission out;
  out.path = path;
  out.student = fs::path(path).stem().string();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto all_goals = [&](const std::string& why) {
    for (const auto& g : lab.lab.goals)
      if (hidden || !g.hidden) out.goals.push_back({g.id, false, why});
  };
  if (auto h = store::file_hash_hex(path); h) out.file_hash = *h;
  // The submission is parsed here, outside the jail: its JSON takes about 20 times its size
  // in memory (a 100 MB file of numbers took 2 GB), and a lab's copy is tens of kilobytes.
  constexpr uintmax_t kMaxSubmissionBytes = uintmax_t{16} << 20;
  if (std::error_code size_ec; fs::file_size(path, size_ec) > kMaxSubmissionBytes && !size_ec) {
    out.status = "unreadable";
    out.detail = path + ": larger than 16 MiB (a lab's copy is tens of kilobytes)";
    all_goals("not checked: the submission cannot be read");
    out.seconds = seconds();
    return out;
  }
  auto sub = nodes::load_document(path, nodes::GraphCheck::Draft);
  if (!sub) {
    out.status = "unreadable";
    out.detail = sub.error().message;
    all_goals("not checked: the submission cannot be read");
    out.seconds = seconds();
    return out;
  }
  out.tampered = nodes::lock_differences(lab, *sub);
  *sub = nodes::graded_project(lab, *sub);

  // A folder of its own: the sandbox's root, the run database of mls.train.
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec) / "mlstudio-grade";
  fs::create_directories(base, ec);
  std::string tmpl = (base / "sub-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) {
    out.status = "sandbox";
    out.detail = "cannot make a folder under " + base.string();
    all_goals("not checked: " + out.detail);
    return out;
  }
  const std::string root = tmpl;
  lua::ScriptOptions so;
  so.sandbox = true;
  so.root = root;
  so.instruction_limit = limits.instruction_limit;
  so.time_limit_s = limits.timeout_s;
  so.memory_limit = limits.memory_mib << 20;
  so.db_path = (fs::path(root) / "runs.db").string();
  // The lab's folder (its data files), read-only.
  if (!limits.lab_dir.empty()) so.read_only_roots.push_back(fs::absolute(limits.lab_dir).string());
  LuaOptions lo;
  lo.file = path;
  lo.time_limit = limits.timeout_s;
  lo.memory_limit_mib = limits.memory_mib;
  lo.db = so.db_path;
  jail::JailLimits jl = script_jail(lo, so);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    out.status = "sandbox";
    out.detail = "cannot make a pipe";
    all_goals("not checked: " + out.detail);
    fs::remove_all(root, ec);
    return out;
  }
  jl.keep_fds = {fds[1]};
  std::string received;
  std::thread reader([&] {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fds[0], buf, sizeof buf);
      if (n <= 0) break;
      if (received.size() < (size_t{16} << 20)) received.append(buf, static_cast<size_t>(n));
    }
  });
  const jail::JailResult r =
      jail::run_jailed(jl, [&] { return child(lab, *sub, path, so, hidden, fds[1]); });
  ::close(fds[1]);
  reader.join();
  ::close(fds[0]);
  fs::remove_all(root, ec);

  // What the child said, line by line.
  std::map<std::string, store::GoalResult> reported;
  std::vector<store::GoalResult> final_goals;
  std::vector<std::string> cell_errors;
  bool done = false;
  size_t start = 0;
  while (start < received.size()) {
    size_t nl = received.find('\n', start);
    if (nl == std::string::npos) break;  // a line cut by the kill
    json line = json::parse(received.substr(start, nl - start), nullptr, false);
    start = nl + 1;
    if (!line.is_object()) continue;
    if (line.contains("done") && line.contains("goals") && line["goals"].is_array()) {
      done = true;
      for (const auto& g : line["goals"])
        final_goals.push_back({g.value("goal", ""), g.value("passed", false), g.value("message", "")});
    } else if (line.contains("goal")) {
      reported[line.value("goal", "")] = {line.value("goal", ""), line.value("passed", false),
                                          line.value("message", "")};
    } else if (line.contains("cell")) {
      cell_errors.push_back("cell " + line.value("cell", "") + ": " + line.value("error", ""));
    }
  }

  if (!r.reason.empty()) {
    // ("killed by signal 11 (SIGSEGV) (perhaps out of memory...)" is a crash: the VM stops
    // what it counts with its own message first.)
    const bool memory = r.reason.rfind("memory limit", 0) == 0;
    out.status = r.timed_out ? "time limit"
                 : memory ? "memory limit"
                 : r.reason.rfind("sandbox setup failed", 0) == 0 ? "sandbox"
                                                                   : "crashed";
    out.detail = r.reason;
  } else if (!done || r.exit_code != 0) {
    out.status = "crashed";
    out.detail = "the grading process ended with exit code " + std::to_string(r.exit_code);
  } else {
    out.status = "graded";
    // A cell stopped by the VM's own limits names the submission's fault.
    for (const auto& e : cell_errors)
      if (std::string l = limit_in(e); !l.empty()) {
        out.status = l;
        break;
      }
    if (!cell_errors.empty()) out.detail = first_line(cell_errors.front());
  }
  if (done) {
    for (auto& g : final_goals)
      if (hidden || !lab.lab.find(g.goal_id) || !lab.lab.find(g.goal_id)->hidden)
        out.goals.push_back(std::move(g));
  } else {
    for (const auto& g : lab.lab.goals) {
      if (!hidden && g.hidden) continue;
      auto it = reported.find(g.id);
      if (it != reported.end())
        out.goals.push_back(it->second);
      else
        out.goals.push_back({g.id, false, "not checked: " + out.status + " (" + out.detail + ")"});
    }
  }
  out.seconds = seconds();
  return out;
}

}  // namespace mls::app

namespace mls::app {

namespace {

// [SECTION] the class: students' names, the report, the gradebook

Result<nodes::Document> load_lab(const std::string& path) {
  auto lab = nodes::load_document(path, nodes::GraphCheck::Draft);
  if (!lab) return lab.error();
  if (!lab->lab.present || lab->lab.goals.empty())
    return make_error(path + ": not a lab: it has no \"lab\" section with goals (see `mlstudio "
                             "lab --help` and the README's \"Labs\")");
  return lab;
}

// File stems, or "folder/stem" where two submissions share a stem (subs/ann/lab.mls).
std::vector<std::string> student_names(const std::vector<std::string>& paths) {
  std::map<std::string, int> count;
  for (const auto& p : paths) ++count[fs::path(p).stem().string()];
  std::vector<std::string> out;
  for (const auto& p : paths) {
    const fs::path f(p);
    std::string stem = f.stem().string();
    if (count[stem] > 1) {
      const std::string folder = fs::absolute(f).parent_path().filename().string();
      stem = folder + "/" + stem;
    }
    out.push_back(stem);
  }
  return out;
}

std::string pct(int passed, int total) {
  char b[32];
  std::snprintf(b, sizeof b, "%5.1f%%", total ? 100.0 * passed / total : 0.0);
  return b;
}

}  // namespace

int grade_command(const GradeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  auto lab = load_lab(o.lab);
  if (!lab) return fail(lab.error().message);
  if (lab->lab.student)
    return fail(o.lab + " is a student's copy (\"student\": true): grade against the teacher's "
                        "lab, which holds the hidden checks");
  if (o.submissions.empty()) return fail("grade: give the submissions to grade after the lab");
  if (o.timeout < 0 || o.memory_mib < 0 || o.instruction_limit < 0)
    return fail("grade: --timeout, --memory-limit and --instruction-limit must be >= 0");
  GradeLimits limits;
  limits.timeout_s = o.timeout > 0 ? o.timeout : lab->lab.time_limit_s;
  limits.memory_mib = o.memory_mib > 0 ? o.memory_mib : lab->lab.memory_mb;
  limits.instruction_limit = o.instruction_limit;
  limits.lab_dir = fs::absolute(o.lab).parent_path().string();

  std::optional<store::Gradebook> book;
  int64_t grading = 0;
  if (!o.gradebook.empty()) {
    auto b = store::Gradebook::open(o.gradebook);
    if (!b) return fail(b.error().message);
    book.emplace(std::move(*b));
    std::vector<store::GoalDef> goals;
    for (const auto& g : lab->lab.goals) goals.push_back({g.id, g.text, g.hidden});
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx",
                  static_cast<unsigned long long>(store::fnv1a64(nodes::locked_parts_text(*lab))));
    auto id = book->begin_grading(fs::absolute(o.lab).string(), hash, lab->lab.title, goals);
    if (!id) return fail(id.error().message);
    grading = *id;
  }

  const std::vector<std::string> names = student_names(o.submissions);
  std::vector<store::GradedSubmission> results;
  bool grader_failed = false;
  if (!o.quiet)
    std::fprintf(stderr, "mlstudio: grading %zu submission%s of %s (%s; per submission %g s, %lld MiB)\n",
                 o.submissions.size(), o.submissions.size() == 1 ? "" : "s",
                 terminal_safe(lab->lab.title.empty() ? o.lab : lab->lab.title).c_str(),
                 jail::probe_walls().describe().c_str(), limits.timeout_s,
                 static_cast<long long>(limits.memory_mib));
  for (size_t i = 0; i < o.submissions.size(); ++i) {
    store::GradedSubmission s = grade_one(*lab, o.submissions[i], limits, true);
    s.student = names[i];
    if (s.status == "sandbox") grader_failed = true;
    if (!o.quiet) {
      std::fprintf(stderr, "[%zu/%zu] %-16s %-17s %d/%zu goals  %.2f s%s\n", i + 1,
                   o.submissions.size(), terminal_safe(s.student).c_str(), s.status.c_str(),
                   s.passed(), s.goals.size(), s.seconds,
                   s.tampered.empty() ? "" : "  TAMPERED");
      std::fflush(stderr);
    }
    if (book)
      if (auto r = book->record(grading, s); !r) return fail(r.error().message);
    results.push_back(std::move(s));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (book)
    if (auto r = book->finish(grading, wall); !r) return fail(r.error().message);

  // Per goal: how the class did.
  std::vector<store::GoalRate> rates;
  for (const auto& g : lab->lab.goals) {
    store::GoalRate rate{g.id, g.text, g.hidden, 0, static_cast<int>(results.size())};
    for (const auto& s : results)
      for (const auto& r : s.goals)
        if (r.goal_id == g.id && r.passed) ++rate.passed;
    rates.push_back(rate);
  }

  if (o.json) {
    json students = json::array();
    for (const auto& s : results) {
      json goals = json::array();
      for (const auto& g : s.goals)
        goals.push_back({{"goal", g.goal_id}, {"passed", g.passed}, {"message", g.message}});
      students.push_back({{"student", s.student}, {"path", s.path}, {"status", s.status},
                          {"detail", s.detail}, {"tampered", s.tampered},
                          {"passed", s.passed()}, {"goals", goals}, {"seconds", s.seconds}});
    }
    json jr = json::array();
    for (const auto& r : rates)
      jr.push_back({{"goal", r.goal_id}, {"text", r.text}, {"hidden", r.hidden},
                    {"passed", r.passed}, {"total", r.total}});
    json all = {{"lab", o.lab}, {"title", lab->lab.title}, {"students", students},
                {"goals", jr}, {"wall_seconds", wall}};
    if (book) all["grading"] = grading;
    std::printf("%s\n", terminal_json(all).c_str());
    return grader_failed ? 1 : 0;
  }

  std::printf("%s\n", terminal_safe(lab->lab.title.empty() ? o.lab : lab->lab.title).c_str());
  for (const auto& s : results) {
    std::printf("\n%s  %s  %d/%zu goals  %.2f s\n", terminal_safe(s.student).c_str(),
                s.status.c_str(), s.passed(), s.goals.size(), s.seconds);
    if (!s.detail.empty()) std::printf("  %s\n", terminal_safe(first_line(s.detail)).c_str());
    for (const auto& t : s.tampered) std::printf("  TAMPERED: %s\n", terminal_safe(t).c_str());
    for (const auto& g : s.goals)
      std::printf("  %s %-14s %s\n", g.passed ? "pass" : "FAIL", terminal_safe(g.goal_id).c_str(),
                  terminal_safe(g.message).c_str());
  }
  std::printf("\nper goal (%zu submission%s):\n", results.size(), results.size() == 1 ? "" : "s");
  for (const auto& r : rates)
    std::printf("  %-14s %3d/%-3d %s  %s%s\n", terminal_safe(r.goal_id).c_str(), r.passed,
                r.total, pct(r.passed, r.total).c_str(), terminal_safe(r.text).c_str(),
                r.hidden ? " (hidden)" : "");
  int graded = 0;
  for (const auto& s : results) graded += s.status == "graded";
  std::printf("%d of %zu graded to the end; %.1f s in all%s\n", graded, results.size(), wall,
              book ? (", gradebook " + o.gradebook + " grading " + std::to_string(grading)).c_str()
                   : "");
  return grader_failed ? 1 : 0;
}

CLI::App* add_grade_command(CLI::App& app, GradeOptions& o) {
  auto* c = app.add_subcommand(
      "grade", "Grade students' submissions of a lab, each in its own sandboxed process");
  c->add_option("lab", o.lab, "The teacher's lab (.mls, with solutions and hidden checks)")
      ->required();
  c->add_option("submissions", o.submissions, "The students' copies (.mls), one per student")
      ->required();
  c->add_option("--gradebook", o.gradebook,
                "Record each goal's result per student in this SQLite gradebook "
                "(read it with `mlstudio gradebook`)");
  c->add_option("--timeout", o.timeout,
                "Seconds per submission (default: the lab's time_limit_s, else 60)");
  c->add_option("--memory-limit", o.memory_mib,
                "MiB per submission (default: the lab's memory_mb, else 2048)");
  c->add_option("--instruction-limit", o.instruction_limit,
                "Lua VM instructions per cell (default 2e9)")
      ->capture_default_str();
  c->add_flag("--json", o.json, "Print the results as one JSON object");
  c->add_flag("-q,--quiet", o.quiet, "No progress lines");
  return c;
}

// [SECTION] mlstudio lab pack | check

int lab_command(const LabOptions& o) {
  if (o.action == "pack") {
    auto lab = load_lab(o.project);
    if (!lab) return fail(lab.error().message);
    auto student = nodes::pack_student(*lab);
    if (!student) return fail(o.project + ": " + student.error().message);
    if (o.output.empty()) return fail("lab pack: give the student's copy with -o student.mls");
    if (fs::exists(o.output) && !o.force)
      return fail(o.output + " exists (add --force to overwrite it)");
    if (fs::absolute(o.output) == fs::absolute(o.project))
      return fail("lab pack: -o would overwrite the lab itself");
    if (auto r = nodes::save_document(*student, o.output); !r) return fail(r.error().message);
    int answers = 0, hidden = 0, solution_nodes = 0;
    for (const auto& c : lab->notebook.cells) {
      answers += c.role == nodes::CellRole::Answer;
      hidden += c.role == nodes::CellRole::HiddenCheck;
    }
    for (const auto& n : lab->nodes) solution_nodes += n.solution;
    std::printf("wrote %s: %d answer cell%s reset to their starters, %d hidden check%s and %d "
                "solution node%s left out\n",
                o.output.c_str(), answers, answers == 1 ? "" : "s", hidden, hidden == 1 ? "" : "s",
                solution_nodes, solution_nodes == 1 ? "" : "s");
    return 0;
  }
  if (o.action == "check") {
    // "Check my work": the student's own copy holds the lab's visible checks.
    auto doc = load_lab(o.project);
    if (!doc) return fail(doc.error().message);
    GradeLimits limits;
    limits.timeout_s = o.timeout > 0 ? o.timeout : doc->lab.time_limit_s;
    limits.memory_mib = doc->lab.memory_mb;
    limits.lab_dir = fs::absolute(o.project).parent_path().string();
    store::GradedSubmission s = grade_one(*doc, o.project, limits, false);
    if (!s.detail.empty()) std::printf("%s\n", terminal_safe(first_line(s.detail)).c_str());
    for (const auto& g : s.goals) {
      const nodes::LabGoal* goal = doc->lab.find(g.goal_id);
      std::printf("%s %s: %s\n   %s\n", g.passed ? "pass" : "FAIL", terminal_safe(g.goal_id).c_str(),
                  terminal_safe(goal ? goal->text : "").c_str(), terminal_safe(g.message).c_str());
    }
    std::printf("%d of %zu goals met\n", s.passed(), s.goals.size());
    return 0;
  }
  return fail("lab: unknown action '" + o.action + "' (pack, check)");
}

CLI::App* add_lab_command(CLI::App& app, LabOptions& o) {
  auto* c = app.add_subcommand("lab", "Make a student's copy of a lab, or check your work");
  c->require_subcommand(1);
  auto* pack = c->add_subcommand(
      "pack", "Write the student's copy: answers reset to their starters, no hidden checks, "
              "goals or solution nodes");
  pack->add_option("lab", o.project, "The teacher's lab (.mls)")->required();
  pack->add_option("-o,--output", o.output, "The student's copy to write")->required();
  pack->add_flag("--force", o.force, "Overwrite the output if it exists");
  pack->callback([&o] { o.action = "pack"; });
  auto* check = c->add_subcommand(
      "check", "Check my work: run the lab's visible checks on your copy, sandboxed");
  check->add_option("project", o.project, "Your copy of the lab (.mls)")->required();
  check->add_option("--timeout", o.timeout, "Seconds (default: the lab's time_limit_s)");
  check->callback([&o] { o.action = "check"; });
  return c;
}

}  // namespace mls::app
