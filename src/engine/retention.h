// Retention (product.md I7): what has aged out goes, in bounded batches.
//
// A pass at instant `now` (the Clock's time when it starts) computes the
// cutoffs of the policy (now - each kind's age; a kind whose age is 0 is kept
// forever) and calls Store::Purge with them until nothing more is due. Each
// Purge is one transaction of at most `batch` executions (with their logs,
// attempts, effects and idempotency keys), `batch` log lines and `batch`
// audit records; the store never removes a queued, running or lane-blocking
// execution, nor one waiting for a replay approval, and keeps its counters
// exact. Between batches the pass pauses as long as the batch took (at most
// max_pause_ms), so a long purge holds the writer at most about half the time
// and every other transaction gets its turn between two batches. After a
// pass that removed anything, the store gives freed space back
// (Store::ReclaimSpace).
//
// The loop (Start) runs a pass every interval_ms on the node that holds the
// lock "retention" (Store::AcquireLock, renewed between batches), so of
// several nodes on one database one purges at a time. RunPass() without the
// loop (the `retention:run` verb) takes no lock: two purges at once remove
// each row once (PostgreSQL skips rows another purge holds; SQLite has one
// writer).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "engine/retention_policy.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

// The name of the lock the loop holds while it purges.
inline constexpr const char* kRetentionLockName = "retention";

// The cutoffs of `policy` at `now` (0 for a kind kept forever).
RetentionCutoffs CutoffsAt(const RetentionPolicy& policy, Millis now);

// Rows removed per kind, summed over batches.
struct PurgeTotals {
  std::int64_t executions = 0;
  std::int64_t logs = 0;
  std::int64_t attempts = 0;
  std::int64_t effects = 0;
  std::int64_t audit = 0;
  Millis oldest_ended_at = 0;  // finished_at of the oldest execution removed (0: none)
  Millis newest_ended_at = 0;
  int batches = 0;

  void Add(const PurgeReport& batch);  // one more batch
  void Add(const PurgeTotals& other);  // the batches of another pass
  std::int64_t rows() const { return executions + logs + attempts + effects + audit; }
};

// What this process's loop has done since it started (for /metrics).
struct RetentionTotals {
  PurgeTotals purged;
  std::int64_t passes = 0;           // passes run as the lock holder
  std::int64_t passes_failed = 0;    // passes a store error ended early
  Millis last_pass_finished_at = 0;  // by the Clock; 0 = none yet
  Millis last_pass_duration_ms = 0;
};

struct RetentionOptions {
  RetentionPolicy policy;
  // The holder of the lock: unique per process. Required for Start().
  std::string node_id;
  // How long the lock lasts without renewal (renewed between batches).
  // Default: 60 s.
  Millis lock_ttl_ms = 60'000;
};

class Retention {
 public:
  // `store` and `clock` are not owned and must outlive this object.
  Retention(Store* store, const Clock* clock, RetentionOptions options);
  ~Retention();
  Retention(const Retention&) = delete;
  Retention& operator=(const Retention&) = delete;

  // Called after each batch with that batch and the pass's totals so far.
  using Progress = std::function<void(const PurgeReport& batch, const PurgeTotals& so_far)>;

  // One pass at the Clock's now, without the lock: batches until nothing
  // more is due (or Stop() was called). `progress` may be empty. A store
  // error ends the pass; what earlier batches removed stays removed (their
  // totals are in the error's message).
  Result<PurgeTotals> RunPass(const Progress& progress = {}) EXCLUDES(mu_);

  // Counts what a pass at the Clock's now would remove; removes nothing.
  Result<PurgeReport> DryRun();

  // Starts the loop on its own thread (the first pass runs at once).
  // kConflict when already started.
  Status Start() EXCLUDES(mu_);
  // Stops the loop (a pass in progress ends after its current batch) and
  // gives the lock up. Idempotent.
  void Stop() EXCLUDES(mu_);

  RetentionTotals totals() const EXCLUDES(mu_);

 private:
  // RunPass into `*totals`, which holds what was removed also when a store
  // error ended the pass; renews the lock between batches when `locked`.
  // Sets *lost_lock when a renewal found another holder (the pass then ends).
  Status Pass(const Progress& progress, bool locked, bool* lost_lock, PurgeTotals* totals)
      EXCLUDES(mu_);
  void Loop() EXCLUDES(mu_);
  // Waits up to `ms` of real time or until Stop(). Returns false when stopping.
  bool Pause(Millis ms) EXCLUDES(mu_);

  Store* const store_;
  const Clock* const clock_;
  const RetentionOptions options_;

  mutable Mutex mu_;
  CondVar cv_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  RetentionTotals totals_ GUARDED_BY(mu_);
  std::thread loop_;
};

// Prometheus families of `totals` (taskengine_retention_*), for /metrics.
void AppendRetentionMetrics(const RetentionTotals& totals, std::string* out);

}  // namespace taskengine
