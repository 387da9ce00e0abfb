// The run database's layout (schema version 4) and its in-place migration from versions 1-3.
// RunStore::open calls these; nothing else should.
//
//   if (Result<int64_t> v = check_run_db(db); !v) return v.error();   // reads only
//   ... PRAGMA foreign_keys = OFF; BEGIN IMMEDIATE ...
//   if (Result<void> r = create_or_migrate(db); !r) return r.error();  // inside it
#pragma once

#include <cstdint>

#include "engine/core/result.h"

namespace mls::store {

class Db;

// Checks that the file is an mlstudio run database this build can use, reading only (a file
// we refuse is left byte for byte). Returns its schema version, 0 for an empty file. Errors
// name the path: not a database, another program's tables, a newer schema, corruption.
Result<int64_t> check_run_db(Db& db);

// Inside a write transaction begun with foreign keys off: creates the schema in an empty
// file, or upgrades an older one in place (the runs table rebuilt, SQLite's 12-step way, every
// row kept, summaries computed from the points present), then checks foreign keys. A file
// already at the current version is left as it is.
Result<void> create_or_migrate(Db& db);

}  // namespace mls::store
