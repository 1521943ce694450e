// SQLite backend of the storage contract. See sqlite_store.h for the design.
#include "storage/sqlite/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/mutex.h"
#include "core/state_machine.h"
#include "storage/list_codec.h"
#include "storage/sql_statements.h"
#include "storage/sqlite/schema.h"
#include "storage/sqlite/sqlite_db.h"
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

constexpr const char* kApplyTransition =
    "UPDATE executions SET status = ?2, run_at = ?3, attempt = ?4, consecutive_lease_expiries = ?5,"
    " permanent_failures = ?6, ambiguous_failures = ?7, failure_class = ?8, cancel_requested = ?9,"
    " lease_expires_at = CASE WHEN ?10 THEN 0 ELSE lease_expires_at END,"
    " worker = CASE WHEN ?10 THEN '' ELSE worker END, finished_at = ?11, result = COALESCE(?12, "
    "result),"
    " error = COALESCE(?13, error), progress = COALESCE(?14, progress),"
    " trigger = COALESCE(?15, trigger) WHERE id = ?1";

// The state columns, then what a worker needs (from kStateColumnCount on).
constexpr const char* kClaimDue =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '')"
    " FROM executions INDEXED BY executions_due"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
    " ORDER BY run_at, id LIMIT ?3";
// kClaimDue for a claimer that names the handlers it can run (?4: a
// HandlerFilter list): executions of other handlers are skipped.
constexpr const char* kClaimDueForHandlers =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '')"
    " FROM executions INDEXED BY executions_due"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
    " AND job IN (SELECT name FROM job_definitions"
    " WHERE instr(?4, char(31) || handler || char(31)) > 0)"
    " ORDER BY run_at, id LIMIT ?3";
constexpr const char* kClaimUpdate =
    "UPDATE executions SET status = ?2, attempt = ?3, claim_version = ?4,"
    " worker = ?5, started_at = ?6, lease_expires_at = ?7, finished_at = 0,"
    " handler_started = ?8 WHERE id = ?1";
// L4: the current claim's handler starts.
constexpr const char* kMarkStarted =
    "UPDATE executions SET handler_started = 1 WHERE id = ?1 AND claim_version = ?2"
    " AND status = 1";

constexpr const char* kExpired = "SELECT " TE_SQL_STATE_COLUMNS
                                 " FROM executions WHERE status = 1 AND lease_expires_at < ?1"
                                 " ORDER BY lease_expires_at LIMIT ?2";

constexpr const char* kInsertExecution =
    "INSERT INTO executions (job, tenant, queue, status, trigger, requester, idempotency_key,"
    " payload, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,"
    " max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)"
    " VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?20, ?21, ?22)";
// Lanes (O1). A lane is (tenant, lane key): ?1 is the tenant, ?2 the key.
constexpr const char* kLaneUnparkNext =
    "UPDATE executions SET lane_parked = 0, run_at = MAX(run_at, ?3) WHERE id = ("
    "SELECT id FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) AND lane_parked = 1 ORDER BY id LIMIT 1)";
constexpr const char* kLaneCounts =
    "SELECT SUM(status = 0), SUM(status = 1) FROM executions WHERE tenant = ?1 AND lane_key = ?2"
    " AND lane_key <> '' AND status IN (0, 1, 3, 4)";
// Lanes with open work (of tenant ?2 when not NULL), blocked ones (whose head
// is failed or quarantined) first.
constexpr const char* kOpenLanes =
    "SELECT tenant, lane_key, MAX(status IN (3, 4)) AS blocked FROM executions"
    " WHERE lane_key <> '' AND status IN (0, 1, 3, 4) AND (?2 IS NULL OR tenant = ?2)"
    " GROUP BY tenant, lane_key ORDER BY blocked DESC, tenant, lane_key LIMIT ?1";
// Audit.
constexpr const char* kListAudit =
    "SELECT id, at, actor, tenant, action, target, before_json, after_json, reason FROM audit_log"
    " WHERE (?1 = '' OR target = ?1) AND (?2 = 0 OR id < ?2) ORDER BY id DESC LIMIT ?3";
constexpr const char* kPurgeCandidates =
    "SELECT id, tenant, queue, status, finished_at FROM executions"
    " INDEXED BY executions_by_finished_at WHERE" TE_SQL_PURGEABLE " ORDER BY finished_at LIMIT ?2";
constexpr const char* kDeleteExecutionLogs =
    "DELETE FROM execution_logs WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kDeleteExecutionAttempts =
    "DELETE FROM execution_attempts WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kDeleteExecutionEffects =
    "DELETE FROM effects WHERE execution_id = ?1 RETURNING 1";
constexpr const char* kDeleteExecution = "DELETE FROM executions WHERE id = ?1";
// Log lines and audit records are appended in time order: the oldest by id
// until the first young one.
constexpr const char* kDeleteLogsUpTo =
    "DELETE FROM execution_logs WHERE id <= ?1 AND at < ?2 RETURNING 1";
constexpr const char* kDeleteAuditUpTo =
    "DELETE FROM audit_log WHERE id <= ?1 AND at < ?2 RETURNING 1";
constexpr const char* kGrant = "INSERT OR IGNORE INTO grants (principal, tenant) VALUES (?1, ?2)";

constexpr const char* kUpsertJob =
    "INSERT INTO job_definitions (" TE_SQL_JOB_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27) ON CONFLICT(name) DO UPDATE SET "
    "display_name = ?2, "
    "handler = ?3, queue = ?4,"
    " scope = ?5, schedule = ?6, timezone = ?7, timeout_ms = ?8, lease_ms = ?9, max_attempts = ?10,"
    " backoff_base_ms = ?11, backoff_cap_ms = ?12, max_permanent_attempts = ?13,"
    " max_ambiguous_attempts = ?14, max_consecutive_lease_expiries = ?15, lane_template = ?16,"
    " config_json = ?17, enabled = ?18, updated_at = MAX(?19, updated_at + 1),"
    " accepted_schema_versions = ?20, max_unsupported_schema_attempts = ?21, catch_up = ?22,"
    " catch_up_window_ms = ?23, window_ms = ?24, seed_digest = ?25,"
    " notify_on_failure = ?26, notify_targets = ?27";
