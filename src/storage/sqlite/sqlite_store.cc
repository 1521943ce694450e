// SQLite backend of the storage contract. See sqlite_store.h for the design.
#include "storage/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/mutex.h"
#include "core/pickup_trace.h"
#include "core/state_machine.h"
#include "platform/thread_name.h"
#include "storage/list_codec.h"
#include "storage/sql_statements.h"
#include "storage/sql_store.h"
#include "storage/sqlite/schema.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/sqlite/wal_batch_vfs.h"
#include "storage/store_actions.h"
#include "storage/store_rows.h"
#include "storage/store_rules.h"

namespace taskengine {
namespace {

// The list codec, the contract's rules and the row readers shared with the
// PostgreSQL backend (list_codec.h, store_rules.h,
// store_rows.h, store_actions.h).
using namespace storage_internal;
using namespace storage_internal::sql;  // the shared statements

using sqlite::Connection;
using sqlite::kWalBatchVfs;
using sqlite::SetWalBatching;
using sqlite::Stmt;

// ["a","b"]: a JSON array of `items` (for json_each).
std::string JsonStringArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char ch : item) {
      if (ch == '"' || ch == '\\') {
        out += '\\';
        out += ch;
      } else if (static_cast<unsigned char>(ch) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", ch);
        out += buf;
      } else {
        out += ch;
      }
    }
    out += '"';
  }
  return out + "]";
}

// --- SQL -------------------------------------------------------------------

constexpr const char* kSelectState =
    "SELECT " TE_SQL_STATE_COLUMNS " FROM executions WHERE id = ?1";

// The state columns, then what a worker needs (from kStateColumnCount on).
constexpr const char* kClaimDue =
    "SELECT " TE_SQL_STATE_COLUMNS ", job, " TE_SQLITE_PAYLOAD
    ", COALESCE(idempotency_key, '')"
    " FROM executions INDEXED BY executions_due"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
    " ORDER BY run_at, id LIMIT ?3";
// kClaimDue's columns for the execution ?1 that an admission just inserted
// (a claim at admission, Store::AdmissionClaimer).
constexpr const char* kClaimRowById =
    "SELECT " TE_SQL_STATE_COLUMNS ", job, " TE_SQLITE_PAYLOAD
    ", COALESCE(idempotency_key, '') FROM executions WHERE id = ?1";
// kClaimDue for a claimer that names the handlers it can run (?4: a
// HandlerFilter list): executions of other handlers are skipped.
constexpr const char* kClaimDueForHandlers =
    "SELECT " TE_SQL_STATE_COLUMNS ", job, " TE_SQLITE_PAYLOAD
    ", COALESCE(idempotency_key, '')"
    " FROM executions INDEXED BY executions_due"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
    " AND job IN (SELECT name FROM job_definitions"
    " WHERE instr(?4, char(31) || handler || char(31)) > 0)"
    " ORDER BY run_at, id LIMIT ?3";
// Admission: the shared kInsertExecution's arguments but the payload (?7),
// which goes to its own row (TE_SQLITE_PAYLOAD) by kInsertPayload.
constexpr const char* kInsertExecutionRow =
    "INSERT INTO executions (job, tenant, queue, status, \"trigger\", requester, idempotency_key,"
    " fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,"
    " max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)"
    " VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?20, ?21, ?22)";
constexpr const char* kInsertPayload =
    "INSERT INTO execution_payloads (execution_id, payload) VALUES (?1, ?2)";
constexpr const char* kDeletePayload = "DELETE FROM execution_payloads WHERE execution_id = ?1";

constexpr const char* kExpired = "SELECT " TE_SQL_STATE_COLUMNS
                                 " FROM executions WHERE status = 1 AND lease_expires_at < ?1"
                                 " ORDER BY lease_expires_at LIMIT ?2";

constexpr const char* kPurgeCandidates =
    "SELECT id, tenant, queue, status, finished_at FROM executions"
    " INDEXED BY executions_by_finished_at WHERE" TE_SQL_PURGEABLE " ORDER BY finished_at LIMIT ?2";
constexpr const char* kDeleteExecutionLogs =
    "DELETE FROM execution_logs WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kDeleteExecutionAttempts =
    "DELETE FROM execution_attempts WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kDeleteExecutionEffects =
    "DELETE FROM effects WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kUpdateScheduleState =
    "INSERT INTO schedule_state (job, last_fire_at, last_evaluated_at, skipped_fires,"
    " last_skipped_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(job) DO UPDATE SET"
    " last_fire_at = MAX(last_fire_at, ?2), last_evaluated_at = MAX(last_evaluated_at, ?3),"
    " skipped_fires = skipped_fires + ?4, last_skipped_at = MAX(last_skipped_at, ?5)";
// Counters (P8).
constexpr const char* kAddStatusCount =
    "INSERT INTO status_counts (tenant, queue, status, count) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT(tenant, queue, status) DO UPDATE SET count = count + ?4";
constexpr const char* kAddOutcome =
    "INSERT INTO hourly_outcomes (hour, tenant, status, count) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT(hour, tenant, status) DO UPDATE SET count = count + ?4";
constexpr const char* kStatusCounts =
    "SELECT tenant, queue, status, count FROM status_counts ORDER BY tenant, queue";
constexpr const char* kRecentOutcomes =
    "SELECT tenant, status, SUM(count) FROM hourly_outcomes WHERE hour >= ?1"
    " GROUP BY tenant, status ORDER BY tenant";
constexpr const char* kOldestDue =
    "SELECT MIN(run_at) FROM executions INDEXED BY executions_due"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2";
// The index of statuses holds no running execution (schema version 16): a
// statement that reads it by another status says `status <> 1`, and the
// running ones are read through the leases index.
constexpr const char* kOldestQuarantined =
    "SELECT finished_at FROM executions INDEXED BY executions_by_status"
    " WHERE status = 4 AND status <> 1 ORDER BY id LIMIT 1";
// ?2: NULL for every tenant, else a JSON array of the tenants in scope.
constexpr const char* kQueuedDepths =
    "SELECT queue, COUNT(*), SUM(run_at <= ?1), MIN(queued_at) FROM executions"
    " WHERE status = 0 AND status <> 1"
    " AND (?2 IS NULL OR tenant IN (SELECT value FROM json_each(?2)))"
    " GROUP BY queue";
constexpr const char* kRunningDepths =
    "SELECT queue, COUNT(*) FROM executions INDEXED BY executions_leases"
    " WHERE status = 1 AND (?1 IS NULL OR tenant IN (SELECT value FROM json_each(?1)))"
    " GROUP BY queue";

// --- row mapping -------------------------------------------------------------

// A statement's current row, as the shared readers (store_rows.h) see it.
class StmtRow final : public storage_internal::Row {
 public:
  explicit StmtRow(const Stmt& s) : s_(s) {}
  std::int64_t Int(int col) const override { return s_.Int(col); }
  std::string Text(int col) const override { return s_.Text(col); }
  std::string_view TextView(int col) const override { return s_.TextView(col); }
  bool IsNull(int col) const override { return s_.IsNull(col); }

 private:
  const Stmt& s_;
};

// A connection inside the writer's or a reader's transaction, as the shared
// store logic (sql_store.h) sees it.
class SqliteSession final : public SqlSession {
 public:
  explicit SqliteSession(Connection& c) : c_(c) {}

  Result<std::int64_t> Run(const char* sql, const SqlArgs& args, RowSink each) override {
    TE_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(sql));
    return Drive(s, args, each);
  }
  Result<std::int64_t> RunText(const std::string& sql, const SqlArgs& args, RowSink each) override {
    TE_ASSIGN_OR_RETURN(Stmt s, c_.PrepareText(sql));
    return Drive(s, args, each);
  }

 private:
  Result<std::int64_t> Drive(Stmt& s, const SqlArgs& args, RowSink each) {
    int i = 0;
    for (const SqlValue& v : args.values()) {
      ++i;
      switch (v.kind) {
        case SqlValue::Kind::kNull:
          s.BindNull(i);
          break;
        case SqlValue::Kind::kInt:
          s.Bind(i, v.number);
          break;
        case SqlValue::Kind::kText:
          s.Bind(i, std::string_view(v.text));
          break;
      }
    }
    const StmtRow row(s);
    while (true) {
      TE_ASSIGN_OR_RETURN(bool more, s.Step());
      if (!more) break;
      each(row);
    }
    return s.readonly() ? 0 : c_.changes();
  }

  Connection& c_;
};

