// Gradebook: what `mlstudio grade` found, in one SQLite file. A grading is one lab graded
// over a batch of submissions; it keeps the lab's goals (in the lab's order), and for each
// submission its status, what was tampered with and every goal's result. The class-wide
// pass rate of each goal, and each student's best result over resubmissions, are read back.
//
//   auto gb = Gradebook::open("class.db");
//   if (!gb) return gb.error();
//   Result<int64_t> g = gb->begin_grading("lab.mls", lab_hash, "Tensors", goals);
//   for (const GradedSubmission& s : graded) gb->record(*g, s);  // one transaction each
//   gb->finish(*g, wall_seconds);
//   auto rates = gb->pass_rates(*g);  // [{"fwd", "f'(2) within 1e-6", false, 27, 30}, ...]
//
// The file says what it is: PRAGMA application_id marks a gradebook (a run database or any
// other SQLite file is refused by name, and left as it was), PRAGMA user_version its layout.
// WAL mode and a busy timeout, so a reader may look while the grader writes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/result.h"

namespace mls::store {

// The gradebook's layout (PRAGMA user_version). A newer file is refused, not written to.
// 1: gradings, goals, submissions, tampered, goal_results.
constexpr int64_t kGradebookVersion = 1;
// PRAGMA application_id of a gradebook: "MLSG".
constexpr int32_t kGradebookApplicationId = 0x4D4C5347;

struct GoalDef {
  std::string id;
  std::string text;
  bool hidden = false;
};

struct GoalResult {
  std::string goal_id;
  bool passed = false;
  std::string message;
};

// One student's submission as graded.
struct GradedSubmission {
  std::string student;    // the submission file's stem ("alice" for alice.mls)
  std::string path;       // as given on the command line
  std::string file_hash;  // hex hash of the file's bytes (file_hash.h)
  // "graded"; or why it could not be: "unreadable", "time limit", "memory limit", "crashed",
  // "sandbox". Any non-empty word is stored; these are the grader's.
  std::string status;
  std::string detail;                 // e.g. "time limit of 20 s reached", the parse error
  std::vector<std::string> tampered;  // e.g. "locked cell 'setup' was edited"
  std::vector<GoalResult> goals;      // one per lab goal, in the lab's order
  double seconds = 0;                 // wall time of this submission's grading
  int passed() const;                 // goals passed
};

struct GoalRate {
  std::string goal_id, text;
  bool hidden = false;
  int passed = 0, total = 0;  // total: every submission of the grading, graded or not
};

struct Grading {
  int64_t id = 0;
  std::string lab_path, lab_hash, lab_title;
  std::string started_at;   // ISO-8601 UTC, "2026-11-27T02:31:05.120Z"
  double wall_seconds = 0;  // 0 until finish()
  int submissions = 0;
};

class Gradebook {
 public:
  // Creates the file if missing, or migrates an older layout. Errors name the file: not a
  // database, another program's (or a run) database, a newer layout, a read-only place.
  static Result<Gradebook> open(const std::string& path);
  // For readers (`mlstudio gradebook`): never creates the file and writes nothing; works on
  // a file that cannot be written. The writing methods then fail naming the file.
  static Result<Gradebook> open_read_only(const std::string& path);

  Gradebook(Gradebook&&) noexcept;
  Gradebook& operator=(Gradebook&&) noexcept;
  ~Gradebook();

  const std::string& path() const;

  // A grading of one lab over a batch of submissions; its goals are stored with it, in
  // order. Goal ids must be non-empty and distinct.
  Result<int64_t> begin_grading(const std::string& lab_path, const std::string& lab_hash,
                                const std::string& lab_title, const std::vector<GoalDef>& goals);
  // One transaction: the submission, its tampering and its goal results, or none of them.
  // Each goal result must name one of the grading's goals, at most once.
  Result<void> record(int64_t grading, const GradedSubmission& s);
  Result<void> finish(int64_t grading, double wall_seconds);

  Result<std::vector<Grading>> gradings() const;                             // newest first
  Result<Grading> grading(int64_t id) const;                                 // "no grading 7 in F"
  Result<std::vector<GoalDef>> goals(int64_t grading) const;                 // the lab's order
  Result<std::vector<GradedSubmission>> submissions(int64_t grading) const;  // record order
  // In the lab's goal order; total = the grading's submissions, graded or not (a submission
  // that timed out has passed nothing).
  Result<std::vector<GoalRate>> pass_rates(int64_t grading) const;
  // Each student's best result for a lab (by lab_hash) across gradings, by student name:
  // the most goals passed; of equals, the latest.
  Result<std::vector<GradedSubmission>> best_per_student(const std::string& lab_hash) const;

 private:
  struct Impl;
  explicit Gradebook(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mls::store
