#include "store/run_summary.h"

#include <cmath>
#include <limits>

#include "engine/train/data_source.h"
#include "store/sqlite.h"

namespace mls::store {

// Unqualified columns are the stored row (logged earlier), excluded.* the batch. SQLite
// stores a NaN as NULL, so a NaN latest arrives as NULL. ?10 is metric_higher_is_better.
const char* const kSummaryUpsertSql = R"sql(
INSERT INTO metric_summary(run_id, key, latest, latest_step, "min", "max", best, best_step, count)
VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
ON CONFLICT(run_id, key) DO UPDATE SET
  latest = CASE WHEN excluded.latest_step >= latest_step THEN excluded.latest ELSE latest END,
  latest_step = max(latest_step, excluded.latest_step),
  "min" = CASE WHEN "min" IS NULL THEN excluded."min" WHEN excluded."min" IS NULL THEN "min"
               ELSE min("min", excluded."min") END,
  "max" = CASE WHEN "max" IS NULL THEN excluded."max" WHEN excluded."max" IS NULL THEN "max"
               ELSE max("max", excluded."max") END,
  best_step = CASE WHEN excluded.best IS NULL THEN best_step
                   WHEN best IS NULL THEN excluded.best_step
                   WHEN excluded.best = best THEN min(best_step, excluded.best_step)
                   WHEN (?10 AND excluded.best > best) OR (NOT ?10 AND excluded.best < best)
                     THEN excluded.best_step
                   ELSE best_step END,
  best = CASE WHEN excluded.best IS NULL THEN best WHEN best IS NULL THEN excluded.best
              WHEN ?10 THEN max(best, excluded.best) ELSE min(best, excluded.best) END,
  count = count + excluded.count
)sql";

SummaryAcc::SummaryAcc(std::string key) : higher(metric_higher_is_better(key)) {
  s.key = std::move(key);
}

void SummaryAcc::add(int64_t step, double value) {
  if (s.count == 0 || step >= s.latest_step) {
    s.latest = value;
    s.latest_step = step;
  }
  ++s.count;
  if (std::isnan(value)) return;
  if (!s.min || value < *s.min) s.min = value;
  if (!s.max || value > *s.max) s.max = value;
  bool better = !s.best || (higher ? value > *s.best : value < *s.best);
  if (better) {
    s.best = value;
    s.best_step = step;
  } else if (value == *s.best && step < *s.best_step) {
    s.best_step = step;
  }
}

Result<void> upsert_summary(Stmt& st, int64_t run_id, const SummaryAcc& acc) {
  const MetricSummary& m = acc.s;
  auto scope = st.scoped();
  st.bind_int(1, run_id).bind_text(2, m.key).bind_double(3, m.latest).bind_int(4, m.latest_step);
  if (m.min) st.bind_double(5, *m.min);
  if (m.max) st.bind_double(6, *m.max);
  if (m.best) st.bind_double(7, *m.best).bind_int(8, *m.best_step);
  st.bind_int(9, m.count).bind_int(10, acc.higher ? 1 : 0);
  return st.run();
}

Result<void> recompute_summaries(Db& db, std::optional<int64_t> run_id) {
  Result<Stmt> del = db.prepare(run_id ? "DELETE FROM metric_summary WHERE run_id = ?1"
                                       : "DELETE FROM metric_summary");
  if (!del) return del.error();
  {
    auto scope = del->scoped();
    if (run_id) del->bind_int(1, *run_id);
    if (Result<void> r = del->run(); !r) return r;
  }
  // (run_id, key, step, rowid) is the index's order: one pass, no sort.
  Result<Stmt> points = db.prepare(
      run_id ? "SELECT run_id, key, step, value FROM metrics WHERE run_id = ?1 "
               "ORDER BY run_id, key, step, rowid"
             : "SELECT run_id, key, step, value FROM metrics ORDER BY run_id, key, step, rowid");
  if (!points) return points.error();
  Result<Stmt> up = db.prepare(kSummaryUpsertSql);
  if (!up) return up.error();
  auto scope = points->scoped();
  if (run_id) points->bind_int(1, *run_id);
  std::optional<SummaryAcc> acc;
  int64_t acc_run = 0;
  for (;;) {
    Result<bool> row = points->step();
    if (!row) return row.error();
    int64_t run = *row ? points->column_int(0) : 0;
    std::string key = *row ? points->column_text(1) : std::string();
    if (acc && (!*row || run != acc_run || key != acc->s.key)) {
      if (Result<void> r = upsert_summary(*up, acc_run, *acc); !r) return r;
      acc.reset();
    }
    if (!*row) return {};
    if (!acc) {
      acc.emplace(std::move(key));
      acc_run = run;
    }
    double v = points->column_is_null(3) ? std::numeric_limits<double>::quiet_NaN()
                                         : points->column_double(3);
    acc->add(points->column_int(2), v);
  }
}

}  // namespace mls::store
