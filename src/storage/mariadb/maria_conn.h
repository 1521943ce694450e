// A thin RAII layer over the MariaDB C client (libmariadb): a connection that
// prepares each statement once (keyed by the address of its text) and
// remembers whether it is broken, typed statement arguments bound in the
// binary protocol, and result rows read as text.
//
// Errors are converted to Status here and nowhere else, from the error
// number: a lost connection (client errors 2000..2999, ER_CONNECTION_KILLED,
// ER_SERVER_SHUTDOWN), "run the transaction again" (ER_LOCK_DEADLOCK,
// ER_LOCK_WAIT_TIMEOUT), an interrupted or timed-out statement and resource
// exhaustion (too many connections, out of memory, disk or table full) are
// kUnavailable; a duplicate key is kConflict; bad data (out of range,
// incorrect or too long a value, invalid JSON, a failed CHECK) is
// kInvalidArgument; anything else kInternal (a bug).
//
// Statements are written with ?N placeholders (sql_session.h) and rewritten
// once, when first prepared, into the driver's positional '?': "?2 ... ?1 ...
// ?2" binds the second, first and second argument.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/sql_session.h"
#include "taskengine/status.h"

struct st_mysql;
struct st_mysql_stmt;

namespace taskengine::maria {

// True when `err` means the session is gone: a client error (2000..2999, e.g.
// CR_SERVER_GONE_ERROR 2006, CR_SERVER_LOST 2013), ER_CONNECTION_KILLED or
// ER_SERVER_SHUTDOWN. ER_QUERY_INTERRUPTED is not: a KILL QUERY leaves the
// session usable (MariaConn checks the connection after one).
bool IsConnectionLoss(unsigned int err);
// True when `err` means "roll back and run the whole transaction again":
// ER_LOCK_DEADLOCK (InnoDB has rolled the transaction back) or
// ER_LOCK_WAIT_TIMEOUT (only the statement was rolled back).
bool IsRetryable(unsigned int err);
// The Status for a failed statement with error number `err` and `message`.
Status StatusForError(unsigned int err, std::string message);

// The parts of a mysql:// or mariadb:// URL:
//   mysql://user:password@host:port/database?param=value
// User and password are percent-decoded; the password, the port (default
// 3306) and the database may be omitted; an IPv6 host is written in brackets.
// Query parameters are accepted and ignored.
struct MariaUrl {
  std::string user;
  std::string password;
  std::string host;
  unsigned int port = 3306;
  std::string database;  // "" for none
};
// kInvalidArgument (naming what is wrong, never the password) for a URL that
// is not of that form.
Result<MariaUrl> ParseMariaUrl(std::string_view url);

struct MariaConnOptions {
  // Default: 5 s.
  std::chrono::seconds connect_timeout{5};
  // How long a call waits for the server to answer or accept data before the
  // connection is given up as lost (kUnavailable). Default: 30 s.
  std::chrono::seconds read_timeout{30};
  std::chrono::seconds write_timeout{30};
  // The session's innodb_lock_wait_timeout: a row lock waited for longer
  // fails the statement with ER_LOCK_WAIT_TIMEOUT (kUnavailable, retryable).
  // Keep it below read_timeout, or the wait loses the connection instead.
  // Default: 20 s.
  std::chrono::seconds lock_wait_timeout{20};
};

// One connection. Not thread-safe: one thread at a time.
//
// The session is set up for the shared SQL: sql_mode STRICT_ALL_TABLES,
// NO_ZERO_DATE, NO_ZERO_IN_DATE, ERROR_FOR_DIVISION_BY_ZERO,
// NO_ENGINE_SUBSTITUTION, ANSI_QUOTES ("x" is an identifier),
// PIPES_AS_CONCAT (|| concatenates) and NO_BACKSLASH_ESCAPES (a backslash in
// a literal is itself), as in PostgreSQL and SQLite; time zone UTC; READ
// COMMITTED; utf8mb4; autocommit on. Affected rows count the rows an UPDATE
// matched, changed or not (CLIENT_FOUND_ROWS), as on the other backends.
// Never reconnects by itself: a lost connection stays broken (healthy() is
// false) until the owner calls Connect again.
class MariaConn {
 public:
  explicit MariaConn(MariaConnOptions options = {});
  ~MariaConn();
  MariaConn(const MariaConn&) = delete;
  MariaConn& operator=(const MariaConn&) = delete;

