#include "storage/sqlite/sqlite_db.h"

#include <sqlite3.h>

#include <mutex>

#include "storage/sqlite/sqlite_alloc.h"
#include "storage/sqlite/wal_batch_vfs.h"

namespace taskengine::sqlite {

Status ToStatus(int rc, sqlite3* db, std::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return Status::Ok();
  std::string msg(what);
  msg += ": ";
  msg += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return Unavailable(msg + " (the disk or database is full)");
    case SQLITE_IOERR:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_NOMEM:
    case SQLITE_PROTOCOL:
    case SQLITE_PERM:
      return Unavailable(std::move(msg));
    default:
      return Internal(std::move(msg));
  }
}

Stmt::~Stmt() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Stmt& Stmt::Bind(int index, std::int64_t v) {
  int rc = sqlite3_bind_int64(stmt_, index, v);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = ToStatus(rc, conn_->raw(), "bind");
  return *this;
}

Stmt& Stmt::Bind(int index, double v) {
  int rc = sqlite3_bind_double(stmt_, index, v);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = ToStatus(rc, conn_->raw(), "bind");
  return *this;
}

Stmt& Stmt::Bind(int index, std::string_view v) {
  // A null data pointer would bind SQL NULL; an empty string_view is "".
  const char* data = v.data() != nullptr ? v.data() : "";
  int rc = sqlite3_bind_text64(stmt_, index, data, v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = ToStatus(rc, conn_->raw(), "bind");
  return *this;
}

Stmt& Stmt::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = ToStatus(rc, conn_->raw(), "bind");
  return *this;
}

Stmt& Stmt::BindOrNull(int index, std::string_view v) {
  return v.empty() ? BindNull(index) : Bind(index, v);
}

Result<bool> Stmt::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return ToStatus(rc, conn_->raw(), "step");
}

Status Stmt::Run() {
  while (true) {
    auto r = Step();
    if (!r.ok()) return r.status();
    if (!*r) return Status::Ok();
  }
}

std::int64_t Stmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
double Stmt::Double(int col) const { return sqlite3_column_double(stmt_, col); }
std::string Stmt::Text(int col) const { return std::string(TextView(col)); }
std::string_view Stmt::TextView(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  if (p == nullptr) return {};
  return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
}
bool Stmt::readonly() const { return sqlite3_stmt_readonly(stmt_) != 0; }

bool Stmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

Connection::~Connection() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  for (auto& [sql, stmt] : text_cache_) sqlite3_finalize(stmt);
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Status Connection::Open(const std::string& path, bool create, int busy_timeout_ms,
                        const char* vfs) {
  // Before SQLite initializes (a later call changes nothing): no memory
  // statistics (they take a global mutex on every allocation; we do not read
  // them), and the allocator of sqlite_alloc.h. Then the VFS of
  // wal_batch_vfs.h (registering initializes SQLite); should SQLite refuse
  // it, opening through it fails with "no such vfs".
  static std::once_flag configure;
  std::call_once(configure, [] {
    (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    (void)InstallAllocator();
    (void)RegisterWalBatchVfs();
  });
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, vfs);
  if (rc != SQLITE_OK) {
    Status s = ToStatus(rc, db_, "open " + path);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    return s.code() == ErrorCode::kInternal ? Unavailable(s.message()) : s;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  return Status::Ok();
}

Status Connection::Exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  return ToStatus(rc, db_, "exec");
}

Result<Stmt> Connection::Prepare(const char* sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Stmt(it->second, this);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return ToStatus(rc, db_, "prepare");
  cache_.emplace(sql, stmt);
  return Stmt(stmt, this);
}

Result<Stmt> Connection::PrepareText(const std::string& sql) {
  auto it = text_cache_.find(sql);
  if (it != text_cache_.end()) return Stmt(it->second, this);
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return ToStatus(rc, db_, "prepare");
  text_cache_.emplace(sql, stmt);
  return Stmt(stmt, this);
}

bool Connection::autocommit() const { return sqlite3_get_autocommit(db_) != 0; }
std::int64_t Connection::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int Connection::changes() const { return sqlite3_changes(db_); }

}  // namespace taskengine::sqlite
