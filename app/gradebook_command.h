// `mlstudio gradebook G.db [--grading ID] [--csv | --json]`: reads a gradebook that
// `mlstudio grade --gradebook G.db` wrote, and changes nothing in it.
//
//   mlstudio gradebook class.db                 the gradings, newest first, then the newest
//                                               one's report: a row per student (status,
//                                               goals passed / total, tampering, seconds)
//                                               and each goal's pass rate across the class
//   mlstudio gradebook class.db --grading 3     grading 3's report only
//   mlstudio gradebook class.db --csv > g.csv   student,goal,passed,message: one row per
//                                               student and goal, for a spreadsheet
//   mlstudio gradebook class.db --json          the same as one JSON object
//   mlstudio gradebook class.db --best          each student's best over every grading of
//                                               the newest grading's lab (resubmissions)
//
// Wiring (app/main.cpp): `GradebookOptions gbo; CLI::App* gb = add_gradebook_command(app,
// gbo);` beside the other subcommands, and `if (*gb) return gradebook_command(gbo);`.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace CLI {
class App;
}

namespace mls::app {

struct GradebookOptions {
  std::string path;     // the gradebook (SQLite)
  int64_t grading = 0;  // 0: the newest
  bool csv = false;     // one row per student and goal
  bool json = false;
  bool best = false;  // each student's best over every grading of the grading's lab
};

// Prints to `out` (stdout for the command); failures go to stderr naming the file.
// Returns the exit code: 0, or 1 (no such file, not a gradebook, no such grading).
int gradebook_command(const GradebookOptions& o, std::FILE* out = stdout);

// Adds the `gradebook` subcommand, its options writing into `o`; returns it, so main() can
// ask whether it was given.
CLI::App* add_gradebook_command(CLI::App& app, GradebookOptions& o);

// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break. A field that a
// spreadsheet would take for a formula (= + - @, a tab or CR first) gets a leading ' first:
// a student's file name or a check's message is not a formula to run.
std::string csv_field(const std::string& text);

}  // namespace mls::app
