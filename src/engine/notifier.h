// Failure notifications (product.md I6).
//
// The store writes an outbox entry in the transaction that ends an execution
// failed, quarantined or partially_canceled (Store::ReadNotifyOutbox), so no
// ending is ever lost. The notifier decides each entry: for a job with
// notify_on_failure and targets (its own, else [notifications] targets) it
// admits one execution of the internal job `taskengine.notify` per target —
// delivery is itself a job, with the effect ledger, leases, retries and
// quarantine of any job — and then removes the entry, with the job's new
// rate-limit state, in one store transaction. The admissions carry
// idempotency keys made of the ending and the target, so a crash between the
// admissions and the removal admits nothing twice on the next pass: each
// ending is told at most once per target, and at least once unless the rate
// limit suppressed it.
//
// Rate limit: at most per_job_per_hour notifications per job in any hour.
// Failures over it are counted (durably, in the job's state) and told by the
// next notification of that job that goes out ("and 7 more failures since
// 14:00"); when no new failure comes, a summary goes out alone as soon as the
// window has room.
//
// Orphan alerts: when one pass sees this engine's sweeper recover more
// expired leases than orphan_threshold since the previous pass, the global
// targets are alerted once (at most one alert per 15 minutes per node).
//
// Several nodes: the outbox is worked by the node holding the lock
// "notifier"; orphan alerts come from every node (each watches its own
// sweeper).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "core/notify_target.h"
#include "engine/notify_settings.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/engine.h"
#include "taskengine/status.h"

namespace taskengine {

// The internal job that delivers one notification to one target, its
// handler and queue (serve works the queue with its own pool).
inline constexpr std::string_view kNotifyJobName = "taskengine.notify";
inline constexpr std::string_view kNotifyHandlerName = "taskengine.notify";
inline constexpr std::string_view kNotifyQueueName = "taskengine";
inline constexpr const char* kNotifierLockName = "notifier";
// Who admits the deliveries (their requester).
inline constexpr std::string_view kNotifierRequester = "system:notifier";

// The definition of kNotifyJobName: 5 attempts with backoff from 30 s, an
// ambiguous delivery quarantined at once (surfaced, never repeated), never
// notifying about itself.
JobDefinition NotifyJobDefinition();

// What one notification tells.
struct Notice {
  enum class Kind { kFailure, kSummary, kOrphans, kTest };
  Kind kind = Kind::kFailure;
  JobName job;
  std::optional<Execution> execution;  // kFailure
  Millis ended_at = 0;                 // kFailure: the ending told (its outbox entry)
  // Failures of `job` before this one that were not told (rate limit).
  std::int64_t suppressed = 0;
  Millis suppressed_since = 0;
  int orphans = 0;   // kOrphans: leases recovered
  std::string node;  // kOrphans: the node whose sweeper recovered them
  Millis at = 0;     // kOrphans, kTest: when
};

// "[taskengine] job nightly-report failed (execution 42)".
std::string NoticeSubject(const Notice& notice);
// The message as plain text (e-mail body, Slack text): what ended how, the
// error, the attempt, the times, the link, the suppressed count.
std::string NoticeText(const Notice& notice, std::string_view dashboard_url);
// The generic webhook document (JSON text): {"kind", "subject", "text", "job",
// "execution": {id, tenant, status, failure_class, error, attempt,
// queued_at, started_at, finished_at, url}, "suppressed": {count, since}, ...}.
std::string NoticeDocument(const Notice& notice, std::string_view dashboard_url);
// The payload of the delivery execution of `notice` to `target`:
// {"target": "<canonical>", "subject", "text", "document": {...}}.
std::string DeliveryPayload(const Notice& notice, const NotifyTarget& target,
                            std::string_view dashboard_url);
// Its idempotency key: the ending (or summary, or alert) and the target.
std::string DeliveryKey(const Notice& notice, const NotifyTarget& target);

// --- the rate limit, pure ---

// A notification to send for one job: about `failure`, or (nullopt) a
// summary alone; carrying the failures suppressed before it.
struct PlannedNotice {
  std::optional<NotifyPending> failure;
  std::int64_t suppressed = 0;
  Millis suppressed_since = 0;
};

struct JobPlan {
  std::vector<PlannedNotice> notices;
  NotifyJobState state;    // after them: the window's sends, what is suppressed now
  int suppressed_now = 0;  // of `pending`
};

inline constexpr Millis kNotifyWindowMs = 3'600'000;

// Decides `pending` (the job's new endings, oldest first) at `now` under a
// limit of `per_hour` notifications in any hour: while the window (sends of
// the last hour) has room each ending gets its own notification, the first
// one carrying what was suppressed before; the rest are suppressed. With no
// ending and suppressed failures, a summary goes out alone when there is room.
JobPlan PlanNotices(NotifyJobState state, const std::vector<NotifyPending>& pending, int per_hour,
                    Millis now);

// --- the loop ---

struct NotifierOptions {
  NotifySettings settings;
  std::string node_id;  // holder of the lock, unique per process
  Millis lock_ttl_ms = 30'000;
  int max_pending_per_pass = 500;
};

// What one pass did.
struct NotifyPassReport {
  bool leader = false;  // held the lock and worked the outbox
  int endings = 0;      // outbox entries decided
  int deliveries = 0;   // delivery executions admitted (new or found)
  int suppressed = 0;   // endings the rate limit suppressed
  int skipped = 0;      // endings of jobs that notify nobody
  bool orphan_alert = false;
};

// Counters of this notifier's passes (for /metrics).
struct NotifierTotals {
  std::int64_t deliveries = 0;
  std::int64_t suppressed = 0;
  std::int64_t skipped = 0;
  std::int64_t orphan_alerts = 0;
  std::int64_t passes_failed = 0;
};

class Notifier {
 public:
  // `engine` (admissions, executions, its sweeper's counter), `store` (the
  // outbox; the engine's) and `clock` are not owned and outlive this object.
  Notifier(Engine* engine, Store* store, const Clock* clock, NotifierOptions options);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // One pass: orphan check, then (when `as_leader` or holding the lock) the
  // outbox; added to totals() (also what a failed pass did). Also what the
  // loop runs.
  Result<NotifyPassReport> RunPass(bool as_leader = false) EXCLUDES(mu_);

