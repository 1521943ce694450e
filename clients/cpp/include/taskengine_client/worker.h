// taskengine_client::Worker: a remote worker over the HTTP worker protocol
// (/api/v1/worker). It long-polls for leases, confirms to the server that
// their handlers start (L4: leases it never received then cost no attempt),
// runs a handler for each on a
// pool of `concurrency` threads, heartbeats every running lease in one batch
// every lease/3 (which also learns cancel requests and lost claims), and
// reports the outcome (complete, fail with a class, or release).
//
//   taskengine_client::Client client({.base_url = url, .token = token});
//   taskengine_client::Worker worker(&client, {.queues = {"default"}, .concurrency = 4},
//       [](taskengine_client::LeaseContext& ctx) {
//         auto effect = ctx.ReserveEffect("email");
//         ...
//         return taskengine_client::Outcome::Complete({{"sent", true}});
//       });
//   worker.Run();  // until Stop() (e.g. from a SIGTERM watcher) or max_jobs
//
// Server down or restarting: leasing retries with exponential backoff
// (reconnect_min..reconnect_max, with jitter), heartbeats are retried at the
// next tick, and finishing an execution is retried until it is accepted, the
// claim is found stale (the server recovered it: nothing to do), or
// finish_retry_for passes. A worker never exits because the server is away.
// 401/403 on lease (bad or tenant-bound token) ends Run with that error.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "taskengine_client/client.h"

namespace taskengine_client {

// What a heartbeat or checkpoint learned about a lease.
enum class LeaseState {
  kActive,           // keep going
  kCancelRequested,  // stop: cancellation was requested; return Outcome::Canceled()
  kLost,             // stop: the claim is no longer current; nothing will be published
};

// How a handler run ended.
struct Outcome {
  enum class Kind { kComplete, kFail, kRelease };
  Kind kind = Kind::kComplete;
  std::optional<Json> result;               // kComplete
  std::string failure_class = "retryable";  // kFail: retryable | permanent | ambiguous
  std::string error;                        // kFail
  std::int64_t retry_after_ms = 0;          // kFail

  static Outcome Complete(std::optional<Json> result = std::nullopt) {
    Outcome o;
    o.result = std::move(result);
    return o;
  }
  static Outcome Fail(std::string failure_class, std::string error,
                      std::int64_t retry_after_ms = 0) {
    Outcome o;
    o.kind = Kind::kFail;
    o.failure_class = std::move(failure_class);
    o.error = std::move(error);
    o.retry_after_ms = retry_after_ms;
    return o;
  }
  static Outcome Retryable(std::string error, std::int64_t retry_after_ms = 0) {
    return Fail("retryable", std::move(error), retry_after_ms);
  }
  static Outcome Permanent(std::string error) { return Fail("permanent", std::move(error)); }
  static Outcome Ambiguous(std::string error) { return Fail("ambiguous", std::move(error)); }
  // Gives the execution back unrun.
  static Outcome Release() {
    Outcome o;
    o.kind = Kind::kRelease;
    return o;
  }
  // The handler stopped at a cancellation point: released while cancel is
  // requested, which the server ends as canceled.
  static Outcome Canceled() { return Release(); }
};

// The handler's window on one leased execution; valid during the handler call.
// Thread-safe.
class LeaseContext {
 public:
  LeaseContext(Client* client, Lease lease) : client_(client), lease_(std::move(lease)) {}

  const Lease& lease() const { return lease_; }
  const std::string& id() const { return lease_.id; }
  std::int64_t claim_version() const { return lease_.claim_version; }
  const Json& payload() const { return lease_.payload; }

  // Records progress (clamped to 0..100); sent with the next batch heartbeat.
  void SetProgress(int percent);
  // Appends a log line (debug|info|warn|error). Errors (e.g. a lost claim) are ignored.
  void Log(const std::string& level, const std::string& message);
  // Heartbeats this lease now (extends it, sends progress) and returns its state.
  // A transport error leaves the state as it was.
  LeaseState Heartbeat();
  // The state learned at the last heartbeat (no network).
  LeaseState Checkpoint() const;

  // The effect ledger: see the API. A stale claim answers Status stale.
  Result<EffectReservation> ReserveEffect(const std::string& name);
  Status CommitEffect(const std::string& name, const std::string& detail);
  Status ReleaseEffect(const std::string& name);

  // --- used by Worker ---
  // Applies a heartbeat answer for this lease.
  void Apply(const HeartbeatResult& result);
  // The progress to send, if it changed since the last call.
  std::optional<int> TakeProgress();

