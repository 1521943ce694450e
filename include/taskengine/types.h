// The domain vocabulary of taskengine: ids, statuses, job definitions and
// executions. The words here are the glossary of docs/architecture.md and are
// used unchanged in SQL tables, CLI verbs and (later) HTTP paths.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "taskengine/clock.h"

namespace taskengine {

// A strongly typed integer id. `Tag` makes ExecutionId and ClaimVersion
// distinct types that cannot be mixed up.
template <typename Tag>
struct IntId {
  std::int64_t value = 0;
  constexpr IntId() = default;
  constexpr explicit IntId(std::int64_t v) : value(v) {}
  friend constexpr auto operator<=>(IntId, IntId) = default;
};

// A strongly typed string id.
template <typename Tag>
struct StringId {
  std::string value;
  StringId() = default;
  explicit StringId(std::string v) : value(std::move(v)) {}
  bool empty() const { return value.empty(); }
  friend auto operator<=>(const StringId&, const StringId&) = default;
};

using ExecutionId = IntId<struct ExecutionIdTag>;
// The fencing token of a lease: bumped by every claim. Only the current claim
// version may heartbeat, log, commit effects or publish a result (L2).
using ClaimVersion = IntId<struct ClaimVersionTag>;
using JobName = StringId<struct JobNameTag>;
// Empty for executions of global jobs.
using TenantId = StringId<struct TenantIdTag>;
using WorkerId = StringId<struct WorkerIdTag>;

// S1. Every status is distinct everywhere: storage, API, CLI, UI.
enum class ExecutionStatus : int {
  kQueued = 0,  // waiting to run; run_at says whether it is delayed or backing off
  kRunning = 1,
  kSucceeded = 2,
  kFailed = 3,             // attempts exhausted
  kQuarantined = 4,        // poison or ambiguous: needs an operator
  kCanceled = 5,           // canceled before any effect escaped
  kPartiallyCanceled = 6,  // canceled after at least one effect had committed
};
inline constexpr int kExecutionStatusCount = 7;

// Q1.
enum class FailureClass : int {
  kNone = 0,
  kRetryable = 1,
  kPermanent = 2,
  kAmbiguous = 3,
  kLeaseExpired = 4,
};

enum class Trigger : int { kScheduled = 0, kManual = 1, kApi = 2, kRetry = 3, kReplay = 4 };

enum class JobScope : int { kGlobal = 0, kPerTenant = 1 };

// T4: what a scheduler does with fires it missed (within the catch-up window).
enum class CatchUpPolicy : int {
  kCoalesce = 0,  // one execution for all missed fires (the latest)
  kAll = 1,       // one execution per missed fire
  kNone = 2,      // skip them (counted)
};

std::string_view ToString(ExecutionStatus s);
std::string_view ToString(FailureClass c);
std::string_view ToString(Trigger t);
std::string_view ToString(JobScope s);
std::string_view ToString(CatchUpPolicy p);
std::optional<CatchUpPolicy> ParseCatchUpPolicy(std::string_view s);
// Parse the names above; nullopt for an unknown name.
std::optional<ExecutionStatus> ParseExecutionStatus(std::string_view s);
std::optional<FailureClass> ParseFailureClass(std::string_view s);
std::optional<Trigger> ParseTrigger(std::string_view s);
std::optional<JobScope> ParseJobScope(std::string_view s);
bool IsTerminal(ExecutionStatus s);

// Name rules of product.md §1.
bool IsValidJobName(std::string_view name);  // [a-z0-9][a-z0-9._-]{0,99}
// Names under "taskengine." belong to the server (its internal jobs): no
// definition of the file or the API may take one, and nobody dispatches one.
bool IsReservedJobName(std::string_view name);
// The queue "taskengine" (and names under "taskengine.") is the server's:
// no [[queue]] declares it and no remote worker leases from it.
bool IsReservedQueueName(std::string_view name);
bool IsValidTenantId(std::string_view tenant);  // [a-z0-9][a-z0-9_-]{0,49}
bool IsValidQueueName(std::string_view queue);  // same rule as job names
// Idempotency keys: 1..200 visible ASCII characters (0x21-0x7E; no spaces).
bool IsValidIdempotencyKey(std::string_view key);

// Retry policy of a job (L5, Q1). Defaults as the spec says.
struct RetryPolicy {
  int max_attempts = 5;            // retryable failures exhaust into kFailed
  Millis backoff_base_ms = 5'000;  // min(cap, base * 2^(attempt-1)) + up to 10% jitter
  Millis backoff_cap_ms = 3'600'000;
  int max_permanent_attempts = 1;  // permanent failures -> kQuarantined after this many
  // Permanent failures because the payload's schema version is not accepted:
  // -> kQuarantined after this many (a rolling deploy may bring a worker that
  // accepts it).
  int max_unsupported_schema_attempts = 3;
  int max_ambiguous_attempts = 1;          // ambiguous failures -> kQuarantined after this many
  int max_consecutive_lease_expiries = 3;  // poison: -> kQuarantined
};

// A named kind of work (product.md §1). Stored in the database; editable at
// runtime; may be seeded from taskengine.toml.
struct JobDefinition {
  JobName name;
  std::string display_name;
  std::string handler;  // a name in the handler registry (W1), e.g. "command"
  std::string queue = "default";
  JobScope scope = JobScope::kGlobal;
  std::string schedule;  // cron expression; empty = none
  std::string timezone = "UTC";
  Millis timeout_ms = 300'000;
  Millis lease_ms = 30'000;
  RetryPolicy retry;
  std::string lane_template;  // empty = none; e.g. "meeting:{meeting_id}"
  // Payload schema versions this job accepts (the payload's "schema_version",
  // 1 when absent). Empty = any. Others fail as permanent (Q1).
  std::vector<int> accepted_schema_versions;
  std::string config_json = "{}";  // handler configuration (JSON object)
  // T4: missed fires older than the window are skipped and counted. Default: 10 min.
  CatchUpPolicy catch_up = CatchUpPolicy::kCoalesce;
  Millis catch_up_window_ms = 600'000;
  // T5: when > 0, a per-tenant job claims windows of this length: one
  // execution per (tenant, window start), keyed "<job>:<tenant>:<window start>".
  Millis window_ms = 0;
  bool enabled = true;
  // I6: when an execution ends failed, quarantined or partially_canceled,
  // notify_targets are told (src/core/notify_target.h: "ops@example.com",
  // "webhook:NAME", "slack:NAME"); with none, the server's
  // [notifications] targets. false: no notification.
  bool notify_on_failure = true;
  std::vector<std::string> notify_targets;
  Millis created_at = 0;
  // Every write of the row makes it larger than before (a version for
  // compare-and-set edits: an edit names the updated_at it read).
  Millis updated_at = 0;
  // The digest (JobDefinitionDigest) of the definition the config file last
  // seeded into this row; empty when the file never seeded it (created at
  // runtime) or an older binary did. A row whose own digest differs was
  // edited at runtime, and seeding leaves it alone (product.md §1).
  std::string seed_digest;
};

// One run of a job (product.md §1). A snapshot read from the store.
struct Execution {
  ExecutionId id;
  JobName job;
  TenantId tenant;
  std::string queue;
  ExecutionStatus status = ExecutionStatus::kQueued;
  Trigger trigger = Trigger::kApi;
  std::string requester;
  WorkerId worker;
  int attempt = 0;  // number of claims that ran (a release gives one back)
  std::string idempotency_key;
  std::string payload_json = "{}";
  std::string fingerprint;  // hex SHA-256 of canonical payload + requester
  std::string result_json;  // empty unless succeeded with a result
  int progress = 0;
  std::string error;
  FailureClass failure_class = FailureClass::kNone;
  Millis scheduled_at = 0;  // scheduled fire time; 0 when not scheduled
  Millis run_at = 0;        // earliest start
  Millis queued_at = 0;
  Millis started_at = 0;
  Millis finished_at = 0;
  ClaimVersion claim_version;
  Millis lease_expires_at = 0;
  bool cancel_requested = false;
  std::string lane_key;
  ExecutionId parent;
  int consecutive_lease_expiries = 0;  // lease expiries in a row (poison detection, L4)
  int permanent_failures = 0;          // failures of class kPermanent so far (Q1)
  int ambiguous_failures = 0;          // failures of class kAmbiguous so far (Q1)
  RetryPolicy retry;                   // the job's policy, frozen at admission
  Millis lease_ms = 30'000;