  // Admits a test notification of `job` to each of its targets (or the
  // global ones) now, whatever the rate limit; returns the delivery
  // executions by target. kNotFound for an unknown job; kInvalidArgument
  // when it has no target.
  Result<std::vector<std::pair<std::string, ExecutionId>>> SendTest(const JobName& job);

  Status Start() EXCLUDES(mu_);
  void Stop() EXCLUDES(mu_);
  NotifierTotals totals() const EXCLUDES(mu_);

 private:
  // The targets of `job`: its own, else the global ones (empty: nobody).
  Result<std::vector<NotifyTarget>> ConfiguredTargets(const JobDefinition& job) const;
  // Whom a failure of job `name` is told: ConfiguredTargets when it has
  // notify_on_failure; empty for a job that is gone, notifies nobody, is the
  // server's own, or whose targets no longer parse (logged).
  Result<std::vector<NotifyTarget>> FailureTargets(const JobName& name) const;
  // The delivery execution of `notice` to `target`.
  DispatchRequest DeliveryRequest(const Notice& notice, const NotifyTarget& target) const;
  // Admits `notice` to each target; the deliveries admitted (new or found).
  Result<int> Admit(const Notice& notice, const std::vector<NotifyTarget>& targets);
  // RunPass without the totals: what it did so far stays in *report on error.
  Status Pass(bool as_leader, NotifyPassReport* report) EXCLUDES(mu_);
  Status WorkOutbox(NotifyPassReport* report);
  Status CheckOrphans(NotifyPassReport* report) EXCLUDES(mu_);
  void Loop() EXCLUDES(mu_);
  bool Pause(Millis ms) EXCLUDES(mu_);

  Engine* const engine_;
  Store* const store_;
  const Clock* const clock_;
  const NotifierOptions options_;
  const std::vector<NotifyTarget> global_targets_;

  mutable Mutex mu_;
  CondVar cv_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  NotifierTotals totals_ GUARDED_BY(mu_);
  std::int64_t seen_lease_expirations_ GUARDED_BY(mu_) = -1;  // -1: not read yet
  Millis last_orphan_alert_at_ GUARDED_BY(mu_) = 0;
  std::thread loop_;
};

// Prometheus families of `totals` (taskengine_notifications_*).
void AppendNotifierMetrics(const NotifierTotals& totals, std::string* out);

}  // namespace taskengine
