// libtaskengine: embed the engine in a C++ application.
//
//   auto engine = taskengine::Engine::Open({.database_path = "jobs.db"});
//   engine.value()->DefineJob(def);
//   engine.value()->RegisterHandler("resize", [](taskengine::JobContext& ctx) { ... });
//   engine.value()->Start();
//   engine.value()->Dispatch({.job = JobName("resize"), .payload_json = R"({"id":7})"});
//   ...
//   engine.value()->Stop();
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "taskengine/clock.h"
#include "taskengine/job.h"
#include "taskengine/lifecycle.h"
#include "taskengine/random.h"
#include "taskengine/status.h"
#include "taskengine/transport_stats.h"
#include "taskengine/types.h"

namespace taskengine {

// Decides whether a principal may still act for a tenant. A replay rechecks
// the original requester of the execution with it (R1). Thread-safe.
class Authorizer {
 public:
  virtual ~Authorizer() = default;
  // `tenant` is empty for global executions (then global scope is needed).
  virtual Result<bool> MayAccess(std::string_view principal, const TenantId& tenant) = 0;
};

struct QueueConfig {
  std::string name = "default";
  int priority = 0;     // higher is claimed first
  int concurrency = 0;  // executions of this queue running at once in this engine; 0 = all workers
  // false: this engine's worker pool never claims from the queue; its work
  // is left to remote workers (worker:start) or other processes.
  bool pool = true;
};

// The payload limit (A1): its default and the range EngineOptions and the
// configuration accept.
inline constexpr std::size_t kDefaultMaxPayloadBytes = 256 * 1024;
inline constexpr std::size_t kMinPayloadLimit = 1024;
inline constexpr std::size_t kMaxPayloadLimit = 16 * 1024 * 1024;

// Every setting of an engine, declared here once with its default: `serve`'s
// configuration (ServerConfig) is these options plus its own, read from the
// file, and the worker pool takes its settings from here.
struct EngineOptions {
  // SQLite database file; ":memory:" is not supported (readers need the file).
  // Ignored when database_url is set. Default: ./data/taskengine.db.
  std::string database_path = "./data/taskengine.db";
  // PostgreSQL (D2): a postgres:// or postgresql:// URL (libpq syntax) selects
  // the PostgreSQL backend; several engines on one database share the work.
  // Empty = SQLite at database_path.
  std::string database_url;
  // PostgreSQL: the schema holding the engine's tables. Default (and when
  // empty): "taskengine".
  std::string database_schema = "taskengine";
  // D3: a redis:// URL (redis://[[user]:password@]host[:port][/db]) turns on
  // the Redis transport: a commit on one node that makes work due wakes the
  // engines of every node within milliseconds (their claims still go to the
  // database, which stays the authority; without Redis, or while it is down,
  // other nodes find the work at their next poll). Empty = none.
  std::string redis_url;
  // The prefix of the transport's Redis keys: engines that share a database
  // share it; deployments that share one Redis must not. 1..64 characters of
  // A-Z a-z 0-9 _ . : -. Default: "taskengine".
  std::string redis_prefix = "taskengine";
  SyncMode sync = SyncMode::kFull;
  // Apply schema migrations on Open. Default: true.
  bool migrate = true;
  // Not owned; default: the system clock for SQLite, the database's clock
  // (a DatabaseClock owned by the engine) for PostgreSQL / a randomly seeded
  // source.
  Clock* clock = nullptr;
  RandomSource* random = nullptr;
  // Worker threads running in-process handlers. Default: 4. 0 = dispatch only.
  int worker_threads = 4;
  // Queues this engine works, in any order (priority decides). Default: "default".
  std::vector<QueueConfig> queues;
  // Upper bound on pickup delay when a wakeup is lost or work was admitted by
  // another process (A3). Default: 1 s.
  Millis poll_interval_ms = 1000;
  // How often the sweeper recovers expired leases (L4). Default: 1 s.
  Millis sweep_interval_ms = 1000;
  int sweep_batch = 500;
  // Most executions one claim may take. Default: 256.
  int claim_batch = 256;
  // Leases a queue may hold beyond its concurrency, waiting for a free worker
  // (their leases are heartbeated). Larger values raise throughput of short
  // jobs. Default: 64.
  int prefetch = 64;
  // A queue whose jobs finish quickly holds about 100 ms of work (its
  // observed completion rate x 100 ms) beyond its concurrency when that is
  // more than `prefetch`, up to this many leases. 0 keeps the prefetch
  // fixed. Default: 2048.
  int max_prefetch = 2048;
  // On Stop(): how long running handlers may finish before their leases are
  // released (L6). Default: 10 s.
  Millis shutdown_grace_ms = 10'000;
  // This engine's worker identity: its in-process pool claims and registers
  // (GET /api/v1/workers, kind "pool") under it. Default:
  // "<hostname>:<pid>:pool".
  std::string worker_id;
  // Run the sweeper in this engine. Default: true.
  bool run_sweeper = true;
  // Not owned. Default: the store's grants (tenant grants, "*" for global
  // scope); local operators ("cli:<user>"), the engine itself ("system:…")
  // and dispatches without a requester (the embedding application) act for
  // every tenant.
  Authorizer* authorizer = nullptr;
  // Four-eyes (R1): a replay is only recorded as pending until a second
  // operator approves it. Default: false.
  bool replay_requires_approval = false;
  // A1: the largest payload (bytes of its JSON text) a dispatch may carry,
  // kMinPayloadLimit..kMaxPayloadLimit. An engine that migrates the database
  // also makes it the limit of PostgreSQL's enqueue() from SQL. Default:
  // 256 KiB.
  std::size_t max_payload_bytes = kDefaultMaxPayloadBytes;
  // Lifecycle events (taskengine/lifecycle.h): admissions of this engine,
  // its pool's start and stop, and every status change its store commits
  // (this engine's workers, sweeper and operator actions). Called on the
  // thread that made the change, after the commit; must be cheap and must
  // not call into the engine. Default: none.
  std::function<void(const LifecycleEvent&)> lifecycle_listener;
};

struct ReplayOptions {
  std::string actor;   // the operator (required)
  std::string reason;  // why (required)
  AmbiguousResolution ambiguous = AmbiguousResolution::kKeep;
};

struct ReplayResult {
  ReplayOutcome outcome = ReplayOutcome::kReplayed;
  ExecutionStatus status = ExecutionStatus::kQueued;
};

// A dispatch (A1).
struct DispatchRequest {
  JobName job;
  TenantId tenant;                  // required for per-tenant jobs, refused for global ones
  std::string payload_json = "{}";  // a JSON object, at most max_payload_bytes
  std::string idempotency_key;      // empty = none
  std::string requester;            // who asked; part of the fingerprint
  Trigger trigger = Trigger::kApi;
  Millis delay_ms = 0;   // start no earlier than now + delay
  Millis run_at = 0;     // or at this time (wins over delay when set)
  std::string lane_key;  // O1: with the tenant, the lane; <= 200 bytes, no control
                         // characters (also when rendered from the lane template)
  ExecutionId parent;
  // The API token that asked (0: none): the admission confirms in its commit
  // that the token is neither revoked nor expired (kUnauthenticated and
  // nothing admitted otherwise).
  std::int64_t token_id = 0;
};

struct DispatchResult {
  ExecutionId id;
  bool created = true;  // false: an earlier dispatch with the same key and payload
  // Batch only: the key was used with a different payload; `id` names the
  // existing execution and nothing was created for this item.
  bool conflict = false;
  ExecutionStatus status = ExecutionStatus::kQueued;
};

// Counters of this engine since Start(): its worker pool, its sweeper and its
// cancels. Monotonic (never reset while the engine lives); a snapshot.
struct EngineStats {
  std::int64_t claimed = 0;    // executions claimed
  std::int64_t succeeded = 0;  // handler runs that returned success
  std::int64_t failed = 0;     // handler runs that returned a failure of any class
  // Of `failed`, by the class the pool reported. A payload whose schema
  // version the job does not accept (Q1) counts as unsupported_schema only
  // (it is published as a permanent failure).
  std::int64_t failed_retryable = 0;
  std::int64_t failed_permanent = 0;
  std::int64_t failed_ambiguous = 0;
  std::int64_t failed_unsupported_schema = 0;
  std::int64_t released = 0;   // leases given back (shutdown)
  std::int64_t stale = 0;      // outcomes or heartbeats rejected because the claim was stale
  std::int64_t published = 0;  // outcomes durably recorded by the store
  // Of `published`, successes the store recorded as succeeded (a success
  // reported after a cancel request ends canceled instead, C1).
  std::int64_t completed = 0;
  // Effect reservations of in-process handlers answered already_done (E1):
  // a side effect that was not done twice.
  std::int64_t effect_duplicates = 0;
  // Expired leases this engine's sweeper recovered (L4), whatever became of
  // the execution (requeued, failed or quarantined).
  std::int64_t lease_expirations = 0;