  Millis DurationMillis() const {
    return started_at > 0 && finished_at >= started_at ? finished_at - started_at : 0;
  }
};

// E1: the answers of the effect ledger to "may I perform this effect now?".
enum class EffectAnswer : int {
  kProceed = 0,      // first time: perform the effect, then commit it
  kAlreadyDone = 1,  // committed earlier: skip it, reuse the recorded detail
  kAmbiguous = 2,    // reserved by an earlier claim that never confirmed: outcome unknown
  kStale = 3,        // this claim is not current: do nothing
  kCanceled = 4,     // cancellation was requested: start no new effect
};
std::string_view ToString(EffectAnswer a);

// A side effect of an execution as the ledger records it.
struct EffectRecord {
  ExecutionId execution;
  std::string name;
  std::string key;  // "<execution id>:<name>"
  bool committed = false;
  ClaimVersion reserved_by;  // the claim that reserved (or last re-reserved) it
  int attempt = 0;           // the attempt of that claim
  Millis reserved_at = 0;
  Millis committed_at = 0;  // 0 while only reserved
  std::string detail;       // what the worker recorded at commit (e.g. a message id)
};

// Effect names: 1..120 characters of [A-Za-z0-9._:-] (":" separates a revision).
bool IsValidEffectName(std::string_view name);
std::string EffectKey(ExecutionId id, std::string_view name);

// What to assume about effects an earlier claim reserved but never confirmed
// (E3), when an operator replays an execution quarantined as ambiguous.
enum class AmbiguousResolution {
  kKeep,           // leave them ambiguous: the replay meets `ambiguous` again
  kAssumeDone,     // the operator checked: they happened (committed, detail "assumed done")
  kAssumeNotDone,  // the operator checked: they did not happen (reservation dropped)
};

enum class ReplayOutcome { kReplayed, kPendingApproval };

// SQLite durability (documented in docs/operations.md):
// kFull survives power loss; kNormal survives process crashes only.
enum class SyncMode { kFull, kNormal };

// One earlier attempt of an execution that did not succeed (the current or
// final attempt is described by the execution itself).
struct AttemptRecord {
  ExecutionId execution;
  int attempt = 0;
  ClaimVersion claim_version;
  std::string worker;
  Millis started_at = 0;
  Millis ended_at = 0;
  ExecutionStatus outcome = ExecutionStatus::kQueued;  // the status the attempt led to
  FailureClass failure_class = FailureClass::kNone;
  bool released = false;  // given back unrun (shutdown), not counted
  std::string error;
};

// A store/customer (product.md §1). Per-tenant jobs fan out to active ones.
struct Tenant {
  TenantId id;
  std::string name;
  bool active = true;
  Millis created_at = 0;
};

// What the scheduler remembers per job between cycles (T3, T4).
struct ScheduleState {
  JobName job;
  Millis last_fire_at = 0;         // the latest fire time admitted (UTC ms); 0 = never
  Millis last_evaluated_at = 0;    // fires up to this instant have been decided
  std::int64_t skipped_fires = 0;  // fires skipped in total (outside the window, or policy none)
  Millis last_skipped_at = 0;      // the latest skipped fire time
};

// X1: who may call the API. Scopes: read, dispatch, operate, admin, worker.
// Tenants: the tenants a principal may see and touch; "*" = global scope.
struct User {
  std::string name;           // [a-z0-9][a-z0-9._@-]{0,99}
  std::string password_hash;  // Argon2id, libsodium's encoded form
  std::vector<std::string> scopes;
  std::vector<std::string> tenants;
  bool disabled = false;
  Millis created_at = 0;
};

// A bearer API token. Only a hash of its secret is stored; the secret is
// shown once at creation.
struct ApiToken {
  std::int64_t id = 0;
  std::string name;         // a label, e.g. "billing-worker"
  std::string secret_hash;  // hex SHA-256 of the secret
  std::string principal;    // the identity calls are made as (audited, requester)
  std::vector<std::string> scopes;
  std::vector<std::string> tenants;
  Millis created_at = 0;
  Millis expires_at = 0;  // 0 = never
  Millis revoked_at = 0;  // 0 = live
  Millis last_used_at = 0;
};

// A dashboard session. Only a hash of its id is stored.
struct Session {
  std::string id_hash;  // hex SHA-256 of the session id cookie
  std::string user;
  std::string csrf_token;
  Millis created_at = 0;
  Millis last_seen_at = 0;
  Millis expires_at = 0;  // absolute timeout
};

// W5: a worker that leases executions: the in-process pool of an engine
// (one per process, its threads counted in `threads`) or a remote worker
// process (the HTTP worker protocol).
// kStale is never stored: it is the state a reader sees for a worker, not
// stopped, whose last heartbeat is older than WorkerStaleAfterMs (LiveState).
enum class WorkerState : int { kIdle = 0, kBusy = 1, kStopped = 2, kStale = 3 };
std::string_view ToString(WorkerState s);
std::optional<WorkerState> ParseWorkerState(std::string_view s);

enum class WorkerKind : int { kRemote = 0, kPool = 1 };
std::string_view ToString(WorkerKind k);

struct WorkerInfo {
  WorkerId id;
  WorkerKind kind = WorkerKind::kRemote;
  std::string hostname;
  std::int64_t pid = 0;
  WorkerState state = WorkerState::kIdle;  // as reported: idle, busy or stopped
  int threads = 0;                         // handler threads (pool) or concurrency; 0 = unknown
  int busy = 0;                            // executions running now
  std::vector<ExecutionId> current;        // executions in hand (at most kMaxWorkerCurrent)
  std::int64_t processed = 0;              // executions finished by this worker
  std::int64_t failed = 0;                 // of which failed
  Millis started_at = 0;
  Millis last_heartbeat_at = 0;
};

// Most executions a worker row lists in `current` (busy counts them all).
inline constexpr std::size_t kMaxWorkerCurrent = 100;
// How often a pool reports (WorkerPoolOptions), and the heartbeat a remote
// worker of the C++ SDK sends when idle (WorkerOptions::idle_heartbeat).
inline constexpr Millis kPoolReportIntervalMs = 1'000;
inline constexpr Millis kRemoteIdleHeartbeatMs = 10'000;
// A worker is stale after missing about three reports: 5 s for a pool,
// 35 s for a remote worker.
Millis WorkerStaleAfterMs(WorkerKind kind);
// The state to show at `now`: kStale for a worker that is not stopped and
// has not reported for WorkerStaleAfterMs(kind), else w.state.
WorkerState LiveState(const WorkerInfo& w, Millis now);

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
std::string_view ToString(LogLevel l);
std::optional<LogLevel> ParseLogLevel(std::string_view s);

struct LogEntry {
  ExecutionId execution;
  int attempt = 0;
  Millis at = 0;
  LogLevel level = LogLevel::kInfo;
  std::string message;
};

}  // namespace taskengine