constexpr const char* kJobVersion = "SELECT updated_at FROM job_definitions WHERE name = ?1";

// List variants: each is a static statement so it is prepared once; the
// optional filters are "?N IS NULL OR ..." and the leading column picks the index.
constexpr const char* kInsertAttempt =
    "INSERT OR REPLACE INTO execution_attempts (execution_id, attempt, claim_version, worker,"
    " started_at, ended_at, outcome, failure_class, released, error)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
// Tenants and scheduling (T3, T4).
constexpr const char* kUpsertTenant =
    "INSERT INTO tenants (id, name, active, created_at) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT(id) DO UPDATE SET name = ?2, active = ?3";
constexpr const char* kAcquireLock =
    "INSERT INTO scheduler_locks (name, holder, expires_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT(name) DO UPDATE SET holder = ?2, expires_at = ?3"
    " WHERE scheduler_locks.holder = ?2 OR scheduler_locks.expires_at <= ?4";
constexpr const char* kUpdateScheduleState =
    "INSERT INTO schedule_state (job, last_fire_at, last_evaluated_at, skipped_fires,"
    " last_skipped_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(job) DO UPDATE SET"
    " last_fire_at = MAX(last_fire_at, ?2), last_evaluated_at = MAX(last_evaluated_at, ?3),"
    " skipped_fires = skipped_fires + ?4, last_skipped_at = MAX(last_skipped_at, ?5)";
// Principals (X1).
constexpr const char* kUpsertUser =
    "INSERT INTO users (name, password_hash, scopes, tenants, disabled, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(name) DO UPDATE SET password_hash = ?2,"
    " scopes = ?3, tenants = ?4, disabled = ?5";
constexpr const char* kCreateToken =
    "INSERT INTO api_tokens (name, secret_hash, principal, scopes, tenants, created_at, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";
constexpr const char* kCreateSession =
    "INSERT INTO sessions (id_hash, user, csrf_token, created_at, last_seen_at, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
constexpr const char* kGetSession =
    "SELECT id_hash, user, csrf_token, created_at, last_seen_at, expires_at FROM sessions"
    " WHERE id_hash = ?1";
// Workers (W5).
constexpr const char* kReportWorker =
    "INSERT INTO workers (id, hostname, pid, state, current_execution, processed, failed,"
    " started_at, last_heartbeat_at, kind, threads, busy, current_executions)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    " ON CONFLICT(id) DO UPDATE SET hostname = ?2, pid = ?3, state = ?4, current_execution = ?5,"
    " processed = ?6, failed = ?7, started_at = ?8, last_heartbeat_at = ?9, kind = ?10,"
    " threads = ?11, busy = ?12, current_executions = ?13";
constexpr const char* kListWorkers =
    "SELECT " TE_WORKER_COLUMNS
    " FROM workers WHERE (?1 = 0 OR last_heartbeat_at >= ?2) ORDER BY id";
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
constexpr const char* kOldestQuarantined =
    "SELECT finished_at FROM executions INDEXED BY executions_by_status"
    " WHERE status = 4 ORDER BY id LIMIT 1";
// ?2: NULL for every tenant, else a JSON array of the tenants in scope.
constexpr const char* kQueuedDepths =
    "SELECT queue, COUNT(*), SUM(run_at <= ?1), MIN(queued_at) FROM executions"
    " WHERE status = 0 AND (?2 IS NULL OR tenant IN (SELECT value FROM json_each(?2)))"
    " GROUP BY queue";
constexpr const char* kRunningDepths =
    "SELECT queue, COUNT(*) FROM executions"
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

 private:
  const Stmt& s_;
};

// --- the store -----------------------------------------------------------------

