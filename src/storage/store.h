// The storage contract: the engine's transactions in domain words.
//
// Every backend (SQLite, later PostgreSQL) implements this interface with the
// same observable behaviour, proven by the conformance suite in
// src/storage/testing/. Each method is one atomic transaction: its effects are
// durable (per the backend's durability setting) before it returns ok, and a
// method that returns an error has changed nothing.
//
// Status changes are decided only by Decide() in src/core/state_machine.h.
// Time comes from the Clock the backend was opened with; jitter from its
// RandomSource.
//
// Fencing (L2): every call about a lease carries the claim version. When the
// version is not the current one (or the execution is no longer running), the
// call returns kStale and changes nothing. When the execution does not exist,
// it returns kNotFound and changes nothing (L7).
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "taskengine/lifecycle.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

// What a dispatch takes from its job's definition: where it is queued, whether
// it needs a tenant, how its lane key is made.
struct JobTerms {
  std::string queue;
  JobScope scope = JobScope::kGlobal;
  std::string lane_template;
  bool operator==(const JobTerms&) const = default;
};

// A request to admit one execution (A1). The dispatcher validates it and
// computes `fingerprint` before calling the store.
struct AdmitRequest {
  JobName job;
  TenantId tenant;                  // empty for global jobs
  std::string payload_json = "{}";  // canonical JSON object
  std::string fingerprint;          // hex SHA-256 of canonical payload + requester (A2)
  std::string idempotency_key;      // empty = no idempotency
  std::string requester;
  Trigger trigger = Trigger::kApi;
  Millis run_at = 0;        // earliest start; 0 = now
  Millis scheduled_at = 0;  // fire time of a scheduled execution; 0 = none
  std::string lane_key;
  ExecutionId parent;
  // The definition a dispatch was prepared from (Dispatcher::Prepare), when
  // the dispatcher set it: the admission checks it against the stored one in
  // its transaction. A disabled job answers kInvalidArgument; another queue,
  // scope or lane template answers kConflict; either way nothing is admitted.
  std::optional<JobTerms> prepared_with;
  // The API token the dispatch was asked with (ApiToken::id; 0: none). The
  // admission checks in its transaction that the token exists, is not revoked
  // and has not expired; kUnauthenticated otherwise, and nothing is admitted.
  // So a revocation holds from the next request on even where the API
  // remembers a token instead of reading it for each request.
  std::int64_t token_id = 0;
};

enum class AdmitOutcome {
  kCreated,    // a new execution was created
  kDuplicate,  // same (job, tenant, key) and same fingerprint: the existing execution
  kConflict,   // same (job, tenant, key), different fingerprint: nothing created
};

struct AdmitResult {
  AdmitOutcome outcome = AdmitOutcome::kCreated;
  ExecutionId id;                                     // the new or the existing execution
  ExecutionStatus status = ExecutionStatus::kQueued;  // its current status
};

// One queue and how many executions of it a claim may take, at most.
struct QueueSlot {
  std::string queue;
  int max = 0;
  // L4: the handlers of this slot's leases start at once, even in a request
  // whose mark_started is false (a prefetching pool whose workers of a fast
  // queue run this work within moments, so the claim marks it instead of a
  // MarkStarted after it). Default: false (the request decides).
  bool mark_started = false;
};

struct ClaimRequest {
  WorkerId worker;
  // Queues in priority order: the first is drained before the next is looked at.
  std::vector<QueueSlot> slots;
  // L4: whether the leases' handlers start at once (a remote worker leases
  // only what it runs now). A claimer that prefetches passes false and calls
  // MarkStarted when it hands a lease to a handler: the expiry of a lease
  // whose handler never started is a free requeue. Default: true.
  bool mark_started = true;
  // The handlers the claimer can run (W4): only executions whose job's
  // handler is one of these are claimed; the others stay queued, untouched,
  // for a claimer that can run them. An execution whose job definition is
  // gone has no handler and is not claimed. nullopt = any handler (the
  // in-process pool; remote workers that do not say). Default: nullopt.
  std::optional<std::vector<std::string>> handlers;
};

// L4: whether the leases a claim takes from `slot` are marked started (the
// one rule every backend's Claim applies).
inline bool ClaimMarksStarted(const ClaimRequest& request, const QueueSlot& slot) {
  return request.mark_started || slot.mark_started;
}

// A claimed execution: everything a worker needs to run it.
struct Lease {
  ExecutionId id;
  ClaimVersion version;
  JobName job;
  TenantId tenant;
  std::string queue;
  int attempt = 0;
  std::string payload_json;
  std::string idempotency_key;
  Millis lease_expires_at = 0;
  Millis lease_ms = 0;
};

