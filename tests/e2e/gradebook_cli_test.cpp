// `mlstudio gradebook G.db` as a teacher reads it: the gradings newest first, a grading's
// table per student and each goal's pass rate, a CSV for a spreadsheet, and the refusals
// (no file, a run database, no such grading). The gradebook is written here through
// store/gradebook.h with known results, so every printed figure is known.
#include <regex>

#include <nlohmann/json.hpp>

#include "store/gradebook.h"
#include "store/run_store.h"
#include "tests/e2e/cli_util.h"

using namespace mls::e2e;
using namespace mls::store;

namespace {

const std::vector<GoalDef> kGoals = {{"fwd", "f'(2) within 1e-6", false},
                                     {"acc", "test accuracy >= 0.88", false},
                                     {"grad", "gradients reach fc1", true}};

GradedSubmission sub(const std::string& student, std::vector<bool> passed) {
  GradedSubmission s;
  s.student = student;
  s.path = student + ".mls";
  s.file_hash = "0123456789abcdef";
  s.status = "graded";
  s.seconds = 1.5;
  for (size_t i = 0; i < passed.size(); ++i)
    s.goals.push_back({kGoals[i].id, passed[i], passed[i] ? "ok" : "got 0.5, want 0.9, off"});
  return s;
}

// A student's name from a file: a formula, a CSI clear screen and a C1 CSI (U+009B).
const std::string kEvil = "=evil\x1b[2J" "\xc2\x9b";

// Grading 1: an older lab, one student. Grading 2: five students, fwd 3/5, acc 2/5, grad 2/5,
// one timed out, one tampered, one named to move a terminal's cursor and start a formula.
std::string make_book(const std::string& path) {
  fs::remove(path);
  auto gb = Gradebook::open(path);
  REQUIRE(gb.ok());
  auto g1 = gb->begin_grading("old.mls", "h0", "Old lab", {{"only", "the only goal", false}});
  REQUIRE(g1.ok());
  GradedSubmission solo;
  solo.student = "solo";
  solo.status = "graded";
  solo.goals = {{"only", true, ""}};
  REQUIRE(gb->record(*g1, solo).ok());
  REQUIRE(gb->finish(*g1, 0.5).ok());

  auto g2 = gb->begin_grading("labs/autodiff.mls", "h1", "Autodiff", kGoals);
  REQUIRE(g2.ok());
  REQUIRE(gb->record(*g2, sub("alice", {true, true, true})).ok());
  REQUIRE(gb->record(*g2, sub("bob", {true, false, true})).ok());
  GradedSubmission carol = sub("carol", {false, false, false});
  carol.tampered = {"locked cell 'setup' was edited"};
  REQUIRE(gb->record(*g2, carol).ok());
  GradedSubmission dave = sub("dave", {});
  dave.status = "time limit";
  dave.detail = "time limit of 20 s reached";
  dave.seconds = 20;
  REQUIRE(gb->record(*g2, dave).ok());
  REQUIRE(gb->record(*g2, sub(kEvil, {true, true, false})).ok());
  REQUIRE(gb->finish(*g2, 31.25).ok());
  return path;
}

}  // namespace

TEST_CASE("gradebook command: the gradings, the newest one's students and pass rates",
          "[gradebook]") {
  const std::string book = make_book((temp_dir() / "book.db").string());
  Output o = run("gradebook " + book);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find(book + ": 2 gradings, newest first") != std::string::npos);
  // The list: grading 2 above grading 1.
  const auto at2 = o.out.find("Autodiff (labs/autodiff.mls)");
  const auto at1 = o.out.find("Old lab (old.mls)");
  REQUIRE(at2 != std::string::npos);
  REQUIRE(at1 != std::string::npos);
  CHECK(at2 < at1);
  CHECK(o.out.find("grading 2: Autodiff") != std::string::npos);
  CHECK(o.out.find("5 submissions, 31.2 s") != std::string::npos);
  CHECK(std::regex_search(o.out, std::regex(R"(\n  alice +graded +3/3 +- +1\.50\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  carol +graded +0/3 +1 +1\.50\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  dave +time limit +0/3 +- +20\.00\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  dave +time limit of 20 s reached\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(carol +tampered: locked cell 'setup' was edited)")));
  // The pass rates, as counted by hand.
  CHECK(std::regex_search(o.out, std::regex(R"(\n  fwd +f'\(2\) within 1e-6 +3/5 +60\.0%\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  acc +test accuracy >= 0\.88 +2/5 +40\.0%\n)")));
  CHECK(std::regex_search(
      o.out, std::regex(R"(\n  grad +gradients reach fc1 \(hidden\) +2/5 +40\.0%\n)")));
  // A name from a file cannot drive the terminal.
  CHECK(o.out.find('\x1b') == std::string::npos);
  CHECK(o.out.find("\xc2\x9b") == std::string::npos);
  CHECK(o.out.find("=evil\\x1b[2J") != std::string::npos);

  Output one = run("gradebook " + book + " --grading 1");
  REQUIRE(one.code == 0);
  CHECK(one.out.find("newest first") == std::string::npos);
  CHECK(std::regex_search(one.out, std::regex(R"(\n  only +the only goal +1/1 +100\.0%\n)")));
}

