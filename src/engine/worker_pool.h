// WorkerPool: runs in-process handlers on leased executions.
//
// Threads (none per job):
//  - a claimer that claims batches per queue (priority order, per-queue
//    concurrency plus a bounded prefetch), woken in-process on admission and
//    polling at `poll_interval_ms` otherwise (A3), or sooner when the store
//    says the next queued execution is due before that (Store::NextDueIn:
//    delayed work starts at its run_at). When a worker is parked
//    (nothing to run), an admission's Wake goes to that worker instead: it
//    claims for itself one lease per queue that may start one (ClaimDirect),
//    marked started in the same transaction, and runs it, so an idle pool's
//    pickup is one writer transaction and four thread wakeups after the
//    admission's commit (P2); the claimer then claims whatever else is due.
//    Faster still, on a store that claims at admission (SQLite,
//    Store::AdmissionClaimer): a parked worker is reserved while the
//    admission's transaction runs, the execution is claimed for it, marked
//    started, in that transaction, and the lease reaches it right after the
//    COMMIT: one thread wakeup and no claim transaction;
//  - `worker_threads` workers that run handlers. A lease is marked started
//    in the store before its handler runs (L4): for slow jobs by the worker
//    that takes it (Store::MarkStarted), one at a time; a fast queue's work
//    is claimed marked (QueueSlot::mark_started), about 5 ms of it ahead of
//    its idle workers, refilled when half is used: its workers never wait for
//    a mark and its rows are not written a third time for one. The expiry of
//    a prefetched lease whose handler never started is a free requeue;
//  - a completer that publishes outcomes in batches (one transaction per
//    batch, so completions group-commit);
//  - a lease keeper that heartbeats every lease in hand at a third of its
//    duration, learns about cancellation, and stops heartbeating a handler
//    past its timeout (its lease then expires and the sweeper recovers it).
//    It also registers the pool as a worker (W5, Store::ReportWorker, kind
//    kPool): at Start, every `report_interval_ms`, and as stopped at the end
//    of Stop, so GET /api/v1/workers of every node shows it.
// Leases are tracked by (execution, claim version): a lease found stale (a
// heartbeat or mark answered kStale, or the same execution claimed again
// after a stall) is dropped at once, unstarted, or its handler learns the
// claim is lost.
//
// Time: lease and heartbeat times are the Clock's NowMillis(); the completion
// rates that size a fast queue's prefetch are sampled by its Steady(). The
// threads' sleeps (poll interval, the keeper's 50 ms tick, the shutdown
// grace) are real time (std::chrono::steady_clock): they bound how long a
// thread blocks, and a FakeClock must not stretch or end them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

class HandlerRegistry;

// The engine's options (the pool reads worker_threads, queues, claim_batch,
// prefetch, max_prefetch, poll_interval_ms, shutdown_grace_ms and worker_id;
// `queues` are those the pool claims from, at least one) and the pool's own.
struct WorkerPoolOptions : EngineOptions {
  // What the pool's worker registration says about its process.
  std::string hostname;
  std::int64_t pid = 0;
  // How often the pool reports its registration (a heartbeat). Readers show
  // it stale after WorkerStaleAfterMs(kPool). Default: kPoolReportIntervalMs.
  Millis report_interval_ms = kPoolReportIntervalMs;
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

  Status Start() EXCLUDES(mu_);
  // New work may be due: claim now instead of at the next poll.
  void Wake() EXCLUDES(mu_);
  // New work is due in `queue`: Wake() when this pool claims from it.
  void Wake(const std::string& queue) EXCLUDES(mu_);
  // Cancellation of `id` was requested in this process: a handler running it
  // here sees kCancelRequested at once instead of at its next heartbeat.
  void NotifyCancel(ExecutionId id) EXCLUDES(mu_);
  // Graceful shutdown (L6). Idempotent.
  void Stop() EXCLUDES(mu_, finish_mu_, keep_mu_);
  // Claims at admission (Store::AdmissionClaimer, which the engine forwards
  // here; called on the store's writer thread). Reserve: true reserves a
  // parked worker for an execution of `queue` admitted now, when the queue
  // may start one more. Deliver: the claim committed; the lease, marked
  // started, goes to a worker at once. Unreserve: it did not commit.
  bool ReserveForAdmission(const std::string& queue) EXCLUDES(mu_);
  void DeliverAdmitted(Lease lease) EXCLUDES(mu_, finish_mu_);
  void UnreserveAdmission(const std::string& queue) EXCLUDES(mu_);
  EngineStats stats() const;

