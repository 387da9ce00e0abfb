// The gradebook: what is recorded comes back the same after the file is closed and opened
// again, the class's pass rates equal the ones counted by hand, each student's best
// resubmission is found, and a file that is not a gradebook is refused by name, untouched.
#include "store/gradebook.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>

#include "store/run_store.h"
#include "tests/store/fixtures.h"

using namespace mls;
using namespace mls::store;
using namespace mls::store::test;

namespace {

const std::vector<GoalDef> kGoals = {
    {"fwd", "f'(2) within 1e-6", false},
    {"acc", "test accuracy >= 0.88", false},
    {"grad", "gradients reach fc1", true},
};

GradedSubmission graded(const std::string& student, std::vector<bool> passed) {
  GradedSubmission s;
  s.student = student;
  s.path = "subs/" + student + ".mls";
  s.file_hash = "00000000000000" + std::to_string(10 + student.size());
  s.status = "graded";
  s.seconds = 0.25 * static_cast<double>(student.size());
  for (size_t i = 0; i < passed.size(); ++i)
    s.goals.push_back({kGoals[i].id, passed[i], passed[i] ? "" : kGoals[i].id + " failed: 0.5"});
  return s;
}

// Five students with known results: fwd 3/5, acc 2/5, grad 2/5.
std::vector<GradedSubmission> five() {
  std::vector<GradedSubmission> v;
  v.push_back(graded("alice", {true, true, true}));
  v.push_back(graded("bob", {true, false, true}));
  GradedSubmission carol = graded("carol", {false, false, false});
  carol.tampered = {"locked cell 'setup' was edited", "locked node 'fc1' was removed"};
  v.push_back(carol);
  GradedSubmission dave = graded("dave", {});
  dave.status = "time limit";
  dave.detail = "time limit of 20 s reached";
  dave.seconds = 20.0;
  v.push_back(dave);
  v.push_back(graded("eve", {true, true, false}));
  return v;
}

void require_same(const GradedSubmission& a, const GradedSubmission& b) {
  CHECK(a.student == b.student);
  CHECK(a.path == b.path);
  CHECK(a.file_hash == b.file_hash);
  CHECK(a.status == b.status);
  CHECK(a.detail == b.detail);
  CHECK(a.seconds == b.seconds);
  CHECK(a.tampered == b.tampered);
  REQUIRE(a.goals.size() == b.goals.size());
  for (size_t i = 0; i < a.goals.size(); ++i) {
    CHECK(a.goals[i].goal_id == b.goals[i].goal_id);
    CHECK(a.goals[i].passed == b.goals[i].passed);
    CHECK(a.goals[i].message == b.goals[i].message);
  }
}

void require_rates(const std::vector<GoalRate>& rates) {
  REQUIRE(rates.size() == 3);
  CHECK(rates[0].goal_id == "fwd");
  CHECK(rates[0].text == "f'(2) within 1e-6");
  CHECK_FALSE(rates[0].hidden);
  CHECK(rates[0].passed == 3);
  CHECK(rates[1].goal_id == "acc");
  CHECK(rates[1].passed == 2);
  CHECK(rates[2].goal_id == "grad");
  CHECK(rates[2].hidden);
  CHECK(rates[2].passed == 2);
  for (const GoalRate& r : rates) CHECK(r.total == 5);
}

int64_t grade_all(Gradebook& gb, const std::string& lab_hash,
                  const std::vector<GradedSubmission>& subs) {
  Result<int64_t> g = gb.begin_grading("labs/autodiff.mls", lab_hash, "Autodiff", kGoals);
  REQUIRE(g.ok());
  for (const GradedSubmission& s : subs) {
    Result<void> r = gb.record(*g, s);
    INFO((r ? "" : r.error().message));
    REQUIRE(r.ok());
  }
  return *g;
}

}  // namespace

