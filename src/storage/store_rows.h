// Mapping result rows to the contract's structs, once for both backends.
//
// Each backend adapts its cursor to Row (a SQLite statement, a libpq result
// and row number) and keeps its own SQL; the SELECT lists of both backends
// name the columns in the order documented at each reader below.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "storage/store.h"
#include "storage/store_rules.h"
#include "taskengine/types.h"

namespace taskengine::storage_internal {

// One result row. Columns are 0-based; a NULL reads as 0 or "".
class Row {
 public:
  virtual std::int64_t Int(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  // Valid as long as the backend's cursor is on this row.
  virtual std::string_view TextView(int col) const = 0;
  virtual bool IsNull(int col) const = 0;

 protected:
  ~Row() = default;
};

// id, status, attempt, claim_version, consecutive_lease_expiries,
// permanent_failures, ambiguous_failures, cancel_requested, failure_class,
// max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts,
// max_ambiguous_attempts, max_consecutive_lease_expiries, lease_ms, run_at,
// started_at, finished_at, max_unsupported_schema_attempts, lane_key, tenant,
// status, worker, queue, handler_started.
constexpr int kStateColumnCount = 27;
StateRow ReadStateRow(const Row& r);
// The state columns, then job, payload, idempotency key ("" for NULL).
ClaimRow ReadClaimRow(const Row& r);

// id, job, tenant, queue, status, trigger, requester, worker, attempt,
// idempotency_key, payload, fingerprint, result, progress, error,
// failure_class, scheduled_at, run_at, queued_at, started_at, finished_at,
// claim_version, lease_expires_at, cancel_requested, lane_key, parent_id,
// consecutive_lease_expiries, permanent_failures, ambiguous_failures,
// max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts,
// max_ambiguous_attempts, max_consecutive_lease_expiries, lease_ms,
// max_unsupported_schema_attempts.
Execution ReadExecutionRow(const Row& r);

// name, display_name, handler, queue, scope, schedule, timezone, timeout_ms,
// lease_ms, max_attempts, backoff_base_ms, backoff_cap_ms,
// max_permanent_attempts, max_ambiguous_attempts,
// max_consecutive_lease_expiries, lane_template, config_json, enabled,
// created_at, updated_at, accepted_schema_versions,
// max_unsupported_schema_attempts, catch_up, catch_up_window_ms, window_ms,
// seed_digest, notify_on_failure, notify_targets.
JobDefinition ReadJobRow(const Row& r);

// queue, max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts,
// max_ambiguous_attempts, max_consecutive_lease_expiries, lease_ms,
// max_unsupported_schema_attempts.
JobPolicy ReadJobPolicyRow(const Row& r);

// id, fingerprint, status: the execution that holds a request's idempotency key.
AdmitResult ReadExistingAdmissionRow(const Row& r, const AdmitRequest& request);

// name, password_hash, scopes, tenants, disabled, created_at.
User ReadUserRow(const Row& r);
// id, name, secret_hash, principal, scopes, tenants, created_at, expires_at,
// revoked_at, last_used_at.
ApiToken ReadTokenRow(const Row& r);
// id_hash, user, csrf_token, created_at, last_seen_at, expires_at.
Session ReadSessionRow(const Row& r);
// id, name, active, created_at.
Tenant ReadTenantRow(const Row& r);
// execution_id, job, ended_at.
NotifyPending ReadNotifyPendingRow(const Row& r);
// job, sent_at, suppressed, suppressed_since.
NotifyJobState ReadNotifyStateRow(const Row& r);
// The columns ReadWorkerRow reads (the same names on both backends).
#define TE_WORKER_COLUMNS                                                       \
  "id, hostname, pid, state, current_execution, processed, failed, started_at," \
  " last_heartbeat_at, kind, threads, busy, current_executions"
// id, hostname, pid, state, current_execution, processed, failed, started_at,
// last_heartbeat_at, kind, threads, busy, current_executions.
WorkerInfo ReadWorkerRow(const Row& r);
// id, at, actor, tenant, action, target, before_json, after_json, reason.
AuditRecord ReadAuditRow(const Row& r);
// job, last_fire_at, last_evaluated_at, skipped_fires, last_skipped_at.
ScheduleState ReadScheduleStateRow(const Row& r);
// execution_id, attempt, at, level, message.
LogEntry ReadLogRow(const Row& r);
// attempt, claim_version, worker, started_at, ended_at, outcome,
// failure_class, released, error (of execution `id`).
AttemptRecord ReadAttemptRow(const Row& r, ExecutionId id);
// name, committed, reserved_by, attempt, reserved_at, committed_at, detail
// (of execution `id`).
EffectRecord ReadEffectRow(const Row& r, ExecutionId id);
// committed, reserved_by, attempt, reserved_at, committed_at, detail.
StoredEffect ReadStoredEffectRow(const Row& r);
// requested_by, reason, ambiguous.
PendingReplay ReadPendingReplayRow(const Row& r);

// Lanes: the head (id, status) and the counts (queued, running) of `lane`.
void ReadLaneHeadRow(const Row& r, LaneStatus& lane);
void ReadLaneCountsRow(const Row& r, LaneStatus& lane);

// Stats: a status counter row (tenant, queue, status, count), rows ordered
// by tenant; an outcome row of the last 24 hours (tenant, status, count),
// rows ordered by tenant. Rows of tenants outside `scope` are skipped.
// FinishStats orders the queues by name.
void AddStatusCountRow(const Row& r, const TenantScope& scope, StoreStats& stats);
void AddRecentOutcomeRow(const Row& r, const TenantScope& scope, StoreStats& stats);
void FinishStats(StoreStats& stats);

// Queue depths: a queued row (queue, count, due count, oldest queued_at), a
// running row (queue, count), and the list by queue name.
using QueueDepthMap = std::map<std::string, QueueDepth>;
void AddQueuedDepthRow(const Row& r, QueueDepthMap& depths);
void AddRunningDepthRow(const Row& r, QueueDepthMap& depths);
std::vector<QueueDepth> QueueDepthList(QueueDepthMap& depths);

}  // namespace taskengine::storage_internal
