// The rules of the storage contract that do not depend on the database:
// argument validation (the contract's kInvalidArgument cases), lease fencing,
// and the small decisions both backends make the same way around their SQL.
// Each backend keeps its SQL and its transactions; what it decides with the
// rows it reads lives here, once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/state_machine.h"
#include "storage/store.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine::storage_internal {

// --- validation (before any SQL runs) --------------------------------------

Status ValidateJob(const JobDefinition& job);
// Store::ChangeJob's answers from what the transaction read: whether the row
// exists and its updated_at. kConflict / kNotFound as store.h says.
Status CheckJobChange(const JobChange& change, bool exists, Millis updated_at);
// kConflict naming `open` when a job to delete has open executions.
Status CheckJobDeletable(const std::string& job, std::int64_t open);
Status ValidateTenant(const Tenant& tenant);
Status ValidateUser(const User& user);
Status ValidateToken(const ApiToken& token);
Status ValidateSession(const Session& session);
Status ValidateWorker(const WorkerInfo& worker);
Status ValidateGrant(std::string_view principal, std::string_view tenant);
Status ValidateLock(std::string_view name, std::string_view holder, Millis ttl_ms);
Status ValidateEffectName(std::string_view name);
// An effect name and the detail of its commit.
Status ValidateEffectCommit(std::string_view name, std::string_view detail);
Status ValidateAuditRecord(const AuditRecord& record);
// A page size of a list call (audit, lanes, executions): 1..1000.
Status ValidateListLimit(int limit);
// A page size of GetLogs (>= 1) and the batch of a sweep (>= 1).
Status ValidateLogLimit(int limit);
Status ValidateSweepBatch(int max_batch);
// Purge (I7): max_rows 1..kMaxPurgeBatch, no negative cutoff.
inline constexpr int kMaxPurgeBatch = 10'000;
Status ValidatePurge(const RetentionCutoffs& cutoffs, int max_rows);
// ReclaimSpace: max_pages 1..kMaxReclaimPages.
inline constexpr int kMaxReclaimPages = 1'000'000;
Status ValidateReclaim(int max_pages);
Status ValidateCancel(const OperatorAction& action);
Status ValidateReplay(const ReplayRequest& request);
Status ValidateApproval(const OperatorAction& approver);

// Migrate() on a database whose schema `version` is newer than `supported`.
Status NewerSchemaError(int version, int supported);

// --- executions --------------------------------------------------------------

// An execution as the state machine and fencing see it (the state columns).
struct StateRow {
  ExecutionId id;
  ExecutionState state;
  ClaimVersion version;
  Millis lease_ms = 0;
  Millis run_at = 0;
  Millis started_at = 0;
  Millis finished_at = 0;
  std::string lane_key;
  std::string tenant;
  std::string worker;
  std::string queue;
  std::string job;
};

// L2 fencing and L7: the one check every lease call makes. kNotFound when
// `row` is nullopt (no such execution), kStale when the lease is not current.
Status CheckLease(const std::optional<StateRow>& row, const LeaseRef& lease);

// A due execution a claim reads: its state and what a worker needs.
struct ClaimRow {
  StateRow row;
  JobName job;
  std::string payload_json;
  std::string idempotency_key;
};
// The lease a claim of `due` in `queue` hands out, `t` being its transition.
Lease NewLease(const ClaimRow& due, const Transition& t, Millis now, const std::string& queue);
// A heartbeat's answer for the lease of `row`.
HeartbeatReply HeartbeatReplyFor(const StateRow& row, Millis now);

// A transition from `row`'s status to `to` ends a running attempt without
// success: the attempt's history is written.
bool EndsFailedAttempt(ExecutionStatus from, ExecutionStatus to);
// I6: a transition from `from` to `to` ends an execution in a way its job's
// notify targets are told about (failed, quarantined, partially_canceled),
// unless it only closes out a failure that was already told (an operator
// canceling a failed or quarantined execution).
bool EndsWithFailureNotice(ExecutionStatus from, ExecutionStatus to);
// ReadNotifyOutbox's limit: 1..10000.
Status ValidateNotifyLimit(int max_pending);
// A notifier state that says nothing (no notification in its window, nothing
// suppressed): its row is deleted.
bool IsEmptyNotifyState(const NotifyJobState& state);
// O1: statuses that hold their lane (a failed or quarantined head blocks it).
bool HoldsLane(ExecutionStatus status);
// A lane whose head has this status is blocked.
bool BlocksLane(ExecutionStatus head_status);
// `row` moving to `to` leaves its lane: the next parked execution may become due.
bool LeavesLane(const StateRow& row, ExecutionStatus to);
// Lanes with a blocked head first, otherwise in the given order.
void SortBlockedFirst(std::vector<LaneStatus>& lanes);

