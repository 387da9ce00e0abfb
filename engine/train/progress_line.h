// The live progress line of a training run, written to stderr so that stdout stays
// machine-readable (--json). On a terminal it redraws one line; elsewhere it prints one
// line per epoch. In a data-parallel job (rank 0 prints it) samples/s is the job's over every
// rank, followed by communication's share of the epoch ("comm 12%").
//
//   Progress bar(/*interactive=*/isatty(2));
//   trainer.fit(train, &test, &store, [&](const ProgressInfo& p) { bar.update(p); });
#pragma once

#include <chrono>

#include "engine/train/trainer.h"

namespace mls {

class Progress {
 public:
  explicit Progress(bool interactive) : interactive_(interactive) {}
  void update(const ProgressInfo& p);
  // Long runs print about 20 epoch lines, not hundreds: every k-th epoch, the first and the last.
  static bool epoch_line_due(int64_t epoch, int64_t epochs);

 private:
  bool interactive_;
  std::chrono::steady_clock::time_point last_{};
};

std::string format_duration(double seconds);  // "2m05s", "41s", "0.8s"
// "  comm 12%": a data-parallel job's share of the epoch spent communicating, as the line shows
// it after the job's (global) samples/s; "" on one rank (comm_fraction 0).
std::string comm_text(const ProgressInfo& p);

}  // namespace mls