// The identity of a lease on the wire: which execution, which claim.
struct LeaseRef {
  ExecutionId id;
  ClaimVersion version;
};

struct HeartbeatRequest {
  LeaseRef lease;
  std::optional<int> progress;  // 0..100; nullopt = unchanged
};

struct HeartbeatReply {
  bool cancel_requested = false;
  Millis lease_expires_at = 0;
};

// How a claim ends: success, a failure of some class, or giving it back.
struct FinishRequest {
  enum class Kind { kComplete, kFail, kRelease };
  LeaseRef lease;
  Kind kind = Kind::kComplete;
  std::string result_json;                                // kComplete: optional JSON value
  FailureClass failure_class = FailureClass::kRetryable;  // kFail
  std::string error;                                      // kFail
  Millis retry_after_ms = 0;                              // kFail
  // kFail with kPermanent: the payload's schema version is not accepted (Q1);
  // bounded by the job's max_unsupported_schema_attempts.
  bool unsupported_schema = false;
  // The API token the finish was asked with (ApiToken::id; 0: none), checked
  // in the finish's transaction as AdmitRequest::token_id is: this reply is
  // kUnauthenticated and changes nothing unless the token exists, is not
  // revoked and has not expired.
  std::int64_t token_id = 0;
};

// What a finish call (complete, fail, release) did.
struct FinishReply {
  ExecutionStatus status = ExecutionStatus::kQueued;  // the status it now has
  Millis run_at = 0;                                  // when queued again: next start
};

struct SweepReport {
  int recovered = 0;  // expired leases handled in this batch
  int requeued = 0;
  int failed = 0;
  int quarantined = 0;
  int canceled = 0;
  bool more = false;  // the batch was full: call again
};

// I7: what retention removes, by age (store times, ms). 0 keeps that kind.
struct RetentionCutoffs {
  // Executions that ended before this: only terminal ones, never one that
  // holds its lane (a failed or quarantined execution with a lane key) nor
  // one with a replay waiting for approval; with their logs, attempts,
  // effects and idempotency key.
  Millis executions_ended_before = 0;
  // Log lines written before this, of any execution.
  Millis logs_before = 0;
  // Audit records made before this.
  Millis audit_before = 0;
};

// What one Purge removed (or, dry run, would remove).
struct PurgeReport {
  std::int64_t executions = 0;
  std::int64_t logs = 0;  // with their executions, and by age
  std::int64_t attempts = 0;
  std::int64_t effects = 0;
  std::int64_t audit = 0;
  // finished_at of the oldest and newest execution counted (0: none).
  Millis oldest_ended_at = 0;
  Millis newest_ended_at = 0;
  bool more = false;  // a kind had more than the batch: call again
};

// I6: an execution that ended failed, quarantined or partially_canceled
// (EndsWithFailureNotice) and whose notification is not decided yet. The
// store writes one in the transaction of the ending, so none is ever lost.
struct NotifyPending {
  ExecutionId execution;
  JobName job;
  Millis ended_at = 0;  // the store's time of the ending
};

// I6: what the notifier remembers of one job: when its notifications went
// out (the rate limit's window) and the failures it suppressed since the last
// one that went out.
struct NotifyJobState {
  JobName job;
  std::vector<Millis> sent_at;  // ascending
  std::int64_t suppressed = 0;
  Millis suppressed_since = 0;  // ended_at of the oldest suppressed failure; 0 = none
};

struct NotifyOutbox {
  std::vector<NotifyPending> pending;  // oldest first (by execution id)
  std::vector<NotifyJobState> jobs;    // by job name
};

// One step of the notifier, written in one transaction.
struct NotifyOutboxUpdate {
  std::vector<NotifyPending> done;   // decided: removed from the outbox
  std::vector<NotifyJobState> jobs;  // replaced; a state with no sent_at and nothing
                                     // suppressed is deleted
};

// Which tenants a read covers (X2).
struct TenantScope {
  // nullopt: every tenant and the global jobs. Otherwise only these tenants
  // (empty: none; an empty TenantId stands for the global jobs).
  std::optional<std::vector<TenantId>> tenants;

  // True when the executions of `tenant` ("" = global jobs) are in scope.
  bool Covers(std::string_view tenant) const;
};

// The most executions a page may skip (ExecutionFilter::offset).
inline constexpr int kMaxListOffset = 10'000;
// A total that needs counting rows stops at this many (total_is_lower_bound).
inline constexpr std::int64_t kListCountCap = 10'000;