TEST_CASE("gradebook: five submissions' pass rates equal the hand count, and survive a reopen",
          "[store][gradebook]") {
  TempDir dir;
  const std::string path = dir.file("class.db");
  const std::vector<GradedSubmission> subs = five();
  CHECK(subs[0].passed() == 3);
  CHECK(subs[2].passed() == 0);
  int64_t id = 0;
  {
    Result<Gradebook> gb = Gradebook::open(path);
    REQUIRE(gb.ok());
    id = grade_all(*gb, "abc123", subs);
    REQUIRE(gb->finish(id, 12.5).ok());
    Result<std::vector<GoalRate>> rates = gb->pass_rates(id);
    REQUIRE(rates.ok());
    require_rates(*rates);
  }
  Result<Gradebook> gb = Gradebook::open(path);
  REQUIRE(gb.ok());
  Result<std::vector<Grading>> gs = gb->gradings();
  REQUIRE(gs.ok());
  REQUIRE(gs->size() == 1);
  const Grading& g = gs->front();
  CHECK(g.id == id);
  CHECK(g.lab_path == "labs/autodiff.mls");
  CHECK(g.lab_hash == "abc123");
  CHECK(g.lab_title == "Autodiff");
  CHECK(g.wall_seconds == 12.5);
  CHECK(g.submissions == 5);
  CHECK(g.started_at.size() == 24);  // 2026-11-27T02:31:05.120Z
  CHECK(g.started_at.back() == 'Z');
  Result<std::vector<GoalDef>> goals = gb->goals(id);
  REQUIRE(goals.ok());
  REQUIRE(goals->size() == 3);
  CHECK((*goals)[1].id == "acc");
  CHECK((*goals)[2].hidden);
  Result<std::vector<GradedSubmission>> back = gb->submissions(id);
  REQUIRE(back.ok());
  REQUIRE(back->size() == subs.size());
  for (size_t i = 0; i < subs.size(); ++i) require_same((*back)[i], subs[i]);
  Result<std::vector<GoalRate>> rates = gb->pass_rates(id);
  REQUIRE(rates.ok());
  require_rates(*rates);

  // The same from a reader that cannot write.
  Result<Gradebook> ro = Gradebook::open_read_only(path);
  REQUIRE(ro.ok());
  Result<std::vector<GoalRate>> ro_rates = ro->pass_rates(id);
  REQUIRE(ro_rates.ok());
  require_rates(*ro_rates);
  Result<int64_t> w = ro->begin_grading("x.mls", "h", "X", kGoals);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message == path + ": gradebook opened read-only (by a command that only reads)");
}

TEST_CASE("gradebook: gradings come newest first, and an unknown grading is named",
          "[store][gradebook]") {
  TempDir dir;
  Result<Gradebook> gb = Gradebook::open(dir.file("g.db"));
  REQUIRE(gb.ok());
  const int64_t a = grade_all(*gb, "h1", {graded("ann", {true, true, true})});
  const int64_t b = grade_all(*gb, "h2", five());
  Result<std::vector<Grading>> gs = gb->gradings();
  REQUIRE(gs.ok());
  REQUIRE(gs->size() == 2);
  CHECK((*gs)[0].id == b);
  CHECK((*gs)[0].submissions == 5);
  CHECK((*gs)[1].id == a);
  CHECK((*gs)[1].submissions == 1);
  CHECK((*gs)[1].wall_seconds == 0);  // not finished

  const std::string missing = "no grading 99 in " + dir.file("g.db");
  CHECK(error_of(gb->pass_rates(99)) == missing);
  CHECK(error_of(gb->submissions(99)) == missing);
  CHECK(error_of(gb->finish(99, 1.0)) == missing);
  CHECK(error_of(gb->record(99, graded("zed", {true}))) == missing);
}

TEST_CASE("gradebook: a result for a goal the lab lacks is refused, and nothing is recorded",
          "[store][gradebook]") {
  TempDir dir;
  Result<Gradebook> gb = Gradebook::open(dir.file("g.db"));
  REQUIRE(gb.ok());
  const int64_t g = grade_all(*gb, "h", {});
  GradedSubmission s = graded("mallory", {true});
  s.goals.push_back({"bonus", true, ""});
  CHECK(error_of(gb->record(g, s)) ==
        "submission 'mallory' (subs/mallory.mls): goal 'bonus' is not "
        "a goal of grading " +
            std::to_string(g) + " in " + dir.file("g.db"));
  s.goals = {{"fwd", true, ""}, {"fwd", false, ""}};
  CHECK(error_of(gb->record(g, s)) ==
        "submission 'mallory' (subs/mallory.mls): goal 'fwd' has two results");
  s.goals.clear();
  s.status = "";
  CHECK(error_of(gb->record(g, s)) ==
        "submission 'mallory' (subs/mallory.mls): no status to record");
  CHECK(error_of(gb->begin_grading("l.mls", "h", "L", {{"a", "", false}, {"a", "", false}})) ==
        "l.mls: goal 'a' twice");
  Result<std::vector<GradedSubmission>> subs = gb->submissions(g);
  REQUIRE(subs.ok());
  CHECK(subs->empty());
  Result<std::vector<Grading>> gs = gb->gradings();
  REQUIRE(gs.ok());
  CHECK(gs->size() == 1);
}

