// The SQL statements that read the same on every SQL backend, written once
// with numbered placeholders (?1, ?2, ...) as SQLite reads them.
// PostgreSQL reads the same text with $1, $2, ... (pg_sql below, converted
// at compile time: same length, so the text keeps its layout). Statements
// that really differ between backends (claims, upserts, returning, row locks)
// stay with their backend.
#pragma once

#include <cstddef>

namespace taskengine::storage_internal {

// Column lists of the shared statements (and of SQLite's own).
#define TE_SQL_EXECUTION_COLUMNS                                                              \
  "id, job, tenant, queue, status, trigger, requester, worker, attempt, idempotency_key, "    \
  "payload, fingerprint, result, progress, error, failure_class, scheduled_at, run_at, "      \
  "queued_at, started_at, finished_at, claim_version, lease_expires_at, cancel_requested, "   \
  "lane_key, parent_id, consecutive_lease_expiries, permanent_failures, ambiguous_failures, " \
  "max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts, "                   \
  "max_ambiguous_attempts, "                                                                  \
  "max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts"
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
    " max_unsupported_schema_attempts FROM job_definitions WHERE name = ?1";
inline constexpr char kLaneOpen[] =
    "SELECT 1 FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) LIMIT 1";
inline constexpr char kLaneHasUnparkedOpen[] =
    "SELECT 1 FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) AND lane_parked = 0 LIMIT 1";
inline constexpr char kLaneHead[] =
    "SELECT id, status FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) ORDER BY id LIMIT 1";
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
inline constexpr char kTouchToken[] = "UPDATE api_tokens SET last_used_at = ?2 WHERE id = ?1";
inline constexpr char kTouchSession[] = "UPDATE sessions SET last_seen_at = ?2 WHERE id_hash = ?1";
inline constexpr char kDeleteSession[] = "DELETE FROM sessions WHERE id_hash = ?1";
inline constexpr char kGetLogs[] =
    "SELECT execution_id, attempt, at, level, message FROM execution_logs"
    " WHERE execution_id = ?1 ORDER BY id LIMIT ?2";
inline constexpr char kExists[] = "SELECT 1 FROM executions WHERE id = ?1";

}  // namespace sql

// A statement of `sql` with each ?N placeholder written $N. The statements
// hold no '?' but in their placeholders.
template <std::size_t N>
struct DollarSql {
  consteval explicit DollarSql(const char (&sql)[N]) {
    for (std::size_t i = 0; i < N; ++i) text[i] = sql[i] == '?' ? '$' : sql[i];
  }
  // The text, at a fixed address (PgConn prepares by address).
  constexpr operator const char*() const { return text; }  // NOLINT(google-explicit-constructor)
  char text[N] = {};
};

namespace pg_sql {

inline constexpr DollarSql kSelectExecution{sql::kSelectExecution};
inline constexpr DollarSql kInsertNotifyPending{sql::kInsertNotifyPending};
inline constexpr DollarSql kListNotifyPending{sql::kListNotifyPending};
inline constexpr DollarSql kListNotifyState{sql::kListNotifyState};
inline constexpr DollarSql kDeleteNotifyPending{sql::kDeleteNotifyPending};
inline constexpr DollarSql kUpsertNotifyState{sql::kUpsertNotifyState};
inline constexpr DollarSql kDeleteNotifyState{sql::kDeleteNotifyState};
inline constexpr DollarSql kHeartbeat{sql::kHeartbeat};
inline constexpr DollarSql kInsertLog{sql::kInsertLog};
inline constexpr DollarSql kFindByKey{sql::kFindByKey};
inline constexpr DollarSql kJobPolicy{sql::kJobPolicy};
inline constexpr DollarSql kLaneOpen{sql::kLaneOpen};
inline constexpr DollarSql kLaneHasUnparkedOpen{sql::kLaneHasUnparkedOpen};
inline constexpr DollarSql kLaneHead{sql::kLaneHead};
inline constexpr DollarSql kGetEffect{sql::kGetEffect};
inline constexpr DollarSql kReserveEffect{sql::kReserveEffect};
inline constexpr DollarSql kCommitEffect{sql::kCommitEffect};
inline constexpr DollarSql kReleaseEffect{sql::kReleaseEffect};
inline constexpr DollarSql kListEffects{sql::kListEffects};
inline constexpr DollarSql kMayHaveEscapedEffects{sql::kMayHaveEscapedEffects};
inline constexpr DollarSql kAssumeEffectsDone{sql::kAssumeEffectsDone};
inline constexpr DollarSql kDropUnconfirmedEffects{sql::kDropUnconfirmedEffects};
inline constexpr DollarSql kInsertAudit{sql::kInsertAudit};
inline constexpr DollarSql kCountPurgeable{sql::kCountPurgeable};
inline constexpr DollarSql kCountPurgeableLogs{sql::kCountPurgeableLogs};
inline constexpr DollarSql kCountPurgeableAttempts{sql::kCountPurgeableAttempts};
inline constexpr DollarSql kCountPurgeableEffects{sql::kCountPurgeableEffects};
inline constexpr DollarSql kCountOldAudit{sql::kCountOldAudit};
inline constexpr DollarSql kOldestLogs{sql::kOldestLogs};
inline constexpr DollarSql kOldestAudit{sql::kOldestAudit};
inline constexpr DollarSql kGetPendingReplay{sql::kGetPendingReplay};
inline constexpr DollarSql kInsertPendingReplay{sql::kInsertPendingReplay};
inline constexpr DollarSql kDeletePendingReplay{sql::kDeletePendingReplay};
inline constexpr DollarSql kRevoke{sql::kRevoke};
inline constexpr DollarSql kIsGranted{sql::kIsGranted};
inline constexpr DollarSql kCountOpenOfJob{sql::kCountOpenOfJob};
inline constexpr DollarSql kDeleteJob{sql::kDeleteJob};
inline constexpr DollarSql kDeleteJobScheduleState{sql::kDeleteJobScheduleState};
inline constexpr DollarSql kGetJob{sql::kGetJob};
inline constexpr DollarSql kListJobs{sql::kListJobs};
inline constexpr DollarSql kListAttempts{sql::kListAttempts};
inline constexpr DollarSql kGetTenant{sql::kGetTenant};
inline constexpr DollarSql kListTenants{sql::kListTenants};
inline constexpr DollarSql kLockHolder{sql::kLockHolder};
inline constexpr DollarSql kReleaseLock{sql::kReleaseLock};
inline constexpr DollarSql kListScheduleStates{sql::kListScheduleStates};
inline constexpr DollarSql kGetUser{sql::kGetUser};
inline constexpr DollarSql kListUsers{sql::kListUsers};
inline constexpr DollarSql kFindToken{sql::kFindToken};
inline constexpr DollarSql kListTokens{sql::kListTokens};
inline constexpr DollarSql kRevokeToken{sql::kRevokeToken};
inline constexpr DollarSql kTouchToken{sql::kTouchToken};
inline constexpr DollarSql kTouchSession{sql::kTouchSession};
inline constexpr DollarSql kDeleteSession{sql::kDeleteSession};
inline constexpr DollarSql kGetLogs{sql::kGetLogs};
inline constexpr DollarSql kExists{sql::kExists};

}  // namespace pg_sql
}  // namespace taskengine::storage_internal
