#include "engine/train/progress_line.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace mls {

std::string format_duration(double s) {
  char buf[32];
  if (s < 10) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
  return buf;
}

std::string comm_text(const ProgressInfo& p) {
  if (!(p.comm_fraction > 0)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "  comm %.0f%%", 100.0 * std::min(1.0, p.comm_fraction));
  return buf;
}

bool Progress::epoch_line_due(int64_t epoch, int64_t epochs) {
  const int64_t every = (epochs + 19) / 20;
  return epoch == 1 || epoch == epochs || epoch % every == 0;
}

void Progress::update(const ProgressInfo& p) {
  auto now = std::chrono::steady_clock::now();
  if (p.epoch_done) {
    if (!epoch_line_due(p.epoch, p.epochs)) {
      if (interactive_) std::fprintf(stderr, "\r\033[K");
      return;
    }
    // "data" is the share of the epoch spent waiting for batches: a slow loader shows here,
    // not as a slow model.
    // Mixed precision: the dynamic loss scale, and the steps skipped for overflow so far (a
    // scale that keeps falling, or many skips, means gradients overflow 16 bits).
    char scale[64] = "";
    if (p.loss_scale != 1 || p.skipped_steps > 0)
      std::snprintf(scale, sizeof scale, "  loss scale %g  skipped %lld", p.loss_scale,
                    static_cast<long long>(p.skipped_steps));
    std::fprintf(
        stderr,
        "%sepoch %lld/%lld  loss %.4f  %.0f samples/s%s  %lld steps  data %.0f%%%s  ETA %s\n",
        interactive_ ? "\r\033[K" : "", static_cast<long long>(p.epoch),
        static_cast<long long>(p.epochs), p.loss, p.samples_per_s, comm_text(p).c_str(),
        static_cast<long long>(p.batches), 100.0 * p.data_fraction, scale,
        format_duration(p.eta_s).c_str());
    std::fflush(stderr);
    return;
  }
  if (!interactive_) return;
  // Redrawing more than ~10 times a second only costs time.
  if (now - last_ < std::chrono::milliseconds(100) && p.batch != p.batches) return;
  last_ = now;
  const int width = 24;
  int filled = static_cast<int>(std::lround(width * static_cast<double>(p.batch) / std::max<int64_t>(p.batches, 1)));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  std::fprintf(stderr,
               "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  loss %.4f  %.0f samples/s%s  ETA %s",
               static_cast<long long>(p.epoch), static_cast<long long>(p.epochs), bar.c_str(),
               static_cast<long long>(p.batch), static_cast<long long>(p.batches), p.loss,
               p.samples_per_s, comm_text(p).c_str(), format_duration(p.eta_s).c_str());
  std::fflush(stderr);
}

}  // namespace mls
