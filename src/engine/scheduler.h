// Scheduler: turns the cron schedules of job definitions into executions
// (product.md T3-T5).
//
// A cycle at instant `now` (the Clock's time when the cycle starts):
//
//  1. Takes the leader lock "scheduler" for the node id, with a ttl (default
//     three cycle intervals; the loop renews it between cycles, see
//     SchedulerOptions::lock_ttl_ms). When another node holds it, the cycle
//     does nothing and reports leader = false. A crashed leader's lock
//     expires, so another node takes over at its first cycle after one ttl.
//  2. Reads every job definition, the schedule state of every job and, when a
//     per-tenant job has a schedule, the ACTIVE tenants.
//  3. Decides, for every ENABLED definition with a schedule, the fire times t
//     with from < t <= now, where `from` is the job's last_evaluated_at, or
//     its created_at when the job has no schedule state yet (fires before a
//     job existed never happened; a freshly added job does not catch up on
//     them). Each fire is, by its age now - t:
//       - on time, when <= cycle_interval_ms (a healthy cycle decides it
//         within one interval): an execution is admitted, whatever the policy;
//       - missed, when older but <= the job's catch_up_window_ms. The job's
//         policy decides (T4): `all` admits each missed fire; `coalesce`
//         admits only the latest missed fire, and none of them when the
//         cycle also has an on-time fire, counting the others as coalesced
//         (so the cycle admits one execution for the latest fire); `none`
//         skips them (an on-time fire still fires);
//       - stale, when older than the catch-up window: skipped, whatever the
//         policy. A two-day pause therefore never releases a burst.
//     Skipped fires are counted in the job's schedule state (skipped_fires,
//     last_skipped_at); coalesced fires only in the cycle's report.
//  4. Admits one execution per admitted fire (per ACTIVE tenant for
//     per-tenant jobs): trigger scheduled, requester "system:scheduler",
//     scheduled_at = the fire time, payload {"fire_time":"<RFC 3339 UTC>"},
//     idempotency key "<job>:<fire minute UTC as YYYY-MM-DDTHH:MMZ>", plus
//     ":<tenant>" for per-tenant jobs (T3). The key makes a double fire
//     impossible even when two schedulers race.
//     Window claims (T5, window_ms > 0): the fire claims the latest COMPLETE
//     window [start, end) of window_ms at the fire time, windows being
//     aligned to the Unix epoch (so a 1-day window is a UTC day):
//     end = floor(t / window_ms) * window_ms, start = end - window_ms. Key
//     "<job>:<tenant>:<start minute>" ("<job>:<start minute>" for a global
//     job), payload {"window_end":"…","window_start":"…"} (no fire time, so
//     every trigger of one window carries the same payload and fingerprint).
//     Triggers of one window coalesce into one execution: within a cycle
//     (extra fires counted as coalesced) and across cycles (the key answers
//     duplicate). window_ms must be a whole number of minutes.
//  5. Commits every admission and every job's new schedule state through
//     Store::CommitSchedule: one call, or consecutive chunks of
//     max_admissions_per_commit admissions for a huge cycle, the state
//     updates riding with the LAST chunk. If a chunk fails, the states stay
//     unchanged and the next cycle decides the same fires again; the
//     admissions that did commit then answer duplicate.
//
// Definitions that are disabled, or have no schedule, get their state
// advanced to `now` without firing or counting anything: re-enabling a job or
// giving it a schedule never catches up on the time it was not scheduled. A
// definition whose schedule or zone does not parse (the store does not check
// them) is reported in CycleReport::errors and its state is left alone.
// Parsed schedules are cached per definition and re-parsed when its
// updated_at, schedule or timezone changes.
//
// Scheduled executions get no lane key (lane templates render from dispatch
// payloads; a scheduled payload carries only the fire time or window).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/schedule.h"
#include "engine/fire_plan.h"
#include "engine/job_schedules.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

// The requester of every scheduled execution (part of its fingerprint).
inline constexpr const char* kSchedulerRequester = "system:scheduler";
// The name of the leader lock.
inline constexpr const char* kSchedulerLockName = "scheduler";

