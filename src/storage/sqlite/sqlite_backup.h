// Online backup of a SQLite database file with SQLite's backup API: a
// consistent copy taken while `serve` keeps writing (the copy restarts its
// pass when the source changes under it, so it always ends consistent).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "taskengine/status.h"

namespace taskengine::sqlite {

struct BackupProgress {
  std::int64_t pages_done = 0;
  std::int64_t pages_total = 0;
};

// Copies the database at `source` into a new file `dest` (kInvalidArgument
// when `dest` exists: a backup never overwrites) in steps of
// `pages_per_step` pages, calling `progress` (may be empty) after each step
// and sleeping `pause_ms` between steps so writers are not starved. The copy
// is written to "<dest>.partial" and renamed when complete, then checked
// with `PRAGMA integrity_check`; a failure leaves no `dest`.
// kNotFound when `source` does not exist, kUnavailable on I/O errors.
Status Backup(const std::string& source, const std::string& dest, int pages_per_step, int pause_ms,
              const std::function<void(const BackupProgress&)>& progress);

}  // namespace taskengine::sqlite
