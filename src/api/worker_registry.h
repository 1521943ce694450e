// What one API process knows about the remote workers that call it (W4).
//
// The worker routes (routes_worker.cc) tell the registry what each call
// says: a lease request registers or refreshes a worker (name, host, pid,
// version, queues, handlers, concurrency), the leases it was handed join its
// executions in hand, a batch heartbeat replaces them with the worker's own
// list, a published outcome takes an execution out of everyone's hands.
//
// Two decisions are the registry's:
//   - When to report a worker to the store (Store::ReportWorker): the row is
//     handed back when the worker is new, when its state (idle / busy)
//     changed, or when kWorkerReportInterval passed since its last report;
//     otherwise nullopt. A lost report is harmless: the next is due soon.
//   - When to forget a worker: one not heard from for kForgetWorkerAfter is
//     dropped (with its executions in hand), looked for at most every
//     kWorkerForgetCheckEvery, on a lease request.
// Whether a worker is live or stale is not decided here: GET /api/v1/workers
// renders each row with WorkerToJson (views.h), which compares
// last_seen_at with the wall clock.
//
// Time: wall-clock stamps (started_at, last_seen_at) come from the caller's
// Clock as `now` arguments; the intervals above run on a monotonic clock the
// registry reads through an injected function, so tests drive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/types.h"
#include "views/views.h"

namespace taskengine::api {

// A worker is reported to the store again after this long even when nothing
// changed.
inline constexpr auto kWorkerReportInterval = std::chrono::seconds(1);
// A worker not heard from for this long is forgotten.
inline constexpr auto kForgetWorkerAfter = std::chrono::hours(1);
// How often, at most, the registry looks for workers to forget.
inline constexpr auto kWorkerForgetCheckEvery = std::chrono::minutes(1);

// Thread-safe.
class WorkerRegistry {
 public:
  using SteadyTime = Clock::SteadyTime;

  // What a lease request says about its worker; unset fields keep what the
  // registry knew (queues are always replaced; handlers too, unset = any).
  struct Registration {
    WorkerId id;
    std::optional<std::string> name, host, version;
    std::optional<std::int64_t> pid;
    std::optional<int> concurrency;
    std::vector<std::string> queues;
    std::optional<std::vector<std::string>> handlers;
  };

  // Intervals (report throttling, forgetting silent workers) are by
  // clock->Steady(). `clock` is not owned and must outlive the registry.
  explicit WorkerRegistry(const Clock* clock);

  // A lease request at wall time `now`: registers the worker (started_at =
  // now when it is new) or updates it, and sets its last_seen_at to `now`.
  // Also forgets workers silent for kForgetWorkerAfter (see the top). Returns
  // the row to report to the store when a report is due, else nullopt.
  std::optional<WorkerInfo> OnLease(const Registration& r, Millis now) EXCLUDES(mu_);

  // `leases` were handed to `worker`: they join its executions in hand. A
  // worker the registry does not know is ignored.
  void OnLeased(const WorkerId& worker, const std::vector<Lease>& leases) EXCLUDES(mu_);

  // A batch heartbeat at wall time `now`: `in_hand` becomes the worker's
  // executions in hand (the worker's own view wins); `processed` and
  // `failed`, when given, its running totals. Registers an unknown worker
  // (without registration fields). Returns the row to report when due.
  std::optional<WorkerInfo> OnHeartbeat(const WorkerId& worker,
                                        const std::vector<ExecutionId>& in_hand,
                                        std::optional<std::int64_t> processed,
                                        std::optional<std::int64_t> failed, Millis now)
      EXCLUDES(mu_);

  // Executions whose outcome was published: no longer in anyone's hands.
  // Unknown ids are ignored.
  void OnFinished(const std::vector<ExecutionId>& ids) EXCLUDES(mu_);

  // Adds, by worker id, the registration fields this process holds
  // (`details`, with current = the executions in hand) and the row the
  // registry would report for the worker (`rows`; the caller lets the
  // store's rows win and keeps these for workers the store lacks).
  void Snapshot(std::map<std::string, WorkerDetails>* details,
                std::map<std::string, WorkerInfo>* rows) const EXCLUDES(mu_);

 private:
  struct Entry {
    WorkerDetails details;
    std::string host;
    std::int64_t pid = 0;
    Millis started_at = 0;
    std::int64_t processed = 0;
    std::int64_t failed = 0;
    std::set<std::int64_t> current;
    SteadyTime last_seen;
    SteadyTime last_report;
    bool reported = false;
    WorkerState reported_state = WorkerState::kIdle;
  };

  Entry& Touch(const WorkerId& id, Millis now) REQUIRES(mu_);
  static WorkerInfo Row(const WorkerId& id, const Entry& e);
  std::optional<WorkerInfo> ReportIfDue(const WorkerId& id, Entry& e) REQUIRES(mu_);
  void Forget(SteadyTime now) REQUIRES(mu_);

  // Constant after construction.
  const Clock* const clock_;

  mutable Mutex mu_;
  std::map<std::string, Entry> workers_ GUARDED_BY(mu_);
  std::map<std::int64_t, std::string> owner_ GUARDED_BY(mu_);  // execution -> worker
  SteadyTime last_forget_ GUARDED_BY(mu_);
};

}  // namespace taskengine::api
