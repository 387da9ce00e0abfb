// `mlstudio grade`, `lab pack`, `lab check` and `gradebook` as a teacher and a student use
// them: a class of 30 generated submissions (one loops forever, one allocates without bound,
// one crashes, one edits a locked cell, one tries to cheat the checks), and every lab in
// resources/labs graded three ways (the reference solution, the student's copy, a copy with
// a locked cell edited).
#include <cstdlib>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;
using nlohmann::json;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path d = temp_dir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A small lab: f(x) = x^3 and its derivative by autograd; a hidden check at x = 3.
json mini_lab() {
  return json::parse(R"LAB({
  "format_version": 1,
  "name": "Derivatives",
  "model": {"nodes": [], "links": []},
  "lab": {
    "title": "Derivatives",
    "goals": [
      {"id": "value", "text": "f(2) = 8"},
      {"id": "deriv", "text": "f'(2) = 12 by autograd, within 1e-4"},
      {"id": "secret", "text": "f'(3) = 27", "hidden": true}
    ],
    "time_limit_s": 3,
    "memory_mb": 256
  },
  "notebook": {"cells": [
    {"id": "intro", "kind": "markdown", "role": "locked", "source": ["# Derivatives"]},
    {"id": "setup", "kind": "lua", "role": "locked", "source": ["x0 = 2"]},
    {"id": "answer", "kind": "lua", "role": "answer",
     "source": ["function f(x) return x * x * x end",
                "function df(x) local t = mls.tensor{x}:requires_grad(); (t * t * t):sum():backward(); return t.grad:sum():item() end"],
     "starter": ["function f(x) return 0 end", "function df(x) return 0 end"]},
    {"id": "check1", "kind": "lua", "role": "check",
     "source": ["lab.near('value', f(x0), 8, 1e-9)", "lab.near('deriv', df(x0), 12, 1e-4)"]},
    {"id": "hidden1", "kind": "lua", "role": "hidden-check",
     "source": ["lab.near('secret', df(3), 27, 1e-3)"]}
  ]}
})LAB");
}

std::string write_json(const fs::path& p, const json& j) {
  std::ofstream(p) << j.dump(2);
  return p.string();
}

json with_answer(json lab, const std::vector<std::string>& lines) {
  for (auto& c : lab["notebook"]["cells"])
    if (c["id"] == "answer") c["source"] = lines;
  return lab;
}

}  // namespace