 private:
  struct Task;
  class Context;
  struct QueueState {
    QueueConfig config;
    int limit = 0;     // concurrency
    int in_hand = 0;   // leased by this pool, not yet finished
    int running = 0;   // handlers running now (or being marked started)
    int reserved = 0;  // claims at admission on their way (ReserveForAdmission)
    // Leases waiting for a worker; those marked started (MarkStarted) first.
    std::deque<std::shared_ptr<Task>> ready;
    std::size_t marked_ready = 0;  // how many at the front of `ready` are marked
    bool refilling = false;        // a worker is marking more of them
    // Completion rate (per second, smoothed), measured by the claimer.
    std::int64_t done = 0;
    std::int64_t done_at_sample = 0;
    double rate = 0;
    bool rate_known = false;
  };
  // How many leases queue `q` may hold now (concurrency + prefetch, the
  // prefetch sized by the queue's completion rate).
  int TargetInHand(const QueueState& q) const REQUIRES(mu_);
  // Whether `q` may start one more lease now: a handler slot free and room
  // in hand, counting the claims at admission on their way. The one rule of
  // a parked worker's own claim (ClaimDirect) and of a claim at admission
  // (ReserveForAdmission).
  bool MayStartOneMore(const QueueState& q) const REQUIRES(mu_);
  // How many leases of `q` are marked started at once (>= 1).
  int MarkBatch(const QueueState& q) const REQUIRES(mu_);
  // Marks `task` (marked started in the store) and puts it in `q`'s ready
  // list after the marked leases, before the unmarked ones.
  void EnqueueMarked(QueueState& q, std::shared_ptr<Task> task) REQUIRES(mu_);
  // Moves up to `n` unmarked leases (those after the marked ones) out of
  // `q`'s ready list to the end of `out`.
  void TakeUnmarked(QueueState& q, int n, std::vector<std::shared_ptr<Task>>* out) REQUIRES(mu_);
  // For a fast queue: marks the next unmarked leases of `q` (claimed before
  // it was fast; the claimer marks its later ones in the claim) started when
  // fewer than half a batch wait marked, so its workers do not wait for
  // marks. Releases mu_ during the store call.
  void RefillMarked(QueueState& q) REQUIRES(mu_);
  // Updates each queue's completion rate.
  void SampleRates() REQUIRES(mu_);
  // Whether a handler runs (or is being marked started) in any queue.
  bool AnyRunning() const REQUIRES(mu_);
  // Forgets `task`, a lease found stale before its handler started: out of
  // its queue's ready list and of in_hand_.
  void DropUnstarted(const std::shared_ptr<Task>& task) REQUIRES(mu_);
  // Removes `task` (this very lease) from in_hand_.
  void EraseInHand(const std::shared_ptr<Task>& task) REQUIRES(mu_);
  // Marks `batch` (taken out of one queue's ready list) started in the store.
  // With `first_is_mine` the first is the calling worker's own task; the
  // others go back to the ready list after its marked leases, marked. Drops
  // stale leases; gives back (releases) leases the store could not mark, and
  // the others when stopping. Returns the worker's task when it may run,
  // else nullptr. Releases mu_ during the store calls.
  std::shared_ptr<Task> MarkStarted(const std::vector<std::shared_ptr<Task>>& batch,
                                    bool first_is_mine) REQUIRES(mu_);

  // Makes `lease`, just claimed, a task in hand (in_hand_ and its queue's
  // count; not in a ready list), dropping an older lease of its execution.
  std::shared_ptr<Task> TakeLease(Lease lease) REQUIRES(mu_);
  // For a worker that Wake woke: claims, marked started, one lease for it and
  // one for each other parked worker; returns the calling worker's (the
  // others wait marked in their ready lists), or nullptr when nothing was
  // due. Wakes the claimer when more may be due. Releases mu_ during the
  // store call.
  std::shared_ptr<Task> ClaimDirect() REQUIRES(mu_);
  // Wake, for new work in *queue (nullptr: in any queue).
  void WakeFor(const std::string* queue) EXCLUDES(mu_);
  // Gives `tasks` (in hand, unstarted, out of every ready list) back to the
  // store (released) and wakes the claimer. Releases mu_ around each Finish.
  void GiveBack(const std::vector<std::shared_ptr<Task>>& tasks) REQUIRES(mu_);

