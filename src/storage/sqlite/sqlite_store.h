// The embedded SQLite backend of the storage contract.
//
// Design: WAL journal; ONE writer thread owns the write connection and
// group-commits the operations that arrive while it is busy into one
// transaction (admissions, claims, heartbeats, completions, sweeps), each in
// its own savepoint so one failing operation does not undo the others. A
// caller hears "ok" only after the COMMIT that contains its operation
// returned; the callbacks of asynchronous operations (AdmitBatchAsync,
// FinishBatchAsync) run after it on a completer thread, in commit order,
// while the writer goes on with the next batch. Reads use a small pool of read-only connections and
// never wait for the writer. SQLITE_FULL and I/O errors answer kUnavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/random.h"

namespace taskengine {

struct SqliteStoreOptions {
  std::string path;                 // database file; its directory must exist
  SyncMode sync = SyncMode::kFull;  // PRAGMA synchronous. Default: FULL.
  Clock* clock = nullptr;           // not owned; default: the system clock
  RandomSource* random = nullptr;   // not owned; default: seeded from the clock
  int read_connections = 4;         // size of the read pool. Default: 4.
  // Most operations in one group commit. Default: 1024.
  int max_group = 1024;
  // How long a writer waits for another process holding the write lock. Default: 5 s.
  int busy_timeout_ms = 5000;
  // Upper bound on the database size in pages (PRAGMA max_page_count); past
  // it writes fail with kUnavailable as on a full disk. 0 = SQLite's default.
  std::int64_t max_page_count = 0;
  // The WAL growth (in pages) after which a checkpoint copies the WAL into
  // the database file. Default: 1000 (SQLite's auto-checkpoint size, about 4 MB).
  int checkpoint_pages = 1000;
};

// Opens the database (creating the file if needed). Does NOT migrate: call
// Migrate() (the engine and `taskengine migrate` do).
Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options);

}  // namespace taskengine
