#include "storage/sqlite/sqlite_vacuum.h"

#include <filesystem>
#include <system_error>

#include "storage/sqlite/sqlite_db.h"

namespace taskengine::sqlite {
namespace {

std::int64_t FileSize(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<std::int64_t>(size);
}

}  // namespace

Result<VacuumReport> Vacuum(const std::string& path, int busy_timeout_ms) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("no database file " + path);
  Connection c;
  TE_RETURN_IF_ERROR(c.Open(path, /*create=*/false, busy_timeout_ms));
  VacuumReport r;
  r.bytes_before = FileSize(path);
  {
    TE_ASSIGN_OR_RETURN(Stmt mode, c.Prepare("PRAGMA auto_vacuum"));
    TE_ASSIGN_OR_RETURN(bool row, mode.Step());
    r.was_incremental = row && mode.Int(0) == 2;
  }
  TE_RETURN_IF_ERROR(c.Exec("PRAGMA auto_vacuum = INCREMENTAL"));
  TE_RETURN_IF_ERROR(c.Exec("VACUUM"));
  // The rewritten pages reach the database file at a checkpoint.
  TE_RETURN_IF_ERROR(c.Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  r.bytes_after = FileSize(path);
  return r;
}

}  // namespace taskengine::sqlite
