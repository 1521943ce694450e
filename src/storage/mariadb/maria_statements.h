// The MariaDB text of shared statements (src/storage/sql_statements.h), each
// under the shared one's name, with the same ?N placeholders in the same
// meaning, doing what the shared one does on SQLite and PostgreSQL
// (maria_schema_test runs both and compares): the ones MariaDB cannot run as
// written (the upserts), and the ones it runs as written but reads through
// its own indexes (the lanes). Every other shared statement runs on MariaDB
// unchanged. Also: the MariaDB text of statements each backend writes its own
// way (claims, kUpdateScheduleState), and kMariaDialect, the SqlDialect of the shared
// store logic on MariaDB.
//
// What differs:
// - Upserts: `ON CONFLICT (key) DO UPDATE SET c = excluded.c` is
//   `ON DUPLICATE KEY UPDATE c = VALUES(c)`, and `ON CONFLICT DO NOTHING` is
//   `INSERT IGNORE`. Each table here has one unique key (its primary key), so
//   "a duplicate key" means the same conflict as on the other backends.
//   INSERT IGNORE also turns other errors into warnings (a value too long is
//   cut, a NULL becomes ''): kGrant runs on values ValidateGrant has checked.
// - The affected rows of an upsert differ (MariaDB counts an updated row
//   twice): the store reads no count from these statements.
#pragma once

#include "storage/sql_statements.h"  // TE_SQL_JOB_COLUMNS, SqlDialect

namespace taskengine::maria::sql {

// I6: the ending of execution ?1 at ?2 waits in the outbox for its
// notification (a newer ending of the same execution replaces an older one).
// VALUES(c) is the value the INSERT ... SELECT would have written.
inline constexpr char kInsertNotifyPending[] =
    "INSERT INTO notify_outbox (execution_id, job, ended_at) SELECT id, job, ?2 FROM executions"
    " WHERE id = ?1 ON DUPLICATE KEY UPDATE job = VALUES(job), ended_at = VALUES(ended_at)";
inline constexpr char kUpsertNotifyState[] =
    "INSERT INTO notify_state (job, sent_at, suppressed, suppressed_since) VALUES (?1, ?2, ?3, ?4)"
    " ON DUPLICATE KEY UPDATE sent_at = VALUES(sent_at), suppressed = VALUES(suppressed),"
    " suppressed_since = VALUES(suppressed_since)";

// A job's version (updated_at) always grows, even within one millisecond:
// ?19 when it is later than the stored version, else the stored one plus 1.
// created_at keeps the value of the first insert.
inline constexpr char kUpsertJob[] =
    "INSERT INTO job_definitions (" TE_SQL_JOB_COLUMNS
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27) ON DUPLICATE KEY UPDATE"
    " display_name = ?2, handler = ?3, queue = ?4, scope = ?5, schedule = ?6, timezone = ?7,"
    " timeout_ms = ?8, lease_ms = ?9, max_attempts = ?10, backoff_base_ms = ?11,"
    " backoff_cap_ms = ?12, max_permanent_attempts = ?13, max_ambiguous_attempts = ?14,"
    " max_consecutive_lease_expiries = ?15, lane_template = ?16, config_json = ?17,"
    " enabled = ?18, updated_at = CASE WHEN ?19 > job_definitions.updated_at THEN ?19"
    " ELSE job_definitions.updated_at + 1 END, accepted_schema_versions = ?20,"
    " max_unsupported_schema_attempts = ?21, catch_up = ?22, catch_up_window_ms = ?23,"
    " window_ms = ?24, seed_digest = ?25, notify_on_failure = ?26, notify_targets = ?27";
inline constexpr char kGrant[] = "INSERT IGNORE INTO grants (principal, tenant) VALUES (?1, ?2)";
inline constexpr char kUpsertTenant[] =
    "INSERT INTO tenants (id, name, active, created_at) VALUES (?1, ?2, ?3, ?4)"
    " ON DUPLICATE KEY UPDATE name = ?2, active = ?3";
// The lock ?1 goes to ?2 until ?3 unless another holder has it beyond ?4.
// MariaDB has no WHERE on ON DUPLICATE KEY UPDATE: each column keeps its
// value unless the lock is free for ?2. The assignments run left to right,
// each seeing the columns assigned before it: holder goes first (on the
// stored holder and expiry), so that afterwards holder = ?2 exactly when ?2
// holds the lock, and only then does the expiry move. (The other order would
// let the new expiry, later than ?4, hide an expired lock from the holder
// assignment.)
inline constexpr char kAcquireLock[] =
    "INSERT INTO scheduler_locks (name, holder, expires_at) VALUES (?1, ?2, ?3)"
    " ON DUPLICATE KEY UPDATE"
    " holder = CASE WHEN holder = ?2 OR expires_at <= ?4 THEN ?2 ELSE holder END,"
    " expires_at = CASE WHEN holder = ?2 THEN ?3 ELSE expires_at END";
inline constexpr char kUpsertUser[] =
    "INSERT INTO users (name, password_hash, scopes, tenants, disabled, created_at)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON DUPLICATE KEY UPDATE password_hash = ?2,"
    " scopes = ?3, tenants = ?4, disabled = ?5";
inline constexpr char kReportWorker[] =
    "INSERT INTO workers (id, hostname, pid, state, current_execution, processed, failed,"
    " started_at, last_heartbeat_at, kind, threads, busy, current_executions)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    " ON DUPLICATE KEY UPDATE hostname = ?2, pid = ?3, state = ?4, current_execution = ?5,"
    " processed = ?6, failed = ?7, started_at = ?8, last_heartbeat_at = ?9, kind = ?10,"
    " threads = ?11, busy = ?12, current_executions = ?13";