// One search over executions (I1, seed 001's execution history): each given
// criterion narrows the result; the API and the CLI fill the same struct.
struct ExecutionFilter {
  std::optional<JobName> job;
  std::optional<TenantId> tenant;  // only this tenant ("" = the global jobs)
  // Only these tenants (a tenant-bound caller's grants); nullopt = any. With
  // `tenant` too: `tenant` when it is one of them, else nothing.
  std::optional<std::vector<TenantId>> tenants;
  std::optional<ExecutionStatus> status;  // only this status
  std::vector<ExecutionStatus> statuses;  // any of these (with `status`: any of both)
  std::vector<Trigger> triggers;          // any of these; empty = any
  Millis queued_from = 0;                 // inclusive; 0 = unbounded
  Millis queued_to = 0;                   // exclusive; 0 = unbounded
  Millis ended_from = 0;  // inclusive; with ended_to, only executions that ended (finished_at)
  Millis ended_to = 0;    // exclusive; 0 = unbounded
  // Cursor pagination: only executions with id < before (0 = from the newest).
  ExecutionId before;
  // Page-number pagination: skips this many matches first (0..kMaxListOffset).
  int offset = 0;
  int limit = 50;  // 1..1000
  // Also count every match (ignoring before, offset and limit): ExecutionPage::total.
  bool with_total = false;
};

struct ExecutionPage {
  std::vector<Execution> items;  // newest first (descending id)
  ExecutionId next_before;       // pass as `before` for the next page; 0 = no more
  // with_total: the number of matches; exact from the status counters when
  // the filter has only tenant and status criteria, otherwise counted up to
  // kListCountCap (total_is_lower_bound when it stopped there). -1 without.
  std::int64_t total = -1;
  bool total_is_lower_bound = false;
};

struct QueueDepth {
  std::string queue;
  std::int64_t queued = 0;  // queued, due or not
  std::int64_t due = 0;     // queued with run_at <= now
  std::int64_t running = 0;
  Millis oldest_queued_at = 0;  // queued_at of the oldest queued execution; 0 = none
};

// Who performs an operator action and why (X4). Written to the audit log in
// the same transaction as the action.
struct OperatorAction {
  std::string actor;   // required: a user, token or "cli:<unix user>"
  std::string reason;  // required for replays; optional otherwise
};

// One line of the append-only audit log.
struct AuditRecord {
  std::int64_t id = 0;
  Millis at = 0;
  std::string actor;
  std::string tenant;       // the tenant of the target; empty for global targets
  std::string action;       // e.g. "execution.cancel", "execution.replay", "job.update"
  std::string target;       // e.g. "execution:42", "job:resize"
  std::string before_json;  // state before (JSON object), may be empty
  std::string after_json;   // state after (JSON object), may be empty
  std::string reason;
};

// One edit of a job definition (Store::ChangeJob).
struct JobChange {
  enum class Kind { kCreate, kReplace, kDelete };
  Kind kind = Kind::kReplace;
  JobDefinition job;  // kDelete reads only the name
  // kReplace, kDelete: the updated_at the caller read; 0 = whatever it is now.
  Millis expected_updated_at = 0;
  // Appended in the same transaction (its `at` is now when 0). None = no record.
  std::optional<AuditRecord> audit;
};

struct AuditFilter {
  std::string target;          // exact target; empty = any
  std::int64_t before_id = 0;  // cursor: only records with id < before_id; 0 = newest
  int limit = 50;              // 1..1000
};

struct ReplayRequest {
  ExecutionId id;
  OperatorAction action;
  bool require_approval = false;  // four-eyes: record a pending replay instead
  AmbiguousResolution ambiguous = AmbiguousResolution::kKeep;
};

struct ReplayReply {
  ReplayOutcome outcome = ReplayOutcome::kReplayed;
  ExecutionStatus status = ExecutionStatus::kQueued;
};

struct EffectReply {
  EffectAnswer answer = EffectAnswer::kProceed;
  std::string key;
  std::string detail;       // kAlreadyDone: the recorded detail
  Millis committed_at = 0;  // kAlreadyDone: when it was committed
};

// O1: the state of one lane. A lane belongs to a tenant: it is (tenant, lane
// key), so executions of different tenants never share one.
struct LaneStatus {
  TenantId tenant;  // empty for the lanes of global jobs
  std::string lane;
  ExecutionId head;  // the oldest execution that is not done (0 = none)
  ExecutionStatus head_status = ExecutionStatus::kQueued;
  bool blocked = false;  // the head is failed or quarantined: the lane waits for an operator
  std::int64_t queued = 0;
  std::int64_t running = 0;
};

