// The metric_summary rows: one per (run, metric key), kept by RunStore at every flush and
// recomputed from the points where points are dropped or copied. The folding rule lives
// here once: SummaryAcc::add, and kSummaryUpsertSql, which folds a batch's summary into the
// stored row the same way (a test checks the two agree).
//
//   Result<Stmt> up = db.prepare(kSummaryUpsertSql);
//   SummaryAcc acc("val/accuracy");          // direction from metric_higher_is_better
//   for (const MetricPoint& p : batch) acc.add(p.step, p.value);
//   upsert_summary(*up, run_id, acc);         // inside the caller's transaction
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/core/result.h"
#include "store/run_store.h"

namespace mls::store {

class Db;
class Stmt;

// Inserts a batch's summary, or folds it into the stored row (the batch logged later).
extern const char* const kSummaryUpsertSql;

struct SummaryAcc {
  explicit SummaryAcc(std::string key);
  // Points in logging order. NaN counts and may be latest; it is never min, max or best.
  void add(int64_t step, double value);
  MetricSummary s;
  bool higher = false;  // metric_higher_is_better(key)
};

// `upsert` is a statement prepared from kSummaryUpsertSql.
Result<void> upsert_summary(Stmt& upsert, int64_t run_id, const SummaryAcc& acc);
// Deletes run_id's rows (every run's when nullopt) and computes them again from the points.
Result<void> recompute_summaries(Db& db, std::optional<int64_t> run_id);

}  // namespace mls::store
