#include "storage/postgres/pg_conn.h"

#include <libpq-fe.h>

#include <charconv>
#include <cstdlib>

namespace taskengine::pg {

bool IsConnectionLoss(std::string_view sqlstate) {
  return sqlstate.substr(0, 2) == "08" || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

bool IsRetryable(std::string_view sqlstate) { return sqlstate == "40001" || sqlstate == "40P01"; }

Status StatusForSqlState(std::string_view sqlstate, std::string message) {
  if (IsConnectionLoss(sqlstate) || sqlstate.empty()) {
    return Unavailable("PostgreSQL connection lost: " + message);
  }
  if (IsRetryable(sqlstate) || sqlstate.substr(0, 2) == "53" || sqlstate == "55P03" ||
      sqlstate == "57014") {
    return Unavailable("PostgreSQL: " + message);
  }
  if (sqlstate == "23505") return Conflict("PostgreSQL: " + message);
  if (sqlstate.substr(0, 2) == "22") return InvalidArgument("PostgreSQL: " + message);
  return Internal("PostgreSQL (SQLSTATE " + std::string(sqlstate) + "): " + message);
}

// --- Params --------------------------------------------------------------------

// Parameter type OIDs (pg_type.h): typed parameters need no casts in the SQL.
namespace {
constexpr unsigned kBoolOid = 16;
constexpr unsigned kInt8Oid = 20;
constexpr unsigned kTextOid = 25;
constexpr unsigned kTextArrayOid = 1009;
constexpr unsigned kInt8ArrayOid = 1016;
constexpr unsigned kUnknownOid = 0;  // NULL: the server infers the type
}  // namespace

Params& Params::Add(std::int64_t v) {
  values_.push_back(std::to_string(v));
  null_.push_back(false);
  types_.push_back(kInt8Oid);
  return *this;
}

Params& Params::Add(bool v) {
  values_.emplace_back(v ? "true" : "false");
  null_.push_back(false);
  types_.push_back(kBoolOid);
  return *this;
}

Params& Params::Add(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  types_.push_back(kTextOid);
  return *this;
}

Params& Params::AddNull() {
  values_.emplace_back();
  null_.push_back(true);
  types_.push_back(kUnknownOid);
  return *this;
}

Params& Params::AddOrNull(std::string_view v) { return v.empty() ? AddNull() : Add(v); }

Params& Params::AddArray(const std::vector<std::int64_t>& values) {
  std::string text = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(values[i]);
  }
  text += '}';
  values_.push_back(std::move(text));
  null_.push_back(false);
  types_.push_back(kInt8ArrayOid);
  return *this;
}

Params& Params::AddTextArray(const std::vector<std::optional<std::string>>& values) {
  std::string text = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    if (!values[i]) {
      text += "NULL";
      continue;
    }
    text += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') text += '\\';
      text += c;
    }
    text += '"';
  }
  text += '}';
  values_.push_back(std::move(text));
  null_.push_back(false);
  types_.push_back(kTextArrayOid);
  return *this;
}

Params Params::From(const storage_internal::SqlArgs& args) {
  Params p;
  for (const storage_internal::SqlValue& v : args.values()) {
    switch (v.kind) {
      case storage_internal::SqlValue::Kind::kNull:
        p.AddNull();
        break;
      case storage_internal::SqlValue::Kind::kInt:
        p.Add(v.number);
        break;
      case storage_internal::SqlValue::Kind::kText:
        p.Add(std::string_view(v.text));
        break;
    }
  }
  return p;
}

const char* const* Params::values() const {
  pointers_.assign(values_.size(), nullptr);
  for (std::size_t i = 0; i < values_.size(); ++i) {
    if (!null_[i]) pointers_[i] = values_[i].c_str();
  }
  return pointers_.data();
}

// --- PgResult ------------------------------------------------------------------

PgResult::~PgResult() {
  if (r_ != nullptr) PQclear(r_);
}

PgResult& PgResult::operator=(PgResult&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}

int PgResult::rows() const { return r_ != nullptr ? PQntuples(r_) : 0; }

bool PgResult::IsNull(int row, int col) const { return PQgetisnull(r_, row, col) != 0; }

std::string PgResult::Text(int row, int col) const { return std::string(TextView(row, col)); }

std::string_view PgResult::TextView(int row, int col) const {
  if (PQgetisnull(r_, row, col)) return {};
  return std::string_view(PQgetvalue(r_, row, col),
                          static_cast<std::size_t>(PQgetlength(r_, row, col)));
}