TEST_CASE("gradebook: each student's best result over two gradings of the same lab",
          "[store][gradebook]") {
  TempDir dir;
  Result<Gradebook> gb = Gradebook::open(dir.file("g.db"));
  REQUIRE(gb.ok());
  grade_all(*gb, "lab1",
            {graded("alice", {true, false, false}), graded("bob", {true, true, true}),
             graded("carol", {false, true, false})});
  GradedSubmission bob2 = graded("bob", {});
  bob2.status = "crashed";
  bob2.detail = "signal 11";
  GradedSubmission carol2 = graded("carol", {true, false, false});  // as good: the latest wins
  carol2.detail = "resubmitted";
  grade_all(*gb, "lab1", {graded("alice", {true, true, false}), bob2, carol2});
  // Another lab does not count, however well alice did there.
  grade_all(*gb, "lab2", {graded("alice", {true, true, true}), graded("dan", {true, true, true})});

  Result<std::vector<GradedSubmission>> best = gb->best_per_student("lab1");
  REQUIRE(best.ok());
  REQUIRE(best->size() == 3);
  CHECK((*best)[0].student == "alice");
  CHECK((*best)[0].passed() == 2);
  CHECK((*best)[1].student == "bob");
  CHECK((*best)[1].passed() == 3);
  CHECK((*best)[1].status == "graded");
  CHECK((*best)[2].student == "carol");
  CHECK((*best)[2].detail == "resubmitted");
  Result<std::vector<GradedSubmission>> none = gb->best_per_student("lab9");
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("gradebook: a file that is not a gradebook is refused by name and left as it was",
          "[store][gradebook]") {
  TempDir dir;
  const std::string junk = dir.file("junk.db");
  const std::string bytes(4096, 'x');
  write_bytes(junk, bytes);
  CHECK(error_of(Gradebook::open(junk)) ==
        junk + ": not an mlstudio gradebook (file is not a database)");
  CHECK(error_of(Gradebook::open_read_only(junk)) ==
        junk + ": not an mlstudio gradebook (file is not a database)");
  CHECK(read_bytes(junk) == bytes);

  // A run database: mlstudio's own, but not this kind.
  const std::string runs = dir.file("runs.db");
  { REQUIRE(RunStore::open(runs).ok()); }
  const std::string before = read_bytes(runs);
  CHECK(error_of(Gradebook::open(runs)) ==
        runs + ": not an mlstudio gradebook (it is an mlstudio run database)");
  CHECK(read_bytes(runs) == before);

  // Another program's SQLite file.
  const std::string other = dir.file("other.db");
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(other.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "CREATE TABLE photos(id INTEGER)", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
    sqlite3_close(db);
  }
  CHECK(error_of(Gradebook::open(other)) ==
        other +
            ": not an mlstudio gradebook (it holds another program's tables, such as 'photos')");

  // A gradebook from a newer mlstudio is not written with this one's assumptions.
  const std::string newer = dir.file("newer.db");
  { REQUIRE(Gradebook::open(newer).ok()); }
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(newer.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "PRAGMA user_version = 2", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  CHECK(error_of(Gradebook::open(newer)) ==
        newer +
            ": gradebook layout version 2 is newer than this mlstudio supports (1); use a "
            "newer mlstudio to open it");

  CHECK(error_of(Gradebook::open_read_only(dir.file("none.db"))) ==
        dir.file("none.db") + ": no gradebook here (`mlstudio grade LAB.mls ... --gradebook " +
            dir.file("none.db") + "` writes one)");
  CHECK(error_of(Gradebook::open(dir.file("no/such/dir/g.db"))) ==
        dir.file("no/such/dir/g.db") + ": cannot create gradebook: directory " +
            dir.file("no/such/dir") + " does not exist");
}
