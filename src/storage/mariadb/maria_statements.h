// The MariaDB text of the shared statements (src/storage/sql_statements.h)
// that MariaDB cannot run as written: each has the name of the shared one, the
// same ?N placeholders in the same meaning, and does what it does on SQLite
// and PostgreSQL (maria_schema_test runs both and compares). Every other
// shared statement runs on MariaDB unchanged. Also: the MariaDB text of
// statements each backend writes its own way (kUpdateScheduleState), and
// kMariaDialect, the SqlDialect of the shared store logic on MariaDB.
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

// --- statements of the MariaDB store that each backend writes its own way ---

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
};

}  // namespace taskengine::maria
