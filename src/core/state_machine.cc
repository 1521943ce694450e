#include "core/state_machine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace taskengine {
namespace {

Status Illegal(const ExecutionState& s, EventKind kind) {
  std::string m = "cannot ";
  m += ToString(kind);
  m += " an execution that is ";
  m += ToString(s.status);
  return Conflict(std::move(m));
}

Transition Base(const ExecutionState& s) {
  Transition t;
  t.to = s.status;
  t.attempt = s.attempt;
  t.consecutive_lease_expiries = s.consecutive_lease_expiries;
  t.permanent_failures = s.permanent_failures;
  t.ambiguous_failures = s.ambiguous_failures;
  t.failure_class = s.failure_class;
  t.cancel_requested = s.cancel_requested;
  return t;
}

// The execution stops for good because cancellation was requested.
Transition EndCanceled(Transition t, const Event& e) {
  t.to = e.has_committed_effects ? ExecutionStatus::kPartiallyCanceled : ExecutionStatus::kCanceled;
  t.clear_lease = true;
  t.finished = true;
  return t;
}

constexpr Millis kMaxMillis = std::numeric_limits<Millis>::max();

// a + b for b >= 0, saturating at kMaxMillis instead of overflowing.
Millis SaturatingAdd(Millis a, Millis b) { return a > kMaxMillis - b ? kMaxMillis : a + b; }

Transition Requeue(Transition t, const ExecutionState& s, const Event& e) {
  t.to = ExecutionStatus::kQueued;
  Millis delay = BackoffDelay(s.retry, std::max(1, s.attempt), e.jitter01);
  delay = std::max(delay, e.retry_after_ms);
  t.run_at = SaturatingAdd(e.now, delay);
  t.clear_lease = true;
  t.trigger = Trigger::kRetry;
  return t;
}

// The execution goes back to the queue unrun: due at once, attempt given back.
Transition GiveBack(Transition t, const ExecutionState& s, const Event& e) {
  t.to = ExecutionStatus::kQueued;
  t.attempt = std::max(0, s.attempt - 1);
  t.run_at = e.now;
  t.clear_lease = true;
  return t;
}

Transition End(Transition t, ExecutionStatus to) {
  t.to = to;
  t.clear_lease = true;
  t.finished = true;
  return t;
}

Result<Transition> DecideFail(const ExecutionState& s, const Event& e) {
  Transition t = Base(s);
  t.consecutive_lease_expiries = 0;  // the worker reported: it did not die
  t.failure_class = e.failure_class;
  const bool exhausted = s.attempt >= s.retry.max_attempts;
  switch (e.failure_class) {
    case FailureClass::kRetryable:
      return exhausted ? End(t, ExecutionStatus::kFailed) : Requeue(t, s, e);
    case FailureClass::kPermanent:
      t.permanent_failures = s.permanent_failures + 1;
      if (exhausted ||
          t.permanent_failures >= (e.unsupported_schema ? s.retry.max_unsupported_schema_attempts
                                                        : s.retry.max_permanent_attempts)) {
        return End(t, ExecutionStatus::kQuarantined);
      }
      return Requeue(t, s, e);
    case FailureClass::kAmbiguous:
      t.ambiguous_failures = s.ambiguous_failures + 1;
      if (exhausted || t.ambiguous_failures >= s.retry.max_ambiguous_attempts) {
        return End(t, ExecutionStatus::kQuarantined);
      }
      return Requeue(t, s, e);
    case FailureClass::kNone:
    case FailureClass::kLeaseExpired:
      break;
  }
  return InvalidArgument("a worker may fail an execution as retryable, permanent or ambiguous");
}

}  // namespace

std::string_view ToString(EventKind k) {
  switch (k) {
    case EventKind::kClaim:
      return "claim";
    case EventKind::kSucceed:
      return "complete";
    case EventKind::kFail:
      return "fail";
    case EventKind::kRelease:
      return "release";
    case EventKind::kLeaseExpired:
      return "expire the lease of";
    case EventKind::kCancel:
      return "cancel";
    case EventKind::kCancelAck:
      return "acknowledge cancellation of";
    case EventKind::kReplay:
      return "replay";
  }
  return "?";
}

ExecutionState ExecutionState::Of(const Execution& e) {
  ExecutionState s;
  s.status = e.status;
  s.attempt = e.attempt;
  s.consecutive_lease_expiries = e.consecutive_lease_expiries;
  s.permanent_failures = e.permanent_failures;
  s.ambiguous_failures = e.ambiguous_failures;
  s.cancel_requested = e.cancel_requested;
  s.failure_class = e.failure_class;
  s.retry = e.retry;
  return s;
}