struct LaneFilter {
  std::optional<TenantId> tenant;  // only this tenant's lanes; nullopt = every tenant's
  int limit = 100;                 // 1..1000
};

// One scheduler cycle's decision for one job (T3, T4).
struct ScheduleUpdate {
  JobName job;
  Millis last_fire_at = 0;     // new value (kept when 0)
  Millis evaluated_until = 0;  // fires up to here are decided
  std::int64_t skipped = 0;    // fires skipped in this cycle
  Millis last_skipped_at = 0;  // the latest of them (0 = none)
};

// Counters kept as executions change status (never a COUNT over history).
struct QueueStats {
  std::string queue;
  std::array<std::int64_t, kExecutionStatusCount> by_status{};  // indexed by ExecutionStatus
  Millis oldest_due_at = 0;  // run_at of the oldest due queued execution; 0 = none due
};

// The counters of one tenant (summed over its queues).
struct TenantStats {
  TenantId tenant;  // empty for the global jobs
  std::array<std::int64_t, kExecutionStatusCount> by_status{};
  std::array<std::int64_t, kExecutionStatusCount> ended_last_24h{};
};

struct StoreStats {
  std::vector<QueueStats> queues;  // by queue name
  std::array<std::int64_t, kExecutionStatusCount> totals{};
  // Executions that ended in the last 24 hours (by the hour), by final status.
  std::array<std::int64_t, kExecutionStatusCount> ended_last_24h{};
  // By tenant id (the global jobs, "", first); tenants without executions are absent.
  std::vector<TenantStats> tenants;
  // finished_at of the quarantined execution admitted first (an index seek,
  // so not always the earliest quarantined); 0 = none quarantined. Global
  // scope only.
  Millis oldest_quarantined_at = 0;
};

// Thread-safe: every method may be called from any thread.
class Store {
 public:
  virtual ~Store() = default;

  // --- schema (D4) ---
  // Applies pending migrations. Refuses (kUnavailable) a database whose schema
  // is newer than this binary knows, and changes nothing then.
  virtual Status Migrate() = 0;
  // The schema version of the database (0 = empty).
  virtual Result<int> SchemaVersion() = 0;
  // Lifecycle events (LifecycleKindOf): after each commit that changed
  // statuses, `observer` gets the events of those changes in order, on the
  // committing thread (keep it short). Nothing is reported for a
  // transaction that did not commit. Call once, before the store is shared
  // between threads; without an observer no event is collected.
  virtual void SetLifecycleObserver(
      std::function<void(std::vector<LifecycleEvent>&&)> observer) = 0;

  // A1: the payload limit of admissions that bypass the engine (PostgreSQL's
  // enqueue() called from SQL); the engine checks its own. Nothing to do for
  // a backend without such a path.
  virtual Status SetPayloadLimit(std::int64_t bytes) = 0;

  // --- job definitions ---
  // Inserts or replaces a definition by name; a replacement keeps created_at
  // and sets updated_at to now. kInvalidArgument for bad names.
  virtual Status UpsertJob(const JobDefinition& job) = 0;
  // Writes one change of a definition and its audit record in ONE transaction
  // (X4: no edit without its record). Answers:
  //   kCreate:  kConflict when the name exists.
  //   kReplace: kNotFound when missing; keeps created_at; updated_at becomes
  //             max(now, previous + 1).
  //   kDelete:  kNotFound when missing; kConflict naming how many when the job
  //             has open (queued or running) executions, and nothing changes.
  //             Removes the job's schedule state; its executions keep their
  //             history.
  //   kReplace and kDelete with expected_updated_at != 0: kConflict when the
  //   row's updated_at is another (changed since the caller read it).
  // kInvalidArgument for a bad definition or audit record. Nothing is written
  // unless everything is.
  virtual Status ChangeJob(const JobChange& change) = 0;
  virtual Result<JobDefinition> GetJob(const JobName& name) = 0;
  virtual Result<std::vector<JobDefinition>> ListJobs() = 0;

