// A thin RAII layer over the sqlite3 C API: a connection with a cache of
// prepared statements, and a statement cursor that resets itself.
//
// Errors are converted to Status here and nowhere else: SQLITE_FULL, I/O
// errors, SQLITE_BUSY/LOCKED and a read-only or corrupt database are
// kUnavailable (the environment), anything else kInternal (a bug).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "taskengine/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace taskengine::sqlite {

// Maps a SQLite result code (and the connection's message) to a Status.
Status ToStatus(int rc, sqlite3* db, std::string_view what);

class Connection;

// A prepared statement borrowed from a Connection's cache. Resets and clears
// its bindings on destruction. Not thread-safe (like its connection).
class Stmt {
 public:
  Stmt(sqlite3_stmt* stmt, Connection* conn) : stmt_(stmt), conn_(conn) {}
  ~Stmt();
  Stmt(Stmt&& o) noexcept : bind_error_(std::move(o.bind_error_)), stmt_(o.stmt_), conn_(o.conn_) {
    o.stmt_ = nullptr;
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& operator=(Stmt&&) = delete;

  // Parameters are 1-based.
  Stmt& Bind(int index, std::int64_t v);
  Stmt& Bind(int index, int v) { return Bind(index, static_cast<std::int64_t>(v)); }
  Stmt& Bind(int index, double v);
  Stmt& Bind(int index, std::string_view v);  // copies (SQLITE_TRANSIENT)
  Stmt& BindNull(int index);
  // Binds NULL for an empty string.
  Stmt& BindOrNull(int index, std::string_view v);

  // Advances: true with a row, false when done; error Status on failure.
  Result<bool> Step();
  // Runs a statement that returns no rows (or ignores them).
  Status Run();

  // Columns are 0-based.
  std::int64_t Int(int col) const;
  double Double(int col) const;
  std::string Text(int col) const;
  std::string_view TextView(int col) const;  // valid until the next Step
  bool IsNull(int col) const;
  // True when the statement writes nothing (a SELECT).
  bool readonly() const;

 private:
  Status bind_error_;
  sqlite3_stmt* stmt_;
  Connection* conn_;
};

// One sqlite3 connection. Not thread-safe: one thread at a time.
class Connection {
 public:
  Connection() = default;
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Opens (creating when `create`) the database file, through the VFS named
  // `vfs` (SQLite's default when null, or kWalBatchVfs).
  Status Open(const std::string& path, bool create, int busy_timeout_ms, const char* vfs = nullptr);
  // Runs one or more statements without results (PRAGMA, DDL, BEGIN...).
  Status Exec(std::string_view sql);
  // The statement for `sql`, prepared once and cached for the connection's
  // life. `sql` must outlive the connection (a string literal): the cache is
  // keyed by its address.
  Result<Stmt> Prepare(const char* sql);
  // The statement for a built `sql` (a search), cached by its text for the
  // connection's life: callers build few distinct texts.
  Result<Stmt> PrepareText(const std::string& sql);
  // True when no transaction is open (SQLite rolled back or committed).
  bool autocommit() const;
  std::int64_t last_insert_rowid() const;
  int changes() const;
  sqlite3* raw() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, sqlite3_stmt*> cache_;
  std::unordered_map<std::string, sqlite3_stmt*> text_cache_;
};

}  // namespace taskengine::sqlite
