#include "runner/checkpoints.h"

#include <filesystem>

#include "store/run_store.h"

namespace mls::runner {

std::string checkpoint_dir(const std::string& db, int64_t run_id) {
  std::filesystem::path p(db);
  std::filesystem::path dir = p.parent_path() / (p.stem().string() + ".checkpoints");
  return (dir / ("run-" + std::to_string(run_id))).string();
}

std::string checkpoint_path(const std::string& db, int64_t run_id, const std::string& which) {
  return (std::filesystem::path(checkpoint_dir(db, run_id)) / (which + ".ckpt")).string();
}

Result<std::string> load_run_checkpoint(Trainer& trainer, const std::string& db, int64_t run_id,
                                        const std::string& which) {
  std::string path = checkpoint_path(db, run_id, which == "auto" ? "best" : which);
  if (which == "auto" && !std::filesystem::exists(path)) path = checkpoint_path(db, run_id, "last");
  if (!std::filesystem::exists(path))
    return make_error(
        "run " + std::to_string(run_id) + " has no checkpoint " + path +
        " (runs save one after each completed epoch; was the run trained with this database?)");
  auto ck = read_checkpoint(path);
  if (!ck) return ck.error();
  if (auto r = trainer.restore(*ck); !r) return make_error(path + ": " + r.error().message);
  return path;
}

int remove_unfinished_checkpoints(const std::string& db, int64_t run_id) {
  namespace fs = std::filesystem;
  std::error_code ec;
  int removed = 0;
  for (const auto& e : fs::directory_iterator(checkpoint_dir(db, run_id), ec)) {
    const std::string name = e.path().filename().string();
    // write_file_atomically's names: "." + target + ".tmp-" + 16 hex digits.
    if (name.size() > 1 && name[0] == '.' && name.find(".ckpt.tmp-") != std::string::npos &&
        fs::remove(e.path(), ec))
      ++removed;
  }
  return removed;
}

Result<std::string> restore_run(Trainer& trainer, const std::string& db, int64_t run_id,
                                const std::string& which) {
  if (which != "best" && which != "last" && which != "auto")
    return make_error("--checkpoint must be best, last or auto, got '" + which + "'");
  auto store = store::RunStore::open_read_only(db);  // eval and predict only read
  if (!store) return store.error();
  auto info = (*store)->get_run(run_id);
  if (!info) return info.error();
  return load_run_checkpoint(trainer, db, run_id, which);
}

}  // namespace mls::runner