TEST_CASE("gradebook command: --csv has a row per student and goal, quoted, no formulas",
          "[gradebook]") {
  const std::string book = make_book((temp_dir() / "csv.db").string());
  Output o = run("gradebook " + book + " --csv");
  INFO(o.err);
  REQUIRE(o.code == 0);
  std::vector<std::string> lines;
  std::istringstream in(o.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 1 + 5 * 3);
  CHECK(lines[0] == "student,goal,passed,message");
  CHECK(lines[1] == "alice,fwd,1,ok");
  CHECK(lines[5] == "bob,acc,0,\"got 0.5, want 0.9, off\"");
  // A goal a submission has no result for is failed, saying why.
  CHECK(lines[10] == "dave,fwd,0,not graded (time limit: time limit of 20 s reached)");
  // A cell starting with = would be a formula to a spreadsheet.
  CHECK(lines[13] == "'=evil\\x1b[2J\\xc2\\x9b,fwd,1,ok");

  Output j = run("gradebook " + book + " --json");
  REQUIRE(j.code == 0);
  const auto doc = nlohmann::json::parse(last_line(j.out));
  CHECK(doc["gradings"].size() == 2);
  CHECK(doc["grading"]["id"] == 2);
  CHECK(doc["grading"]["submissions"][3]["status"] == "time limit");
  CHECK(doc["grading"]["goals"][0]["passed"] == 3);
  CHECK(doc["grading"]["goals"][0]["total"] == 5);
  // The JSON holds the name as it is, its C1 control escaped (\u009b), never as raw bytes.
  CHECK(doc["grading"]["submissions"][4]["student"] == kEvil);
  CHECK(j.out.find("\xc2\x9b") == std::string::npos);
  CHECK(j.out.find("\\u009b") != std::string::npos);
}

TEST_CASE("gradebook command: a missing file, a run database, an unknown grading are refused",
          "[gradebook]") {
  const std::string missing = (temp_dir() / "none.db").string();
  Output m = run("gradebook " + missing);
  CHECK(m.code == 1);
  CHECK(m.err.find(missing + ": no gradebook here") != std::string::npos);
  CHECK_FALSE(fs::exists(missing));  // a reader creates nothing

  const std::string runs = (temp_dir() / "gb-runs.db").string();
  fs::remove(runs);
  { REQUIRE(RunStore::open(runs).ok()); }
  Output r = run("gradebook " + runs);
  CHECK(r.code == 1);
  CHECK(r.err.find(runs + ": not an mlstudio gradebook (it is an mlstudio run database)") !=
        std::string::npos);

  const std::string book = make_book((temp_dir() / "unknown.db").string());
  Output u = run("gradebook " + book + " --grading 9");
  CHECK(u.code == 1);
  CHECK(u.err.find("no grading 9 in " + book) != std::string::npos);
  CHECK(run("gradebook " + book + " --csv --json").code != 0);
  CHECK(run("gradebook " + book + " --grading 0").code != 0);
}

TEST_CASE("gradebook command: --best takes each student's best over the gradings of a lab",
          "[gradebook]") {
  const std::string book = make_book((temp_dir() / "best.db").string());
  {
    // A second grading of the same lab (hash h1): bob resubmits and passes everything, alice
    // does worse than before, and a new student comes.
    auto gb = Gradebook::open(book);
    REQUIRE(gb.ok());
    auto g3 = gb->begin_grading("labs/autodiff.mls", "h1", "Autodiff", kGoals);
    REQUIRE(g3.ok());
    REQUIRE(gb->record(*g3, sub("bob", {true, true, true})).ok());
    REQUIRE(gb->record(*g3, sub("alice", {false, false, false})).ok());
    REQUIRE(gb->record(*g3, sub("zoe", {true, false, false})).ok());
    REQUIRE(gb->finish(*g3, 2).ok());
  }
  Output o = run("gradebook " + book + " --best");
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("Autodiff (labs/autodiff.mls, lab hash h1): each student's best over 2 "
                   "gradings") != std::string::npos);
  CHECK(std::regex_search(o.out, std::regex(R"(\n  alice +graded +3/3 )")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  bob +graded +3/3 )")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  zoe +graded +1/3 )")));
  CHECK(o.out.find("Old lab") == std::string::npos);
  // Six students: alice, bob, carol, dave, =evil, zoe.
  CHECK(std::regex_search(o.out, std::regex(R"(\n  fwd +f'\(2\) within 1e-6 +4/6 +66\.7%\n)")));
  CHECK(std::regex_search(o.out, std::regex(R"(\n  acc +test accuracy >= 0\.88 +3/6 +50\.0%\n)")));
  CHECK(std::regex_search(
      o.out, std::regex(R"(\n  grad +gradients reach fc1 \(hidden\) +2/6 +33\.3%\n)")));

  Output c = run("gradebook " + book + " --best --csv");
  REQUIRE(c.code == 0);
  CHECK(c.out.find("alice,fwd,1,ok\n") != std::string::npos);
  CHECK(c.out.find("bob,acc,1,ok\n") != std::string::npos);
}
