// The classroom grader and the lab commands.
//
//   mlstudio grade LAB.mls SUB.mls... [--gradebook G.db] [--timeout S] [--json]
//   mlstudio lab pack LAB.mls -o student.mls      the student's copy (nodes/lab.h)
//   mlstudio lab check student.mls                "Check my work": the visible checks
//
// Each submission is graded in its own jailed child process (scripting/jail.h: rlimits,
// Landlock, seccomp, a wall clock), inside the Lua sandbox with instruction, time and memory
// limits, so a submission that loops, allocates without bound or crashes fails alone. The
// child runs the graded notebook (the submission's cells, the lab's locked cells restored,
// the lab's checks, hidden ones too) and streams each goal's result to the grader through a
// pipe. Locked parts are compared with the lab's (lock_differences) and reported as
// tampering. The exit code is 0 whatever the students did, 1 only when the grader itself
// fails (the lab cannot be read, the gradebook cannot be written, the sandbox cannot be set).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nodes/document.h"
#include "store/gradebook.h"

namespace CLI {
class App;
}

namespace mls::app {

struct GradeOptions {
  std::string lab;
  std::vector<std::string> submissions;
  std::string gradebook;       // empty: results are printed only
  double timeout = 0;          // seconds per submission; 0: the lab's time_limit_s
  int64_t memory_mib = 0;      // per submission; 0: the lab's memory_mb
  int64_t instruction_limit = 2'000'000'000;  // Lua VM instructions per cell
  bool json = false;
  bool quiet = false;
};
int grade_command(const GradeOptions& o);
CLI::App* add_grade_command(CLI::App& app, GradeOptions& o);

struct LabOptions {
  std::string action;  // "pack" or "check"
  std::string project;
  std::string output;  // pack: the student's copy
  bool force = false;  // pack: overwrite
  double timeout = 0;
};
int lab_command(const LabOptions& o);
CLI::App* add_lab_command(CLI::App& app, LabOptions& o);

// Grades one submission against the lab in a jailed child (what both commands run).
// `hidden` runs the hidden checks too (the grader); the lab check runs only visible ones.
struct GradeLimits {
  double timeout_s = 60;
  int64_t memory_mib = 2048;
  int64_t instruction_limit = 2'000'000'000;
  std::string lab_dir;  // the lab's folder: its data files, readable by the submission
};
store::GradedSubmission grade_one(const nodes::Document& lab, const std::string& path,
                                  const GradeLimits& limits, bool hidden);

}  // namespace mls::app
