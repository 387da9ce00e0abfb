// The run filter language (`runs list --where`, the run browser's filter box) and its fields,
// turned into SQL over the run database (schema 4, store/run_schema.cpp) with every value the
// user typed bound as a parameter: user text is never part of the SQL string.
//
//   SqlBinds binds;
//   Result<std::string> where = filter_sql("params.lr < 0.01 AND NOT tags.bad", binds);
//   // where: "(mls_num((SELECT value FROM params WHERE run_id = r.id AND key = ?1)) < ?2 ...)"
//   Result<Field> f = parse_field("metrics.val/loss.best");
//   std::string expr = field_sql(*f, binds);  // a value for SELECT or ORDER BY
//
// The SQL reads `runs AS r` and calls two functions the connection must have
// (register_filter_functions): mls_num(text), the number a whole text spells or NULL, and
// mls_owner_gone(owner), so a 'running' run whose process is gone reads 'interrupted'.
//
// Grammar (keywords in any case):
//   expr    := or
//   or      := and ("OR" and)*
//   and     := not ("AND" not)*
//   not     := "NOT" not | primary
//   primary := "(" expr ")" | field [op value | ["NOT"] "LIKE" value]
//   op      := = == != <> < <= > >= ~          (~: a glob, * and ?; LIKE: % and _)
//   value   := number | 'text' | "text" | true | false
// A field alone is a test for params, metrics and tags: the run has it. params and tags hold
// text: against a number they compare as numbers (a value that is not a number never
// matches), against text as text. A comparison with a run that lacks the field is false
// (so is its NOT: "lacks" is neither).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/core/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace mls::store {

struct Field {
  enum class Kind { Attribute, Param, Metric, Tag } kind = Kind::Attribute;
  std::string name;           // the attribute ("status") or the key ("val/loss")
  std::string agg;            // metrics: latest min max best count step best_step
  bool numeric() const;       // compares as a number (metrics, id, seed, duration...)
  std::string label() const;  // as written canonically: "metrics.val/loss.best"
};

// The attributes, in the order run_table.h lists them.
const std::vector<std::string>& run_attributes();

// "status", "params.lr", "metrics.val/loss" (.latest), "metrics.`a.b`.max", "tags.keep".
// Errors: "unknown field 'stauts' (did you mean status?)", an unknown aggregate, an empty key.
Result<Field> parse_field(std::string_view text);

// Values bound to ?1, ?2, ... in the order they were added.
using SqlValue = std::variant<int64_t, double, std::string>;
struct SqlBinds {
  std::vector<SqlValue> values;
  std::string add(SqlValue v);  // "?N"
};

// The SQL value of a field for run `r` (NULL where the run has none).
std::string field_sql(const Field& f, SqlBinds& binds);
// For ORDER BY: numbers before text, params' numeric texts by their value.
std::string field_order_sql(const Field& f, SqlBinds& binds, bool descending);

// The filter as a SQL boolean expression; "" (or only spaces) is "1". Errors start
// "--where: column N: " and end with the text and a caret under column N. `fields`, when
// given, receives the fields the filter names (to warn of a key no run has).
Result<std::string> filter_sql(std::string_view where, SqlBinds& binds,
                               std::vector<Field>* fields = nullptr);

// Binds `binds` to a prepared statement (1-based, in order).
void bind_all(sqlite3_stmt* st, const SqlBinds& binds);

// Adds mls_num and mls_owner_gone to a connection.
Result<void> register_filter_functions(sqlite3* db);

// The closest of `candidates` to `word` within a small edit distance, or "".
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace mls::store