struct SchedulerOptions {
  // The holder of the leader lock: unique per node (and per process when one
  // host runs several). Required.
  std::string node_id;
  // The period of the loop, the alignment of its cycles (multiples of it
  // since the epoch) and the age up to which a fire counts as on time.
  // Default: 1 min (cron's resolution).
  Millis cycle_interval_ms = 60'000;
  // How long the leader lock lasts without renewal. 0 = 3 x cycle_interval_ms.
  // Each cycle renews it; the loop (Start) also renews it every ttl/3 between
  // cycles, so a ttl shorter than the interval makes a dead leader's lock
  // expire within that ttl (serve uses 15 s); with such a ttl a follower's
  // loop also tries to take the lock every ttl/3, so it takes over within
  // about 4/3 of the ttl, before the next boundary.
  Millis lock_ttl_ms = 0;
  // The loop starts each cycle this long after an interval boundary, so that
  // the fires of that minute are due. Default: 1 s.
  Millis loop_offset_ms = 1'000;
  // The longest real-time wait of the loop before it reads the Clock again
  // (a FakeClock moved by a test is noticed within this). Default: 1 s.
  Millis loop_tick_ms = 1'000;
  // Most admissions per CommitSchedule call. Default: 20,000.
  std::size_t max_admissions_per_commit = 20'000;
  // Called after a commit that created executions (the in-process wakeup of
  // the worker pool). May be empty.
  std::function<void()> on_admitted;
  // Gets an execution.dispatched event (trigger scheduled) for each
  // execution a commit created. May be empty.
  std::function<void(const LifecycleEvent&)> lifecycle;
};

// A definition the cycle could not evaluate.
struct ScheduleError {
  JobName job;
  std::string message;  // names the job and the problem
};

// What one cycle did. Counts of fires are per fire time (not per tenant);
// counts of executions are per admission.
struct CycleReport {
  // Whether the cycle took the leader lock. RunCycle: false means another
  // node holds it and nothing was done.
  bool leader = false;
  Millis now = 0;                   // the instant the cycle decided up to
  int jobs_evaluated = 0;           // enabled definitions with a valid schedule
  std::int64_t fires = 0;           // fire times decided: admitted + coalesced + skipped
  std::int64_t admitted_fires = 0;  // fire times (or windows) that got admissions
  std::int64_t coalesced = 0;       // missed fires folded into a later one (coalesce, windows)
  std::int64_t skipped = 0;         // fires skipped: stale, or missed under policy none
  // True when a job's count of stale fires hit the per-cycle counting bound
  // (kMaxCountedFires): `skipped` is then a lower bound.
  bool skipped_count_capped = false;
  std::int64_t admissions = 0;          // admission requests sent to the store
  std::int64_t executions_created = 0;  // of which created a new execution
  std::int64_t duplicates = 0;          // of which found their key already used (same payload)
  std::int64_t conflicts =
      0;  // of which found their key used with another payload (nothing created)
  std::vector<ScheduleError> errors;
  std::chrono::microseconds load_time{0};        // reading definitions, states, tenants
  std::chrono::microseconds evaluation_time{0};  // deciding fires and building admissions
  // The CPU time the evaluating thread spent on the evaluation (wall time on
  // a busy machine includes time other processes ran).
  std::chrono::microseconds evaluation_cpu_time{0};
  std::chrono::microseconds commit_time{0};  // CommitSchedule calls
};

// A cycle's decisions before they are committed. Produced by Evaluate().
struct CyclePlan {
  std::vector<AdmitRequest> admissions;
  std::vector<std::string> queues;  // admissions[i]'s queue (for lifecycle events)
  std::vector<ScheduleUpdate> updates;
  CycleReport report;  // everything but the commit outcome
};

// What the cycles of one Scheduler (RunCycle, also from its loop) did since it
// was constructed: for /metrics (I5). Cycles run through Evaluate/Commit
// directly are not counted. A snapshot.
struct SchedulerTotals {
  std::int64_t cycles = 0;             // cycles run as the leader that committed
  std::int64_t cycles_not_leader = 0;  // cycles that found another node holding the lock
  std::int64_t cycles_failed = 0;      // cycles that ended in an error
  std::int64_t fires = 0;
  std::int64_t executions_created = 0;
  std::int64_t coalesced = 0;
  std::int64_t skipped = 0;  // a lower bound when a cycle's count was capped
  // Of `skipped`, per job name (only jobs that skipped at least one fire).
  std::map<std::string, std::int64_t> skipped_by_job;
  // The last committed leader cycle; all 0 before the first.
  Millis last_cycle_at = 0;  // its CycleReport::now
  // Lag: how late that cycle ran relative to the fire time it served, i.e.
  // its start (by the scheduler's Clock) minus the latest multiple of
  // cycle_interval_ms at or before it, which is the latest fire time it
  // decided. A loop on time shows about loop_offset_ms (1 s).
  Millis last_lag_ms = 0;
  // Its wall-clock duration (lock, evaluation and commit), steady clock.
  std::chrono::microseconds last_duration{0};
};

// Appends the scheduler families of /metrics (Prometheus text format 0.0.4,
// HELP and TYPE lines; listed in docs/operations.md) for `totals`:
// taskengine_scheduler_cycles_total{result}, taskengine_scheduler_fires_total,
// taskengine_scheduler_executions_created_total,
// taskengine_scheduler_coalesced_fires_total,
// taskengine_scheduler_skipped_fires_total,
// taskengine_scheduler_job_skipped_fires_total{job},
// taskengine_scheduler_lag_seconds, taskengine_scheduler_cycle_duration_seconds
// and taskengine_scheduler_last_cycle_timestamp_seconds.
void AppendSchedulerMetrics(const SchedulerTotals& totals, std::string* out);