// The first hour (ms / 1 hour) of the 24 whose outcomes GetStats reports.
std::int64_t FirstRecentOutcomeHour(Millis now);

// Per-transaction changes of the status counters (P8): executions per
// (tenant, queue, status), and terminal outcomes per (hour, tenant, status).
// Keys are in the order of the tables' primary keys, so writers that flush
// them in map order lock counter rows in one order.
struct StatusCounters {
  std::map<std::tuple<std::string, std::string, int>, std::int64_t> counts;
  std::map<std::tuple<std::int64_t, std::string, int>, std::int64_t> outcomes;
  // The lifecycle events of the transitions, in order, when `record_events`
  // (the store has an observer): published after the commit.
  bool record_events = false;
  std::vector<LifecycleEvent> events;

  // `row` moves by `t` at `now`.
  void CountTransition(const StateRow& row, const Transition& t, Millis now);
  void CountAdmission(const std::string& queue, const std::string& tenant);
  // Adds `other`'s changes to these.
  void Add(const StatusCounters& other);
  void Clear();
};

// --- execution search ------------------------------------------------------------

// kInvalidArgument for a limit outside 1..1000 or an offset outside
// 0..kMaxListOffset.
Status ValidateExecutionFilter(const ExecutionFilter& filter);

// One index seek of a search: at most one tenant and one status, or every
// status but running (`not_running`).
struct ListPart {
  std::optional<std::string> tenant;
  std::optional<int> status;
  bool not_running = false;
};

// A value bound to a search statement.
struct ListArg {
  bool is_text = false;
  std::int64_t number = 0;
  std::string text;
};
// The statement of one seek and its arguments, numbered ?1.. (SQLite) or
// $1.. (PostgreSQL) by `placeholder`. Selects `columns` of the matches, newest
// first, at most `row_limit`; with `count_only`, one row: how many of the
// first `row_limit` matches there are.
struct ListSql {
  std::string sql;
  std::vector<ListArg> args;
};
// What a backend's indexes need a search to say.
struct ListIndexing {
  // The index of statuses leaves running executions out (the leases index
  // holds them: SQLite, PostgreSQL). A search by another status says
  // `status <> 1` so that the planner may use it; one for running executions
  // names status 1 as a literal, the condition of the leases index.
  bool status_index_without_running = false;
  // SQLite: a search for running executions reads the leases index (INDEXED
  // BY), as many rows as leases are held, whatever else it says.
  bool index_hints = false;
  // The indexes of jobs and of queue times leave running executions out too
  // (PostgreSQL): a search by job or queue time and no status is two seeks,
  // one of every status but running and one of running executions.
  bool job_and_time_indexes_without_running = false;
};
// The seeks of `filter` (tenants x statuses) on a backend's indexes; none
// when its tenant criteria exclude each other.
std::vector<ListPart> PlanListParts(const ExecutionFilter& filter,
                                    const ListIndexing& indexing = {});
ListSql BuildListSql(const ExecutionFilter& filter, const ListPart& part, std::string_view columns,
                     std::int64_t row_limit, bool count_only, char placeholder,
                     ListIndexing indexing = {});
// The rows each seek reads: enough for offset + limit and one to tell "more".
std::int64_t ListPartRowLimit(const ExecutionFilter& filter);
// Merges the seeks' rows (each newest first) into the page: skips `offset`,
// keeps `limit`, sets next_before when more follow.
ExecutionPage MergeListParts(std::vector<std::vector<Execution>> parts,
                             const ExecutionFilter& filter);
// True when the filter's total is a sum of status counters (tenant and status
// criteria only).
bool TotalFromCounters(const ExecutionFilter& filter);
// The scope whose counters hold the filter's matches (TotalFromCounters).
TenantScope ListTotalScope(const ExecutionFilter& filter);
// The matches of the filter's statuses in counters already scoped (GetStats).
std::int64_t TotalOfStatuses(const StoreStats& stats, const ExecutionFilter& filter);
// Sets page.total from the seeks' counts (each at most kListCountCap + 1).
void SetCountedTotal(ExecutionPage& page, const std::vector<std::int64_t>& counts);