  void ClaimLoop() EXCLUDES(mu_);
  void WorkLoop() EXCLUDES(mu_);
  void CompleteLoop() EXCLUDES(finish_mu_);
  void KeepLoop() EXCLUDES(keep_mu_, mu_);
  void RunTask(const std::shared_ptr<Task>& task) EXCLUDES(mu_);
  // The pool's worker registration now; `stopped` after Stop. Takes mu_.
  WorkerInfo Registration(bool stopped) EXCLUDES(mu_);
  // Reports Registration(stopped) to the store; a failure is logged (the
  // next report is due within report_interval_ms).
  void Report(bool stopped) EXCLUDES(mu_);
  void Finish(const std::shared_ptr<Task>& task, FinishRequest request) EXCLUDES(mu_, finish_mu_);
  std::shared_ptr<Task> NextReady() REQUIRES(mu_);
  Result<std::shared_ptr<const JobDefinition>> Definition(const JobName& job) EXCLUDES(defs_mu_);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  const HandlerRegistry* const handlers_;
  const WorkerPoolOptions options_;

  Mutex mu_;
  CondVar claim_cv_;
  CondVar work_cv_;
  CondVar idle_cv_;
  // Protected by mu_ (as are the fields of each Task so marked).
  std::vector<QueueState> queues_ GUARDED_BY(mu_);  // by priority, highest first
  std::unordered_map<std::string, int> queue_index_ GUARDED_BY(mu_);
  // Every lease in hand by execution id; one execution may briefly have two
  // (a stale lease and its successor), told apart by claim version.
  std::unordered_multimap<std::int64_t, std::shared_ptr<Task>> in_hand_ GUARDED_BY(mu_);
  // When the completion rates were last sampled (clock_->Steady()); none yet.
  std::optional<Clock::SteadyTime> rate_sampled_at_ GUARDED_BY(mu_);
  // How long marking work takes (clock_->Steady(), smoothed): a
  // Store::MarkStarted call, or a claim that marks (a fast queue's refill).
  double mark_seconds_ GUARDED_BY(mu_) = 0;
  bool wake_ GUARDED_BY(mu_) = false;
  // Workers waiting on work_cv_ with nothing to run, and how many of them
  // Wake asked to claim new work themselves (ClaimDirect); never more.
  int parked_workers_ GUARDED_BY(mu_) = 0;
  // parked_workers_ for a look without mu_ (ReserveForAdmission); a hint:
  // the decision is made under mu_.
  std::atomic<int> parked_hint_{0};
  int direct_claims_ GUARDED_BY(mu_) = 0;
  // Parked workers a claim at admission is on its way to (the sum of the
  // queues' `reserved`); a Wake asks only the others to claim.
  int admission_reserved_ GUARDED_BY(mu_) = 0;
  bool stop_claiming_ GUARDED_BY(mu_) = false;
  bool stop_workers_ GUARDED_BY(mu_) = false;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;

  Mutex finish_mu_;
  CondVar finish_cv_;
  std::vector<FinishRequest> finishes_ GUARDED_BY(finish_mu_);
  int finishes_in_flight_ GUARDED_BY(finish_mu_) = 0;
  bool stop_completer_ GUARDED_BY(finish_mu_) = false;

  Mutex keep_mu_;
  CondVar keep_cv_;
  bool stop_keeper_ GUARDED_BY(keep_mu_) = false;
  // Set by Start; read by the keeper thread and Stop (after Start).
  Millis started_at_ = 0;
  Millis reported_at_ = 0;  // the keeper thread's only

  Mutex defs_mu_;
  // By job name.
  std::unordered_map<std::string, std::shared_ptr<const JobDefinition>> defs_ GUARDED_BY(defs_mu_);

  std::atomic<std::int64_t> claimed_{0}, succeeded_{0}, failed_{0}, stale_{0}, released_{0},
      published_{0}, completed_{0};
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