std::int64_t PgResult::Int(int row, int col) const {
  std::string_view v = TextView(row, col);
  if (v.empty()) return 0;
  if (v == "t") return 1;
  if (v == "f") return 0;
  std::int64_t out = 0;
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

std::int64_t PgResult::affected() const {
  if (r_ == nullptr) return 0;
  const char* n = PQcmdTuples(r_);
  return (n != nullptr && *n != '\0') ? std::strtoll(n, nullptr, 10) : 0;
}

// --- PgConn --------------------------------------------------------------------

namespace {

// NOTICEs (e.g. "schema already exists, skipping") are not errors: drop them.
void IgnoreNotice(void*, const char*) {}

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// RoundTripsOnThisThread().
thread_local std::uint64_t t_round_trips = 0;

}  // namespace

std::uint64_t RoundTripsOnThisThread() { return t_round_trips; }

PgConn::~PgConn() { Close(); }

void PgConn::Close() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  broken_ = false;
  prepared_.clear();
  prepared_text_.clear();
  deferred_begin_ = nullptr;
  later_.clear();
}

bool PgConn::healthy() const {
  return conn_ != nullptr && !broken_ && PQstatus(conn_) == CONNECTION_OK;
}

Status PgConn::Connect(const std::string& conninfo, const std::string& schema) {
  Close();
  // Defaults first: settings in `conninfo` (expanded from "dbname") win.
  // Keepalives notice a dead server or network while a call waits on it.
  static const char* const kKeys[] = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "application_name", "dbname",          nullptr};
  const char* const values[] = {"10",   "1", "30", "10", "3", "taskengine", conninfo.c_str(),
                                nullptr};
  conn_ = PQconnectdbParams(kKeys, values, /*expand_dbname=*/1);
  if (conn_ == nullptr) return Unavailable("PostgreSQL: out of memory while connecting");
  if (PQstatus(conn_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    Close();
    return Unavailable("cannot connect to PostgreSQL: " + msg);
  }
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  std::string setup = "SET client_encoding = 'UTF8'; SET TIME ZONE 'UTC'";
  if (!schema.empty()) setup += "; SET search_path TO " + QuoteIdentifier(schema);
  auto r = Exec(setup);
  if (!r.ok()) {
    Close();
    return r.status();
  }
  return Status::Ok();
}

Result<PgResult> PgConn::Check(pg_result* r, std::string_view what) {
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
    last_sqlstate_.clear();
    return PgResult(r);
  }
  PgResult owned(r);
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  last_sqlstate_ = state != nullptr ? state : "";
  std::string msg = r != nullptr ? PQresultErrorMessage(r) : "";
  if (msg.empty() && conn_ != nullptr) msg = PQerrorMessage(conn_);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  msg = std::string(what) + ": " + msg;
  const bool lost =
      conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK || IsConnectionLoss(last_sqlstate_);
  if (lost) {
    broken_ = true;
    if (last_sqlstate_.empty()) last_sqlstate_ = "08006";
    return Unavailable("PostgreSQL connection lost: " + msg);
  }
  return StatusForSqlState(last_sqlstate_, std::move(msg));
}

Status PgConn::Lost(std::string_view what) {
  broken_ = true;
  last_sqlstate_ = "08006";
  std::string msg = conn_ != nullptr ? PQerrorMessage(conn_) : "";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return Unavailable("PostgreSQL connection lost: " + std::string(what) + ": " + msg);
}

Result<PgResult> PgConn::Exec(const std::string& sql) {
  if (conn_ == nullptr) return Unavailable("PostgreSQL: not connected");
  if (deferred_begin_ != nullptr || !later_.empty()) {
    // Several statements in one string cannot share a pipeline: what waits
    // goes first.
    TE_RETURN_IF_ERROR(Run({}).status());
  }
  ++t_round_trips;
  return Check(PQexec(conn_, sql.c_str()), "statement");
}

PgConn::Sent PgConn::Prepared(const char* sql, const Params& params) {
  Sent s;
  s.params = &params;
  s.sql = sql;
  if (auto it = prepared_.find(sql); it != prepared_.end()) {
    s.name = it->second;
  } else {
    s.name = "te" + std::to_string(next_name_++);
    s.prepare =
        storage_internal::TranslatePlaceholders(sql, storage_internal::PlaceholderStyle::kDollar)
            .text;
  }
  return s;
}

PgConn::Sent PgConn::PreparedText(const std::string& sql, const Params& params) {
  Sent s;
  s.params = &params;
  s.text = sql;
  if (auto it = prepared_text_.find(sql); it != prepared_text_.end()) {
    s.name = it->second;
  } else {
    s.name = "tt" + std::to_string(next_name_++);
    s.prepare =
        storage_internal::TranslatePlaceholders(sql, storage_internal::PlaceholderStyle::kDollar)
            .text;
  }
  return s;
}

void PgConn::Remember(const Sent& s) {
  if (s.sql != nullptr) {
    prepared_.emplace(s.sql, s.name);
  } else {
    prepared_text_.emplace(s.text, s.name);
  }
}

