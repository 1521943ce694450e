// Compaction of a SQLite database file (`taskengine db:vacuum`): rewrites the
// file without its free pages and switches it to incremental auto-vacuum, so
// that from then on retention gives freed space back by itself
// (Store::ReclaimSpace). Databases created by this version are in that mode
// from the start and never need it.
#pragma once

#include <cstdint>
#include <string>

#include "taskengine/status.h"

namespace taskengine::sqlite {

struct VacuumReport {
  std::int64_t bytes_before = 0;  // the database file (without its WAL)
  std::int64_t bytes_after = 0;
  bool was_incremental = false;  // already in incremental auto-vacuum mode
};

// VACUUM of the database at `path`. It holds the write lock while it copies
// the file (other writers wait up to `busy_timeout_ms`, then fail), and needs
// free disk space about the size of the database. kNotFound when `path`
// does not exist, kUnavailable when the database is busy or on I/O errors.
Result<VacuumReport> Vacuum(const std::string& path, int busy_timeout_ms);

}  // namespace taskengine::sqlite
