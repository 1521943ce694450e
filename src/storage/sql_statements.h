// The SQL statements that read the same on every SQL backend, written once
// with numbered placeholders (?1, ?2, ...) as SQLite reads them; a backend
// whose driver wants another form rewrites each text when it first prepares
// it (TranslatePlaceholders, sql_session.h). Arguments are typed, so no cast
// is needed. Statements that really differ between dialects are named in
// SqlDialect below; those that differ in how a backend works (claims, batch
// writes, counters) stay with their backend.
#pragma once

#include "storage/store_rows.h"  // TE_WORKER_COLUMNS

namespace taskengine::storage_internal {

// Column lists of the shared statements (and of SQLite's own). PAYLOAD is
// what reads an execution's payload: the column `payload` on PostgreSQL and
// MariaDB, TE_SQLITE_PAYLOAD on SQLite.
#define TE_SQL_EXECUTION_COLUMNS_WITH(PAYLOAD)                                                \
  "id, job, tenant, queue, status, \"trigger\", requester, worker, attempt, "                 \
  "idempotency_key, " PAYLOAD                                                                 \
  ", fingerprint, result, progress, error, failure_class, scheduled_at, run_at, "             \
  "queued_at, started_at, finished_at, claim_version, lease_expires_at, cancel_requested, "   \
  "lane_key, parent_id, consecutive_lease_expiries, permanent_failures, ambiguous_failures, " \
  "max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts, "                   \
  "max_ambiguous_attempts, "                                                                  \
  "max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts"
#define TE_SQL_EXECUTION_COLUMNS TE_SQL_EXECUTION_COLUMNS_WITH("payload")
// SQLite keeps each payload in its own row of execution_payloads, written once
// at admission: SQLite rewrites a whole row on every UPDATE, and claims and
// finishes update the execution's row. (PostgreSQL's TOAST and InnoDB's
// off-page columns already keep a large payload out of the rewritten row.)
#define TE_SQLITE_PAYLOAD \
  "(SELECT payload FROM execution_payloads WHERE execution_id = executions.id)"
// The columns the state machine and fencing look at.
#define TE_SQL_STATE_COLUMNS                                                                    \
  "id, status, attempt, claim_version, consecutive_lease_expiries, permanent_failures, "        \
  "ambiguous_failures, cancel_requested, failure_class, max_attempts, backoff_base_ms, "        \
  "backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts, "                            \
  "max_consecutive_lease_expiries, lease_ms, run_at, started_at, finished_at, "                 \
  "max_unsupported_schema_attempts, lane_key, tenant, status, worker, queue, handler_started, " \
  "job"
// Retention (I7). An ended execution may go unless it holds its lane (a
// failed or quarantined one with a lane key: HoldsLane) or waits for a replay
// approval; oldest ended first, by executions_by_finished_at.
#define TE_SQL_PURGEABLE                                                \
  " finished_at > 0 AND finished_at < ?1 AND status IN (2, 3, 4, 5, 6)" \
  " AND NOT (status IN (3, 4) AND lane_key <> '')"                      \
  " AND NOT EXISTS (SELECT 1 FROM replay_requests r WHERE r.execution_id = executions.id)"
// O1: the statuses in which an execution holds its lane (HoldsLane,
// store_rules.h): queued, running, failed, quarantined.
#define TE_SQL_HOLDS_LANE "status IN (0, 1, 3, 4)"
// The same statuses as SQLite tests them cheaply (statuses are 0 to 6,
// ExecutionStatus). In a partial index's WHERE (executions_lane_open), SQLite
// tests an IN list of more than two values against a temporary b-tree that it
// builds for each row an INSERT or UPDATE writes: with the list, an execution
// in a lane cost about twice as much to admit, claim and finish (callgrind,
// `taskengine-bench p1 --lanes`). Queries must name the index's terms as it
// does for SQLite to use it.
#define TE_SQLITE_HOLDS_LANE "status <> 2 AND status < 5"
// The statements of lanes, given how the backend writes the holding statuses
// (HOLDS: the index of open lanes must be implied by it). A lane is
// (tenant, lane key): ?1 is the tenant, ?2 the key.
#define TE_SQL_LANE_WHERE(HOLDS) \
  " FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> '' AND " HOLDS
#define TE_SQL_LANE_OPEN(HOLDS) "SELECT 1" TE_SQL_LANE_WHERE(HOLDS) " LIMIT 1"
#define TE_SQL_LANE_HAS_UNPARKED_OPEN(HOLDS) \
  "SELECT 1" TE_SQL_LANE_WHERE(HOLDS) " AND lane_parked = 0 LIMIT 1"
#define TE_SQL_LANE_HEAD(HOLDS) "SELECT id, status" TE_SQL_LANE_WHERE(HOLDS) " ORDER BY id LIMIT 1"
#define TE_SQL_LANE_COUNTS(HOLDS)                                                              \
  "SELECT SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 1 THEN 1 ELSE 0" \
  " END)" TE_SQL_LANE_WHERE(HOLDS)
// The open lanes, blocked ones first (of one tenant: ?2).
#define TE_SQL_OPEN_LANES(HOLDS)                                                          \
  "SELECT tenant, lane_key, MAX(CASE WHEN status IN (3, 4) THEN 1 ELSE 0 END) AS blocked" \
  " FROM executions WHERE lane_key <> '' AND " HOLDS                                      \
  " GROUP BY tenant, lane_key ORDER BY blocked DESC, tenant, lane_key LIMIT ?1"
#define TE_SQL_OPEN_LANES_OF_TENANT(HOLDS)                                                \
  "SELECT tenant, lane_key, MAX(CASE WHEN status IN (3, 4) THEN 1 ELSE 0 END) AS blocked" \
  " FROM executions WHERE lane_key <> '' AND " HOLDS                                      \
  " AND tenant = ?2"                                                                      \
  " GROUP BY tenant, lane_key ORDER BY blocked DESC, lane_key LIMIT ?1"
#define TE_SQL_JOB_COLUMNS                                                                        \
  "name, display_name, handler, queue, scope, schedule, timezone, timeout_ms, lease_ms, "         \
  "max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts, "                       \
  "max_ambiguous_attempts, max_consecutive_lease_expiries, lane_template, config_json, enabled, " \
  "created_at, updated_at, accepted_schema_versions, max_unsupported_schema_attempts, catch_up, " \
  "catch_up_window_ms, window_ms, seed_digest, notify_on_failure, notify_targets"
#define TE_SQL_TOKEN_COLUMNS                                                                \
  "id, name, secret_hash, principal, scopes, tenants, created_at, expires_at, revoked_at, " \
  "last_used_at"

namespace sql {

// The earliest run_at of queue ?1's queued, un-parked executions (the due
// index), NULL when there is none.
inline constexpr char kNextRunAt[] =
    "SELECT MIN(run_at) FROM executions WHERE queue = ?1 AND status = 0 AND lane_parked = 0";
inline constexpr char kSelectExecution[] =
    "SELECT " TE_SQL_EXECUTION_COLUMNS " FROM executions WHERE id = ?1";
// I6: the ending of execution ?1 at ?2 waits in the outbox for its
// notification (a newer ending of the same execution replaces an older one).
inline constexpr char kInsertNotifyPending[] =
    "INSERT INTO notify_outbox (execution_id, job, ended_at) SELECT id, job, ?2 FROM executions"
    " WHERE id = ?1 ON CONFLICT (execution_id) DO UPDATE SET job = excluded.job,"
    " ended_at = excluded.ended_at";
inline constexpr char kListNotifyPending[] =
    "SELECT execution_id, job, ended_at FROM notify_outbox ORDER BY execution_id LIMIT ?1";
inline constexpr char kListNotifyState[] =
    "SELECT job, sent_at, suppressed, suppressed_since FROM notify_state ORDER BY job";
inline constexpr char kDeleteNotifyPending[] =
    "DELETE FROM notify_outbox WHERE execution_id = ?1 AND ended_at = ?2";
inline constexpr char kUpsertNotifyState[] =
    "INSERT INTO notify_state (job, sent_at, suppressed, suppressed_since) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT (job) DO UPDATE SET sent_at = excluded.sent_at, suppressed = excluded.suppressed,"
    " suppressed_since = excluded.suppressed_since";
inline constexpr char kDeleteNotifyState[] = "DELETE FROM notify_state WHERE job = ?1";
inline constexpr char kHeartbeat[] =
    "UPDATE executions SET lease_expires_at = ?2, progress = COALESCE(?3, progress)"
    " WHERE id = ?1";
inline constexpr char kInsertLog[] =
    "INSERT INTO execution_logs (execution_id, attempt, at, level, message)"
    " VALUES (?1, ?2, ?3, ?4, ?5)";
inline constexpr char kFindByKey[] =
    "SELECT id, fingerprint, status FROM executions"
    " WHERE job = ?1 AND tenant = ?2 AND idempotency_key = ?3";
inline constexpr char kJobPolicy[] =
    "SELECT queue, max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts,"
    " max_ambiguous_attempts, max_consecutive_lease_expiries, lease_ms,"
    " max_unsupported_schema_attempts, enabled, scope, lane_template FROM job_definitions"
    " WHERE name = ?1";
inline constexpr char kLaneOpen[] = TE_SQL_LANE_OPEN(TE_SQL_HOLDS_LANE);
inline constexpr char kLaneHasUnparkedOpen[] = TE_SQL_LANE_HAS_UNPARKED_OPEN(TE_SQL_HOLDS_LANE);
inline constexpr char kLaneHead[] = TE_SQL_LANE_HEAD(TE_SQL_HOLDS_LANE);
// Effects (E1).
inline constexpr char kGetEffect[] =
    "SELECT committed, reserved_by, attempt, reserved_at, committed_at, detail FROM effects"
    " WHERE execution_id = ?1 AND name = ?2";
inline constexpr char kReserveEffect[] =
    "INSERT INTO effects (execution_id, name, reserved_by, attempt, reserved_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5)";
inline constexpr char kCommitEffect[] =
    "UPDATE effects SET committed = 1, committed_at = ?3, detail = ?4, reserved_by = ?5,"
    " attempt = ?6 WHERE execution_id = ?1 AND name = ?2";
inline constexpr char kReleaseEffect[] =
    "DELETE FROM effects WHERE execution_id = ?1 AND name = ?2 AND committed = 0"
    " AND reserved_by = ?3";
inline constexpr char kListEffects[] =
    "SELECT name, committed, reserved_by, attempt, reserved_at, committed_at, detail FROM effects"
    " WHERE execution_id = ?1 ORDER BY reserved_at, name";
// C1: an effect may have escaped when it was committed, or reserved and never
// confirmed (its outcome is unknown): either makes a cancel partial.
inline constexpr char kMayHaveEscapedEffects[] =
    "SELECT EXISTS (SELECT 1 FROM effects WHERE execution_id = ?1)";
inline constexpr char kAssumeEffectsDone[] =
    "UPDATE effects SET committed = 1, committed_at = ?2, detail = ?3"
    " WHERE execution_id = ?1 AND committed = 0";
inline constexpr char kDropUnconfirmedEffects[] =
    "DELETE FROM effects WHERE execution_id = ?1 AND committed = 0";
inline constexpr char kInsertAudit[] =
    "INSERT INTO audit_log (at, actor, tenant, action, target, before_json, after_json, reason)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
inline constexpr char kCountPurgeable[] =
    "SELECT COUNT(*), COALESCE(MIN(finished_at), 0), COALESCE(MAX(finished_at), 0)"
    " FROM executions WHERE" TE_SQL_PURGEABLE;
inline constexpr char kCountPurgeableLogs[] =
    "SELECT COUNT(*) FROM execution_logs WHERE at < ?2 OR execution_id IN"
    " (SELECT id FROM executions WHERE" TE_SQL_PURGEABLE ")";
inline constexpr char kCountPurgeableAttempts[] =
    "SELECT COUNT(*) FROM execution_attempts WHERE execution_id IN"
    " (SELECT id FROM executions WHERE" TE_SQL_PURGEABLE ")";
inline constexpr char kCountPurgeableEffects[] =
    "SELECT COUNT(*) FROM effects WHERE execution_id IN"
    " (SELECT id FROM executions WHERE" TE_SQL_PURGEABLE ")";
inline constexpr char kCountOldAudit[] = "SELECT COUNT(*) FROM audit_log WHERE at < ?1";
inline constexpr char kOldestLogs[] = "SELECT id, at FROM execution_logs ORDER BY id LIMIT ?1";
inline constexpr char kOldestAudit[] = "SELECT id, at FROM audit_log ORDER BY id LIMIT ?1";
inline constexpr char kGetPendingReplay[] =
    "SELECT requested_by, reason, ambiguous FROM replay_requests WHERE execution_id = ?1";
inline constexpr char kInsertPendingReplay[] =
    "INSERT INTO replay_requests (execution_id, requested_by, reason, requested_at, ambiguous)"
    " VALUES (?1, ?2, ?3, ?4, ?5)";
inline constexpr char kDeletePendingReplay[] =
    "DELETE FROM replay_requests WHERE execution_id = ?1";
inline constexpr char kRevoke[] = "DELETE FROM grants WHERE principal = ?1 AND tenant = ?2";
inline constexpr char kIsGranted[] =
    "SELECT EXISTS (SELECT 1 FROM grants WHERE principal = ?1 AND tenant IN (?2, '*'))";
inline constexpr char kCountOpenOfJob[] =
    "SELECT COUNT(*) FROM executions WHERE job = ?1 AND status IN (0, 1)";
inline constexpr char kDeleteJob[] = "DELETE FROM job_definitions WHERE name = ?1";
inline constexpr char kDeleteJobScheduleState[] = "DELETE FROM schedule_state WHERE job = ?1";
inline constexpr char kGetJob[] =
    "SELECT " TE_SQL_JOB_COLUMNS " FROM job_definitions WHERE name = ?1";
inline constexpr char kListJobs[] =
    "SELECT " TE_SQL_JOB_COLUMNS " FROM job_definitions ORDER BY name";
inline constexpr char kListAttempts[] =
    "SELECT attempt, claim_version, worker, started_at, ended_at, outcome, failure_class,"
    " released, error FROM execution_attempts WHERE execution_id = ?1 ORDER BY claim_version";
inline constexpr char kGetTenant[] =
    "SELECT id, name, active, created_at FROM tenants WHERE id = ?1";
inline constexpr char kListTenants[] =
    "SELECT id, name, active, created_at FROM tenants WHERE (?1 = 0 OR active = 1) ORDER BY id";
inline constexpr char kLockHolder[] = "SELECT holder FROM scheduler_locks WHERE name = ?1";
inline constexpr char kReleaseLock[] =
    "DELETE FROM scheduler_locks WHERE name = ?1 AND holder = ?2";
inline constexpr char kListScheduleStates[] =
    "SELECT job, last_fire_at, last_evaluated_at, skipped_fires, last_skipped_at FROM "
    "schedule_state"
    " ORDER BY job";
inline constexpr char kGetUser[] =
    "SELECT name, password_hash, scopes, tenants, disabled, created_at FROM users WHERE name = ?1";
inline constexpr char kListUsers[] =
    "SELECT name, password_hash, scopes, tenants, disabled, created_at FROM users ORDER BY name";
inline constexpr char kFindToken[] =
    "SELECT " TE_SQL_TOKEN_COLUMNS " FROM api_tokens WHERE secret_hash = ?1";
inline constexpr char kListTokens[] = "SELECT " TE_SQL_TOKEN_COLUMNS " FROM api_tokens ORDER BY id";
inline constexpr char kRevokeToken[] =
    "UPDATE api_tokens SET revoked_at = CASE WHEN revoked_at = 0 THEN ?2 ELSE revoked_at END"
    " WHERE id = ?1";
inline constexpr char kTokenStanding[] =
    "SELECT revoked_at, expires_at FROM api_tokens WHERE id = ?1";
inline constexpr char kTouchToken[] = "UPDATE api_tokens SET last_used_at = ?2 WHERE id = ?1";
inline constexpr char kTouchSession[] = "UPDATE sessions SET last_seen_at = ?2 WHERE id_hash = ?1";
inline constexpr char kDeleteSession[] = "DELETE FROM sessions WHERE id_hash = ?1";
inline constexpr char kGetLogs[] =
    "SELECT execution_id, attempt, at, level, message FROM execution_logs"
    " WHERE execution_id = ?1 ORDER BY id LIMIT ?2";
inline constexpr char kExists[] = "SELECT 1 FROM executions WHERE id = ?1";

inline constexpr char kListAudit[] =
    "SELECT id, at, actor, tenant, action, target, before_json, after_json, reason FROM audit_log"
    " WHERE (?1 = '' OR target = ?1) AND (?2 = 0 OR id < ?2) ORDER BY id DESC LIMIT ?3";
inline constexpr char kListWorkers[] =
    "SELECT " TE_WORKER_COLUMNS
    " FROM workers WHERE (?1 = 0 OR last_heartbeat_at >= ?2) ORDER BY id";
inline constexpr char kCreateSession[] =
    "INSERT INTO sessions (id_hash, user_name, csrf_token, created_at, last_seen_at, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
inline constexpr char kGetSession[] =
    "SELECT id_hash, user_name, csrf_token, created_at, last_seen_at, expires_at FROM sessions"
    " WHERE id_hash = ?1";
// Lanes (Q1): the open lanes, blocked ones first (of one tenant: ?2).
inline constexpr char kOpenLanes[] = TE_SQL_OPEN_LANES(TE_SQL_HOLDS_LANE);
inline constexpr char kOpenLanesOfTenant[] = TE_SQL_OPEN_LANES_OF_TENANT(TE_SQL_HOLDS_LANE);
inline constexpr char kLaneCounts[] = TE_SQL_LANE_COUNTS(TE_SQL_HOLDS_LANE);

// --- one row at a time, as SQLite and MariaDB write them (PostgreSQL
// writes batches with arrays) ---

inline constexpr char kApplyTransition[] =
    "UPDATE executions SET status = ?2, run_at = ?3, attempt = ?4, consecutive_lease_expiries = ?5,"
    " permanent_failures = ?6, ambiguous_failures = ?7, failure_class = ?8, cancel_requested = ?9,"
    " lease_expires_at = CASE WHEN ?10 THEN 0 ELSE lease_expires_at END,"
    " worker = CASE WHEN ?10 THEN '' ELSE worker END, finished_at = ?11,"
    " result = COALESCE(?12, result), error = COALESCE(?13, error),"
    " progress = COALESCE(?14, progress), \"trigger\" = COALESCE(?15, \"trigger\") WHERE id = ?1";
inline constexpr char kClaimUpdate[] =
    "UPDATE executions SET status = ?2, attempt = ?3, claim_version = ?4,"
    " worker = ?5, started_at = ?6, lease_expires_at = ?7, finished_at = 0,"
    " handler_started = ?8 WHERE id = ?1";
// L4: the current claim's handler starts.
inline constexpr char kMarkStartedOne[] =
    "UPDATE executions SET handler_started = 1 WHERE id = ?1 AND claim_version = ?2"
    " AND status = 1";
inline constexpr char kInsertExecution[] =
    "INSERT INTO executions (job, tenant, queue, status, \"trigger\", requester, idempotency_key,"
    " payload, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,"
    " max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)"
    " VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?20, ?21, ?22)";
// The history of an attempt that did not succeed (one row per claim).
inline constexpr char kReplaceAttempt[] =
    "REPLACE INTO execution_attempts (execution_id, attempt, claim_version, worker,"
    " started_at, ended_at, outcome, failure_class, released, error)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
inline constexpr char kDeleteExecution[] = "DELETE FROM executions WHERE id = ?1";
// Retention (I7): log lines and audit records are appended in time order:
// the oldest by id until the first young one.
inline constexpr char kDeleteLogsUpTo[] = "DELETE FROM execution_logs WHERE id <= ?1 AND at < ?2";
inline constexpr char kDeleteAuditUpTo[] = "DELETE FROM audit_log WHERE id <= ?1 AND at < ?2";

// --- upserts and row locks as SQLite and PostgreSQL write them ---

inline constexpr char kJobVersion[] = "SELECT updated_at FROM job_definitions WHERE name = ?1";
inline constexpr char kJobVersionForUpdate[] =
    "SELECT updated_at FROM job_definitions WHERE name = ?1 FOR UPDATE";
// A job's version (updated_at) always grows, even within one millisecond.
inline constexpr char kUpsertJob[] =
    "INSERT INTO job_definitions (" TE_SQL_JOB_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27) ON CONFLICT (name) DO UPDATE SET"
    " display_name = ?2, handler = ?3, queue = ?4, scope = ?5, schedule = ?6, timezone = ?7,"
    " timeout_ms = ?8, lease_ms = ?9, max_attempts = ?10, backoff_base_ms = ?11,"
    " backoff_cap_ms = ?12, max_permanent_attempts = ?13, max_ambiguous_attempts = ?14,"
    " max_consecutive_lease_expiries = ?15, lane_template = ?16, config_json = ?17,"
    " enabled = ?18, updated_at = CASE WHEN ?19 > job_definitions.updated_at THEN ?19"
    " ELSE job_definitions.updated_at + 1 END, accepted_schema_versions = ?20,"
    " max_unsupported_schema_attempts = ?21, catch_up = ?22, catch_up_window_ms = ?23,"
    " window_ms = ?24, seed_digest = ?25, notify_on_failure = ?26, notify_targets = ?27";
inline constexpr char kGrant[] =
    "INSERT INTO grants (principal, tenant) VALUES (?1, ?2) ON CONFLICT DO NOTHING";
inline constexpr char kUpsertTenant[] =
    "INSERT INTO tenants (id, name, active, created_at) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT (id) DO UPDATE SET name = ?2, active = ?3";
// The lock ?1 goes to ?2 until ?3 unless another holder has it beyond ?4.
inline constexpr char kAcquireLock[] =
    "INSERT INTO scheduler_locks (name, holder, expires_at) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (name) DO UPDATE SET holder = ?2, expires_at = ?3"
    " WHERE scheduler_locks.holder = ?2 OR scheduler_locks.expires_at <= ?4";
inline constexpr char kUpsertUser[] =
    "INSERT INTO users (name, password_hash, scopes, tenants, disabled, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO UPDATE SET password_hash = ?2,"
    " scopes = ?3, tenants = ?4, disabled = ?5";
inline constexpr char kReportWorker[] =
    "INSERT INTO workers (id, hostname, pid, state, current_execution, processed, failed,"
    " started_at, last_heartbeat_at, kind, threads, busy, current_executions)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    " ON CONFLICT (id) DO UPDATE SET hostname = ?2, pid = ?3, state = ?4, current_execution = ?5,"
    " processed = ?6, failed = ?7, started_at = ?8, last_heartbeat_at = ?9, kind = ?10,"
    " threads = ?11, busy = ?12, current_executions = ?13";
inline constexpr char kCreateToken[] =
    "INSERT INTO api_tokens (name, secret_hash, principal, scopes, tenants, created_at, expires_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id";

}  // namespace sql

