// A thin RAII layer over libpq: a connection that prepares each statement
// once (by name) and remembers whether it is broken, a result that frees
// itself, and text-format statement parameters.
//
// Errors are converted to Status here and nowhere else, from the SQLSTATE:
// a lost connection (class 08, 57P01..57P03, or PQstatus != CONNECTION_OK),
// resource exhaustion (class 53) and "retry the transaction" (40001, 40P01)
// are kUnavailable; a unique violation (23505) is kConflict; bad data
// (class 22) is kInvalidArgument; anything else kInternal (a bug).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/sql_session.h"
#include "taskengine/status.h"

struct pg_conn;
struct pg_result;

namespace taskengine::pg {

// How many times this thread has sent statements to a server and waited for
// the answer (one per statement, or per pipeline of statements).
std::uint64_t RoundTripsOnThisThread();

// True when `sqlstate` means the session is gone (class 08, 57P01..57P03).
bool IsConnectionLoss(std::string_view sqlstate);
// True when `sqlstate` means "run the whole transaction again" (40001, 40P01).
bool IsRetryable(std::string_view sqlstate);
// The Status for a failed statement with `sqlstate` and `message`.
Status StatusForSqlState(std::string_view sqlstate, std::string message);

// Statement parameters in libpq's text format, typed (bigint, text, boolean,
// bigint[], text[]; NULL untyped), so the SQL needs no casts. Not thread-safe.
class Params {
 public:
  // The shared layer's arguments (sql_session.h).
  static Params From(const storage_internal::SqlArgs& args);

  Params& Add(std::int64_t v);
  Params& Add(int v) { return Add(static_cast<std::int64_t>(v)); }
  Params& Add(bool v);
  Params& Add(std::string_view v);
  Params& Add(const std::string& v) { return Add(std::string_view(v)); }
  Params& Add(const char* v) { return Add(std::string_view(v)); }
  Params& AddNull();
  // NULL for an empty string.
  Params& AddOrNull(std::string_view v);
  // A bigint[] literal, e.g. {1,2,3}.
  Params& AddArray(const std::vector<std::int64_t>& values);
  // A text[] literal; nullopt elements are NULL.
  Params& AddTextArray(const std::vector<std::optional<std::string>>& values);

  int size() const { return static_cast<int>(values_.size()); }
  // Pointers into this object's storage, valid until the next Add.
  const char* const* values() const;
  // The type OID of each parameter (0: let the server infer it).
  const unsigned* types() const { return types_.data(); }

 private:
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<unsigned> types_;
  mutable std::vector<const char*> pointers_;
};

// One statement's result. Move-only; frees the PGresult.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(pg_result* r) : r_(r) {}
  ~PgResult();
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult& operator=(PgResult&& o) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;

  int rows() const;
  bool IsNull(int row, int col) const;
  // Text of a value ("" for NULL).
  std::string Text(int row, int col) const;
  std::string_view TextView(int row, int col) const;  // valid while this result lives
  // An integer value; 0 for NULL; booleans read 't' -> 1, 'f' -> 0.
  std::int64_t Int(int row, int col) const;
  // Rows changed by an INSERT/UPDATE/DELETE.
  std::int64_t affected() const;

 private:
  pg_result* r_ = nullptr;
};

// One libpq connection. Not thread-safe: one thread at a time.
class PgConn {
 public:
  PgConn() = default;
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  // Connects to `conninfo` (a URL or key=value string). When `schema` is not
  // empty, every statement resolves unqualified names in it (search_path).
  // kUnavailable when the server cannot be reached.
  Status Connect(const std::string& conninfo, const std::string& schema);
  void Close();
  // Open and not known to be broken.
  bool healthy() const;

  // Runs one or more statements in the simple query protocol (DDL, BEGIN).
  Result<PgResult> Exec(const std::string& sql);
  // Runs `sql` as a prepared statement: prepared on first use by this
  // connection under a name derived from the address of `sql`, which must
  // therefore outlive the connection (a string literal or a constant). The
  // placeholders may be written $N or ?N (the shared statements); the types
  // of the first call's parameters are the statement's.
  Result<PgResult> Query(const char* sql, const Params& params = Params());
  // Runs a built `sql` (a search) as a prepared statement, prepared on first
  // use and cached by its text: callers build few distinct texts.
  Result<PgResult> QueryText(const std::string& sql, const Params& params);

  // The SQLSTATE of the last failed statement ("" after a success).
  const std::string& last_sqlstate() const { return last_sqlstate_; }

  // Transactions in fewer round trips (libpq's pipeline mode). DeferBegin
  // does not send `begin_sql` (a constant, e.g. "BEGIN ...") at once: the
  // next statement of this connection carries it, in one round trip.
  // QueryLater keeps `sql` (as Query), a statement whose result is not read,
  // for the next statement or Commit, which sends what waits and COMMIT in
  // one round trip; with the BEGIN still deferred and nothing waiting, Commit
  // sends nothing, for nothing was begun. A failed statement leaves the
  // transaction open and failed (the ones after it, COMMIT included, do not
  // run): ROLLBACK it. REQUIRES: no transaction is open at DeferBegin.
  void DeferBegin(const char* begin_sql);
  void QueryLater(const char* sql, Params params);
  Status Commit();
  // Forgets a deferred BEGIN that no statement carried, and statements not
  // yet sent; true when there was such a BEGIN (no transaction is open then).
  bool DropDeferredBegin();
  // True when the statement that carried the deferred BEGIN found the
  // connection lost (it died while idle: nothing of the transaction ran).
  bool lost_at_begin() const { return lost_at_begin_; }

 private:
  // One statement to send: prepared as `name` (after preparing it with
  // `prepare` when that is not empty), or, without a name, `plain`
  // unprepared, without parameters.
  struct Sent {
    std::string name;
    std::string prepare;
    const Params* params = nullptr;
    std::optional<Params> owned;  // QueryLater's (then `params` is unset)
    const Params& args() const { return owned ? *owned : *params; }
    const char* plain = nullptr;
    const char* sql = nullptr;  // Query's key in prepared_
    std::string text;           // else QueryText's key in prepared_text_
  };
  Sent Prepared(const char* sql, const Params& params);
  Sent PreparedText(const std::string& sql, const Params& params);
  // Records that the statement of `s` is prepared on this connection.
  void Remember(const Sent& s);
  // Runs what waits (a deferred BEGIN, QueryLater's statements), then `steps`,
  // in one round trip; the last one's result, or the first error.
  Result<PgResult> Run(std::vector<Sent> steps);
  // Sends `steps` and one Sync, then reads their answers.
  Result<PgResult> Pipeline(const std::vector<Sent>& steps);
  Result<PgResult> Check(pg_result* r, std::string_view what);
  Status Lost(std::string_view what);

  pg_conn* conn_ = nullptr;
  bool broken_ = false;
  std::string last_sqlstate_;
  const char* deferred_begin_ = nullptr;
  std::vector<Sent> later_;  // QueryLater's, not sent yet
  int next_name_ = 0;        // of the next prepared statement
  bool lost_at_begin_ = false;
  std::unordered_map<const char*, std::string> prepared_;       // sql address -> statement name
  std::unordered_map<std::string, std::string> prepared_text_;  // sql text -> statement name
};

}  // namespace taskengine::pg
