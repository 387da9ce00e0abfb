#include "runner/run_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "runner/checkpoints.h"
#include "store/file_hash.h"
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

// Whether `file` lies inside `folder` once both are resolved (symbolic links included): a
// database from elsewhere may list any path, and `runs delete` must not follow it out.
bool inside(const fs::path& folder, const std::string& file) {
  std::error_code ec;
  const fs::path f = fs::weakly_canonical(fs::path(file).parent_path(), ec);
  if (ec) return false;
  const fs::path root = fs::weakly_canonical(folder, ec);
  if (ec) return false;
  auto [r, fi] = std::mismatch(root.begin(), root.end(), f.begin(), f.end());
  return r == root.end();
}

}  // namespace

Result<DeleteReport> delete_run(const std::string& db, int64_t run_id) {
  auto store = store::RunStore::open(db);
  if (!store) return store.error();
  store::RunStore& s = **store;
  // What the run recorded of its files, read before its rows go.
  auto listed = s.artifacts(run_id);
  if (!listed) return listed.error();
  Result<std::vector<std::string>> paths = s.delete_run(run_id);
  if (!paths) return paths.error();

  DeleteReport report;
  report.run_id = run_id;
  const fs::path db_folder = fs::absolute(db).parent_path();
  for (const store::ArtifactInfo& a : *listed) {
    const std::string file = s.resolve_path(a.path);
    Result<bool> shared = s.artifact_shared(a.path, run_id);
    if (!shared) return shared.error();
    std::error_code ec;
    if (*shared) {
      report.kept.push_back(file);
    } else if (!fs::exists(fs::symlink_status(file, ec))) {
      continue;  // already gone
    } else if (!inside(db_folder, file)) {
      // Only files under the database's folder are the run's to remove: an export written
      // elsewhere is the user's, and a database from a stranger may name any file.
      report.kept.push_back(file);
      report.problems.push_back(file + ": left in place (outside " + db_folder.string() +
                                ", the database's folder)");
    } else if (const fs::file_status st = fs::symlink_status(file, ec);
               !fs::is_regular_file(st) && !fs::is_symlink(st)) {
      // A FIFO (reading it to hash would block), a device, a folder: not a file a run writes.
      report.kept.push_back(file);
      report.problems.push_back(file + ": left in place (not a regular file)");
    } else if (auto h =
                   fs::is_symlink(st) ? Result<std::string>(a.hash) : store::file_hash_hex(file);
               !h || *h != a.hash) {
      // Rewritten since (last.ckpt is, every epoch: its row follows; another file is not).
      report.kept.push_back(file);
      report.problems.push_back(file +
                                ": left in place (its bytes changed since the run recorded it)");
    } else {
      remove_file(file, report);
    }
  }

  const std::string dir = s.resolve_path(fs::absolute(checkpoint_dir(db, run_id)).string());
  std::error_code ec;
  // A link in the run's folder's place points somewhere else: not descended into.
  if (fs::is_symlink(dir, ec) || !fs::is_directory(dir, ec)) return report;
  // Nor one reached through a link above it (the database's "NAME.checkpoints" linked to a
  // folder of the user's): the folder must resolve to a place under the database's folder.
  if (!inside(db_folder, (fs::path(dir) / "x").string())) {
    report.problems.push_back(dir + ": left in place (it resolves outside " + db_folder.string() +
                              ", the database's folder)");
    return report;
  }
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