  // --- admission (A1-A5) ---
  // Admits one execution, or returns the existing one / a conflict by
  // (job, tenant, idempotency key). kNotFound when the job is not defined.
  // The execution snapshots the job's queue, retry policy and lease duration.
  virtual Result<AdmitResult> Admit(const AdmitRequest& request) = 0;
  // Admits many in ONE transaction: all outcomes are decided together, and an
  // error (e.g. an undefined job) admits none. Results are in request order.
  virtual Result<std::vector<AdmitResult>> AdmitBatch(
      const std::vector<AdmitRequest>& requests) = 0;
  // AdmitBatch without a waiting thread: `done` receives exactly what
  // AdmitBatch would return, once, only after the transaction is durable (or
  // with the error; then nothing was admitted). It runs on a thread of the
  // store after the commit, or on the calling thread before this returns, so
  // it must be quick, must not block and must not wait for the store's writes.
  // Default: AdmitBatch on the calling thread, then `done`.
  using AdmitDone = std::function<void(Result<std::vector<AdmitResult>>)>;
  virtual void AdmitBatchAsync(std::vector<AdmitRequest> requests, AdmitDone done);

  // --- leasing (L1-L4) ---
  // Atomically moves up to the slots' maxima of due queued executions to
  // kRunning, leased to `worker` until now + the execution's lease duration,
  // oldest run_at first (then id). An execution with a lane key is claimed
  // only when no older execution of its lane (same tenant, same key) is
  // queued, running, failed or quarantined (O1: one at a time, in id order, a
  // failed head blocks; another tenant's lane of the same key never does). Each gets attempt+1 and
  // a new claim version. Returns an empty vector when nothing is due.
  virtual Result<std::vector<Lease>> Claim(const ClaimRequest& request) = 0;
  // How long until the next queued, un-parked execution of one of `queues`
  // is due, by the clock claims use (0 when one is due already); -1 when none
  // is queued, or the backend cannot tell. A claimer that found nothing
  // sleeps that long rather than a whole poll interval: a delayed execution
  // starts at its run_at, and one another node admitted by a clock a little
  // ahead of this node's is claimed once it is due here. Default: -1.
  virtual Result<Millis> NextDueIn(const std::vector<std::string>& queues);
  // L4: the handlers of these leases start now (claimed with mark_started =
  // false). One reply per lease, in request order, each independent: ok, or
  // kStale when the lease is not current (its handler must not start: the
  // execution was recovered or claimed again), kNotFound for a missing
  // execution. Durable against a process crash (not necessarily power loss)
  // before it returns, like Claim.
  virtual std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) = 0;
  // Extends the lease by its duration, optionally records progress (0..100),
  // and reports whether cancellation was requested (L3).
  Result<HeartbeatReply> Heartbeat(const LeaseRef& lease, std::optional<int> progress);
  // Many heartbeats in one transaction. Replies are in request order; each is
  // independent (a stale one does not affect the others).
  virtual std::vector<Result<HeartbeatReply>> HeartbeatBatch(
      const std::vector<HeartbeatRequest>& requests) = 0;
  // Appends a log line to the execution (kept with the attempt number).
  virtual Status AppendLog(const LeaseRef& lease, LogLevel level, std::string_view message) = 0;

  // Publishes success with an optional JSON result.
  Result<FinishReply> Complete(const LeaseRef& lease, std::string_view result_json);
  // Reports a failure; the state machine requeues with backoff, fails or
  // quarantines. `retry_after_ms` > 0 delays the retry at least that long.
  Result<FinishReply> Fail(const LeaseRef& lease, FailureClass failure_class,
                           std::string_view error, Millis retry_after_ms = 0);
  // Gives the execution back unrun (graceful shutdown): queued at once, the
  // attempt is not counted.
  Result<FinishReply> Release(const LeaseRef& lease);
  // Many finishes (complete, fail, release) in one transaction. Replies are in
  // request order; each is independent (a stale one does not affect the
  // others), but all share the commit: none is ok before it is durable.
  virtual std::vector<Result<FinishReply>> FinishBatch(
      const std::vector<FinishRequest>& requests) = 0;
  // FinishBatch without a waiting thread; `done` as for AdmitBatchAsync: the
  // replies FinishBatch would return, once, none ok before it is durable.
  // Default: FinishBatch on the calling thread, then `done`.
  using FinishDone = std::function<void(std::vector<Result<FinishReply>>)>;
  virtual void FinishBatchAsync(std::vector<FinishRequest> requests, FinishDone done);
  // True when AdmitBatchAsync and FinishBatchAsync return before the commit
  // (never wait for the store's writes on the calling thread): callers that
  // must not block, such as the network threads (api::Router::TryInline),
  // admit and finish only then. Default: false.
  virtual bool WritesWithoutWaiting() const { return false; }

  // Recovers up to `max_batch` executions whose lease expired strictly before
  // now (the staleness gate: never an in-flight one), deciding each with the
  // state machine: requeued with backoff, failed or quarantined (L4) — or,
  // when the lease's handler never started (MarkStarted), requeued at once
  // with its attempt given back and no expiry counted. Safe to call
  // concurrently from several threads or nodes.
  virtual Result<SweepReport> SweepExpired(int max_batch) = 0;

  // I7: removes in one transaction at most `max_rows` executions due under
  // `cutoffs` (oldest ended first) with everything that belongs to them, at
  // most `max_rows` log lines and at most `max_rows` audit records older than
  // their cutoffs; the status counters lose the removed executions, so stats
  // stay exact. `dry_run`: counts everything due (no batch limit) and removes
  // nothing. kInvalidArgument for max_rows outside 1..10000 or a negative
  // cutoff. Safe to call concurrently with every other method.
  virtual Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows,
                                    bool dry_run) = 0;
  // Gives space freed by deletions back to the file system, at most
  // `max_pages` database pages per call (1..1,000,000); returns the pages
  // given back (fewer than `max_pages`: nothing more to give). SQLite: an
  // incremental vacuum step (databases created with auto_vacuum =
  // INCREMENTAL; 0 for older files, which `taskengine db:vacuum` converts).
  // PostgreSQL: 0 (autovacuum makes freed space reusable).
  virtual Result<std::int64_t> ReclaimSpace(int max_pages) = 0;

  // --- failure notifications (I6) ---
  // The outbox: at most `max_pending` pending failures (1..10000, oldest
  // first) and every job's notifier state. kInvalidArgument for a bad limit.
  virtual Result<NotifyOutbox> ReadNotifyOutbox(int max_pending) = 0;
  // Removes the decided failures (those still there; one that ended again
  // since — a replay failing anew — stays) and writes the job states, in one
  // transaction.
  virtual Status UpdateNotifyOutbox(const NotifyOutboxUpdate& update) = 0;

  // --- effect ledger (E1-E3) ---
  // Before a side effect: reserves `name` for the current claim. Answers (see
  // EffectAnswer): kStale for a claim that is not current (nothing changes);
  // kAlreadyDone with the recorded detail for a committed effect; kCanceled
  // when cancellation was requested (no new effect starts); kAmbiguous when an
  // earlier claim reserved it and never committed; else kProceed (also when
  // this same claim reserved it before). kNotFound for a missing execution,
  // kInvalidArgument for a bad name. The reservation is durable before the
  // answer.
  virtual Result<EffectReply> ReserveEffect(const LeaseRef& lease, std::string_view name) = 0;
  // After the effect: records it as done with `detail`. Idempotent: committing
  // a committed effect keeps the first detail. kStale for a claim that is not
  // current; kConflict when it was never reserved.
  virtual Result<EffectRecord> CommitEffect(const LeaseRef& lease, std::string_view name,
                                            std::string_view detail) = 0;
  // Drops the current claim's unconfirmed reservation of `name` (the effect
  // certainly did not happen). No-op for a committed effect or one reserved
  // by another claim. kStale for a claim that is not current.
  virtual Status ReleaseEffect(const LeaseRef& lease, std::string_view name) = 0;
  // Every effect of the execution, by reservation time.
  virtual Result<std::vector<EffectRecord>> GetEffects(ExecutionId id) = 0;

  // --- operator actions (C1, R1, X4): each writes its audit record in the
  // same transaction; an illegal one changes nothing and writes no record ---
  // C1: a queued (or failed or quarantined) execution ends canceled at once —
  // partially_canceled if an effect had committed; a running one gets
  // cancel-requested and its worker learns at the next heartbeat, checkpoint
  // or effect reservation. Returns the status after the call.
  virtual Result<ExecutionStatus> RequestCancel(ExecutionId id, const OperatorAction& action) = 0;
  // R1: a failed or quarantined execution is queued again with the same id
  // and effect keys (committed effects are not repeated). With
  // require_approval, only a pending replay is recorded. kInvalidArgument
  // without actor or reason; kConflict for other statuses or when a replay is
  // already pending.
  virtual Result<ReplayReply> Replay(const ReplayRequest& request) = 0;
  // Four-eyes: performs the pending replay of `id`. kConflict when the
  // approver is the one who asked for the replay; kNotFound when none is pending.
  virtual Result<ReplayReply> ApproveReplay(ExecutionId id, const OperatorAction& approver) = 0;
  // Appends an audit record for an action taken outside the store.
  virtual Status AppendAudit(const AuditRecord& record) = 0;
  // Newest first.
  virtual Result<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter) = 0;

  // --- tenant grants (the authorization a replay rechecks, R1) ---
  // `tenant` "*" grants every tenant (global scope).
  virtual Status Grant(std::string_view principal, std::string_view tenant) = 0;
  virtual Status Revoke(std::string_view principal, std::string_view tenant) = 0;
  // True when `principal` holds a grant for `tenant` or for "*".
  virtual Result<bool> IsGranted(std::string_view principal, std::string_view tenant) = 0;

  // --- lanes (O1): a lane is (tenant, lane key) ---
  // The lane `lane` of `tenant` (empty: of global jobs); head 0 and counts 0
  // when it has no work that is not done.
  virtual Result<LaneStatus> GetLane(const TenantId& tenant, std::string_view lane) = 0;
  // Lanes with work that is not done (of filter.tenant only, when given),
  // blocked ones first, then by tenant and key; at most filter.limit.
  // kInvalidArgument when the limit is outside 1..1000.
  virtual Result<std::vector<LaneStatus>> ListLanes(const LaneFilter& filter) = 0;

  // --- tenants (product.md §1) ---
  // Inserts or updates a tenant by id. kInvalidArgument for a bad id.
  virtual Status UpsertTenant(const Tenant& tenant) = 0;
  virtual Result<Tenant> GetTenant(const TenantId& id) = 0;
  // By id; only active ones when `active_only`.
  virtual Result<std::vector<Tenant>> ListTenants(bool active_only) = 0;

  // --- scheduling (T3, T4) ---
  // Takes or renews the lock `name` for `holder` until now + ttl (it expires
  // at exactly that instant) when it is free, expired or already held by
  // `holder`. Returns whether `holder` holds
  // it now. Across nodes at most one holder at a time (up to clock skew on
  // SQLite, where all nodes share one file and one machine).
  virtual Result<bool> AcquireLock(std::string_view name, std::string_view holder,
                                   Millis ttl_ms) = 0;
  // Gives the lock up when `holder` holds it; otherwise a no-op.
  virtual Status ReleaseLock(std::string_view name, std::string_view holder) = 0;
  virtual Result<std::vector<ScheduleState>> ListScheduleStates() = 0;
  // One transaction: admits the cycle's executions (as AdmitBatch, keys make
  // a double fire impossible) and records each job's schedule state.
  virtual Result<std::vector<AdmitResult>> CommitSchedule(
      const std::vector<AdmitRequest>& admissions, const std::vector<ScheduleUpdate>& updates) = 0;

  // --- principals (X1): users, API tokens, dashboard sessions ---
  // Inserts or replaces a user by name. kInvalidArgument for a bad name.
  virtual Status UpsertUser(const User& user) = 0;
  virtual Result<User> GetUser(std::string_view name) = 0;
  virtual Result<std::vector<User>> ListUsers() = 0;
  // Stores a token (its secret_hash must be unique); returns its id.
  virtual Result<std::int64_t> CreateToken(const ApiToken& token) = 0;
  // The token whose secret hashes to `secret_hash`, revoked or expired ones
  // included (the caller decides); kNotFound otherwise.
  virtual Result<ApiToken> FindToken(std::string_view secret_hash) = 0;
  // Marks a token revoked (idempotent). kNotFound for an unknown id.
  virtual Status RevokeToken(std::int64_t id) = 0;
  virtual Result<std::vector<ApiToken>> ListTokens() = 0;
  // Records that a token was used now (best effort, not durable).
  virtual Status TouchToken(std::int64_t id) = 0;
  virtual Status CreateSession(const Session& session) = 0;
  virtual Result<Session> GetSession(std::string_view id_hash) = 0;
  // Sets last_seen_at to now (not durable).
  virtual Status TouchSession(std::string_view id_hash) = 0;
  // Logout: the session is gone server-side (idempotent).
  virtual Status DeleteSession(std::string_view id_hash) = 0;

  // --- workers (W5) ---
  // Inserts or updates a worker's registration and heartbeat (relaxed
  // durability: a lost heartbeat is harmless); last_heartbeat_at becomes now
  // and started_at, when 0, now. `processed` and `failed` are the worker's
  // own running totals; `current` keeps its first kMaxWorkerCurrent ids.
  // kInvalidArgument for an empty id, a kStale state or negative counts.
  virtual Status ReportWorker(const WorkerInfo& worker) = 0;
  // Workers seen within `seen_within_ms` (0 = all), by id, with the state
  // they reported (LiveState tells a reader which are stale).
  virtual Result<std::vector<WorkerInfo>> ListWorkers(Millis seen_within_ms) = 0;

  // --- wakeups (A3) ---
  // Registers `listener` (replacing any earlier one; empty = none) to be
  // called when another process or node may have made work due (admitted,
  // requeued, scheduled), so the engine can claim at once instead of at its
  // next poll. Best effort: it is called on a store thread, may fire when
  // nothing is due, and may miss work (a miss only delays pickup until the
  // engine's bounded poll). When this returns, no call of an earlier listener
  // is in progress or will start. The default (SQLite: one process) never
  // calls it.
  virtual void SetWorkListener(std::function<void()> listener) { (void)listener; }
  // Work made due by THIS store: after each commit that made work due now or
  // later (an admission that is not parked, a requeue, the next execution of
  // a lane), `publisher` gets each queue it made work due in, once per queue
  // and commit, on the thread that committed (SQLite: its writer thread, before the callers of
  // the batch hear of the commit); it must not block and must not call into
  // the store. Nothing for a transaction that did not commit. The engine
  // wakes its own workers with it and hands it to its transport (D3). Best
  // effort by design: the work is in the database already (A3), so a call
  // dropped only delays pickup to the next poll. Call once, before the store
  // is shared between threads (empty = none).
  virtual void SetWorkPublisher(std::function<void(const std::string& queue)> publisher) {
    (void)publisher;
  }

  // --- claims at admission (P2) ---
  // An engine whose workers sit idle may take an execution in the very
  // transaction that admits it: then no claim transaction and no thread
  // hop stand between the admission's COMMIT and the handler's start. A
  // store that supports it (SQLite, whose writer thread runs every
  // admission) asks `claimer` for each execution it admits due now and not
  // parked; the others never call it. Call once, before the store is shared
  // between threads (nullptr = none); it must outlive the store's use of it.
  class AdmissionClaimer {
   public:
    // Called inside the admission's transaction. True reserves an idle
    // worker for an execution of `queue`: the store then claims it, marked
    // started, for worker(), and afterwards calls exactly one of Deliver
    // (the claim committed) or Unreserve (it did not, or the store could
    // not claim). None of the three may block or call into the store.
    virtual bool Reserve(const std::string& queue) = 0;
    virtual void Deliver(Lease lease) = 0;
    virtual void Unreserve(const std::string& queue) = 0;
    virtual WorkerId worker() const = 0;

   protected:
    ~AdmissionClaimer() = default;
  };
  virtual void SetAdmissionClaimer(AdmissionClaimer* claimer) { (void)claimer; }

  // --- reads ---
  virtual Result<Execution> GetExecution(ExecutionId id) = 0;
  // The attempts of `id` that ended without success (retried, expired,
  // released, failed, quarantined, canceled), oldest first.
  virtual Result<std::vector<AttemptRecord>> GetAttempts(ExecutionId id) = 0;
  // kInvalidArgument when filter.limit is outside 1..1000 or filter.offset
  // outside 0..kMaxListOffset (never clamped). Each combination of one job,
  // tenant or status with the other criteria is an index seek in id order
  // (several tenants or statuses: one seek each, merged).
  virtual Result<ExecutionPage> ListExecutions(const ExecutionFilter& filter) = 0;
  // The oldest `limit` log lines, oldest first. kNotFound for a missing execution.
  virtual Result<std::vector<LogEntry>> GetLogs(ExecutionId id, int limit) = 0;
  // Status counts per queue and per tenant, outcomes of the last 24 hours and
  // the oldest due execution per queue, from counters the store keeps per
  // (tenant, queue, status) and per (hour, tenant, status) in the same
  // transactions as the status changes: cost independent of history (P8).
  // A scope with tenants counts only theirs (queues, totals and outcomes
  // alike) and leaves oldest_due_at and oldest_quarantined_at 0 (no index
  // serves them per tenant).
  virtual Result<StoreStats> GetStats(const TenantScope& scope) = 0;
  Result<StoreStats> GetStats() { return GetStats(TenantScope{}); }
  // One row per queue that has queued or running executions of the scope's
  // tenants, by queue name. Counts `due` by scanning the queued executions.
  virtual Result<std::vector<QueueDepth>> QueueDepths(const TenantScope& scope) = 0;
  Result<std::vector<QueueDepth>> QueueDepths() { return QueueDepths(TenantScope{}); }
};

}  // namespace taskengine