// --- shared statements MariaDB reads through its own indexes -------------------
// They run as written, but the open-lane index of MariaDB (maria_schema.h,
// version 2) is keyed on open_lane, the lane key of an open member (status 0,
// 1, 3 or 4) and NULL otherwise: a seek by open_lane reads the open members
// only, where the shared text would read every member the lane ever had.

inline constexpr char kLaneOpen[] =
    "SELECT 1 FROM executions WHERE open_lane = ?2 AND tenant = ?1 LIMIT 1";
inline constexpr char kLaneHasUnparkedOpen[] =
    "SELECT 1 FROM executions WHERE open_lane = ?2 AND tenant = ?1 AND lane_parked = 0 LIMIT 1";
inline constexpr char kLaneHead[] =
    "SELECT id, status FROM executions WHERE open_lane = ?2 AND tenant = ?1 ORDER BY id LIMIT 1";
inline constexpr char kLaneCounts[] =
    "SELECT SUM(CASE WHEN status = 0 THEN 1 ELSE 0 END), SUM(CASE WHEN status = 1 THEN 1 ELSE 0"
    " END) FROM executions WHERE open_lane = ?2 AND tenant = ?1";
inline constexpr char kOpenLanes[] =
    "SELECT tenant, lane_key, MAX(CASE WHEN status IN (3, 4) THEN 1 ELSE 0 END) AS blocked"
    " FROM executions WHERE open_lane IS NOT NULL"
    " GROUP BY tenant, lane_key ORDER BY blocked DESC, tenant, lane_key LIMIT ?1";
inline constexpr char kOpenLanesOfTenant[] =
    "SELECT tenant, lane_key, MAX(CASE WHEN status IN (3, 4) THEN 1 ELSE 0 END) AS blocked"
    " FROM executions WHERE open_lane IS NOT NULL AND tenant = ?2"
    " GROUP BY tenant, lane_key ORDER BY blocked DESC, lane_key LIMIT ?1";

// --- statements of the MariaDB store that each backend writes its own way ---

// Claims (L1) seek the due index (maria_schema.h, version 2) by due_queue, the
// queue of a due execution and NULL otherwise: the state columns, then what a
// worker needs (from kStateColumnCount on). Rows another node is claiming are
// skipped, not waited for.
inline constexpr char kClaimDue[] = "SELECT " TE_SQL_STATE_COLUMNS
                                    ", job, payload, COALESCE(idempotency_key, '') FROM executions"
                                    " WHERE due_queue = ?1 AND run_at <= ?2"
                                    " ORDER BY run_at, id LIMIT ?3 FOR UPDATE SKIP LOCKED";
// kClaimDue for a claimer that names the handlers it can run (?4: a
// HandlerFilter list): executions of other handlers are skipped.
inline constexpr char kClaimDueForHandlers[] =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '') FROM executions"
    " WHERE due_queue = ?1 AND run_at <= ?2"
    " AND job IN (SELECT name FROM job_definitions"
    " WHERE INSTR(?4, CONCAT(CHAR(31 USING utf8mb4), handler, CHAR(31 USING utf8mb4))) > 0)"
    " ORDER BY run_at, id LIMIT ?3 FOR UPDATE SKIP LOCKED";
// The earliest run_at of queue ?1's queued, un-parked executions.
inline constexpr char kNextRunAt[] = "SELECT MIN(run_at) FROM executions WHERE due_queue = ?1";
// The run_at of the oldest execution of queue ?1 due at ?2.
inline constexpr char kOldestDue[] =
    "SELECT MIN(run_at) FROM executions WHERE due_queue = ?1 AND run_at <= ?2";
// O1: the oldest parked member of the open lane (?1, ?2), locked: its id
// and queue.
inline constexpr char kLaneFirstParked[] =
    "SELECT id, queue FROM executions WHERE open_lane = ?2 AND tenant = ?1 AND lane_parked = 1"
    " ORDER BY id LIMIT 1 FOR UPDATE";

// T4: the schedule state of job ?1 moves forward: the latest fire ?2 and
// evaluation ?3, ?4 more skipped fires, the latest skip ?5 (SQLite's text,
// with GREATEST for its two-argument MAX; each assignment reads only its own
// column, so their order does not matter).
inline constexpr char kUpdateScheduleState[] =
    "INSERT INTO schedule_state (job, last_fire_at, last_evaluated_at, skipped_fires,"
    " last_skipped_at) VALUES (?1, ?2, ?3, ?4, ?5) ON DUPLICATE KEY UPDATE"
    " last_fire_at = GREATEST(last_fire_at, ?2),"
    " last_evaluated_at = GREATEST(last_evaluated_at, ?3),"
    " skipped_fires = skipped_fires + ?4, last_skipped_at = GREATEST(last_skipped_at, ?5)";

}  // namespace taskengine::maria::sql

namespace taskengine::maria {

// The dialect of the shared store logic (SqlStore) on MariaDB: InnoDB locks
// rows, so a job's version is read FOR UPDATE (as on PostgreSQL); INSERT ...
// RETURNING answers the new token's id (MariaDB 10.5 and later).
inline constexpr storage_internal::SqlDialect kMariaDialect{
    storage_internal::sql::kJobVersionForUpdate,
    sql::kUpsertJob,
    sql::kGrant,
    sql::kUpsertTenant,
    sql::kAcquireLock,
    sql::kUpsertUser,
    sql::kReportWorker,
    sql::kUpsertNotifyState,
    storage_internal::sql::kCreateToken,
    {sql::kLaneHead, sql::kLaneCounts, sql::kOpenLanes, sql::kOpenLanesOfTenant},
    storage_internal::sql::kSelectExecution,
    sql::kNextRunAt,
};

}  // namespace taskengine::maria