// The statements of the shared store logic (SqlStore, sql_store.h) whose text
// depends on the dialect: upserts, and row locks where the backend has them.
// The reads of lanes (Q1): the shared texts, unless a backend's indexes
// want its own (MariaDB: maria_statements.h; SQLite: kSqliteLaneHead and the
// others below, TE_SQLITE_HOLDS_LANE).
struct SqlLaneReads {
  const char* head = sql::kLaneHead;
  const char* counts = sql::kLaneCounts;
  const char* open_lanes = sql::kOpenLanes;
  const char* open_lanes_of_tenant = sql::kOpenLanesOfTenant;  // ?2 = tenant
};

struct SqlDialect {
  const char* job_version;  // ?1 = name; locks the row where rows lock
  const char* upsert_job;
  const char* grant;
  const char* upsert_tenant;
  const char* acquire_lock;
  const char* upsert_user;
  const char* report_worker;
  const char* upsert_notify_state;
  const char* create_token;  // answers the new id
  SqlLaneReads lanes{};
  const char* select_execution = sql::kSelectExecution;  // ?1 = id
  const char* next_run_at = sql::kNextRunAt;             // ?1 = queue
  const char* count_open_of_job = sql::kCountOpenOfJob;  // ?1 = job
};

// kSelectExecution with the payload in its own table.
inline constexpr char kSelectExecutionSqlite[] =
    "SELECT " TE_SQL_EXECUTION_COLUMNS_WITH(TE_SQLITE_PAYLOAD) " FROM executions WHERE id = ?1";