// What a FinishRequest asks of the state machine, and what it writes.
struct FinishPlan {
  Event event;
  std::optional<std::string_view> result;  // views into the request
  std::optional<std::string_view> error;
  std::optional<int> progress;
};
// `jitter01` is the request's draw from the store's random source.
FinishPlan PlanFinish(const FinishRequest& request, Millis now, double jitter01);

// The error recorded when a lease of `attempt` expires.
std::string LeaseExpiredError(int attempt);
// L4: the error recorded when a lease whose handler never started expires.
std::string UnstartedLeaseExpiredError(int attempt);
// Counts one execution recovered by a sweep that moved it to `to`.
void CountRecovered(SweepReport& report, ExecutionStatus to);

// --- operator actions ------------------------------------------------------------

// A replay waiting for a second operator's approval (four-eyes).
struct PendingReplay {
  std::string requested_by;
  std::string reason;
  AmbiguousResolution ambiguous = AmbiguousResolution::kKeep;
};
// kConflict: a replay of execution `id` by `requested_by` already waits.
Status ReplayAlreadyPending(ExecutionId id, const std::string& requested_by);
// kNotFound: no replay of execution `id` waits for approval.
Status NoPendingReplay(ExecutionId id);
// kConflict when `approver` asked for the replay itself.
Status CheckFourEyes(const PendingReplay& pending, const OperatorAction& approver);
// The reason recorded for an approved replay.
std::string ApprovedReplayReason(const PendingReplay& pending);
// The detail of effects assumed done by a replay of `actor`.
std::string AssumedDoneDetail(const std::string& actor);
// The audit action of a cancel that moved an execution to `to`.
const char* CancelAuditAction(ExecutionStatus to);

// {"status":"<name>"}, the before/after of an operator action's audit record.
std::string StatusJson(ExecutionStatus status);
// An audit record about execution `id` (target "execution:<id>"). An empty
// `after` leaves after_json empty.
AuditRecord ExecutionAudit(Millis at, const std::string& actor, const std::string& tenant,
                           std::string action, ExecutionId id, ExecutionStatus before,
                           std::optional<ExecutionStatus> after, const std::string& reason);

// --- effects -----------------------------------------------------------------

// An effect's stored row, as ReserveEffect and CommitEffect look at it.
struct StoredEffect {
  bool committed = false;
  ClaimVersion reserved_by;
  int attempt = 0;
  Millis reserved_at = 0;
  Millis committed_at = 0;
  std::string detail;
};
// ReserveEffect under a current lease: answers in `reply` and returns true,
// or returns false when the caller must reserve the effect now (and answer
// kProceed). `stored` is the effect's row, nullopt when there is none.
bool AnswerReserve(const std::optional<StoredEffect>& stored, bool cancel_requested,
                   const LeaseRef& lease, EffectReply& reply);
// CommitEffect under a current lease. kConflict when the effect was never
// reserved. Otherwise the record to return; `write` says whether the caller
// must record the commit (false: it was committed already, keep the first).
struct EffectCommit {
  EffectRecord record;
  bool write = false;
};
Result<EffectCommit> PlanCommit(const LeaseRef& lease, std::string_view name,
                                std::string_view detail, const std::optional<StoredEffect>& stored,
                                int attempt, Millis now);

// --- admission -----------------------------------------------------------------

// The part of a job definition an admission copies into the execution.
struct JobPolicy {
  std::string queue;
  RetryPolicy retry;
  Millis lease_ms = 0;
  bool enabled = true;
  JobScope scope = JobScope::kGlobal;
  std::string lane_template;
};

// The admission's check of the definition its dispatch was prepared from
// (AdmitRequest::prepared_with) against the stored policy `p`: ok when none
// was given or it still holds.
Status CheckPreparedTerms(const AdmitRequest& request, const JobPolicy& p);

// When an admitted execution first becomes due: the requested run_at, or now.
Millis AdmissionRunAt(const AdmitRequest& request, Millis now);

// The answer to an admission whose idempotency key already names execution
// `id` (with `fingerprint` and `status`).
AdmitResult ExistingAdmission(ExecutionId id, std::string_view fingerprint, ExecutionStatus status,
                              const AdmitRequest& request);

}  // namespace taskengine::storage_internal