class SqliteStore final : public ActionStore {
 public:
  explicit SqliteStore(const SqliteStoreOptions& o)
      : options_(o),
        clock_(o.clock != nullptr ? o.clock : SystemClock::Get()),
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
  }

  Status Init() {
    TE_RETURN_IF_ERROR(writer_conn_.Open(options_.path, /*create=*/true, options_.busy_timeout_ms));
    // A new database gives the space retention frees back to the file system
    // (ReclaimSpace); the mode can only be chosen before the first table.
    TE_ASSIGN_OR_RETURN(std::int64_t pages, PragmaInt(writer_conn_, "PRAGMA page_count"));
    if (pages == 0) TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA auto_vacuum = INCREMENTAL"));
    TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA journal_mode = WAL"));
    TE_RETURN_IF_ERROR(writer_conn_.Exec(options_.sync == SyncMode::kFull
                                             ? "PRAGMA synchronous = FULL"
                                             : "PRAGMA synchronous = NORMAL"));
    TE_RETURN_IF_ERROR(writer_conn_.Exec("PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16384"));
    if (options_.max_page_count > 0) {
      TE_RETURN_IF_ERROR(
          writer_conn_.Exec("PRAGMA max_page_count = " + std::to_string(options_.max_page_count)));
    }
    for (int i = 0; i < std::max(1, options_.read_connections); ++i) {
      auto conn = std::make_unique<Connection>();
      TE_RETURN_IF_ERROR(conn->Open(options_.path, /*create=*/false, options_.busy_timeout_ms));
      TE_RETURN_IF_ERROR(conn->Exec("PRAGMA query_only = 1; PRAGMA cache_size = -4096"));
      MutexLock lock(read_mu_);  // uncontended: no Read runs before Init returns
      readers_.push_back(conn.get());
      owned_readers_.push_back(std::move(conn));
    }
    writer_ = std::thread([this] { WriterLoop(); });
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

  // SQLite has no admission from SQL: the dispatcher's check is the only one.
  Status SetPayloadLimit(std::int64_t) override { return Status::Ok(); }

  // --- job definitions ---

  Status UpsertJob(const JobDefinition& job) override {
    TE_RETURN_IF_ERROR(ValidateJob(job));
    const Millis now = clock_->NowMillis();
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_RETURN_IF_ERROR(WriteJob(c, job, now));
             return true;
           })
        .status();
  }

  Status ChangeJob(const JobChange& change) override {
    if (change.kind == JobChange::Kind::kDelete) {
      if (!IsValidJobName(change.job.name.value)) return NotFound("no job named that");
    } else {
      TE_RETURN_IF_ERROR(ValidateJob(change.job));
    }
    if (change.audit) TE_RETURN_IF_ERROR(ValidateAuditRecord(*change.audit));
    const Millis now = clock_->NowMillis();
    const std::string& name = change.job.name.value;
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt v, c.Prepare(kJobVersion));
             v.Bind(1, name);
             TE_ASSIGN_OR_RETURN(bool exists, v.Step());
             const Millis version = exists ? v.Int(0) : 0;
             TE_RETURN_IF_ERROR(CheckJobChange(change, exists, version));
             if (change.kind == JobChange::Kind::kDelete) {
               TE_ASSIGN_OR_RETURN(Stmt n, c.Prepare(kCountOpenOfJob));
               n.Bind(1, name);
               TE_ASSIGN_OR_RETURN(bool row, n.Step());
               TE_RETURN_IF_ERROR(CheckJobDeletable(name, row ? n.Int(0) : 0));
               for (const char* sql : {kDeleteJob, kDeleteJobScheduleState}) {
                 TE_ASSIGN_OR_RETURN(Stmt d, c.Prepare(sql));
                 d.Bind(1, name);
                 TE_RETURN_IF_ERROR(d.Run());
               }
             } else {
               TE_RETURN_IF_ERROR(WriteJob(c, change.job, now));
             }
             if (change.audit) {
               AuditRecord r = *change.audit;
               if (r.at == 0) r.at = now;
               TE_RETURN_IF_ERROR(InsertAudit(c, r));
             }
             return true;
           })
        .status();
  }

  // Inserts `job`, or replaces the row of its name (keeping created_at).
  static Status WriteJob(Connection& c, const JobDefinition& job, Millis now) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kUpsertJob));
    s.Bind(1, job.name.value).Bind(2, job.display_name).Bind(3, job.handler).Bind(4, job.queue);
    s.Bind(5, static_cast<int>(job.scope)).Bind(6, job.schedule).Bind(7, job.timezone);
    s.Bind(8, job.timeout_ms).Bind(9, job.lease_ms).Bind(10, job.retry.max_attempts);
    s.Bind(11, job.retry.backoff_base_ms).Bind(12, job.retry.backoff_cap_ms);
    s.Bind(13, job.retry.max_permanent_attempts).Bind(14, job.retry.max_ambiguous_attempts);
    s.Bind(15, job.retry.max_consecutive_lease_expiries).Bind(16, job.lane_template);
    s.Bind(17, job.config_json).Bind(18, job.enabled ? 1 : 0).Bind(19, now);
    s.Bind(20, FormatIntList(job.accepted_schema_versions));
    s.Bind(21, job.retry.max_unsupported_schema_attempts);
    s.Bind(22, static_cast<int>(job.catch_up)).Bind(23, job.catch_up_window_ms);
    s.Bind(24, job.window_ms).Bind(25, job.seed_digest);
    s.Bind(26, job.notify_on_failure ? 1 : 0).Bind(27, JoinList(job.notify_targets));
    return s.Run();
  }

  Result<JobDefinition> GetJob(const JobName& name) override {
    return Read<JobDefinition>([&](Connection& c) -> Result<JobDefinition> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kGetJob));
      s.Bind(1, name.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no job named '" + name.value + "'");
      return ReadJobRow(StmtRow(s));
    });
  }

  Result<std::vector<JobDefinition>> ListJobs() override {
    return Read<std::vector<JobDefinition>>(
        [&](Connection& c) -> Result<std::vector<JobDefinition>> {
          TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListJobs));
          std::vector<JobDefinition> out;
          while (true) {
            TE_ASSIGN_OR_RETURN(bool row, s.Step());
            if (!row) break;
            out.push_back(ReadJobRow(StmtRow(s)));
          }
          return out;
        });
  }

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
      std::vector<AdmitResult> out;
      out.reserve(admissions.size());
      std::unordered_map<std::string, JobPolicy> jobs;
      for (const AdmitRequest& r : admissions) {
        TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(c, r, now, jobs));
        out.push_back(res);
      }
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
    return Write<std::vector<AdmitResult>>([&](Connection& c) -> Result<std::vector<AdmitResult>> {
      std::vector<AdmitResult> out;
      out.reserve(requests.size());
      std::unordered_map<std::string, JobPolicy> jobs;
      for (const AdmitRequest& r : requests) {
        TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(c, r, now, jobs));
        out.push_back(res);
      }
      return out;
    });
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
              const StateRow& row = claim.row;
              Event e;
              e.kind = EventKind::kClaim;
              e.now = now;
              auto t = Decide(row.state, e);
              if (!t.ok()) continue;  // cannot happen for a queued row; never guess
              Lease lease = NewLease(claim, *t, now, slot.queue);
              TE_ASSIGN_OR_RETURN(Stmt u, c.Prepare(kClaimUpdate));
              u.Bind(1, row.id.value).Bind(2, static_cast<int>(t->to)).Bind(3, t->attempt);
              u.Bind(4, lease.version.value).Bind(5, request.worker.value).Bind(6, now);
              u.Bind(7, lease.lease_expires_at).Bind(8, request.mark_started ? 1 : 0);
              TE_RETURN_IF_ERROR(u.Run());
              op_counters_.CountTransition(row, *t, now);
              out.push_back(std::move(lease));
            }
          }
          return out;
        },
        Durability::kRelaxed);
  }

  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    using Replies = std::vector<Status>;
    auto r = Write<Replies>(
        [&](Connection& c) -> Result<Replies> {
          Replies out;
          out.reserve(leases.size());
          for (const LeaseRef& lease : leases) {
            {
              TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kMarkStarted));
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
        Durability::kRelaxed);
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
        Durability::kRelaxed);
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
    auto r = Write<Replies>([&](Connection& c) -> Result<Replies> {
      const Millis now = clock_->NowMillis();
      Replies out;
      out.reserve(requests.size());
      SqliteActionTx tx(*this, c);
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
    });
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
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
          SqliteActionTx tx(*this, c);
          return RecoverExpired(tx, expired, max_batch, now, *random_);
        },
        Durability::kRelaxed);
  }

  // --- retention (I7) ---

  Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows, bool dry_run) override {
    TE_RETURN_IF_ERROR(ValidatePurge(cutoffs, max_rows));
    if (dry_run) {
      return Read<PurgeReport>([&](Connection& c) { return CountPurge(c, cutoffs); });
    }
    return Write<PurgeReport>(
        [&](Connection& c) -> Result<PurgeReport> {
          PurgeReport r;
          if (cutoffs.executions_ended_before > 0) {
            TE_RETURN_IF_ERROR(PurgeExecutions(c, cutoffs.executions_ended_before, max_rows, r));
          }
          if (cutoffs.logs_before > 0) {
            TE_ASSIGN_OR_RETURN(bool more, PurgeOldest(c, kOldestLogs, kDeleteLogsUpTo,
                                                       cutoffs.logs_before, max_rows, &r.logs));
            r.more = r.more || more;
          }
          if (cutoffs.audit_before > 0) {
            TE_ASSIGN_OR_RETURN(bool more, PurgeOldest(c, kOldestAudit, kDeleteAuditUpTo,
                                                       cutoffs.audit_before, max_rows, &r.audit));
            r.more = r.more || more;
          }
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

  Result<std::vector<EffectRecord>> GetEffects(ExecutionId id) override {
    return Read<std::vector<EffectRecord>>([&](Connection& c) -> Result<std::vector<EffectRecord>> {
      TE_RETURN_IF_ERROR(RequireExecution(c, id));
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListEffects));
      s.Bind(1, id.value);
      std::vector<EffectRecord> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadEffectRow(StmtRow(s), id));
      }
      return out;
    });
  }

  // --- operator actions ---

  // RequestCancel, Replay, ApproveReplay: ActionStore (store_actions.h).

  Status AppendAudit(const AuditRecord& record) override {
    TE_RETURN_IF_ERROR(ValidateAuditRecord(record));
    return Write<bool>([&](Connection& c) -> Result<bool> {
             AuditRecord r = record;
             if (r.at == 0) r.at = clock_->NowMillis();
             TE_RETURN_IF_ERROR(InsertAudit(c, r));
             return true;
           })
        .status();
  }

  Result<std::vector<AuditRecord>> ListAudit(const AuditFilter& f) override {
    TE_RETURN_IF_ERROR(ValidateListLimit(f.limit));
    return Read<std::vector<AuditRecord>>([&](Connection& c) -> Result<std::vector<AuditRecord>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListAudit));
      s.Bind(1, f.target).Bind(2, f.before_id).Bind(3, f.limit);
      std::vector<AuditRecord> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadAuditRow(StmtRow(s)));
      }
      return out;
    });
  }

  // --- grants ---

  Status Grant(std::string_view principal, std::string_view tenant) override {
    return WriteGrant(kGrant, principal, tenant);
  }
  Status Revoke(std::string_view principal, std::string_view tenant) override {
    return WriteGrant(kRevoke, principal, tenant);
  }
  Result<bool> IsGranted(std::string_view principal, std::string_view tenant) override {
    return Read<bool>([&](Connection& c) -> Result<bool> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kIsGranted));
      s.Bind(1, principal).Bind(2, tenant);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      return row && s.Int(0) != 0;
    });
  }

  // --- lanes ---

  Result<LaneStatus> GetLane(const TenantId& tenant, std::string_view lane) override {
    return Read<LaneStatus>([&](Connection& c) { return LaneOf(c, tenant.value, lane); });
  }

  Result<std::vector<LaneStatus>> ListLanes(const LaneFilter& filter) override {
    TE_RETURN_IF_ERROR(ValidateListLimit(filter.limit));
    return Read<std::vector<LaneStatus>>([&](Connection& c) -> Result<std::vector<LaneStatus>> {
      std::vector<std::pair<std::string, std::string>> names;  // (tenant, lane)
      {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kOpenLanes));
        s.Bind(1, filter.limit);
        if (filter.tenant) {
          s.Bind(2, filter.tenant->value);
        } else {
          s.BindNull(2);
        }
        while (true) {
          TE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          names.emplace_back(s.Text(0), s.Text(1));
        }
      }
      std::vector<LaneStatus> out;
      for (const auto& [tenant, name] : names) {
        TE_ASSIGN_OR_RETURN(LaneStatus lane, LaneOf(c, tenant, name));
        out.push_back(std::move(lane));
      }
      SortBlockedFirst(out);
      return out;
    });
  }

  // --- failure notifications (I6) ---

  Result<NotifyOutbox> ReadNotifyOutbox(int max_pending) override {
    TE_RETURN_IF_ERROR(ValidateNotifyLimit(max_pending));
    return Read<NotifyOutbox>([&](Connection& c) -> Result<NotifyOutbox> {
      NotifyOutbox out;
      {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListNotifyPending));
        s.Bind(1, max_pending);
        while (true) {
          TE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) break;
          out.pending.push_back(ReadNotifyPendingRow(StmtRow(s)));
        }
      }
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListNotifyState));
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.jobs.push_back(ReadNotifyStateRow(StmtRow(s)));
      }
      return out;
    });
  }

  Status UpdateNotifyOutbox(const NotifyOutboxUpdate& update) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             for (const NotifyPending& p : update.done) {
               TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kDeleteNotifyPending));
               s.Bind(1, p.execution.value).Bind(2, p.ended_at);
               TE_RETURN_IF_ERROR(s.Run());
             }
             for (const NotifyJobState& j : update.jobs) {
               if (IsEmptyNotifyState(j)) {
                 TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kDeleteNotifyState));
                 s.Bind(1, j.job.value);
                 TE_RETURN_IF_ERROR(s.Run());
                 continue;
               }
               TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kUpsertNotifyState));
               s.Bind(1, j.job.value).Bind(2, FormatIntList(j.sent_at));
               s.Bind(3, j.suppressed).Bind(4, j.suppressed_since);
               TE_RETURN_IF_ERROR(s.Run());
             }
             return true;
           })
        .status();
  }

  // --- tenants ---

  Status UpsertTenant(const Tenant& tenant) override {
    TE_RETURN_IF_ERROR(ValidateTenant(tenant));
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kUpsertTenant));
             s.Bind(1, tenant.id.value).Bind(2, tenant.name).Bind(3, tenant.active ? 1 : 0);
             s.Bind(4, clock_->NowMillis());
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  Result<Tenant> GetTenant(const TenantId& id) override {
    return Read<Tenant>([&](Connection& c) -> Result<Tenant> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kGetTenant));
      s.Bind(1, id.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no tenant '" + id.value + "'");
      return ReadTenantRow(StmtRow(s));
    });
  }

  Result<std::vector<Tenant>> ListTenants(bool active_only) override {
    return Read<std::vector<Tenant>>([&](Connection& c) -> Result<std::vector<Tenant>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListTenants));
      s.Bind(1, active_only ? 1 : 0);
      std::vector<Tenant> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadTenantRow(StmtRow(s)));
      }
      return out;
    });
  }

  // --- scheduling ---

  Result<bool> AcquireLock(std::string_view name, std::string_view holder, Millis ttl_ms) override {
    TE_RETURN_IF_ERROR(ValidateLock(name, holder, ttl_ms));
    return Write<bool>([&](Connection& c) -> Result<bool> {
      const Millis now = clock_->NowMillis();
      {
        TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kAcquireLock));
        s.Bind(1, name).Bind(2, holder).Bind(3, now + ttl_ms).Bind(4, now);
        TE_RETURN_IF_ERROR(s.Run());
      }
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kLockHolder));
      s.Bind(1, name);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      return row && s.TextView(0) == holder;
    });
  }

  Status ReleaseLock(std::string_view name, std::string_view holder) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kReleaseLock));
             s.Bind(1, name).Bind(2, holder);
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  Result<std::vector<ScheduleState>> ListScheduleStates() override {
    return Read<std::vector<ScheduleState>>(
        [&](Connection& c) -> Result<std::vector<ScheduleState>> {
          TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListScheduleStates));
          std::vector<ScheduleState> out;
          while (true) {
            TE_ASSIGN_OR_RETURN(bool row, s.Step());
            if (!row) break;
            out.push_back(ReadScheduleStateRow(StmtRow(s)));
          }
          return out;
        });
  }

  // --- principals ---

  Status UpsertUser(const User& user) override {
    TE_RETURN_IF_ERROR(ValidateUser(user));
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kUpsertUser));
             s.Bind(1, user.name).Bind(2, user.password_hash).Bind(3, JoinList(user.scopes));
             s.Bind(4, JoinList(user.tenants))
                 .Bind(5, user.disabled ? 1 : 0)
                 .Bind(6, clock_->NowMillis());
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  Result<User> GetUser(std::string_view name) override {
    return Read<User>([&](Connection& c) -> Result<User> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kGetUser));
      s.Bind(1, name);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no user '" + std::string(name) + "'");
      return ReadUserRow(StmtRow(s));
    });
  }

  Result<std::vector<User>> ListUsers() override {
    return Read<std::vector<User>>([&](Connection& c) -> Result<std::vector<User>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListUsers));
      std::vector<User> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadUserRow(StmtRow(s)));
      }
      return out;
    });
  }

  Result<std::int64_t> CreateToken(const ApiToken& token) override {
    TE_RETURN_IF_ERROR(ValidateToken(token));
    return Write<std::int64_t>([&](Connection& c) -> Result<std::int64_t> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kCreateToken));
      s.Bind(1, token.name).Bind(2, token.secret_hash).Bind(3, token.principal);
      s.Bind(4, JoinList(token.scopes)).Bind(5, JoinList(token.tenants));
      s.Bind(6, clock_->NowMillis()).Bind(7, token.expires_at);
      TE_RETURN_IF_ERROR(s.Run());
      return c.last_insert_rowid();
    });
  }

  Result<ApiToken> FindToken(std::string_view secret_hash) override {
    return Read<ApiToken>([&](Connection& c) -> Result<ApiToken> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kFindToken));
      s.Bind(1, secret_hash);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no such token");
      return ReadTokenRow(StmtRow(s));
    });
  }

  Status RevokeToken(std::int64_t id) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kRevokeToken));
             s.Bind(1, id).Bind(2, clock_->NowMillis());
             TE_RETURN_IF_ERROR(s.Run());
             if (c.changes() == 0) return NotFound("no token " + std::to_string(id));
             return true;
           })
        .status();
  }

  Result<std::vector<ApiToken>> ListTokens() override {
    return Read<std::vector<ApiToken>>([&](Connection& c) -> Result<std::vector<ApiToken>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListTokens));
      std::vector<ApiToken> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadTokenRow(StmtRow(s)));
      }
      return out;
    });
  }

  Status TouchToken(std::int64_t id) override {
    return Write<bool>(
               [&](Connection& c) -> Result<bool> {
                 TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kTouchToken));
                 s.Bind(1, id).Bind(2, clock_->NowMillis());
                 TE_RETURN_IF_ERROR(s.Run());
                 return true;
               },
               Durability::kRelaxed)
        .status();
  }

  Status CreateSession(const Session& session) override {
    TE_RETURN_IF_ERROR(ValidateSession(session));
    return Write<bool>([&](Connection& c) -> Result<bool> {
             const Millis now = clock_->NowMillis();
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kCreateSession));
             s.Bind(1, session.id_hash).Bind(2, session.user).Bind(3, session.csrf_token);
             s.Bind(4, now).Bind(5, now).Bind(6, session.expires_at);
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  Result<Session> GetSession(std::string_view id_hash) override {
    return Read<Session>([&](Connection& c) -> Result<Session> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kGetSession));
      s.Bind(1, id_hash);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no such session");
      return ReadSessionRow(StmtRow(s));
    });
  }

  Status TouchSession(std::string_view id_hash) override {
    return Write<bool>(
               [&](Connection& c) -> Result<bool> {
                 TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kTouchSession));
                 s.Bind(1, id_hash).Bind(2, clock_->NowMillis());
                 TE_RETURN_IF_ERROR(s.Run());
                 return true;
               },
               Durability::kRelaxed)
        .status();
  }

  Status DeleteSession(std::string_view id_hash) override {
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kDeleteSession));
             s.Bind(1, id_hash);
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  // --- workers ---

  Status ReportWorker(const WorkerInfo& w) override {
    TE_RETURN_IF_ERROR(ValidateWorker(w));
    return Write<bool>(
               [&](Connection& c) -> Result<bool> {
                 const Millis now = clock_->NowMillis();
                 TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kReportWorker));
                 s.Bind(1, w.id.value)
                     .Bind(2, w.hostname)
                     .Bind(3, w.pid)
                     .Bind(4, static_cast<int>(w.state));
                 s.Bind(5, w.current.empty() ? 0 : w.current.front().value)
                     .Bind(6, w.processed)
                     .Bind(7, w.failed);
                 s.Bind(8, w.started_at > 0 ? w.started_at : now).Bind(9, now);
                 s.Bind(10, static_cast<int>(w.kind)).Bind(11, w.threads).Bind(12, w.busy);
                 s.Bind(13, FormatIdList(w.current, kMaxWorkerCurrent));
                 TE_RETURN_IF_ERROR(s.Run());
                 return true;
               },
               Durability::kRelaxed)
        .status();
  }

  Result<std::vector<WorkerInfo>> ListWorkers(Millis seen_within_ms) override {
    const Millis now = clock_->NowMillis();
    return Read<std::vector<WorkerInfo>>([&](Connection& c) -> Result<std::vector<WorkerInfo>> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListWorkers));
      s.Bind(1, seen_within_ms).Bind(2, now - seen_within_ms);
      std::vector<WorkerInfo> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadWorkerRow(StmtRow(s)));
      }
      return out;
    });
  }

  // --- reads ---

  Result<Execution> GetExecution(ExecutionId id) override {
    return Read<Execution>([&](Connection& c) -> Result<Execution> {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kSelectExecution));
      s.Bind(1, id.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no execution " + std::to_string(id.value));
      return ReadExecutionRow(StmtRow(s));
    });
  }

  Result<std::vector<AttemptRecord>> GetAttempts(ExecutionId id) override {
    return Read<std::vector<AttemptRecord>>(
        [&](Connection& c) -> Result<std::vector<AttemptRecord>> {
          TE_RETURN_IF_ERROR(RequireExecution(c, id));
          TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kListAttempts));
          s.Bind(1, id.value);
          std::vector<AttemptRecord> out;
          while (true) {
            TE_ASSIGN_OR_RETURN(bool row, s.Step());
            if (!row) break;
            out.push_back(ReadAttemptRow(StmtRow(s), id));
          }
          return out;
        });
  }

  Result<ExecutionPage> ListExecutions(const ExecutionFilter& f) override {
    TE_RETURN_IF_ERROR(ValidateExecutionFilter(f));
    const Millis now = clock_->NowMillis();
    return Read<ExecutionPage>([&](Connection& c) -> Result<ExecutionPage> {
      const std::vector<ListPart> parts = PlanListParts(f);
      std::vector<std::vector<Execution>> rows(parts.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        ListSql q = BuildListSql(f, parts[i], TE_SQL_EXECUTION_COLUMNS, ListPartRowLimit(f),
                                 /*count_only=*/false, '?');
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
        ListSql q = BuildListSql(whole, part, "", kListCountCap + 1, /*count_only=*/true, '?');
        TE_ASSIGN_OR_RETURN(Stmt s, PrepareList(c, q));
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        counts.push_back(row ? s.Int(0) : 0);
      }
      SetCountedTotal(page, counts);
      return page;
    });
  }

  Result<std::vector<LogEntry>> GetLogs(ExecutionId id, int limit) override {
    TE_RETURN_IF_ERROR(ValidateLogLimit(limit));
    return Read<std::vector<LogEntry>>([&](Connection& c) -> Result<std::vector<LogEntry>> {
      TE_RETURN_IF_ERROR(RequireExecution(c, id));
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kGetLogs));
      s.Bind(1, id.value).Bind(2, limit);
      std::vector<LogEntry> out;
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        out.push_back(ReadLogRow(StmtRow(s)));
      }
      return out;
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
             SqliteActionTx tx(*this, c);
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

  struct Op {
    Durability durability = Durability::kSync;
    std::function<Status(Connection&)> body;
    Status result;
    bool done = false;  // guarded by mu_
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

  Status WriteGrant(const char* sql, std::string_view principal, std::string_view tenant) {
    TE_RETURN_IF_ERROR(ValidateGrant(principal, tenant));
    return Write<bool>([&](Connection& c) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(sql));
             s.Bind(1, principal).Bind(2, tenant);
             TE_RETURN_IF_ERROR(s.Run());
             return true;
           })
        .status();
  }

  static Status RequireExecution(Connection& c, ExecutionId id) {
    TE_ASSIGN_OR_RETURN(Stmt e, c.Prepare(kExists));
    e.Bind(1, id.value);
    TE_ASSIGN_OR_RETURN(bool exists, e.Step());
    if (!exists) return NotFound("no execution " + std::to_string(id.value));
    return Status::Ok();
  }

  static Result<LaneStatus> LaneOf(Connection& c, std::string_view tenant, std::string_view lane) {
    LaneStatus out;
    out.tenant = TenantId(std::string(tenant));
    out.lane = std::string(lane);
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kLaneHead));
      s.Bind(1, tenant).Bind(2, lane);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) ReadLaneHeadRow(StmtRow(s), out);
    }
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kLaneCounts));
    s.Bind(1, tenant).Bind(2, lane);
    TE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) ReadLaneCountsRow(StmtRow(s), out);
    return out;
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
    if (EndsFailedAttempt(row.state.status, t.to)) {
      // History of an attempt that did not succeed (the success path writes nothing extra).
      TE_ASSIGN_OR_RETURN(Stmt a, c.Prepare(kInsertAttempt));
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
      TE_RETURN_IF_ERROR(UnparkLane(c, row.tenant, row.lane_key, now));
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

  static Result<std::int64_t> CountOne(Connection& c, const char* sql, Millis a) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(sql));
    s.Bind(1, a);
    TE_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Int(0) : 0;
  }

  static Result<PurgeReport> CountPurge(Connection& c, const RetentionCutoffs& cutoffs) {
    PurgeReport r;
    const Millis ended = cutoffs.executions_ended_before;
    if (ended > 0) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kCountPurgeable));
      s.Bind(1, ended);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        r.executions = s.Int(0);
        r.oldest_ended_at = s.Int(1);
        r.newest_ended_at = s.Int(2);
      }
      TE_ASSIGN_OR_RETURN(r.attempts, CountOne(c, kCountPurgeableAttempts, ended));
      TE_ASSIGN_OR_RETURN(r.effects, CountOne(c, kCountPurgeableEffects, ended));
    }
    // Log lines: those of the executions that go, and those old enough.
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kCountPurgeableLogs));
      s.Bind(1, ended).Bind(2, cutoffs.logs_before);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) r.logs = s.Int(0);
    }
    if (cutoffs.audit_before > 0) {
      TE_ASSIGN_OR_RETURN(r.audit, CountOne(c, kCountOldAudit, cutoffs.audit_before));
    }
    return r;
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
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kDeleteExecution));
      s.Bind(1, d.id);
      TE_RETURN_IF_ERROR(s.Run());
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

  // Removes the oldest rows by id while they are older than `before`, up to
  // `max_rows`; adds how many to *removed and returns whether the batch was
  // full of old rows.
  static Result<bool> PurgeOldest(Connection& c, const char* oldest_sql, const char* delete_sql,
                                  Millis before, int max_rows, std::int64_t* removed) {
    std::int64_t last_old = 0;
    int old_rows = 0;
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(oldest_sql));
      s.Bind(1, max_rows);
      while (true) {
        TE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row || s.Int(1) >= before) break;
        last_old = s.Int(0);
        ++old_rows;
      }
    }
    if (old_rows == 0) return false;
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(delete_sql));
    s.Bind(1, last_old).Bind(2, before);
    TE_ASSIGN_OR_RETURN(std::int64_t n, CountReturned(s));
    *removed += n;
    return old_rows == max_rows;
  }

  // Counters change with the operation that changes the status; the writer
  // keeps an operation's deltas apart until it succeeds and writes a batch's
  // deltas just before its COMMIT. Writer thread only.
  void KeepOpCounts() {
    batch_counters_.Add(op_counters_);
    op_counters_.Clear();
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
  // oldest parked one becomes due.
  static Status UnparkLane(Connection& c, const std::string& tenant, const std::string& lane,
                           Millis now) {
    {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kLaneHasUnparkedOpen));
      s.Bind(1, tenant).Bind(2, lane);
      TE_ASSIGN_OR_RETURN(bool busy, s.Step());
      if (busy) return Status::Ok();
    }
    TE_ASSIGN_OR_RETURN(Stmt u, c.Prepare(kLaneUnparkNext));
    u.Bind(1, tenant).Bind(2, lane).Bind(3, now);
    return u.Run();
  }

  static Status InsertAudit(Connection& c, const AuditRecord& r) {
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kInsertAudit));
    s.Bind(1, r.at).Bind(2, r.actor).Bind(3, r.tenant).Bind(4, r.action).Bind(5, r.target);
    s.Bind(6, r.before_json).Bind(7, r.after_json).Bind(8, r.reason);
    return s.Run();
  }

  // The steps of the shared operator actions and sweep (store_actions.h) in
  // one writer transaction.
  class SqliteActionTx final : public ActionTx {
   public:
    SqliteActionTx(SqliteStore& store, Connection& c) : store_(store), c_(c) {}

    Result<std::optional<StateRow>> LoadState(ExecutionId id) override {
      return SqliteStore::LoadState(c_, id);
    }
    Result<bool> MayHaveEscapedEffects(ExecutionId id) override {
      TE_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(kMayHaveEscapedEffects));
      s.Bind(1, id.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      return row && s.Int(0) != 0;
    }
    Status Apply(const StateRow& row, const Transition& t, Millis now,
                 std::optional<std::string_view> result, std::optional<std::string_view> error,
                 std::optional<int> progress) override {
      return store_.Apply(c_, row, t, now, result, error, progress);
    }
    Status InsertAudit(const AuditRecord& record) override {
      return SqliteStore::InsertAudit(c_, record);
    }
    Result<std::optional<PendingReplay>> GetPendingReplay(ExecutionId id) override {
      TE_ASSIGN_OR_RETURN(Stmt p, c_.Prepare(kGetPendingReplay));
      p.Bind(1, id.value);
      TE_ASSIGN_OR_RETURN(bool pending, p.Step());
      if (!pending) return std::optional<PendingReplay>();
      return std::optional<PendingReplay>(ReadPendingReplayRow(StmtRow(p)));
    }
    Status InsertPendingReplay(const ReplayRequest& request, Millis now) override {
      TE_ASSIGN_OR_RETURN(Stmt ins, c_.Prepare(kInsertPendingReplay));
      ins.Bind(1, request.id.value).Bind(2, request.action.actor).Bind(3, request.action.reason);
      ins.Bind(4, now).Bind(5, static_cast<int>(request.ambiguous));
      return ins.Run();
    }
    Status DeletePendingReplay(ExecutionId id) override {
      TE_ASSIGN_OR_RETURN(Stmt d, c_.Prepare(kDeletePendingReplay));
      d.Bind(1, id.value);
      return d.Run();
    }
    Status AssumeEffectsDone(ExecutionId id, Millis now, const std::string& detail) override {
      TE_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(kAssumeEffectsDone));
      s.Bind(1, id.value).Bind(2, now).Bind(3, detail);
      return s.Run();
    }
    Status DropUnconfirmedEffects(ExecutionId id) override {
      TE_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(kDropUnconfirmedEffects));
      s.Bind(1, id.value);
      return s.Run();
    }
    Result<std::optional<StoredEffect>> GetEffect(ExecutionId id, std::string_view name) override {
      TE_ASSIGN_OR_RETURN(Stmt s, c_.Prepare(kGetEffect));
      s.Bind(1, id.value).Bind(2, name);
      TE_ASSIGN_OR_RETURN(bool exists, s.Step());
      if (!exists) return std::optional<StoredEffect>();
      return std::optional<StoredEffect>(ReadStoredEffectRow(StmtRow(s)));
    }
    Status InsertEffect(const LeaseRef& lease, std::string_view name, int attempt,
                        Millis now) override {
      TE_ASSIGN_OR_RETURN(Stmt ins, c_.Prepare(kReserveEffect));
      ins.Bind(1, lease.id.value).Bind(2, name).Bind(3, lease.version.value);
      ins.Bind(4, attempt).Bind(5, now);
      return ins.Run();
    }
    Status UpdateCommittedEffect(const LeaseRef& lease, std::string_view name,
                                 std::string_view detail, int attempt, Millis now) override {
      TE_ASSIGN_OR_RETURN(Stmt u, c_.Prepare(kCommitEffect));
      u.Bind(1, lease.id.value).Bind(2, name).Bind(3, now).Bind(4, detail);
      u.Bind(5, lease.version.value).Bind(6, attempt);
      return u.Run();
    }
    Status DeleteReservedEffect(const LeaseRef& lease, std::string_view name) override {
      TE_ASSIGN_OR_RETURN(Stmt d, c_.Prepare(kReleaseEffect));
      d.Bind(1, lease.id.value).Bind(2, name).Bind(3, lease.version.value);
      return d.Run();
    }

   private:
    SqliteStore& store_;
    Connection& c_;
  };

  Result<AdmitResult> AdmitOne(Connection& c, const AdmitRequest& r, Millis now,
                               std::unordered_map<std::string, JobPolicy>& jobs) {
    if (!r.idempotency_key.empty()) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kFindByKey));
      s.Bind(1, r.job.value).Bind(2, r.tenant.value).Bind(3, r.idempotency_key);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) return ReadExistingAdmissionRow(StmtRow(s), r);
    }
    auto it = jobs.find(r.job.value);
    if (it == jobs.end()) {
      TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kJobPolicy));
      s.Bind(1, r.job.value);
      TE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return NotFound("no job named '" + r.job.value + "'");
      it = jobs.emplace(r.job.value, ReadJobPolicyRow(StmtRow(s))).first;
    }
    const JobPolicy& p = it->second;
    bool parked = false;
    if (!r.lane_key.empty()) {
      TE_ASSIGN_OR_RETURN(Stmt l, c.Prepare(kLaneOpen));
      l.Bind(1, r.tenant.value).Bind(2, r.lane_key);
      TE_ASSIGN_OR_RETURN(parked, l.Step());
    }
    TE_ASSIGN_OR_RETURN(Stmt s, c.Prepare(kInsertExecution));
    s.Bind(1, r.job.value).Bind(2, r.tenant.value).Bind(3, p.queue);
    s.Bind(4, static_cast<int>(r.trigger)).Bind(5, r.requester).BindOrNull(6, r.idempotency_key);
    s.Bind(7, r.payload_json).Bind(8, r.fingerprint).Bind(9, r.scheduled_at);
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
    res.status = ExecutionStatus::kQueued;
    op_counters_.CountAdmission(p.queue, r.tenant.value);
    return res;
  }

  // Runs `f(connection)` on the writer thread inside a group-committed
  // transaction; returns its result only after the COMMIT that contains it.
  template <typename T, typename F>
  Result<T> Write(F&& f, Durability durability = Durability::kSync) EXCLUDES(mu_) {
    std::optional<Result<T>> out;
    Op op;
    op.durability = durability;
    op.body = [&](Connection& c) -> Status {
      out.emplace(f(c));
      return out->status();
    };
    {
      MutexLock lock(mu_);
      if (stopping_) return Unavailable("store is closing");
      queue_.push_back(&op);
      work_cv_.NotifyOne();
      while (!op.done) done_cv_.Wait(mu_);
    }
    if (!op.result.ok()) return op.result;
    return std::move(*out);
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
      {
        MutexLock lock(mu_);
        for (Op* op : batch) op->done = true;
      }
      done_cv_.NotifyAll();
      batch.clear();
    }
  }

  // One transaction for the whole batch; a savepoint per operation so that a
  // failing operation changes nothing while the others still commit.
  void RunBatch(const std::vector<Op*>& batch) {
    Connection& c = writer_conn_;
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
    Status begin = RunCached(c, kBegin);
    if (!begin.ok()) {
      for (Op* op : batch) op->result = begin;
      return;
    }
    op_counters_.record_events = ObservesLifecycle();
    for (std::size_t i = 0; i < batch.size(); ++i) {
      Op* op = batch[i];
      Status sp = RunCached(c, kSavepoint);
      op_counters_.Clear();
      if (sp.ok()) {
        op->result = op->body(c);
        if (op->result.ok()) KeepOpCounts();
        if (!op->result.ok() && !c.autocommit()) sp = RunCached(c, kRollbackTo);
        if (sp.ok() && !c.autocommit()) sp = RunCached(c, kRelease);
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
        batch_counters_.Clear();
        return;
      }
    }
    Status commit = FlushCounts(c);
    std::vector<LifecycleEvent> events = std::move(batch_counters_.events);
    batch_counters_.Clear();
    if (commit.ok()) commit = RunCached(c, kCommit);
    if (!commit.ok()) {
      if (!c.autocommit()) (void)c.Exec("ROLLBACK");
      for (Op* op : batch) op->result = commit;
      return;
    }
    PublishLifecycle(std::move(events));
  }

  // Constant after construction.
  const SqliteStoreOptions options_;
  Clock* const clock_;
  const std::unique_ptr<RandomSource> owned_random_;
  RandomSource* const random_;

  // Used only by the writer thread (and Init before it starts).
  Connection writer_conn_;
  std::thread writer_;
  bool synced_commits_ = true;  // the writer connection's current synchronous mode is FULL
  // Counter deltas of the running operation and of the batch (writer thread only).
  StatusCounters op_counters_, batch_counters_;

  Mutex mu_;
  CondVar work_cv_;
  CondVar done_cv_;
  std::deque<Op*> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  Mutex read_mu_;
  CondVar read_cv_;
  std::vector<Connection*> readers_ GUARDED_BY(read_mu_);  // idle read connections
  // Every read connection; set by Init, before any Read.
  std::vector<std::unique_ptr<Connection>> owned_readers_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions& options) {
  if (options.path.empty()) return InvalidArgument("SQLite store needs a database path");
  // Memory statistics take a global mutex on every allocation; we do not use
  // them. Must precede SQLite's initialization; a later call is a no-op.
  static std::once_flag configure;
  std::call_once(configure, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto store = std::make_unique<SqliteStore>(options);
  TE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace taskengine