// --- the store -----------------------------------------------------------------

class SqliteStore final : public SqlStore {
 public:
  explicit SqliteStore(const SqliteStoreOptions& o)
      : SqlStore(kSqliteDialect, o.clock != nullptr ? o.clock : SystemClock::Get()),
        options_(o),
        owned_random_(o.random != nullptr
                          ? nullptr
                          : std::make_unique<SeededRandom>(
                                static_cast<std::uint64_t>(SystemClock::Get()->NowMillis()))),
        random_(o.random != nullptr ? o.random : owned_random_.get()) {}

  ~SqliteStore() override {
    {
      MutexLock lock(mu_);
      stopping_ = true;
    }
    work_cv_.NotifyAll();
    if (writer_.joinable()) writer_.join();
    // The writer drained its queue: the completer runs what it handed over.
    {
      MutexLock lock(completer_mu_);
      stop_completer_ = true;
    }
    completer_cv_.NotifyAll();
    if (completer_.joinable()) completer_.join();
    {
      MutexLock lock(checkpoint_mu_);
      stop_checkpointer_ = true;
    }
    checkpoint_cv_.NotifyAll();
    if (checkpointer_.joinable()) checkpointer_.join();
  }

  Status Init() {
    TE_RETURN_IF_ERROR(
        writer_conn_.Open(options_.path, /*create=*/true, options_.busy_timeout_ms, kWalBatchVfs));
    // A new database gives the space retention frees back to the file system
    // (ReclaimSpace); the mode can only be chosen before the first table.
    TE_ASSIGN_OR_RETURN(std::int64_t pages, PragmaInt(writer_conn_, "PRAGMA page_count"));
    if (pages == 0) TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA auto_vacuum = INCREMENTAL"));
    TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA journal_mode = WAL"));
    TE_RETURN_IF_ERROR(writer_conn_.Exec(options_.sync == SyncMode::kFull
                                             ? "PRAGMA synchronous = FULL"
                                             : "PRAGMA synchronous = NORMAL"));
    // The writer's commits write their WAL frames in one call each
    // (wal_batch_vfs.h), those that sync and those that do not.
    if (int rc = SetWalBatching(writer_conn_.raw(), true); rc != SQLITE_OK) {
      return Unavailable(std::string("WAL batching not started: ") + sqlite3_errstr(rc));
    }
    TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16384"));
    if (options_.max_page_count > 0) {
      TE_RETURN_IF_ERROR(
          writer_conn_.Exec("PRAGMA max_page_count = " + std::to_string(options_.max_page_count)));
    }
    // Checkpoints run on the checkpointer thread, not in the writer's COMMIT
    // (SQLite's auto-checkpoint): see CheckpointLoop. This replaces the
    // connection's auto-checkpoint hook.
    TE_RETURN_IF_ERROR(
        checkpoint_conn_.Open(options_.path, /*create=*/false, options_.busy_timeout_ms));
    TE_RETURN_IF_ERROR(checkpoint_conn_.Exec(options_.sync == SyncMode::kFull
                                                 ? "PRAGMA synchronous = FULL"
                                                 : "PRAGMA synchronous = NORMAL"));
    sqlite3_wal_hook(writer_conn_.raw(), &SqliteStore::OnWalCommit, this);
    for (int i = 0; i < std::max(1, options_.read_connections); ++i) {
      auto conn = std::make_unique<Connection>();
      TE_RETURN_IF_ERROR(conn->Open(options_.path, /*create=*/false, options_.busy_timeout_ms));
      TE_RETURN_IF_ERROR(conn->Exec("PRAGMA query_only = 1; PRAGMA cache_size = -4096"));
      MutexLock lock(read_mu_);  // uncontended: no Read runs before Init returns
      readers_.push_back(conn.get());
      owned_readers_.push_back(std::move(conn));
    }
    writer_ = NamedThread("te-writer", [this] { WriterLoop(); });
    completer_ = NamedThread("te-callbacks", [this] { CompleterLoop(); });
    checkpointer_ = NamedThread("te-checkpoint", [this] { CheckpointLoop(); });
    return Status::Ok();
  }

  // --- schema ---

  Status Migrate() override {
    return Write<bool>([](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(int version, UserVersion(c));
             if (version > sqlite::kSchemaVersion) {
               return NewerSchemaError(version, sqlite::kSchemaVersion);
             }
             for (int v = version; v < sqlite::kSchemaVersion; ++v) {
               TE_RETURN_IF_ERROR(c.Exec(sqlite::kMigrations[v]));
               TE_RETURN_IF_ERROR(c.Exec("PRAGMA user_version = " + std::to_string(v + 1)));
             }
             return true;
           })
        .status();
  }

  Result<int> SchemaVersion() override {
    return Read<int>([](Connection& c) { return UserVersion(c); });
  }

  void SetAdmissionClaimer(AdmissionClaimer* claimer) override { admission_claimer_ = claimer; }

  // SQLite has no admission from SQL: the dispatcher's check is the only one.
  Status SetPayloadLimit(std::int64_t) override { return Status::Ok(); }

  // --- job definitions ---

  // --- admission ---

  Result<AdmitResult> Admit(const AdmitRequest& request) override {
    TE_ASSIGN_OR_RETURN(auto results, AdmitBatch({request}));
    return std::move(results.front());
  }