// kCountOpenOfJob where the index of jobs leaves running executions out
// (PostgreSQL, kListIndexing): queued ones by that index (the literal status
// implies its condition), running ones by the leases index.
inline constexpr char kCountOpenOfJobWithoutRunning[] =
    "SELECT (SELECT COUNT(*) FROM executions WHERE job = ?1 AND status = 0)"
    " + (SELECT COUNT(*) FROM executions WHERE job = ?1 AND status = 1)";

// SQLite's statements of lanes (TE_SQLITE_HOLDS_LANE).
inline constexpr char kSqliteLaneOpen[] = TE_SQL_LANE_OPEN(TE_SQLITE_HOLDS_LANE);
inline constexpr char kSqliteLaneHasUnparkedOpen[] =
    TE_SQL_LANE_HAS_UNPARKED_OPEN(TE_SQLITE_HOLDS_LANE);
inline constexpr char kSqliteLaneHead[] = TE_SQL_LANE_HEAD(TE_SQLITE_HOLDS_LANE);
inline constexpr char kSqliteLaneCounts[] = TE_SQL_LANE_COUNTS(TE_SQLITE_HOLDS_LANE);
inline constexpr char kSqliteOpenLanes[] = TE_SQL_OPEN_LANES(TE_SQLITE_HOLDS_LANE);
inline constexpr char kSqliteOpenLanesOfTenant[] =
    TE_SQL_OPEN_LANES_OF_TENANT(TE_SQLITE_HOLDS_LANE);