Millis BackoffDelay(const RetryPolicy& policy, int attempt, double jitter01) {
  const Millis base = std::max<Millis>(0, policy.backoff_base_ms);
  const Millis cap = std::max<Millis>(0, policy.backoff_cap_ms);
  // attempt - 1 without overflow for attempt == INT_MIN; 2^63 already exceeds any cap.
  const int exponent = std::clamp(attempt, 1, 64) - 1;
  Millis delay = cap;
  // base * 2^exponent without overflow: base <= cap >> exponent guarantees
  // base << exponent <= cap; for exponent 63 it never holds (base > 0 there).
  if (base == 0) {
    delay = 0;
  } else if (base <= (cap >> exponent)) {
    delay = base << exponent;
  }
  const double j = jitter01 > 0.0 ? std::min(jitter01, 1.0) : 0.0;  // NaN -> 0
  // Jitter in [0, 10%]. A delay near the int64 limit saturates instead of
  // overflowing (double rounding may push 0.1 * delay past the exact value).
  const double extra = std::floor(static_cast<double>(delay) * 0.1 * j);
  if (extra >= static_cast<double>(kMaxMillis - delay)) return kMaxMillis;
  return delay + static_cast<Millis>(extra);
}

Result<Transition> Decide(const ExecutionState& s, const Event& e) {
  Transition t = Base(s);
  switch (e.kind) {
    case EventKind::kClaim:
      if (s.status != ExecutionStatus::kQueued || s.cancel_requested) return Illegal(s, e.kind);
      t.to = ExecutionStatus::kRunning;
      t.attempt = s.attempt + 1;
      t.bump_claim = true;
      return t;

    case EventKind::kSucceed:
      if (s.status != ExecutionStatus::kRunning) return Illegal(s, e.kind);
      // C1: a handler that finishes after the cancel was requested never
      // hides it; the effects that went out are listed as escaped.
      if (s.cancel_requested) return EndCanceled(t, e);
      t.consecutive_lease_expiries = 0;
      t.failure_class = FailureClass::kNone;
      return End(t, ExecutionStatus::kSucceeded);

    case EventKind::kFail:
      if (s.status != ExecutionStatus::kRunning) return Illegal(s, e.kind);
      if (s.cancel_requested) return EndCanceled(t, e);
      return DecideFail(s, e);

    case EventKind::kRelease:
      if (s.status != ExecutionStatus::kRunning) return Illegal(s, e.kind);
      if (s.cancel_requested) return EndCanceled(t, e);
      return GiveBack(t, s, e);

    case EventKind::kLeaseExpired:
      if (s.status != ExecutionStatus::kRunning) return Illegal(s, e.kind);
      if (s.cancel_requested) return EndCanceled(t, e);
      // L4: a lease whose handler never started (prefetched work of a node
      // that died) burns no attempt and counts toward no poison limit.
      if (!s.handler_started) return GiveBack(t, s, e);
      t.consecutive_lease_expiries = s.consecutive_lease_expiries + 1;
      t.failure_class = FailureClass::kLeaseExpired;
      if (t.consecutive_lease_expiries >= s.retry.max_consecutive_lease_expiries) {
        return End(t, ExecutionStatus::kQuarantined);
      }
      if (s.attempt >= s.retry.max_attempts) return End(t, ExecutionStatus::kFailed);
      return Requeue(t, s, e);

    case EventKind::kCancel:
      if (s.status == ExecutionStatus::kQueued || s.status == ExecutionStatus::kFailed ||
          s.status == ExecutionStatus::kQuarantined) {
        t.cancel_requested = true;
        return EndCanceled(t, e);
      }
      if (s.status == ExecutionStatus::kRunning) {
        t.changed = !s.cancel_requested;
        t.cancel_requested = true;
        return t;
      }
      return Illegal(s, e.kind);

    case EventKind::kCancelAck:
      if (s.status != ExecutionStatus::kRunning || !s.cancel_requested) return Illegal(s, e.kind);
      return EndCanceled(t, e);

    case EventKind::kReplay:
      if (s.status != ExecutionStatus::kFailed && s.status != ExecutionStatus::kQuarantined) {
        return Illegal(s, e.kind);
      }
      t.to = ExecutionStatus::kQueued;
      t.run_at = e.now;
      t.attempt = 0;
      t.consecutive_lease_expiries = 0;
      t.permanent_failures = 0;
      t.ambiguous_failures = 0;
      t.failure_class = FailureClass::kNone;
      t.cancel_requested = false;
      t.clear_lease = true;
      t.trigger = Trigger::kReplay;
      return t;
  }
  return Internal("unknown event");
}

}  // namespace taskengine