TEST_CASE("grade: 30 submissions, one looping, one allocating without bound, one crashing",
          "[grade]") {
  const fs::path dir = fresh_dir("grade-class");
  const std::string lab = write_json(dir / "lab.mls", mini_lab());
  // Student i: f right when i % 2 == 0; df right when i % 3 == 0 (then f'(3) is right too),
  // else df returns 12 always (passes f'(2), fails the hidden f'(3)) when i % 3 == 1, else 0.
  std::vector<std::string> subs;
  int want_value = 0, want_deriv = 0, want_secret = 0;
  for (int i = 0; i < 30; ++i) {
    std::vector<std::string> answer;
    answer.push_back(i % 2 == 0 ? "function f(x) return x * x * x end"
                                : "function f(x) return x * x end");
    if (i % 3 == 0)
      answer.push_back(
          "function df(x) local t = mls.tensor{x}:requires_grad(); (t * t * t):sum():backward(); "
          "return t.grad:sum():item() end");
    else if (i % 3 == 1)
      answer.push_back("function df(x) return 12 end");
    else
      answer.push_back("function df(x) return 0 end");
    json doc = with_answer(mini_lab(), answer);
    doc["lab"]["student"] = true;
    const bool broken = i == 27 || i == 28 || i == 29;
    if (i == 27) doc = with_answer(doc, {"while true do end"});
    if (i == 28) doc = with_answer(doc, {"t = {} while true do t[#t + 1] = ('x'):rep(1 << 20) .. #t end"});
    if (i == 25) {  // tries to cheat: replaces lab, math and mls in its own world
      answer.push_back("lab = {near = function() return true end}");
      answer.push_back("math.abs = function() return 0 end");
      answer.push_back("mls.tensor = nil");
      doc = with_answer(doc, answer);
    }
    if (i == 26)  // edits a locked cell (x0 = 3 would make f(x0) = 27)
      for (auto& c : doc["notebook"]["cells"])
        if (c["id"] == "setup") c["source"] = {"x0 = 3"};
    // 29 crashes (MLSTUDIO_GRADE_CRASH below).
    if (!broken) {
      want_value += i % 2 == 0;
      want_deriv += i % 3 != 2;
      want_secret += i % 3 == 0;
    }
    char name[32];
    std::snprintf(name, sizeof name, "s%02d.mls", i);
    subs.push_back(write_json(dir / name, doc));
  }
  std::string args = "grade " + lab;
  for (const auto& s : subs) args += " " + s;
  const std::string book = (dir / "class.db").string();
  ::setenv("MLSTUDIO_GRADE_CRASH", "s29", 1);
  Output o = run(args + " --gradebook " + book + " --json", 300);
  ::unsetenv("MLSTUDIO_GRADE_CRASH");
  INFO(o.err);
  REQUIRE(o.code == 0);  // the students' failures are not the grader's
  const json r = json::parse(last_line(o.out));
  REQUIRE(r["students"].size() == 30);
  std::map<std::string, json> by;
  for (const auto& s : r["students"]) by[s["student"]] = s;
  CHECK(by["s27"]["status"] != "graded");
  CHECK(std::regex_search(by["s27"]["status"].get<std::string>(), std::regex("limit")));
  CHECK(by["s28"]["status"] == "memory limit");
  CHECK(by["s29"]["status"] == "crashed");
  CHECK(std::regex_search(by["s29"]["detail"].get<std::string>(), std::regex("SIGSEGV")));
  int graded = 0;
  for (const auto& [name, s] : by) graded += s["status"] == "graded";
  CHECK(graded == 27);  // every other submission
  // The one that edited a locked cell is reported, and graded with the lab's cell.
  REQUIRE(by["s26"]["tampered"].size() == 1);
  CHECK(by["s26"]["tampered"][0] == "locked cell 'setup' was edited");
  CHECK(by["s26"]["goals"][0]["passed"] == true);  // f(2) = 8 with x0 = 2 restored
  for (const auto& [name, s] : by)
    if (name != "s26") CHECK(s["tampered"].empty());
  // The cheat changed only its own world: its checks ran with the real lab and math.
  CHECK(by["s25"]["goals"][0]["passed"] == false);  // 25 is odd: f is wrong
  // Per-goal pass rates, against the count above.
  std::map<std::string, int> passed;
  for (const auto& g : r["goals"]) {
    CHECK(g["total"] == 30);
    passed[g["goal"]] = g["passed"];
  }
  CHECK(passed["value"] == want_value);
  CHECK(passed["deriv"] == want_deriv);
  CHECK(passed["secret"] == want_secret);
  const double wall = r["wall_seconds"];
  WARN("graded 30 submissions in " << wall << " s");
  CHECK(wall > 0);

  // The gradebook holds the same, as `mlstudio gradebook` reads it.
  Output gb = run("gradebook " + book + " --json");
  REQUIRE(gb.code == 0);
  const json g = json::parse(last_line(gb.out));
  INFO(gb.out);
  bool found = false;
  for (const auto& rate : g.at("grading").at("goals"))
    if (rate.at("id") == "secret") {
      found = true;
      CHECK(rate.at("passed") == want_secret);
      CHECK(rate.at("total") == 30);
    }
  CHECK(found);
}