Result<PgResult> PgConn::Query(const char* sql, const Params& params) {
  if (conn_ == nullptr) return Unavailable("PostgreSQL: not connected");
  return Run({Prepared(sql, params)});
}

Result<PgResult> PgConn::QueryText(const std::string& sql, const Params& params) {
  if (conn_ == nullptr) return Unavailable("PostgreSQL: not connected");
  return Run({PreparedText(sql, params)});
}

Result<PgResult> PgConn::Run(std::vector<Sent> steps) {
  const bool carries_begin = deferred_begin_ != nullptr;
  if (carries_begin || !later_.empty()) {
    std::vector<Sent> all;
    all.reserve(1 + later_.size() + steps.size());
    if (carries_begin) {
      Sent begin;
      begin.plain = deferred_begin_;
      deferred_begin_ = nullptr;
      all.push_back(std::move(begin));
    }
    for (Sent& s : later_) all.push_back(std::move(s));
    later_.clear();
    for (Sent& s : steps) all.push_back(std::move(s));
    steps = std::move(all);
  }
  Result<PgResult> r = Pipeline(steps);
  if (carries_begin) lost_at_begin_ = !r.ok() && !healthy();
  return r;
}

Result<PgResult> PgConn::Pipeline(const std::vector<Sent>& steps) {
  if (PQenterPipelineMode(conn_) != 1) return Lost("entering pipeline mode");
  // Send everything, then one Sync: the server answers it all in one go.
  for (const Sent& s : steps) {
    int sent = 0;
    if (s.plain != nullptr) {
      sent = PQsendQueryParams(conn_, s.plain, 0, nullptr, nullptr, nullptr, nullptr, 0);
    } else {
      sent = 1;
      if (!s.prepare.empty()) {
        sent = PQsendPrepare(conn_, s.name.c_str(), s.prepare.c_str(), s.args().size(),
                             s.args().types());
      }
      if (sent == 1) {
        sent = PQsendQueryPrepared(conn_, s.name.c_str(), s.args().size(), s.args().values(),
                                   nullptr, nullptr, 0);
      }
    }
    if (sent != 1) return Lost("sending a statement");
  }
  ++t_round_trips;
  if (PQpipelineSync(conn_) != 1) return Lost("sending a pipeline");
  // The results, in order: each command's, then the end of its results.
  Result<PgResult> last = PgResult();
  Status first_error = Status::Ok();
  auto next = [this](std::string_view what, PgResult* out, Status* error) -> Status {
    pg_result* r = PQgetResult(conn_);
    if (r == nullptr) return Lost(what);
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_ABORTED) {
      PQclear(r);
    } else if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
      *out = PgResult(r);
    } else {
      Result<PgResult> checked = Check(r, what);
      if (!healthy()) return checked.status();
      if (error->ok()) *error = checked.status();
    }
    pg_result* end = PQgetResult(conn_);
    if (end != nullptr) {
      PQclear(end);
      return Lost(what);
    }
    return Status::Ok();
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const Sent& s = steps[i];
    PgResult result;
    if (s.plain == nullptr && !s.prepare.empty()) {
      const bool before = first_error.ok();
      TE_RETURN_IF_ERROR(next("prepare", &result, &first_error));
      if (before && first_error.ok()) Remember(s);
    }
    TE_RETURN_IF_ERROR(next(s.plain != nullptr ? "statement" : "query", &result, &first_error));
    if (i + 1 == steps.size()) last = std::move(result);
  }
  pg_result* sync = PQgetResult(conn_);
  const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  if (sync != nullptr) PQclear(sync);
  if (!synced || PQexitPipelineMode(conn_) != 1) return Lost("ending a pipeline");
  if (!first_error.ok()) return first_error;
  last_sqlstate_.clear();
  return last;
}

void PgConn::DeferBegin(const char* begin_sql) {
  deferred_begin_ = begin_sql;
  lost_at_begin_ = false;
}

void PgConn::QueryLater(const char* sql, Params params) {
  Sent s = Prepared(sql, params);
  s.params = nullptr;
  s.owned = std::move(params);
  later_.push_back(std::move(s));
}

bool PgConn::DropDeferredBegin() {
  const bool was = deferred_begin_ != nullptr;
  deferred_begin_ = nullptr;
  later_.clear();
  return was;
}

Status PgConn::Commit() {
  if (conn_ == nullptr) return Unavailable("PostgreSQL: not connected");
  if (deferred_begin_ != nullptr && later_.empty()) {
    deferred_begin_ = nullptr;  // nothing was begun, nothing to commit
    return Status::Ok();
  }
  Sent commit;
  commit.plain = "COMMIT";
  return Run({std::move(commit)}).status();
}

}  // namespace taskengine::pg
