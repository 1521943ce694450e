// The execution state machine (S2): the ONE place that decides every status
// change. Every backend reads the current row inside its transaction, asks
// Decide() what the event does, and writes the answer (or returns the error,
// changing nothing). Pure: no I/O, no clock, no randomness of its own.
//
//   queued --claim--> running --succeed--> succeeded
//     ^                 |  \--fail(retryable, attempts left) / lease expired --> queued
//     |                 |  \--fail(retryable, exhausted) / lease expired, exhausted --> failed
//     |                 |  \--fail(permanent|ambiguous, class bound reached),
//     |                 |     N lease expiries in a row --> quarantined
//     |                 |  \--release / lease expired, handler never started
//     |                 |     --> queued at once (attempt given back, no expiry counted)
//     |                 \--cancel ack / any finish (success included) or expiry
//     |                    while cancel requested --> canceled | partially_canceled
//     +---replay--- failed | quarantined
//   queued | failed | quarantined --cancel--> canceled | partially_canceled
//   running --cancel--> running with cancel_requested
#pragma once

#include <optional>
#include <string>

#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

enum class EventKind {
  kClaim,         // a claimer takes a due queued execution
  kSucceed,       // the current claim reports success
  kFail,          // the current claim reports a failure of `failure_class`
  kRelease,       // the current claim gives the execution back unrun (shutdown)
  kLeaseExpired,  // the sweeper found the lease expired
  kCancel,        // an operator asks to cancel
  kCancelAck,     // the current claim stopped because cancellation was requested
  kReplay,        // an operator replays a failed or quarantined execution
};

std::string_view ToString(EventKind k);

struct Event {
  EventKind kind = EventKind::kClaim;
  Millis now = 0;
  FailureClass failure_class = FailureClass::kRetryable;  // for kFail
  double jitter01 = 0.0;      // a uniform [0,1) sample for backoff jitter
  Millis retry_after_ms = 0;  // for kFail: the sink asked to wait at least this long
  // For cancel outcomes: may an effect have escaped? True when one committed,
  // and when one was reserved but never confirmed (outcome unknown).
  bool has_committed_effects = false;
  // For kFail with kPermanent: the payload's schema version is not accepted;
  // bounded by max_unsupported_schema_attempts instead of max_permanent_attempts.
  bool unsupported_schema = false;
};

// What a legal event does to the execution. Fields not named keep their value.
struct Transition {
  ExecutionStatus to = ExecutionStatus::kQueued;
  // Only meaningful when `to` is kQueued: the earliest next start.
  Millis run_at = 0;
  int attempt = 0;
  int consecutive_lease_expiries = 0;
  int permanent_failures = 0;
  int ambiguous_failures = 0;
  FailureClass failure_class = FailureClass::kNone;
  bool cancel_requested = false;
  bool clear_lease = false;  // worker and lease expiry are cleared
  bool bump_claim = false;   // claim version + 1 (kClaim only)
  bool finished = false;     // `to` is terminal: set finished_at = now
  bool changed = true;       // false for an idempotent no-op (e.g. a second cancel)
  // The trigger of the attempt this transition queues, when it changes:
  // kRetry when a failed or expired attempt is queued again, kReplay when an
  // operator replays. Unset keeps the stored trigger (a release or a
  // prefetched lease given back is not a new attempt).
  std::optional<Trigger> trigger;
};

// The part of an execution the state machine looks at.
struct ExecutionState {
  ExecutionStatus status = ExecutionStatus::kQueued;
  int attempt = 0;
  int consecutive_lease_expiries = 0;
  int permanent_failures = 0;
  int ambiguous_failures = 0;
  bool cancel_requested = false;
  // L4: the handler of the current claim started (false for a lease a pool
  // prefetched and never handed to a handler). Only kLeaseExpired reads it.
  bool handler_started = true;
  FailureClass failure_class = FailureClass::kNone;
  RetryPolicy retry;

  static ExecutionState Of(const Execution& e);
};

// Decides what `event` does to an execution in `state`.
// Returns kConflict naming the current status when the event is illegal in it
// (for example completing a queued execution or replaying a succeeded one).
Result<Transition> Decide(const ExecutionState& state, const Event& event);

// L5: min(cap, base * 2^(attempt-1)) plus up to 10% jitter (jitter01 in [0,1)).
// `attempt` >= 1 is the attempt that just failed.
Millis BackoffDelay(const RetryPolicy& policy, int attempt, double jitter01);

}  // namespace taskengine