// The oldest parked member of the lane becomes due no earlier than ?3; its
// queue is returned (the wakeup names it).
inline constexpr char kSqliteLaneUnparkNext[] =
    "UPDATE executions SET lane_parked = 0, run_at = MAX(run_at, ?3) WHERE id = ("
    "SELECT id" TE_SQL_LANE_WHERE(TE_SQLITE_HOLDS_LANE) " AND lane_parked = 1 ORDER BY id LIMIT 1)"
    " RETURNING queue";
inline constexpr SqlLaneReads kSqliteLaneReads{kSqliteLaneHead, kSqliteLaneCounts, kSqliteOpenLanes,
                                               kSqliteOpenLanesOfTenant};

// SQLite: one writer at a time, so no row locks; payloads in their own table.
inline constexpr SqlDialect kSqliteDialect{
    sql::kJobVersion,   sql::kUpsertJob,         sql::kGrant,
    sql::kUpsertTenant, sql::kAcquireLock,       sql::kUpsertUser,
    sql::kReportWorker, sql::kUpsertNotifyState, sql::kCreateToken,
    kSqliteLaneReads,   kSelectExecutionSqlite,
};
inline constexpr SqlDialect kPostgresDialect{
    .job_version = sql::kJobVersionForUpdate,
    .upsert_job = sql::kUpsertJob,
    .grant = sql::kGrant,
    .upsert_tenant = sql::kUpsertTenant,
    .acquire_lock = sql::kAcquireLock,
    .upsert_user = sql::kUpsertUser,
    .report_worker = sql::kReportWorker,
    .upsert_notify_state = sql::kUpsertNotifyState,
    .create_token = sql::kCreateToken,
    .count_open_of_job = kCountOpenOfJobWithoutRunning,
};

}  // namespace taskengine::storage_internal
