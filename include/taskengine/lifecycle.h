// Lifecycle events: what happened to an execution or a worker, under stable
// names (seed 001's tracking events). The store reports the status changes it
// committed; the engine adds admissions and its pool's start and stop. `serve`
// logs each as one line (docs/operations.md, "Lifecycle log lines").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "taskengine/types.h"

namespace taskengine {

enum class LifecycleKind : int {
  kDispatched = 0,  // admitted (a new execution; a repeated key is no event)
  kRetried,         // a failed attempt is queued again (backoff)
  kOrphaned,        // the sweeper found the lease expired and queued it again
  kReplayed,        // an operator's replay queued it again
  kCompleted,       // ended succeeded
  kFailed,          // ended failed or quarantined
  kAborted,         // ended canceled or partially_canceled
  kWorkerStarted,   // an in-process pool started
  kWorkerStopped,   // an in-process pool stopped
};

struct LifecycleEvent {
  LifecycleKind kind = LifecycleKind::kDispatched;
  ExecutionId id;  // 0 for worker events
  JobName job;
  TenantId tenant;
  std::string queue;
  ExecutionStatus status = ExecutionStatus::kQueued;  // the status it now has
  // The attempt that ended (terminal, retried, orphaned); 0 when none ran.
  int attempt = 0;
  FailureClass failure_class = FailureClass::kNone;
  Millis started_at = 0;            // start of that attempt; 0 = it never started
  Millis at = 0;                    // when it happened (the store's clock)
  Millis run_at = 0;                // dispatched / queued again: its earliest start
  Trigger trigger = Trigger::kApi;  // dispatched: how it was admitted
  std::string worker;               // the claim's worker; for worker events the worker id
  int threads = 0;                  // worker events: handler threads
};

// "execution.dispatched", "execution.retried", "execution.orphaned",
// "execution.replayed", "execution.completed", "execution.failed",
// "execution.aborted", "worker.started", "worker.stopped".
std::string_view LifecycleEventName(LifecycleKind kind);

// The event a committed status change from `from` to `to` is, if any: terminal
// statuses by kind, a requeue by its cause (a lease expiry is an orphan), a
// replay; nullopt for claims, releases and changes that are no new attempt.
// `requeued_as` is the trigger the transition wrote (Transition::trigger).
std::optional<LifecycleKind> LifecycleKindOf(ExecutionStatus from, ExecutionStatus to,
                                             FailureClass failure_class,
                                             std::optional<Trigger> requeued_as);

}  // namespace taskengine
