#include "storage/sqlite/sqlite_backup.h"

#include <sqlite3.h>

#include <filesystem>
#include <system_error>

#include "storage/sqlite/sqlite_db.h"

namespace taskengine::sqlite {

Status Backup(const std::string& source, const std::string& dest, int pages_per_step, int pause_ms,
              const std::function<void(const BackupProgress&)>& progress) {
  std::error_code ec;
  if (!std::filesystem::exists(source, ec)) return NotFound("no database file " + source);
  if (std::filesystem::exists(dest, ec)) {
    return InvalidArgument(dest + " exists; a backup never overwrites a file");
  }
  const std::string partial = dest + ".partial";
  std::filesystem::remove(partial, ec);

  Connection from;
  TE_RETURN_IF_ERROR(from.Open(source, /*create=*/false, /*busy_timeout_ms=*/5000));
  Status copied = [&]() -> Status {
    Connection to;
    TE_RETURN_IF_ERROR(to.Open(partial, /*create=*/true, /*busy_timeout_ms=*/5000));
    sqlite3_backup* b = sqlite3_backup_init(to.raw(), "main", from.raw(), "main");
    if (b == nullptr) return ToStatus(sqlite3_errcode(to.raw()), to.raw(), "backup init");
    int rc = SQLITE_OK;
    while (true) {
      rc = sqlite3_backup_step(b, pages_per_step > 0 ? pages_per_step : -1);
      if (progress) {
        const int total = sqlite3_backup_pagecount(b);
        progress({total - sqlite3_backup_remaining(b), total});
      }
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
      if (pause_ms > 0) sqlite3_sleep(pause_ms);
    }
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) return ToStatus(rc, to.raw(), "backup step");
    // The copy of a WAL database is in WAL mode too; leave one self-contained file.
    TE_RETURN_IF_ERROR(to.Exec("PRAGMA journal_mode=DELETE"));
    auto check = to.Prepare("PRAGMA integrity_check");
    if (!check.ok()) return check.status();
    TE_ASSIGN_OR_RETURN(bool row, check->Step());
    if (!row || check->Text(0) != "ok") {
      return Unavailable("the backup failed its integrity check: " + (row ? check->Text(0) : ""));
    }
    return Status::Ok();
  }();
  if (!copied.ok()) {
    std::filesystem::remove(partial, ec);
    return copied;
  }
  std::filesystem::rename(partial, dest, ec);
  if (ec) return Unavailable("rename " + partial + " -> " + dest + ": " + ec.message());
  return Status::Ok();
}

}  // namespace taskengine::sqlite