TEST_CASE("lab pack: the student's copy has starters, no hidden checks or goals", "[grade]") {
  const fs::path dir = fresh_dir("grade-pack");
  const std::string lab = write_json(dir / "lab.mls", mini_lab());
  const std::string student = (dir / "student.mls").string();
  Output o = run("lab pack " + lab + " -o " + student);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const json s = json::parse(read_file(student));
  CHECK(s["lab"]["student"] == true);
  CHECK(s["lab"]["goals"].size() == 2);
  for (const auto& c : s["notebook"]["cells"]) {
    CHECK(c["role"] != "hidden-check");
    if (c["id"] == "answer") CHECK(c["source"] == json{"function f(x) return 0 end", "function df(x) return 0 end"});
  }
  CHECK(run("lab pack " + lab + " -o " + student).code == 1);  // exists: no overwrite
  CHECK(run("lab pack " + student + " -o " + (dir / "again.mls").string()).code == 1);
  // Check my work: the visible goals, unmet, named.
  Output c = run("lab check " + student);
  INFO(c.out << c.err);
  REQUIRE(c.code == 0);
  CHECK(c.out.find("FAIL value") != std::string::npos);
  CHECK(c.out.find("FAIL deriv") != std::string::npos);
  CHECK(c.out.find("secret") == std::string::npos);
  CHECK(c.out.find("0 of 2 goals met") != std::string::npos);
  // A lab that is not one, and a missing gradebook folder, are the grader's failures.
  CHECK(run("grade " + example() + " " + student).code == 1);
  CHECK(run("grade " + lab + " " + student + " --gradebook /nonexistent/dir/g.db").code == 1);
}

TEST_CASE("a lab authored from Lua: set_lab, roles and node marks, then packed and graded",
          "[grade]") {
  const fs::path dir = fresh_dir("grade-author");
  const std::string lab = (dir / "authored.mls").string();
  const std::string script = (dir / "author.lua").string();
  std::ofstream(script) << "local p = mls.project.open('" << example() << "')\n"
                        << R"LUA(
p:set_lab{title = "Count the parameters", time_limit_s = 20,
          goals = {{id = "count", text = "the model's parameter count"},
                   {id = "hidden_count", text = "fc1's weights", hidden = true}}}
p:set_node_marks("fc1", {locked = true})
p:set_node_marks("fc2", {solution = true})
local setup = p:add_cell{source = "p = mls.project.current()"}
p:set_cell_role(setup, "locked")
local q = p:add_cell{source = "n = 784 * 256 + 256 + 256 * 10 + 10"}
p:set_cell_role(q, "answer", "n = 0")
local c = p:add_cell{source = "lab.equal('count', n, 203530)"}
p:set_cell_role(c, "check")
local h = p:add_cell{source = "lab.at_least('hidden_count', n, 784 * 256)"}
p:set_cell_role(h, "hidden-check")
local ok, err = pcall(p.set_cell_role, p, q, "teacher")
assert(not ok and tostring(err):find("unknown role 'teacher'"), tostring(err))
p:save(arg[1])
print(#p:cells())
)LUA";
  Output a = run("lua --trust " + script + " " + lab);
  INFO(a.err);
  REQUIRE(a.code == 0);
  CHECK(a.out == "4\n");
  const std::string student = (dir / "student.mls").string();
  REQUIRE(run("lab pack " + lab + " -o " + student).code == 0);
  const json s = json::parse(read_file(student));
  for (const auto& n : s["model"]["nodes"]) CHECK(n["id"] != "fc2");
  // In the student's copy the same calls are refused.
  const std::string tries = (dir / "tries.lua").string();
  std::ofstream(tries) << "local p = mls.project.open('" << student << "')\n"
                       << "local ok, e = pcall(p.set_node_marks, p, 'fc1', {locked = false})\n"
                       << "print(ok, e:find('student') ~= nil)\n"
                       << "ok, e = pcall(p.set_params, p, 'fc1', {out_features = 8})\n"
                       << "print(ok, e:find('locked by the lab') ~= nil)\n";
  Output t = run("lua --trust " + tries);
  INFO(t.err);
  CHECK(t.out == "false\ttrue\nfalse\ttrue\n");
  Output o = run("grade " + lab + " " + lab + " " + student + " --json --quiet");
  INFO(o.err);
  REQUIRE(o.code == 0);
  const json r = json::parse(last_line(o.out));
  CHECK(r["students"][0]["passed"] == 2);
  CHECK(r["students"][1]["passed"] == 0);
  CHECK(r["students"][1]["goals"][0]["message"] == "got 0, want 203530");
}