 private:
  Client* const client_;
  const Lease lease_;
  std::atomic<int> progress_{-1};
  std::atomic<int> sent_progress_{-1};
  std::atomic<bool> cancel_requested_{false};
  std::atomic<bool> lost_{false};
};

using WorkerHandler = std::function<Outcome(LeaseContext&)>;

struct WorkerOptions {
  // Queues in priority order (1..32). Default: {"default"}.
  std::vector<std::string> queues{"default"};
  // The handler names this worker runs (1..64, e.g. {"command"}): the server
  // leases only executions whose job's handler is one of them, and leaves the
  // others queued for a worker that can run them. Empty = any handler (the
  // handler function then receives every job of its queues). Default: empty.
  std::vector<std::string> handlers;
  // Handler threads, and the most leases held at once. Default: 4.
  int concurrency = 4;
  // Unique per process. Default: "<hostname>:<pid>".
  std::string worker_id;
  std::string name;
  std::string version = "taskengine-cpp-sdk/0.1";
  // The lease long-poll wait. Default: 30 s (the server's maximum).
  std::chrono::milliseconds poll_wait{30'000};
  // After this many leased executions, stop leasing, finish them and return
  // from Run (memory hygiene). 0 = unlimited. Default: 0.
  std::int64_t max_jobs = 0;
  // Heartbeat interval when no lease told one (registration refresh).
  // Default: 10 s. With leases held it is min(lease_ms)/3.
  std::chrono::milliseconds idle_heartbeat{10'000};
  // Backoff when the server cannot be reached. Defaults: 100 ms .. 5 s.
  std::chrono::milliseconds reconnect_min{100};
  std::chrono::milliseconds reconnect_max{5'000};
  // How long a finish (complete/fail/release) is retried while the server is
  // away before it is given up (the lease then expires and the sweeper
  // requeues the execution). Default: 5 min.
  std::chrono::milliseconds finish_retry_for{300'000};
  // Diagnostics (one line each). Default: stderr.
  std::function<void(const std::string&)> logger;
};

struct WorkerStats {
  std::int64_t leased = 0;
  std::int64_t completed = 0;   // finished with complete
  std::int64_t failed = 0;      // finished with fail
  std::int64_t released = 0;    // finished with release (incl. unstarted ones at stop)
  std::int64_t lost = 0;        // claims found stale / gone; nothing published
  std::int64_t reconnects = 0;  // lease calls that failed for the transport
};

// Thread-safe: Stop() and stats() may be called from any thread while Run runs.
class Worker {
 public:
  // `client` is not owned and must outlive the worker.
  Worker(Client* client, WorkerOptions options, WorkerHandler handler);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs until Stop() or max_jobs: leases, runs, heartbeats, finishes. On
  // return every leased execution was finished or released (or its claim
  // lost). Returns ok, or the error that made it give up (401/403 on lease).
  // REQUIRES: called once.
  Status Run();

  // Graceful stop: no more leasing; leases not started yet are released; Run
  // returns once running handlers finished and were reported. Async-signal-
  // unsafe; call it from a normal thread. Idempotent.
  void Stop();

  WorkerStats stats() const;
  const std::string& worker_id() const { return options_.worker_id; }

 private:
  void HandlerLoop();
  void HeartbeatLoop();
  // L4: tells the server the handlers of `leases` (leased with confirm_start)
  // start now; keeps only those it confirmed (the others are counted lost).
  void ConfirmStarts(std::vector<Lease>* leases);
  void RunOne(const std::shared_ptr<LeaseContext>& context);
  void Report(const std::shared_ptr<LeaseContext>& context, const Outcome& outcome);
  void Log(const std::string& line);
  // Sleeps up to `d`, returning early (true) when stopping.
  bool SleepUnlessStopping(std::chrono::milliseconds d);

  Client* const client_;
  WorkerOptions options_;
  const WorkerHandler handler_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> abort_poll_{false};

  mutable std::mutex mu_;
  std::condition_variable cv_;  // work queued, slot freed, stopping
  // Protected by mu_:
  std::deque<std::shared_ptr<LeaseContext>> queue_;  // leased, not started
  // Leased, not yet reported, by (execution id, claim version): after a stall
  // the same execution may be leased again while its stale lease still runs.
  std::map<std::pair<std::string, std::int64_t>, std::shared_ptr<LeaseContext>> held_;
  bool leasing_done_ = false;  // Run's lease loop ended: handler threads exit when idle
  bool heartbeat_done_ = false;
  bool new_lease_ = false;  // wakes the heartbeat thread to recompute its interval
  WorkerStats stats_;
};

}  // namespace taskengine_client