  // Connects to `url` (ParseMariaUrl), closing any previous connection and
  // dropping its statements. kInvalidArgument for a bad URL, kUnavailable
  // when the server cannot be reached or refuses the session.
  Status Connect(const std::string& url);
  void Close();
  // Connected and not known to be broken.
  bool healthy() const;

  // Runs one or more statements, separated by ';', in the text protocol (DDL,
  // BEGIN, COMMIT, ROLLBACK, SET); their results are read and dropped. Stops
  // at the first failing statement and returns its error.
  Status Exec(std::string_view sql);

  // Runs `sql`, written with ?N placeholders, as a prepared statement:
  // prepared on first use by this connection and cached by the address of
  // `sql`, which must therefore outlive the connection (a string literal or a
  // constant). `each` sees every result row in order (the result is read
  // whole first, so `each` may run other statements on this connection).
  // Returns the rows the statement changed: the affected rows of an INSERT,
  // UPDATE or DELETE, the rows returned by an INSERT/REPLACE/DELETE ...
  // RETURNING, 0 for a SELECT.
  Result<std::int64_t> Run(const char* sql, const storage_internal::SqlArgs& args,
                           storage_internal::SqlSession::RowSink each);
  // The same for a statement built at run time (a search), cached by its
  // text: callers build few distinct texts.
  Result<std::int64_t> RunText(const std::string& sql, const storage_internal::SqlArgs& args,
                               storage_internal::SqlSession::RowSink each);

  // Runs `sql` (an INSERT, UPDATE or DELETE with ?N placeholders and no
  // result rows) once for each element of `rows`, in order, in one round trip
  // (MariaDB's bulk execution: the arguments are sent as arrays). Every
  // element has the same number of arguments, and each argument the same
  // kind in every element (or NULL). Returns the sum of the rows each
  // execution changed. Stops at the first failing execution; the earlier
  // ones stay done (the caller's transaction decides). Cached by the address
  // of `sql`, as Run. On a server without bulk execution (MySQL), one round
  // trip per element. No element: nothing is sent (not even a prepare).
  Result<std::int64_t> RunBulk(const char* sql, const std::vector<storage_internal::SqlArgs>& rows);

  // The AUTO_INCREMENT value of the last INSERT that generated one (0 if the
  // last statement generated none).
  std::int64_t last_insert_id() const { return last_insert_id_; }
  // The error number of the last failed call (0 after a success).
  unsigned int last_error() const { return last_error_; }
  // How many requests (statements, prepares) this object has sent to a
  // server so far: a caller compares two readings to learn whether a failed
  // request was the first of a sequence.
  std::uint64_t requests() const { return requests_; }

 private:
  struct Statement;

  Result<std::unique_ptr<Statement>> Prepare(std::string_view sql);
  Result<Statement*> Prepared(const char* sql);
  Result<std::int64_t> Execute(Statement& stmt, const storage_internal::SqlArgs& args,
                               storage_internal::SqlSession::RowSink each);
  // Records a failure of the connection (or of `stmt`, when not null) and
  // converts it; marks the connection broken on a connection loss.
  Status Fail(st_mysql_stmt* stmt, std::string_view what);
  void DropStatements();

  // Constant after construction.
  const MariaConnOptions options_;

  st_mysql* conn_ = nullptr;
  bool broken_ = false;
  bool bulk_ = false;  // the server runs bulk executions (RunBulk)
  unsigned int last_error_ = 0;
  std::int64_t last_insert_id_ = 0;
  std::uint64_t requests_ = 0;
  std::unordered_map<const char*, std::unique_ptr<Statement>> prepared_;       // by address
  std::unordered_map<std::string, std::unique_ptr<Statement>> prepared_text_;  // by text
};

// The SqlSession of the shared store logic over one MariaConn, for one
// transaction. Not thread-safe; must not outlive `conn`.
class MariaSession final : public storage_internal::SqlSession {
 public:
  explicit MariaSession(MariaConn& conn) : conn_(conn) {}

  Result<std::int64_t> Run(const char* sql, const storage_internal::SqlArgs& args,
                           RowSink each) override {
    return conn_.Run(sql, args, each);
  }
  Result<std::int64_t> RunText(const std::string& sql, const storage_internal::SqlArgs& args,
                               RowSink each) override {
    return conn_.RunText(sql, args, each);
  }

 private:
  MariaConn& conn_;
};

}  // namespace taskengine::maria