// "2026-01-01T00:05Z": the UTC minute of `ms` (floored), as keys use it.
std::string FormatKeyMinute(Millis ms);
// T3: "<job>:<fire minute>" or, for a tenant, "<job>:<fire minute>:<tenant>".
std::string ScheduledKey(const JobName& job, Millis fire, const TenantId& tenant);
// T5: "<job>:<tenant>:<window start minute>" or, without a tenant,
// "<job>:<window start minute>".
std::string WindowKey(const JobName& job, const TenantId& tenant, Millis window_start);

// Checks the scheduling fields of a definition the way a cycle does: the
// schedule (when not empty) and the zone parse, and window_ms is a whole
// number of minutes. kInvalidArgument naming the job and the problem.
// Returns the parsed schedule, or nullopt when the job has none.
Result<std::optional<Schedule>> CheckJobSchedule(const JobDefinition& job);

// Thread-safe. Cycles of one instance run one at a time (a concurrent call
// waits); several instances (nodes) coordinate through the store's lock.
class Scheduler {
 public:
  // `store` and `clock` are not owned and must outlive the scheduler.
  // REQUIRES: !options.node_id.empty(), options.cycle_interval_ms > 0.
  Scheduler(Store* store, Clock* clock, SchedulerOptions options);
  // Stops the loop (see Stop()).
  ~Scheduler();

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // One cycle (see the file comment). Not being the leader is not an error:
  // the report says leader = false. Errors: the store's (kUnavailable, ...);
  // nothing was committed unless the error came from a chunk after the first.
  Result<CycleReport> RunCycle() EXCLUDES(cycle_mu_, totals_mu_);

  // The parts of a cycle after the lock, for tests and drills (RD14 proves
  // with them that the keys alone prevent a double fire when two schedulers
  // both believe they lead). Evaluate decides at the Clock's now from the
  // stored states; Commit stores the plan as step 5 says and fills in the
  // commit counts and commit_time. Their report says leader = false (no lock
  // was taken). Committing a plan twice creates nothing new (the keys answer
  // duplicate) but adds its skipped counts to the states again: the store
  // sums them.
  Result<CyclePlan> Evaluate() EXCLUDES(cycle_mu_);
  Result<CycleReport> Commit(CyclePlan plan) EXCLUDES(cycle_mu_);

  // Runs cycles in a background thread: one at once, then one
  // loop_offset_ms after every boundary of cycle_interval_ms, until Stop().
  // Each result goes to `on_cycle` (may be empty) and to the log. A
  // scheduler runs its loop at most once: kConflict when started before.
  Status Start(std::function<void(const Result<CycleReport>&)> on_cycle = nullptr)
      EXCLUDES(loop_mu_);
  // Stops the loop (waits for a running cycle) and releases the leader lock
  // when this node holds it, so that another node takes over at once.
  // Idempotent; a no-op when never started.
  void Stop() EXCLUDES(loop_mu_);

  // Totals of RunCycle calls so far. Thread-safe; does not wait for a cycle.
  SchedulerTotals totals() const EXCLUDES(totals_mu_);

  const SchedulerOptions& options() const { return options_; }
  Millis lock_ttl_ms() const { return lock_ttl_ms_; }

 private:
  struct CachedSchedule {
    Millis updated_at = 0;
    std::string schedule;
    std::string timezone;
    Millis window_ms = 0;
    Result<std::optional<Schedule>> parsed{std::optional<Schedule>()};
  };

  // The parsed schedule of `job`, from the cache when still current.
  const Result<std::optional<Schedule>>& ParsedSchedule(const JobDefinition& job)
      REQUIRES(cycle_mu_);
  Result<CyclePlan> EvaluateLocked() REQUIRES(cycle_mu_);
  Result<CycleReport> CommitLocked(CyclePlan plan) REQUIRES(cycle_mu_);
  Result<CycleReport> RunCycleLocked(std::map<std::string, std::int64_t>* skipped_by_job)
      REQUIRES(cycle_mu_);
  void Loop(std::function<void(const Result<CycleReport>&)> on_cycle) EXCLUDES(loop_mu_);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  const SchedulerOptions options_;
  const Millis lock_ttl_ms_;

  // Held for a whole cycle: cycles of this instance run one at a time.
  Mutex cycle_mu_ ACQUIRED_BEFORE(totals_mu_);
  std::unordered_map<std::string, CachedSchedule> cache_ GUARDED_BY(cycle_mu_);

  mutable Mutex totals_mu_;
  SchedulerTotals totals_ GUARDED_BY(totals_mu_);

  // The loop.
  Mutex loop_mu_;
  CondVar loop_cv_;
  bool stopping_ GUARDED_BY(loop_mu_) = false;
  bool started_ GUARDED_BY(loop_mu_) = false;
  std::thread loop_;
};

}  // namespace taskengine
