#include "runner/run_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "runner/checkpoints.h"
#include "store/run_store.h"

namespace mls::runner {

namespace fs = std::filesystem;

namespace {

// What a run's checkpoint folder holds of its own: "last.ckpt", "best.ckpt", and the
// temporary ".last.ckpt.tmp-..." a killed writer leaves.
bool checkpoint_file_name(const std::string& name) {
  return name.ends_with(".ckpt") ||
         (name.starts_with(".") && name.find(".ckpt.tmp-") != std::string::npos);
}

void remove_file(const std::string& path, DeleteReport& report) {
  std::error_code ec;
  if (fs::remove(path, ec)) {
    report.removed.push_back(path);
  } else if (ec) {
    report.problems.push_back(path + ": cannot remove (" + ec.message() + ")");
  }
}

}  // namespace

Result<DeleteReport> delete_run(const std::string& db, int64_t run_id) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  store::RunStore& s = **store;
  Result<std::vector<std::string>> paths = s.delete_run(run_id);
  if (!paths) return paths.error();

  DeleteReport report;
  report.run_id = run_id;
  for (const std::string& p : *paths) {
    const std::string file = s.resolve_path(p);
    Result<bool> shared = s.artifact_shared(p, run_id);
    if (!shared) return shared.error();
    if (*shared) {
      report.kept.push_back(file);
    } else {
      remove_file(file, report);
    }
  }

  const std::string dir = s.resolve_path(fs::absolute(checkpoint_dir(db, run_id)).string());
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return report;
  bool keep_dir = false;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string file = e.path().string();
    if (std::find(report.kept.begin(), report.kept.end(), file) != report.kept.end()) {
      keep_dir = true;  // one of its artifacts that another run lists, judged above
      continue;
    }
    if (!e.is_regular_file(ec) || !checkpoint_file_name(e.path().filename().string())) {
      keep_dir = true;  // not ours to judge: a user's file, a folder
      report.kept.push_back(file);
      continue;
    }
    Result<bool> shared = s.artifact_shared(file, run_id);
    if (!shared) return shared.error();
    if (*shared) {
      keep_dir = true;
      report.kept.push_back(file);
    } else {
      remove_file(file, report);
    }
  }
  if (ec) report.problems.push_back(dir + ": cannot list (" + ec.message() + ")");
  if (!keep_dir && fs::remove(dir, ec)) report.removed_dir = dir;
  if (ec) report.problems.push_back(dir + ": cannot remove (" + ec.message() + ")");
  return report;
}

}  // namespace mls::runner