  // Cancel latency: for each Cancel() of this engine, the time by this
  // engine's clock from the request to the terminal status of the execution
  // as this engine observed it: at once when the cancel itself ended the
  // execution; else when this engine published its outcome (from its own
  // worker pool, or from remote workers through this node's API), or
  // when its sweep loop found it terminal (ended elsewhere, e.g. another
  // node). Cancels still pending after 24 h are dropped unobserved.
  // Upper bounds of the histogram's buckets, in milliseconds.
  static constexpr std::array<Millis, 10> kCancelLatencyBoundsMs = {
      10, 50, 100, 250, 500, 1'000, 2'500, 5'000, 10'000, 30'000};
  // Observations per bucket, NOT cumulative: [i] counts latencies in
  // (bound[i-1], bound[i]]; the last element counts those above every bound.
  std::array<std::int64_t, kCancelLatencyBoundsMs.size() + 1> cancel_latency_buckets{};
  std::int64_t cancel_latency_count = 0;
  Millis cancel_latency_sum_ms = 0;

  // The Redis transport (redis_url); enabled = false without one.
  TransportStats transport;
};

// Thread-safe.
class Engine {
 public:
  // Opens (and by default migrates) the database. Does not start workers.
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options);
  virtual ~Engine() = default;

  // Inserts or replaces a job definition in the database.
  virtual Status DefineJob(const JobDefinition& job) = 0;
  // Registers `handler` under `name` (W1). kConflict when the name is taken.
  // REQUIRES: before Start().
  virtual Status RegisterHandler(const std::string& name, Handler handler) = 0;

