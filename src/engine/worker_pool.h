// WorkerPool: runs in-process handlers on leased executions.
//
// Threads (none per job):
//  - a claimer that claims batches per queue (priority order, per-queue
//    concurrency plus a bounded prefetch), woken in-process on admission and
//    polling at `poll_interval_ms` otherwise (A3);
//  - `worker_threads` workers that run handlers;
//  - a completer that publishes outcomes in batches (one transaction per
//    batch, so completions group-commit);
//  - a lease keeper that heartbeats every lease in hand at a third of its
//    duration, learns about cancellation, and stops heartbeating a handler
//    past its timeout (its lease then expires and the sweeper recovers it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

class HandlerRegistry;

struct WorkerPoolOptions {
  int worker_threads = 4;
  std::vector<QueueConfig> queues;  // at least one
  int claim_batch = 256;
  // Leases a queue may hold beyond its concurrency, waiting for a free
  // worker. Their leases are heartbeated like running ones. Default: 64.
  int prefetch = 64;
  // A queue whose jobs finish quickly holds up to ~100 ms of work (its
  // observed completion rate x 100 ms) beyond its concurrency, if that is
  // more than `prefetch`, but never more than this. 0 = prefetch is fixed.
  int max_prefetch = 2048;
  Millis poll_interval_ms = 1000;
  Millis shutdown_grace_ms = 10'000;
  std::string worker_id;
  // Called on the completer thread after each outcome the store recorded,
  // with the status it left the execution in (e.g. the engine observes
  // cancel latency). Must be cheap and must not block. May be empty.
  std::function<void(ExecutionId, ExecutionStatus)> on_published;
};

// Thread-safe.
class WorkerPool {
 public:
  WorkerPool(Store* store, Clock* clock, const HandlerRegistry* handlers,
             WorkerPoolOptions options);
  ~WorkerPool();

  Status Start();
  // New work may be due: claim now instead of at the next poll.
  void Wake();
  // Cancellation of `id` was requested in this process: a handler running it
  // here sees kCancelRequested at once instead of at its next heartbeat.
  void NotifyCancel(ExecutionId id);
  // Graceful shutdown (L6). Idempotent.
  void Stop();
  EngineStats stats() const;

 private:
  struct Task;
  class Context;
  struct QueueState {
    QueueConfig config;
    int limit = 0;     // concurrency
    int in_hand = 0;   // leased by this pool, not yet finished
    int running = 0;   // handlers running now
    std::deque<std::shared_ptr<Task>> ready;
    // Completion rate (per second, smoothed), measured by the claimer.
    std::int64_t done = 0;
    std::int64_t done_at_sample = 0;
    double rate = 0;
  };
  // How many leases queue `q` may hold now (concurrency + prefetch, the
  // prefetch grown with the queue's completion rate). Under mu_.
  int TargetInHand(const QueueState& q) const;
  // Updates each queue's completion rate. Under mu_.
  void SampleRates();

  void ClaimLoop();
  void WorkLoop();
  void CompleteLoop();
  void KeepLoop();
  void RunTask(const std::shared_ptr<Task>& task);
  void Finish(const std::shared_ptr<Task>& task, FinishRequest request);
  std::shared_ptr<Task> NextReady();  // REQUIRES: mu_ held
  Result<std::shared_ptr<const JobDefinition>> Definition(const JobName& job);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  const HandlerRegistry* const handlers_;
  const WorkerPoolOptions options_;

  std::mutex mu_;
  std::condition_variable claim_cv_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  // Protected by mu_.
  std::vector<QueueState> queues_;  // by priority, highest first
  std::unordered_map<std::string, int> queue_index_;
  std::unordered_map<std::int64_t, std::shared_ptr<Task>> in_hand_;
  std::chrono::steady_clock::time_point rate_sampled_at_{};
  bool wake_ = false;
  bool stop_claiming_ = false;
  bool stop_workers_ = false;
  bool started_ = false;
  bool stopped_ = false;

  std::mutex finish_mu_;
  std::condition_variable finish_cv_;
  // Protected by finish_mu_.
  std::vector<FinishRequest> finishes_;
  int finishes_in_flight_ = 0;
  bool stop_completer_ = false;

  std::mutex keep_mu_;
  std::condition_variable keep_cv_;
  bool stop_keeper_ = false;  // protected by keep_mu_

  std::mutex defs_mu_;
  std::unordered_map<std::string, std::shared_ptr<const JobDefinition>> defs_;  // by job name

  std::atomic<std::int64_t> claimed_{0}, succeeded_{0}, failed_{0}, stale_{0}, released_{0},
      published_{0};
  // Of failed_, by class; reservations answered already_done (EngineStats).
  std::atomic<std::int64_t> failed_retryable_{0}, failed_permanent_{0}, failed_ambiguous_{0},
      failed_unsupported_schema_{0}, effect_duplicates_{0};

  std::thread claimer_;
  std::thread completer_;
  std::thread keeper_;
  std::vector<std::thread> workers_;
};

// The handler registry (W1): names to code. Written before Start, read after.
class HandlerRegistry {
 public:
  Status Register(const std::string& name, Handler handler);
  // nullptr when no handler has that name.
  const Handler* Find(const std::string& name) const;

 private:
  std::unordered_map<std::string, Handler> handlers_;
};

}  // namespace taskengine