  Result<std::vector<AdmitResult>> CommitSchedule(
      const std::vector<AdmitRequest>& admissions,
      const std::vector<ScheduleUpdate>& updates) override {
    const Millis now = clock_->NowMillis();
    return Write<std::vector<AdmitResult>>([&](Connection& c) -> Result<std::vector<AdmitResult>> {
      TE_ASSIGN_OR_RETURN(std::vector<AdmitResult> out, AdmitAll(c, admissions, now));
      for (const ScheduleUpdate& u : updates) {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kUpdateScheduleState));
        s.Bind(1, u.job.value).Bind(2, u.last_fire_at).Bind(3, u.evaluated_until);
        s.Bind(4, u.skipped).Bind(5, u.last_skipped_at);
        TE_RETURN_IF_ERROR(s.Run());
      }
      return out;
    });
  }

  Result<std::vector<AdmitResult>> AdmitBatch(const std::vector<AdmitRequest>& requests) override {
    const Millis now = clock_->NowMillis();
    return Write<std::vector<AdmitResult>>(
        [&](Connection& c) { return AdmitAll(c, requests, now); }, Durability::kSync,
        OpKind::kExecutionsOnly);
  }

  void AdmitBatchAsync(std::vector<AdmitRequest> requests, AdmitDone done) override {
    const Millis now = clock_->NowMillis();
    WriteAsync<std::vector<AdmitResult>>([this, requests = std::move(requests), now](
                                             Connection& c) { return AdmitAll(c, requests, now); },
                                         std::move(done), OpKind::kExecutionsOnly);
  }

  // --- leasing ---

  Result<std::vector<Lease>> Claim(const ClaimRequest& request) override {
    return Write<std::vector<Lease>>(
        [&](Connection& c) -> Result<std::vector<Lease>> {
          const Millis now = clock_->NowMillis();
          std::string handler_filter;
          if (request.handlers) {
            TE_ASSIGN_OR_RETURN(handler_filter, HandlerFilter(*request.handlers));
          }
          std::vector<Lease> out;
          std::vector<ClaimRow> due;
          for (const QueueSlot& slot : request.slots) {
            if (slot.max <= 0) continue;
            due.clear();
            {
              TE_ASSIGN_OR_RETURN(Stmt s,
                                  c.Prepare(request.handlers ? kClaimDueForHandlers : kClaimDue));
              s.Bind(1, slot.queue).Bind(2, now).Bind(3, slot.max);
              if (request.handlers) s.Bind(4, handler_filter);
              while (true) {
                TE_ASSIGN_OR_RETURN(bool row, s.Step());
                if (!row) break;
                due.push_back(ReadClaimRow(StmtRow(s)));
              }
            }
            for (const ClaimRow& claim : due) {
              TE_ASSIGN_OR_RETURN(std::optional<Lease> lease,
                                  ClaimOne(c, claim, request.worker,
                                           ClaimMarksStarted(request, slot), slot.queue, now));
              if (lease) out.push_back(std::move(*lease));
            }
          }
          return out;
        },
        Durability::kRelaxed, OpKind::kExecutionsOnly);
  }

  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    using Replies = std::vector<Status>;
    auto r = Write<Replies>(
        [&](Connection& c) -> Result<Replies> {
          Replies out;
          out.reserve(leases.size());
          for (const LeaseRef& lease : leases) {
            {
              TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kMarkStartedOne));
              s.Bind(1, lease.id.value).Bind(2, lease.version.value);
              TE_RETURN_IF_ERROR(s.Run());
            }
            if (c.changes() == 1) {
              out.push_back(Status::Ok());
              continue;
            }
            TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, LoadState(c, lease.id));
            Status check = CheckLease(row, lease);
            out.push_back(check.ok() ? Internal("lease not marked started") : check);
          }
          return out;
        },
        Durability::kRelaxed, OpKind::kExecutionsOnly);
    if (!r.ok()) return Replies(leases.size(), r.status());
    return std::move(r).value();
  }

  std::vector<Result<HeartbeatReply>> HeartbeatBatch(
      const std::vector<HeartbeatRequest>& requests) override {
    using Replies = std::vector<Result<HeartbeatReply>>;
    auto r = Write<Replies>(
        [&](Connection& c) -> Result<Replies> {
          const Millis now = clock_->NowMillis();
          Replies out;
          out.reserve(requests.size());
          for (const HeartbeatRequest& h : requests) {
            TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, LoadState(c, h.lease.id));
            Status check = CheckLease(row, h.lease);
            if (!check.ok()) {
              out.emplace_back(check);
              continue;
            }
            HeartbeatReply reply = HeartbeatReplyFor(*row, now);
            TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kHeartbeat));
            s.Bind(1, h.lease.id.value).Bind(2, reply.lease_expires_at);
            if (h.progress) {
              s.Bind(3, std::clamp(*h.progress, 0, 100));
            } else {
              s.BindNull(3);
            }
            TE_RETURN_IF_ERROR(s.Run());
            out.emplace_back(reply);
          }
          return out;
        },
        Durability::kRelaxed, OpKind::kExecutionsOnly);
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
  }

  Status AppendLog(const LeaseRef& lease, LogLevel level, std::string_view message) override {
    return Write<bool>(
               [&](Connection& c) -> Result<bool> {
                 TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, LoadState(c, lease.id));
                 TE_RETURN_IF_ERROR(CheckLease(row, lease));
                 TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kInsertLog));
                 s.Bind(1, lease.id.value).Bind(2, row->state.attempt).Bind(3, clock_->NowMillis());
                 s.Bind(4, static_cast<int>(level)).Bind(5, message);
                 TE_RETURN_IF_ERROR(s.Run());
                 return true;
               },
               Durability::kRelaxed)
        .status();
  }

  std::vector<Result<FinishReply>> FinishBatch(
      const std::vector<FinishRequest>& requests) override {
    using Replies = std::vector<Result<FinishReply>>;
    auto r = Write<Replies>([&](Connection& c) { return FinishAll(c, requests); },
                            Durability::kSync, OpKind::kExecutionsOnly);
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
  }

  bool WritesWithoutWaiting() const override { return true; }

  void FinishBatchAsync(std::vector<FinishRequest> requests, FinishDone done) override {
    using Replies = std::vector<Result<FinishReply>>;
    const std::size_t n = requests.size();
    WriteAsync<Replies>(
        [this, requests = std::move(requests)](Connection& c) { return FinishAll(c, requests); },
        [n, done = std::move(done)](Result<Replies> r) {
          if (!r.ok()) return done(Replies(n, r.status()));
          done(std::move(r).value());
        },
        OpKind::kExecutionsOnly);
  }

  Result<SweepReport> SweepExpired(int max_batch) override {
    TE_RETURN_IF_ERROR(ValidateSweepBatch(max_batch));
    return Write<SweepReport>(
        [&](Connection& c) -> Result<SweepReport> {
          const Millis now = clock_->NowMillis();
          std::vector<StateRow> expired;
          {
            TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kExpired));
            s.Bind(1, now).Bind(2, max_batch);
            while (true) {
              TE_ASSIGN_OR_RETURN(bool row, s.Step());
              if (!row) break;
              expired.push_back(ReadStateRow(StmtRow(s)));
            }
          }
          SqliteSession session(c);
          SqliteActionTx tx(*this, c, session);
          return RecoverExpired(tx, expired, max_batch, now, *random_);
        },
        Durability::kRelaxed);
  }

  // --- retention (I7) ---

  Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows, bool dry_run) override {
    TE_RETURN_IF_ERROR(ValidatePurge(cutoffs, max_rows));
    if (dry_run) {
      return Read<PurgeReport>([&](Connection& c) {
        SqliteSession session(c);
        return CountPurgeable(session, cutoffs);
      });
    }
    return Write<PurgeReport>(
        [&](Connection& c) -> Result<PurgeReport> {
          PurgeReport r;
          if (cutoffs.executions_ended_before > 0) {
            TE_RETURN_IF_ERROR(PurgeExecutions(c, cutoffs.executions_ended_before, max_rows, r));
          }
          SqliteSession session(c);
          TE_RETURN_IF_ERROR(PurgeOldLogsAndAudit(session, cutoffs, max_rows, r));
          return r;
        },
        Durability::kRelaxed);
  }

  Result<std::int64_t> ReclaimSpace(int max_pages) override {
    TE_RETURN_IF_ERROR(ValidateReclaim(max_pages));
    return Write<std::int64_t>(
        [&](Connection& c) -> Result<std::int64_t> {
          // Only a database in incremental auto-vacuum mode gives pages back.
          TE_ASSIGN_OR_RETURN(std::int64_t mode, PragmaInt(c, "PRAGMA auto_vacuum"));
          if (mode != 2) return std::int64_t{0};
          TE_ASSIGN_OR_RETURN(std::int64_t before, PragmaInt(c, "PRAGMA freelist_count"));
          TE_RETURN_IF_ERROR(
              c.Exec("PRAGMA incremental_vacuum(" + std::to_string(max_pages) + ")"));
          TE_ASSIGN_OR_RETURN(std::int64_t after, PragmaInt(c, "PRAGMA freelist_count"));
          return before - after;
        },
        Durability::kRelaxed);
  }

  // --- effects ---

  // ReserveEffect, CommitEffect, ReleaseEffect: ActionStore (store_actions.h).

  // --- operator actions ---

  // RequestCancel, Replay, ApproveReplay: ActionStore (store_actions.h).

  // --- grants ---

  // --- lanes ---

  // --- failure notifications (I6) ---

  // --- tenants ---

  // --- scheduling ---

  // --- principals ---

  // --- workers ---

  // --- reads ---

  Result<ExecutionPage> ListExecutions(const ExecutionFilter& f) override {
    TE_RETURN_IF_ERROR(ValidateExecutionFilter(f));
    const Millis now = clock_->NowMillis();
    return Read<ExecutionPage>([&](Connection& c) -> Result<ExecutionPage> {
      const std::vector<ListPart> parts = PlanListParts(f, sqlite::kListIndexing);
      std::vector<std::vector<Execution>> rows(parts.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        ListSql q = BuildListSql(f, parts[i], TE_SQL_EXECUTION_COLUMNS_WITH(TE_SQLITE_PAYLOAD),
                                 ListPartRowLimit(f),
                                 /*count_only=*/false, '?', sqlite::kListIndexing);
        TE_ASSIGN_OR_RETURN(Stmt s, PrepareList(c, q));
        while (true) {
          TE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          rows[i].push_back(ReadExecutionRow(StmtRow(s)));
        }
      }
      ExecutionPage page = MergeListParts(std::move(rows), f);
      if (!f.with_total) return page;
      if (TotalFromCounters(f)) {
        TE_ASSIGN_OR_RETURN(StoreStats stats, ReadStats(c, ListTotalScope(f), now));
        page.total = TotalOfStatuses(stats, f);
        return page;
      }
      ExecutionFilter whole = f;
      whole.before = ExecutionId(0);
      std::vector<std::int64_t> counts;
      for (const ListPart& part : parts) {
        ListSql q = BuildListSql(whole, part, "", kListCountCap + 1, /*count_only=*/true, '?',
                                 sqlite::kListIndexing);
        TE_ASSIGN_OR_RETURN(Stmt s, PrepareList(c, q));
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        counts.push_back(row ? s.Int(0) : 0);
      }
      SetCountedTotal(page, counts);
      return page;
    });
  }

  Result<StoreStats> GetStats(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    return Read<StoreStats>([&](Connection& c) { return ReadStats(c, scope, now); });
  }

  Result<std::vector<QueueDepth>> QueueDepths(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    std::optional<std::string> tenants;
    if (scope.tenants) {
      std::vector<std::string> ids;
      for (const TenantId& t : *scope.tenants) ids.push_back(t.value);
      tenants = JsonStringArray(ids);
    }
    return Read<std::vector<QueueDepth>>([&](Connection& c) -> Result<std::vector<QueueDepth>> {
      QueueDepthMap by_queue;
      {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kQueuedDepths));
        s.Bind(1, now);
        if (tenants)
          s.Bind(2, *tenants);
        else
          s.BindNull(2);
        while (true) {
          TE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          AddQueuedDepthRow(StmtRow(s), by_queue);
        }
      }
      {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kRunningDepths));
        if (tenants)
          s.Bind(1, *tenants);
        else
          s.BindNull(1);
        while (true) {
          TE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          AddRunningDepthRow(StmtRow(s), by_queue);
        }
      }
      return QueueDepthList(by_queue);
    });
  }

 protected:
  Status WithActionTx(const std::function<Status(ActionTx&, Millis)>& body) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             SqliteSession session(c);
             SqliteActionTx tx(*this, c, session);
             TE_RETURN_IF_ERROR(body(tx, clock_->NowMillis()));
             return true;
           })
        .status();
  }

 private:
  // One operation for the writer thread. Lives on the caller's stack until done.
  // Whether an operation's commit must reach the disk before it is
  // acknowledged. Claims, heartbeats, log lines and sweeps are kRelaxed: if a
  // power cut loses them, the execution is simply found queued (or its lease
  // expired) again, which recovery handles anyway; every later kSync commit
  // flushes them too, in order (WAL). Admissions, outcomes and definitions are
  // kSync: "accepted" and "done" must survive a power cut (S3).
  enum class Durability { kSync, kRelaxed };
  // kExecutionsOnly: an operation that writes executions and what belongs
  // to them (admissions, claims, heartbeats, finishes), never job definitions
  // or API tokens, so what the transaction read of those (definition_reads_)
  // still holds after it; any other operation may change them.
  enum class OpKind { kOther, kExecutionsOnly };

  struct Op {
    Durability durability = Durability::kSync;
    OpKind kind = OpKind::kOther;
    std::function<Status(Connection&)> body;
    Status result;
    bool done = false;  // guarded by mu_
    // Set for an operation nobody waits for (WriteAsync): once the batch
    // holding the operation is over, the completer thread calls it, then
    // deletes the operation (allocated with new); `done` is not used.
    std::function<void(Op&)> finished;
    // Filled only while a pickup trace is installed (core/pickup_trace.h):
    // queued by the caller, the rest by the writer before `done`.
    pickup_trace::WriteTimes times;
  };

  static constexpr const char* kBegin = "BEGIN IMMEDIATE";
  static constexpr const char* kSyncFull = "PRAGMA synchronous = FULL";
  static constexpr const char* kSyncNormal = "PRAGMA synchronous = NORMAL";
  static constexpr const char* kSavepoint = "SAVEPOINT op";
  static constexpr const char* kRollbackTo = "ROLLBACK TO op";
  static constexpr const char* kRelease = "RELEASE op";
  static constexpr const char* kCommit = "COMMIT";

  static Status RunCached(Connection& c, const char* sql) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(sql));
    return s.Run();
  }

  // The value of a pragma that answers one integer ("PRAGMA user_version").
  static Result<std::int64_t> PragmaInt(Connection& c, const std::string& pragma) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.PrepareText(pragma));
    TE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Internal(pragma + " returned nothing");
    return s.Int(0);
  }

  static Result<int> UserVersion(Connection& c) {
    TE_ASSIGN_OR_RETURN(std::int64_t v, PragmaInt(c, "PRAGMA user_version"));
    return static_cast<int>(v);
  }

  static Result<std::optional<StateRow>> LoadState(Connection& c, ExecutionId id) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kSelectState));
    s.Bind(1, id.value);
    TE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<StateRow>();
    return std::optional<StateRow>(ReadStateRow(StmtRow(s)));
  }

  // Writes a state-machine transition decided for `row`.
  Status Apply(Connection& c, const StateRow& row, const Transition& t, Millis now,
               std::optional<std::string_view> result, std::optional<std::string_view> error,
               std::optional<int> progress) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kApplyTransition));
    s.Bind(1, row.id.value).Bind(2, static_cast<int>(t.to));
    s.Bind(3, t.to == ExecutionStatus::kQueued ? t.run_at : row.run_at);
    s.Bind(4, t.attempt).Bind(5, t.consecutive_lease_expiries).Bind(6, t.permanent_failures);
    s.Bind(7, t.ambiguous_failures).Bind(8, static_cast<int>(t.failure_class));
    s.Bind(9, t.cancel_requested ? 1 : 0);
    s.Bind(10, t.clear_lease ? 1 : 0);
    s.Bind(11, t.finished ? now : Millis{0});
    if (result && !result->empty())
      s.Bind(12, *result);
    else
      s.BindNull(12);
    if (error)
      s.Bind(13, *error);
    else
      s.BindNull(13);
    if (progress)
      s.Bind(14, *progress);
    else
      s.BindNull(14);
    if (t.trigger)
      s.Bind(15, static_cast<int>(*t.trigger));
    else
      s.BindNull(15);
    TE_RETURN_IF_ERROR(s.Run());
    op_counters_.CountTransition(row, t, now);
    if (t.to == ExecutionStatus::kQueued && row.state.status != ExecutionStatus::kQueued) {
      MarkWork(row.queue);
    }
    if (EndsFailedAttempt(row.state.status, t.to)) {
      // History of an attempt that did not succeed (the success path writes nothing extra).
      TE_ASSIGN_OR_RETURN(Stmt a, c.Prepare(kReplaceAttempt));
      a.Bind(1, row.id.value).Bind(2, row.state.attempt).Bind(3, row.version.value);
      a.Bind(4, row.worker).Bind(5, row.started_at).Bind(6, now).Bind(7, static_cast<int>(t.to));
      a.Bind(8, static_cast<int>(t.failure_class));
      a.Bind(9, t.attempt < row.state.attempt ? 1 : 0);  // a release gives the attempt back
      a.Bind(10, error ? *error : std::string_view());
      TE_RETURN_IF_ERROR(a.Run());
    }
    if (EndsWithFailureNotice(row.state.status, t.to)) {
      TE_ASSIGN_OR_RETURN(Stmt n, c.Prepare(kInsertNotifyPending));
      n.Bind(1, row.id.value).Bind(2, now);
      TE_RETURN_IF_ERROR(n.Run());
    }
    if (LeavesLane(row, t.to)) {
      TE_ASSIGN_OR_RETURN(std::optional<std::string> unparked,
                          UnparkLane(c, row.tenant, row.lane_key, now));
      if (unparked) MarkWork(*unparked);  // the lane's next execution's queue
    }
    return Status::Ok();
  }

  // The counters of `scope` (GetStats): cost independent of history (P8).
  static Result<StoreStats> ReadStats(Connection& c, const TenantScope& scope, Millis now) {
    StoreStats out;
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kStatusCounts));
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        AddStatusCountRow(StmtRow(s), scope, out);
      }
    }
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kRecentOutcomes));
      s.Bind(1, FirstRecentOutcomeHour(now));
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        AddRecentOutcomeRow(StmtRow(s), scope, out);
      }
    }
    FinishStats(out);
    if (scope.tenants) return out;  // oldest due per queue: global scope only
    for (QueueStats& q : out.queues) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kOldestDue));
      s.Bind(1, q.queue).Bind(2, now);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row && !s.IsNull(0)) q.oldest_due_at = s.Int(0);
    }
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kOldestQuarantined));
    TE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) out.oldest_quarantined_at = s.Int(0);
    return out;
  }

  // A search statement with its arguments bound.
  static Result<Stmt> PrepareList(Connection& c, const ListSql& q) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.PrepareText(q.sql));
    for (std::size_t i = 0; i < q.args.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      if (q.args[i].is_text)
        s.Bind(index, q.args[i].text);
      else
        s.Bind(index, q.args[i].number);
    }
    return s;
  }

  // Retention (I7): the rows of a statement with RETURNING.
  static Result<std::int64_t> CountReturned(Stmt& s) {
    std::int64_t n = 0;
    while (true) {
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return n;
      ++n;
    }
  }

  // Writer thread only: removes up to `max_rows` due executions with their
  // logs, attempts and effects; their counters go down with them.
  Status PurgeExecutions(Connection& c, Millis ended_before, int max_rows, PurgeReport& r) {
    struct Doomed {
      std::int64_t id;
      std::string tenant, queue;
      int status;
      Millis finished_at;
    };
    std::vector<Doomed> doomed;
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kPurgeCandidates));
      s.Bind(1, ended_before).Bind(2, max_rows);
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        doomed.push_back({s.Int(0), s.Text(1), s.Text(2), static_cast<int>(s.Int(3)), s.Int(4)});
      }
    }
    for (const Doomed& d : doomed) {
      for (auto [sql, count] : {std::pair{kDeleteExecutionLogs, &r.logs},
                                std::pair{kDeleteExecutionAttempts, &r.attempts},
                                std::pair{kDeleteExecutionEffects, &r.effects}}) {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(sql));
        s.Bind(1, d.id);
        TE_ASSIGN_OR_RETURN(std::int64_t n, CountReturned(s));
        *count += n;
      }
      for (const char* sql : {kDeletePayload, kDeleteExecution}) {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(sql));
        s.Bind(1, d.id);
        TE_RETURN_IF_ERROR(s.Run());
      }
      op_counters_.counts[{d.tenant, d.queue, d.status}] -= 1;
      ++r.executions;
      if (r.oldest_ended_at == 0 || d.finished_at < r.oldest_ended_at) {
        r.oldest_ended_at = d.finished_at;
      }
      r.newest_ended_at = std::max(r.newest_ended_at, d.finished_at);
    }
    r.more = static_cast<int>(doomed.size()) == max_rows;
    return Status::Ok();
  }

  // Counters change with the operation that changes the status; the writer
  // keeps an operation's deltas apart until it succeeds and writes a batch's
  // deltas just before its COMMIT. Writer thread only.
  void KeepOpCounts() {
    batch_counters_.Add(op_counters_);
    op_counters_.Clear();
    batch_wake_.Take(std::move(op_wake_));
    for (Lease& lease : op_claims_) batch_claims_.push_back(std::move(lease));
    op_claims_.clear();
  }
  // Claims at admission that will not commit: their workers are free again.
  void UnreserveClaims(std::vector<Lease>* claims) {
    for (const Lease& lease : *claims) admission_claimer_->Unreserve(lease.queue);
    claims->clear();
  }
  Status FlushCounts(Connection& c) {
    for (const auto& [k, v] : batch_counters_.counts) {
      if (v == 0) continue;
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kAddStatusCount));
      s.Bind(1, std::get<0>(k)).Bind(2, std::get<1>(k)).Bind(3, std::get<2>(k)).Bind(4, v);
      TE_RETURN_IF_ERROR(s.Run());
    }
    for (const auto& [k, v] : batch_counters_.outcomes) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kAddOutcome));
      s.Bind(1, std::get<0>(k)).Bind(2, std::get<1>(k)).Bind(3, std::get<2>(k)).Bind(4, v);
      TE_RETURN_IF_ERROR(s.Run());
    }
    return Status::Ok();
  }

  // When the lane (tenant, lane) has no open, un-parked execution left, the
  // oldest parked one becomes due: its queue then.
  static Result<std::optional<std::string>> UnparkLane(Connection& c, const std::string& tenant,
                                                       const std::string& lane, Millis now) {
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kSqliteLaneHasUnparkedOpen));
      s.Bind(1, tenant).Bind(2, lane);
      TE_ASSIGN_OR_RETURN(bool busy, s.Step());
      if (busy) return std::optional<std::string>();
    }
    TE_ASSIGN_OR_RETURN(Stmt u, c.Prepare(kSqliteLaneUnparkNext));
    u.Bind(1, tenant).Bind(2, lane).Bind(3, now);
    TE_ASSIGN_OR_RETURN(bool row, u.Step());
    if (!row) return std::optional<std::string>();
    std::optional<std::string> queue = u.Text(0);
    TE_RETURN_IF_ERROR(u.Run());  // the statement's end
    return queue;
  }

  // Records that the running operation makes work in `queue` due (for the
  // work publisher after the batch's COMMIT). Writer thread only.
  void MarkWork(const std::string& queue) { op_wake_.Mark(queue); }

  // The steps of the shared operator actions and sweep (store_actions.h) in
  // one writer transaction.
  class SqliteActionTx final : public SqlActionTx {
   public:
    SqliteActionTx(SqliteStore& store, Connection& c, SqlSession& session)
        : SqlActionTx(session, &store.definition_reads_.tokens), store_(store), c_(c) {}

    Result<std::optional<StateRow>> LoadState(ExecutionId id) override {
      return SqliteStore::LoadState(c_, id);
    }
    Status Apply(const StateRow& row, const Transition& t, Millis now,
                 std::optional<std::string_view> result, std::optional<std::string_view> error,
                 std::optional<int> progress) override {
      return store_.Apply(c_, row, t, now, result, error, progress);
    }

   private:
    SqliteStore& store_;
    Connection& c_;
  };

  // Claims the queued execution `claim` for `worker` (the claim's one
  // place on this backend): nothing when the state machine refuses it.
  Result<std::optional<Lease>> ClaimOne(Connection& c, const ClaimRow& claim, WorkerId worker,
                                        bool mark_started, const std::string& queue, Millis now) {
    const StateRow& row = claim.row;
    Event e;
    e.kind = EventKind::kClaim;
    e.now = now;
    auto t = Decide(row.state, e);
    if (!t.ok()) return std::optional<Lease>();  // cannot happen for a queued row; never guess
    Lease lease = NewLease(claim, *t, now, queue);
    TE_ASSIGN_OR_RETURN(Stmt u, c.Prepare(kClaimUpdate));
    u.Bind(1, row.id.value).Bind(2, static_cast<int>(t->to)).Bind(3, t->attempt);
    u.Bind(4, lease.version.value).Bind(5, worker.value).Bind(6, now);
    u.Bind(7, lease.lease_expires_at).Bind(8, mark_started ? 1 : 0);
    TE_RETURN_IF_ERROR(u.Run());
    op_counters_.CountTransition(row, *t, now);
    return std::optional<Lease>(std::move(lease));
  }

  // P2: the execution `id` an admission just inserted, due now in `queue`,
  // goes to an idle worker of the engine in the same transaction when one
  // is reserved (Store::AdmissionClaimer). False: it stays queued, and the
  // caller publishes the work as usual.
  Result<bool> ClaimAtAdmission(Connection& c, ExecutionId id, const std::string& queue,
                                Millis now) {
    AdmissionClaimer* claimer = admission_claimer_;
    if (claimer == nullptr || !claimer->Reserve(queue)) return false;
    auto claimed = [&]() -> Result<std::optional<Lease>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kClaimRowById));
      s.Bind(1, id.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return std::optional<Lease>();
      const ClaimRow claim = ReadClaimRow(StmtRow(s));
      return ClaimOne(c, claim, claimer->worker(), /*mark_started=*/true, queue, now);
    }();
    if (!claimed.ok() || !claimed->has_value()) {
      claimer->Unreserve(queue);
      if (!claimed.ok()) return claimed.status();
      return false;
    }
    op_claims_.push_back(std::move(**claimed));
    return true;
  }

  // The body of AdmitBatch: every request or none (the first error).
  Result<std::vector<AdmitResult>> AdmitAll(Connection& c,
                                            const std::vector<AdmitRequest>& requests, Millis now) {
    SqliteSession session(c);
    TE_RETURN_IF_ERROR(ConfirmAdmissionTokens(session, requests, now, definition_reads_.tokens));
    std::vector<AdmitResult> out;
    out.reserve(requests.size());
    for (const AdmitRequest& r : requests) {
      TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(c, r, now, definition_reads_.jobs));
      out.push_back(res);
    }
    return out;
  }

  // The body of FinishBatch: one reply per request, each fenced on its own.
  Result<std::vector<Result<FinishReply>>> FinishAll(Connection& c,
                                                     const std::vector<FinishRequest>& requests) {
    const Millis now = clock_->NowMillis();
    std::vector<Result<FinishReply>> out;
    out.reserve(requests.size());
    SqliteSession session(c);
    SqliteActionTx tx(*this, c, session);
    for (const FinishRequest& f : requests) {
      TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, LoadState(c, f.lease.id));
      TE_ASSIGN_OR_RETURN(FinishDecision d, DecideFinish(tx, row, f, now, *random_));
      if (!d.status.ok()) {
        out.emplace_back(d.status);
        continue;
      }
      TE_RETURN_IF_ERROR(
          Apply(c, *row, d.transition, now, d.plan.result, d.plan.error, d.plan.progress));
      out.emplace_back(FinishReplyFor(d.transition));
    }
    return out;
  }

  Result<AdmitResult> AdmitOne(Connection& c, const AdmitRequest& r, Millis now,
                               std::unordered_map<std::string, JobPolicy>& jobs) {
    auto it = jobs.find(r.job.value);
    const auto load_policy = [&]() -> Status {
      if (it != jobs.end()) return Status::Ok();
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kJobPolicy));
      s.Bind(1, r.job.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no job named '" + r.job.value + "'");
      it = jobs.emplace(r.job.value, ReadJobPolicyRow(StmtRow(s))).first;
      return Status::Ok();
    };
    if (r.prepared_with) {
      // Before the key: a dispatch to a disabled job is refused, a repeat too.
      TE_RETURN_IF_ERROR(load_policy());
      TE_RETURN_IF_ERROR(CheckPreparedTerms(r, it->second));
    }
    if (!r.idempotency_key.empty()) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kFindByKey));
      s.Bind(1, r.job.value).Bind(2, r.tenant.value).Bind(3, r.idempotency_key);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) return ReadExistingAdmissionRow(StmtRow(s), r);
    }
    TE_RETURN_IF_ERROR(load_policy());
    const JobPolicy& p = it->second;
    bool parked = false;
    if (!r.lane_key.empty()) {
      TE_ASSIGN_OR_RETURN(Stmt l, c.Prepare(kSqliteLaneOpen));
      l.Bind(1, r.tenant.value).Bind(2, r.lane_key);
      TE_ASSIGN_OR_RETURN(parked, l.Step());
    }
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kInsertExecutionRow));
    s.Bind(1, r.job.value).Bind(2, r.tenant.value).Bind(3, p.queue);
    s.Bind(4, static_cast<int>(r.trigger)).Bind(5, r.requester).BindOrNull(6, r.idempotency_key);
    s.Bind(8, r.fingerprint).Bind(9, r.scheduled_at);
    s.Bind(10, AdmissionRunAt(r, now)).Bind(11, now).Bind(12, r.lane_key);
    s.Bind(13, r.parent.value).Bind(14, p.retry.max_attempts).Bind(15, p.retry.backoff_base_ms);
    s.Bind(16, p.retry.backoff_cap_ms).Bind(17, p.retry.max_permanent_attempts);
    s.Bind(18, p.retry.max_ambiguous_attempts).Bind(19, p.retry.max_consecutive_lease_expiries);
    s.Bind(20, p.lease_ms).Bind(21, p.retry.max_unsupported_schema_attempts);
    s.Bind(22, parked ? 1 : 0);
    TE_RETURN_IF_ERROR(s.Run());
    AdmitResult res;
    res.outcome = AdmitOutcome::kCreated;
    res.id = ExecutionId(c.last_insert_rowid());
    TE_ASSIGN_OR_RETURN(Stmt pl, c.Prepare(kInsertPayload));
    pl.Bind(1, res.id.value).Bind(2, r.payload_json);
    TE_RETURN_IF_ERROR(pl.Run());
    res.status = ExecutionStatus::kQueued;
    op_counters_.CountAdmission(p.queue, r.tenant.value);
    if (parked) return res;
    if (AdmissionRunAt(r, now) <= now) {
      TE_ASSIGN_OR_RETURN(bool claimed, ClaimAtAdmission(c, res.id, p.queue, now));
      if (claimed) {
        res.status = ExecutionStatus::kRunning;
        return res;
      }
    }
    MarkWork(p.queue);
    return res;
  }

  // Runs `f(connection)` on the writer thread inside a group-committed
  // transaction; returns its result only after the COMMIT that contains it.
  template <typename T, typename F>
  Result<T> Write(F&& f, Durability durability = Durability::kSync, OpKind kind = OpKind::kOther)
      EXCLUDES(mu_) {
    std::optional<Result<T>> out;
    Op op;
    op.durability = durability;
    op.kind = kind;
    op.body = [&](Connection& c) -> Status {
      out.emplace(f(c));
      return out->status();
    };
    const bool traced = pickup_trace::Installed() != nullptr;
    if (traced) [[unlikely]]
      op.times.queued = pickup_trace::NowNs();
    {
      MutexLock lock(mu_);
      if (stopping_) return Unavailable("store is closing");
      queue_.push_back(&op);
      work_cv_.NotifyOne();
      while (!op.done) done_cv_.Wait(mu_);
    }
    if (traced) [[unlikely]]
      pickup_trace::last_write = op.times;
    if (!op.result.ok()) return op.result;
    return std::move(*out);
  }

  // Write without a waiting caller: `done` gets what Write would return, on
  // the completer thread after the batch's COMMIT (or on the calling thread
  // when the store is closing). `done` must be quick and must not wait for
  // the store's writes.
  template <typename T, typename F>
  void WriteAsync(F f, std::function<void(Result<T>)> done, OpKind kind = OpKind::kOther)
      EXCLUDES(mu_) {
    auto out = std::make_shared<std::optional<Result<T>>>();
    auto op = std::make_unique<Op>();
    op->kind = kind;
    op->body = [out, f = std::move(f)](Connection& c) mutable -> Status {
      out->emplace(f(c));
      return (*out)->status();
    };
    op->finished = [out, done](Op& self) {
      if (!self.result.ok()) return done(self.result);
      done(std::move(**out));
    };
    {
      MutexLock lock(mu_);
      if (!stopping_) {
        queue_.push_back(op.get());  // may throw: then nothing was queued
        op.release();
        work_cv_.NotifyOne();
        return;
      }
    }
    done(Unavailable("store is closing"));
  }

  // The shared store logic's transactions (sql_store.h).
  Status InRead(SessionBody body) override {
    return Read<bool>([&](Connection& c) -> Result<bool> {
             SqliteSession session(c);
             TE_RETURN_IF_ERROR(body(session));
             return true;
           })
        .status();
  }
  Status InWrite(SessionBody body) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             SqliteSession session(c);
             TE_RETURN_IF_ERROR(body(session));
             return true;
           })
        .status();
  }

  template <typename T, typename F>
  Result<T> Read(F&& f) EXCLUDES(read_mu_) {
    Connection* c = nullptr;
    {
      MutexLock lock(read_mu_);
      while (readers_.empty()) read_cv_.Wait(read_mu_);
      c = readers_.back();
      readers_.pop_back();
    }
    Result<T> r = f(*c);
    {
      MutexLock lock(read_mu_);
      readers_.push_back(c);
    }
    read_cv_.NotifyOne();
    return r;
  }

  void WriterLoop() EXCLUDES(mu_) {
    std::vector<Op*> batch;
    while (true) {
      {
        MutexLock lock(mu_);
        while (queue_.empty() && !stopping_) work_cv_.Wait(mu_);
        if (queue_.empty()) return;  // stopping and drained
        const std::size_t n = std::min<std::size_t>(queue_.size(), std::max(1, options_.max_group));
        batch.assign(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
        queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      }
      RunBatch(batch);
      // A waiting caller may return (and free its operation) as soon as its
      // `done` is set: operations without one are told apart before.
      std::vector<std::unique_ptr<Op>> async;
      {
        MutexLock lock(mu_);
        for (Op* op : batch) {
          if (op->finished) {
            async.emplace_back(op);
          } else {
            op->done = true;
          }
        }
      }
      done_cv_.NotifyAll();
      // Their callbacks run on the completer, while this thread goes on
      // with the next batch.
      if (!async.empty()) {
        bool idle = false;
        {
          MutexLock lock(completer_mu_);
          idle = completions_.empty();
          for (std::unique_ptr<Op>& op : async) completions_.push_back(std::move(op));
        }
        if (idle) completer_cv_.NotifyOne();
      }
      batch.clear();
      if (!checkpoints_held_ && finish_checkpoint_.load(std::memory_order_acquire)) {
        FinishCheckpoint();
      }
    }
  }

  // Calls the callbacks of the asynchronous operations the writer hands
  // over, in commit order, until the store closes and none is left.
  void CompleterLoop() EXCLUDES(completer_mu_) {
    std::vector<std::unique_ptr<Op>> ready;
    while (true) {
      {
        MutexLock lock(completer_mu_);
        while (completions_.empty() && !stop_completer_) completer_cv_.Wait(completer_mu_);
        if (completions_.empty()) return;  // stopping and drained
        ready.swap(completions_);
      }
      for (std::unique_ptr<Op>& op : ready) {
        try {
          op->finished(*op);
        } catch (...) {
          // A callback that throws loses only its own answer (an HTTP
          // Responder dropped unanswered answers 500); the others go on.
        }
      }
      ready.clear();
    }
  }

  // SQLite's wal hook, called on the writer thread after each COMMIT with the
  // number of pages in the WAL. Asks for a checkpoint each time the WAL grew
  // by options_.checkpoint_pages: once per growth, not after every commit
  // while the WAL is long.
  static int OnWalCommit(void* self, sqlite3*, const char*, int pages) {
    auto* store = static_cast<SqliteStore*>(self);
    if (pages < store->wal_pages_) store->next_checkpoint_at_ = 0;  // the WAL started over
    store->wal_pages_ = pages;
    const int size = std::max(1, store->options_.checkpoint_pages);
    if (pages >= std::max(size, store->next_checkpoint_at_)) {
      store->next_checkpoint_at_ = pages + size;
      store->RequestCheckpoint();
    }
    return SQLITE_OK;
  }

  // On the writer thread, between two batches, after each checkpoint
  // (CopyWal): copies the pages committed during the checkpointer's last
  // pass, with the fsyncs of the WAL and the database file; none when the
  // checkpointer caught up, and then it costs no fsync. The WAL is then
  // wholly in the database file, so the writer's next transaction starts it
  // over, unless a checkpoint then holds the WAL's first read lock: the
  // checkpointer starts no pass until that transaction began
  // (ResumeCheckpoints). SQLITE_BUSY (another process's checkpoint runs) and
  // other failures leave the WAL to the next checkpoint.
  void FinishCheckpoint() {
    (void)sqlite3_wal_checkpoint_v2(writer_conn_.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr,
                                    nullptr);
    checkpoints_held_ = true;
  }

  // On the writer thread, once the transaction after a FinishCheckpoint
  // began (or failed to): the checkpointer may start its next pass.
  void ResumeCheckpoints() EXCLUDES(checkpoint_mu_) {
    if (!checkpoints_held_) return;
    checkpoints_held_ = false;
    {
      MutexLock lock(checkpoint_mu_);
      finish_checkpoint_.store(false, std::memory_order_release);
    }
    checkpoint_cv_.NotifyAll();
  }

  void RequestCheckpoint() EXCLUDES(checkpoint_mu_) {
    {
      MutexLock lock(checkpoint_mu_);
      if (checkpoint_wanted_) return;
      checkpoint_wanted_ = true;
    }
    checkpoint_cv_.NotifyOne();
  }

  // Copies the WAL's committed pages into the database file (PASSIVE
  // checkpoints: they wait for no reader or writer) each time the writer
  // asks (CopyWal). Inside a COMMIT, as SQLite's auto-checkpoint does
  // it, the copy (about 4 MB) and the fsync of the database file would delay
  // every caller of that commit by milliseconds, once in a few dozen commits.
  void CheckpointLoop() EXCLUDES(checkpoint_mu_) {
    MutexLock lock(checkpoint_mu_);
    while (true) {
      while (!checkpoint_wanted_ && !stop_checkpointer_) checkpoint_cv_.Wait(checkpoint_mu_);
      if (stop_checkpointer_) return;
      checkpoint_wanted_ = false;
      lock.Unlock();
      CopyWal();
      lock.Lock();
      // Until the writer finished this checkpoint and began its next
      // transaction (ResumeCheckpoints): a pass in between would hold the
      // WAL's first read lock when that transaction begins, and the WAL
      // would not start over.
      finish_checkpoint_.store(true, std::memory_order_release);
      while (finish_checkpoint_.load(std::memory_order_acquire) && !stop_checkpointer_) {
        checkpoint_cv_.Wait(checkpoint_mu_);
      }
    }
  }

  // Passes over the WAL beside the writer, whose commits keep appending to
  // it: the first copies the WAL, each next one what was committed during
  // the one before, until a pass finds nothing new or after
  // kCheckpointPasses. A checkpoint beside a writer that never pauses never
  // catches up with it alone (the WAL would grow with every commit): the
  // writer copies what is left (FinishCheckpoint), so the passes only make
  // that rest small. A pass that fails ends them: SQLITE_BUSY (another
  // checkpoint runs, e.g. a backup's) and the disk's errors, which the
  // writer's own commits report, leave the WAL to the next checkpoint, as do
  // readers that still read older pages (a pass that cannot copy them all).
  static constexpr int kCheckpointPasses = 3;
  void CopyWal() {
    int seen = -1;
    for (int pass = 0; pass < kCheckpointPasses; ++pass) {
      int log = 0;
      int copied = 0;
      if (sqlite3_wal_checkpoint_v2(checkpoint_conn_.raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                    &log, &copied) != SQLITE_OK ||
          log == seen || copied < log) {
        return;
      }
      seen = log;
    }
  }

  enum class OpsRun {
    kAll,                  // every operation ran: the batch commits
    kOver,                 // nothing commits; every operation has its result
    kAgainWithSavepoints,  // rolled back: run the batch again with savepoints
  };

  // Begins the batch's transaction and runs its operations in it.
  OpsRun RunOps(Connection& c, const std::vector<Op*>& batch, bool savepoints) {
    Status begin = RunCached(c, kBegin);
    ResumeCheckpoints();
    if (!begin.ok()) {
      for (Op* op : batch) op->result = begin;
      return OpsRun::kOver;
    }
    op_counters_.record_events = ObservesLifecycle();
    definition_reads_.Clear();
    for (Op* op : batch) {
      Status sp = savepoints ? RunCached(c, kSavepoint) : Status::Ok();
      op_counters_.Clear();
      op_wake_.Clear();
      if (sp.ok()) {
        op->result = op->body(c);
        // What was read of job definitions and API tokens in this
        // transaction holds while only operations that never change them
        // run. Another operation may.
        if (op->kind != OpKind::kExecutionsOnly) definition_reads_.Clear();
        if (op->result.ok()) KeepOpCounts();
        UnreserveClaims(&op_claims_);  // those of an operation that failed
        if (!op->result.ok() && !savepoints && !c.autocommit()) {
          // Without a savepoint to roll back to: the whole transaction.
          (void)c.Exec("ROLLBACK");
          ForgetBatch();
          if (batch.size() == 1) return OpsRun::kOver;
          return OpsRun::kAgainWithSavepoints;
        }
        if (!op->result.ok() && !c.autocommit()) sp = RunCached(c, kRollbackTo);
        if (savepoints && sp.ok() && !c.autocommit()) sp = RunCached(c, kRelease);
      }
      if (!sp.ok() || c.autocommit()) {
        // SQLite abandoned the transaction (disk full, I/O error): nothing of
        // this batch is durable, whatever the operations said.
        Status aborted = !sp.ok()          ? sp
                         : op->result.ok() ? Unavailable("transaction aborted by the database")
                                           : op->result;
        if (aborted.code() == ErrorCode::kInternal) aborted = Unavailable(aborted.message());
        for (Op* o : batch) o->result = aborted;
        if (!c.autocommit()) (void)c.Exec("ROLLBACK");
        ForgetBatch();
        return OpsRun::kOver;
      }
    }
    return OpsRun::kAll;
  }

  // What the batch's operations left on the writer, once they will not commit.
  void ForgetBatch() {
    batch_counters_.Clear();
    batch_wake_.Clear();
    UnreserveClaims(&batch_claims_);
    definition_reads_.Clear();
  }

  // One transaction for the whole batch; a failing operation changes nothing
  // while the others still commit. Each operation runs in a savepoint of its
  // own, except where no savepoint is needed to roll back the failing one
  // alone (they cost each operation a statement before and after, and a
  // copy of every page it changes into the savepoint's journal):
  //   - a batch of one operation: when it fails, the transaction is rolled
  //     back and nothing committed, which is what its savepoint did;
  //   - a batch of operations that write executions only (kExecutionsOnly:
  //     their effects on the writer's state are the op_* and batch_* members,
  //     which a rollback resets): when one fails, the transaction is rolled
  //     back and the batch runs again, each operation in its savepoint.
  void RunBatch(const std::vector<Op*>& batch) {
    Connection& c = writer_conn_;
    const bool traced = pickup_trace::Installed() != nullptr;
    if (traced) [[unlikely]] {
      const std::int64_t now = pickup_trace::NowNs();
      for (Op* op : batch) op->times.began = now;
    }
    if (options_.sync == SyncMode::kFull) {
      bool sync = false;
      for (const Op* op : batch) sync = sync || op->durability == Durability::kSync;
      if (sync != synced_commits_) {
        Status mode = RunCached(c, sync ? kSyncFull : kSyncNormal);
        if (!mode.ok()) {
          for (Op* op : batch) op->result = mode;
          return;
        }
        synced_commits_ = sync;
      }
    }
    const bool savepoints =
        batch.size() > 1 && std::any_of(batch.begin(), batch.end(), [](const Op* op) {
          return op->kind != OpKind::kExecutionsOnly;
        });
    OpsRun run = RunOps(c, batch, savepoints);
    if (run == OpsRun::kAgainWithSavepoints) run = RunOps(c, batch, /*savepoints=*/true);
    if (run != OpsRun::kAll) return;
    Status commit = FlushCounts(c);
    std::vector<LifecycleEvent> events = std::move(batch_counters_.events);
    batch_counters_.Clear();
    DueQueues wake = std::move(batch_wake_);
    batch_wake_.Clear();
    std::vector<Lease> claims = std::move(batch_claims_);
    batch_claims_.clear();
    if (traced) [[unlikely]] {
      const std::int64_t now = pickup_trace::NowNs();
      for (Op* op : batch) op->times.committing = now;
    }
    if (commit.ok()) commit = RunCached(c, kCommit);
    if (traced) [[unlikely]] {
      const std::int64_t now = pickup_trace::NowNs();
      for (Op* op : batch) op->times.committed = now;
    }
    if (!commit.ok()) {
      if (!c.autocommit()) (void)c.Exec("ROLLBACK");
      for (Op* op : batch) op->result = commit;
      UnreserveClaims(&claims);
      return;
    }
    // On this thread, before the callers of the batch wake: the leases
    // claimed at admission go to their idle workers, and a commit that made
    // work due wakes the engine's workers without waiting for them.
    for (Lease& lease : claims) admission_claimer_->Deliver(std::move(lease));
    PublishWork(wake);
    PublishLifecycle(std::move(events));
  }

  // Constant after construction.
  const SqliteStoreOptions options_;
  const std::unique_ptr<RandomSource> owned_random_;
  RandomSource* const random_;

  // Used only by the writer thread (and Init before it starts).
  Connection writer_conn_;
  std::thread writer_;
  bool synced_commits_ = true;  // the writer connection's current synchronous mode is FULL
  // Counter deltas of the running operation and of the batch (writer thread only).
  StatusCounters op_counters_, batch_counters_;
  // The queues the running operation / the batch made work due in (writer
  // thread only).
  DueQueues op_wake_, batch_wake_;
  // Leases claimed at admission by the running operation / the batch, for
  // admission_claimer_ after the COMMIT (writer thread only).
  std::vector<Lease> op_claims_, batch_claims_;
  // What was read of job definitions and API tokens in the running
  // transaction since its last operation that was not kExecutionsOnly (writer
  // thread only): the admissions and finishes of one commit read each job's
  // definition and confirm each API token once.
  struct DefinitionReads {
    std::unordered_map<std::string, JobPolicy> jobs;
    std::unordered_set<std::int64_t> tokens;
    void Clear() {
      jobs.clear();
      tokens.clear();
    }
  };
  DefinitionReads definition_reads_;
  // Set once before the store is shared (Store::SetAdmissionClaimer).
  AdmissionClaimer* admission_claimer_ = nullptr;

  Mutex mu_;
  CondVar work_cv_;
  CondVar done_cv_;
  std::deque<Op*> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  // The asynchronous operations whose batch is over, for the completer.
  std::thread completer_;
  Mutex completer_mu_;
  CondVar completer_cv_;
  std::vector<std::unique_ptr<Op>> completions_ GUARDED_BY(completer_mu_);
  bool stop_completer_ GUARDED_BY(completer_mu_) = false;

  // The checkpointer's connection; used only by its thread (and Init).
  Connection checkpoint_conn_;
  std::thread checkpointer_;
  Mutex checkpoint_mu_;
  CondVar checkpoint_cv_;
  bool checkpoint_wanted_ GUARDED_BY(checkpoint_mu_) = false;
  bool stop_checkpointer_ GUARDED_BY(checkpoint_mu_) = false;
  // Set by the checkpointer after each checkpoint; the writer then finishes
  // it (FinishCheckpoint) and clears it, under checkpoint_mu_, once its next
  // transaction began (ResumeCheckpoints).
  std::atomic<bool> finish_checkpoint_{false};
  // The writer finished a checkpoint and has not begun a transaction since
  // (writer thread only).
  bool checkpoints_held_ = false;
  // The WAL's size after the last commit, and the size at which the next
  // checkpoint is asked for (writer thread only, in OnWalCommit).
  int wal_pages_ = 0;
  int next_checkpoint_at_ = 0;

  Mutex read_mu_;
  CondVar read_cv_;
  std::vector<Connection*> readers_ GUARDED_BY(read_mu_);  // idle read connections
  // Every read connection; set by Init, before any Read.
  std::vector<std::unique_ptr<Connection>> owned_readers_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options) {
  if (options.path.empty()) return InvalidArgument("SQLite store needs a database path");
  auto store = std::make_unique<SqliteStore>(options);
  TE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace taskengine