  // Admits one execution; ok only after it is durably committed (S3).
  // kConflict when the key was used with a different payload (nothing created),
  // kNotFound for an undefined job, kInvalidArgument for bad input.
  virtual Result<DispatchResult> Dispatch(const DispatchRequest& request) = 0;
  // Admits many in one transaction (A5). Invalid input (or an undefined job)
  // admits none; otherwise each item reports created, existing or conflict.
  virtual Result<std::vector<DispatchResult>> DispatchBatch(
      const std::vector<DispatchRequest>& requests) = 0;

  // Starts the worker pool and the sweeper.
  virtual Status Start() = 0;
  // Graceful shutdown (L6): stop claiming, let running handlers finish for up
  // to the grace period, then release the leases that remain. Idempotent.
  virtual void Stop() = 0;

  // C1: cancels a queued, failed or quarantined execution at once, or asks a
  // running one to stop. Audited with `actor`. Returns the status after.
  virtual Result<ExecutionStatus> Cancel(ExecutionId id, const std::string& actor,
                                         const std::string& reason) = 0;
  // R1: queues a failed or quarantined execution again with the same id and
  // effect keys, after rechecking that its original requester may still act
  // for its tenant (kInvalidArgument naming them if not). Pending when the
  // engine requires four-eyes approval.
  virtual Result<ReplayResult> Replay(ExecutionId id, const ReplayOptions& options) = 0;
  // Four-eyes: a second operator approves a pending replay.
  virtual Result<ReplayResult> ApproveReplay(ExecutionId id, const std::string& approver) = 0;

  // One sweep of expired leases (all batches). Returns how many were recovered.
  virtual Result<int> SweepOnce() = 0;

  virtual Result<Execution> GetExecution(ExecutionId id) = 0;
  // Registers `listener`, called after every commit of this engine that may
  // have made work due (admissions, replays, sweeps) — e.g. to complete
  // remote workers' long polls. Called on the committing thread: it must be
  // cheap and must not block. Listeners live as long as the engine.
  virtual void AddWorkListener(std::function<void()> listener) = 0;
  // Counters (see EngineStats; zero before Start). Thread-safe.
  virtual EngineStats stats() const = 0;
  // The clock this engine and its store decide time by (leases, backoff,
  // schedules): EngineOptions::clock, else the default described there. Lives
  // as long as the engine; give it to anything sharing the store (e.g. the
  // Scheduler). The default implementation answers the system clock.
  virtual Clock* clock();
};

}  // namespace taskengine