TEST_CASE(
    "grade: a submission that makes the lab's data easier is TAMPERED and graded on "
    "the lab's",
    "[grade]") {
  // Red team (helper U): the computational-graphs lab's hidden check trains the student's
  // graph. A one-unit hidden layer initialised at zero reaches 0.69 on the lab's blobs; the
  // hand-edited copy lowered the blobs' noise from 0.5 to 0.01 and passed with 1.000.
  const fs::path dir = fresh_dir("grade-dataset");
  const std::string lab = std::string(MLS_SOURCE_DIR) + "/resources/labs/computational-graphs.mls";
  json l = json::parse(read_file(lab));
  json sub = json::parse(read_file(lab));
  sub["lab"]["student"] = true;
  for (auto& n : sub["model"]["nodes"]) {
    n.erase("solution");
    if (n["id"] == "hidden") {
      n["params"]["out_features"] = 1;
      n["params"]["init"] = "zeros";
    }
  }
  REQUIRE(l["dataset"]["synthetic"]["noise"] == 0.5);
  sub["dataset"]["synthetic"]["noise"] = 0.01;
  const std::string path = write_json(dir / "easy.mls", sub);
  Output o = run("grade " + lab + " " + path + " --json --quiet", 120);
  REQUIRE(o.code == 0);
  const json r = json::parse(o.out);
  const json& s = r["students"][0];
  CHECK(s["status"] == "graded");
  CHECK(s["tampered"] == json::array({"the dataset was changed"}));
  bool saw_trains = false;
  for (const auto& g : s["goals"])
    if (g["goal"] == "trains") {
      saw_trains = true;
      CHECK(g["passed"] == false);
      CHECK(g["message"].get<std::string>().find("test accuracy 0.") == 0);
      CHECK(g["message"].get<std::string>().find("test accuracy 1.000") == std::string::npos);
    }
  CHECK(saw_trains);
}

TEST_CASE("grade: a submission larger than 16 MiB is unreadable, the next one graded", "[grade]") {
  // Red team (helper U): the grader parses each submission itself, outside the jail; a
  // 100 MB file of numbers took it to 2 GB of memory (the loader's cap is 256 MiB).
  const fs::path dir = fresh_dir("grade-huge");
  const std::string lab = write_json(dir / "lab.mls", mini_lab());
  json big = mini_lab();
  big["lab"]["student"] = true;
  big["description"] = std::string((size_t{16} << 20) + 1, 'x');
  const std::string huge = write_json(dir / "huge.mls", big);
  const std::string fine = write_json(dir / "fine.mls", mini_lab());
  Output o = run("grade " + lab + " " + huge + " " + fine + " --json --quiet", 120);
  REQUIRE(o.code == 0);
  const json r = json::parse(o.out);
  REQUIRE(r["students"].size() == 2);
  CHECK(r["students"][0]["status"] == "unreadable");
  CHECK(r["students"][0]["detail"].get<std::string>().find("larger than 16 MiB") !=
        std::string::npos);
  CHECK(r["students"][0]["passed"] == 0);
  CHECK(r["students"][1]["status"] == "graded");
  CHECK(r["students"][1]["passed"] == 3);
}

TEST_CASE("grade --json: a student's name cannot drive the terminal", "[grade]") {
  // A submission's file name is the student's name: here with a C1 CSI (U+009B), which some
  // terminals obey as ESC [. The JSON keeps the name, written as \u009b, never the raw bytes.
  const fs::path dir = fresh_dir("grade-c1");
  const std::string lab = write_json(dir / "lab.mls", mini_lab());
  json sub = mini_lab();
  sub["lab"]["student"] = true;
  const std::string name =
      "evil\xc2\x9b"
      "2J";
  const std::string path = write_json(dir / (name + ".mls"), sub);
  Output o = run("grade " + lab + " '" + path + "' --json --quiet", 120);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("\xc2\x9b") == std::string::npos);
  CHECK(o.out.find("\\u009b") != std::string::npos);
  const json r = json::parse(last_line(o.out));
  REQUIRE(r["students"].size() == 1);
  CHECK(r["students"][0]["student"] == name);
}
