// Tests of the execution state machine (S2) and the retry backoff (L5).
#include "core/state_machine.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

constexpr Millis kNow = 1'767'225'600'000;  // 2026-01-01T00:00Z
constexpr Millis kMaxMillis = std::numeric_limits<Millis>::max();

const std::vector<ExecutionStatus> kAllStatuses = {
    ExecutionStatus::kQueued,           ExecutionStatus::kRunning,     ExecutionStatus::kSucceeded,
    ExecutionStatus::kFailed,           ExecutionStatus::kQuarantined, ExecutionStatus::kCanceled,
    ExecutionStatus::kPartiallyCanceled};
const std::vector<EventKind> kAllEvents = {
    EventKind::kClaim,        EventKind::kSucceed, EventKind::kFail,      EventKind::kRelease,
    EventKind::kLeaseExpired, EventKind::kCancel,  EventKind::kCancelAck, EventKind::kReplay};

ExecutionState State(ExecutionStatus status, int attempt = 0) {
  ExecutionState s;
  s.status = status;
  s.attempt = attempt;
  return s;
}

ExecutionState Running(int attempt) { return State(ExecutionStatus::kRunning, attempt); }

Event Ev(EventKind kind, Millis now = kNow) {
  Event e;
  e.kind = kind;
  e.now = now;
  return e;
}

Event Fail(FailureClass c, Millis now = kNow) {
  Event e = Ev(EventKind::kFail, now);
  e.failure_class = c;
  return e;
}

// Applies a legal transition to a state, as a backend would.
ExecutionState Apply(ExecutionState s, const Transition& t) {
  s.status = t.to;
  s.attempt = t.attempt;
  s.consecutive_lease_expiries = t.consecutive_lease_expiries;
  s.permanent_failures = t.permanent_failures;
  s.ambiguous_failures = t.ambiguous_failures;
  s.failure_class = t.failure_class;
  s.cancel_requested = t.cancel_requested;
  return s;
}

// Whether `kind` is legal in `s` according to the diagram in state_machine.h.
bool IsLegal(const ExecutionState& s, EventKind kind) {
  const bool running = s.status == ExecutionStatus::kRunning;
  switch (kind) {
    case EventKind::kClaim:
      return s.status == ExecutionStatus::kQueued && !s.cancel_requested;
    case EventKind::kSucceed:
    case EventKind::kFail:
    case EventKind::kRelease:
    case EventKind::kLeaseExpired:
      return running;
    case EventKind::kCancel:
      return running || s.status == ExecutionStatus::kQueued ||
             s.status == ExecutionStatus::kFailed || s.status == ExecutionStatus::kQuarantined;
    case EventKind::kCancelAck:
      return running && s.cancel_requested;
    case EventKind::kReplay:
      return s.status == ExecutionStatus::kFailed || s.status == ExecutionStatus::kQuarantined;
  }
  return false;
}

// ---------------------------------------------------------------------------
// The legality matrix

TEST(StateMachine, EveryStatusAndEventIsLegalOrAConflictNamingTheStatus) {
  int legal = 0;
  int illegal = 0;
  for (ExecutionStatus status : kAllStatuses) {
    for (bool cancel_requested : {false, true}) {
      ExecutionState s = State(status, 1);
      s.cancel_requested = cancel_requested;
      for (EventKind kind : kAllEvents) {
        Event e = Ev(kind);
        e.failure_class = FailureClass::kRetryable;
        const Result<Transition> r = Decide(s, e);
        const std::string what = std::string(ToString(kind)) + " on " +
                                 std::string(ToString(status)) +
                                 (cancel_requested ? " (cancel requested)" : "");
        if (IsLegal(s, kind)) {
          ++legal;
          EXPECT_TRUE(r.ok()) << what << ": " << r.status().ToString();
        } else {
          ++illegal;
          ASSERT_FALSE(r.ok()) << what;
          EXPECT_EQ(r.status().code(), ErrorCode::kConflict) << what;
          EXPECT_NE(r.status().message().find(std::string(ToString(status))), std::string::npos)
              << what << ": " << r.status().message();
        }
      }
    }
  }
  EXPECT_GT(legal, 10);
  EXPECT_GT(illegal, 50);
}

TEST(StateMachine, ConflictMessagesReadWell) {
  const Result<Transition> r = Decide(State(ExecutionStatus::kQueued), Ev(EventKind::kSucceed));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot complete an execution that is queued");
  const Result<Transition> replay =
      Decide(State(ExecutionStatus::kSucceeded), Ev(EventKind::kReplay));
  EXPECT_EQ(replay.status().message(), "cannot replay an execution that is succeeded");
  const Result<Transition> cancel =
      Decide(State(ExecutionStatus::kPartiallyCanceled), Ev(EventKind::kCancel));
  EXPECT_EQ(cancel.status().message(), "cannot cancel an execution that is partially_canceled");
}

TEST(StateMachine, EventNames) {
  EXPECT_EQ(ToString(EventKind::kClaim), "claim");
  EXPECT_EQ(ToString(EventKind::kSucceed), "complete");
  EXPECT_EQ(ToString(EventKind::kFail), "fail");
  EXPECT_EQ(ToString(EventKind::kRelease), "release");
  EXPECT_EQ(ToString(EventKind::kLeaseExpired), "expire the lease of");
  EXPECT_EQ(ToString(EventKind::kCancel), "cancel");
  EXPECT_EQ(ToString(EventKind::kCancelAck), "acknowledge cancellation of");
  EXPECT_EQ(ToString(EventKind::kReplay), "replay");
}

// ---------------------------------------------------------------------------
// Claim and success

TEST(StateMachine, ClaimStartsAnAttempt) {
  ExecutionState s = State(ExecutionStatus::kQueued, 2);
  s.permanent_failures = 1;
  s.failure_class = FailureClass::kRetryable;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kClaim)));
  EXPECT_EQ(t.to, ExecutionStatus::kRunning);
  EXPECT_EQ(t.attempt, 3);
  EXPECT_TRUE(t.bump_claim);
  EXPECT_TRUE(t.changed);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(t.clear_lease);
  EXPECT_EQ(t.permanent_failures, 1);                    // kept
  EXPECT_EQ(t.failure_class, FailureClass::kRetryable);  // the last failure is kept
}

TEST(StateMachine, ClaimOfACancelRequestedQueuedExecutionIsRefused) {
  ExecutionState s = State(ExecutionStatus::kQueued);
  s.cancel_requested = true;
  const Result<Transition> r = Decide(s, Ev(EventKind::kClaim));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kConflict);
}

TEST(StateMachine, OnlyClaimBumpsTheClaimVersion) {
  for (ExecutionStatus status : kAllStatuses) {
    for (EventKind kind : kAllEvents) {
      if (kind == EventKind::kClaim) continue;
      ExecutionState s = State(status, 1);
      s.cancel_requested = kind == EventKind::kCancelAck;
      Event e = Ev(kind);
      e.failure_class = FailureClass::kRetryable;
      const Result<Transition> r = Decide(s, e);
      if (r.ok()) {
        EXPECT_FALSE(r->bump_claim) << ToString(kind);
      }
    }
  }
}

TEST(StateMachine, SucceedFinishes) {
  ExecutionState s = Running(2);
  s.consecutive_lease_expiries = 2;
  s.failure_class = FailureClass::kLeaseExpired;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kSucceed)));
  EXPECT_EQ(t.to, ExecutionStatus::kSucceeded);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.clear_lease);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_EQ(t.consecutive_lease_expiries, 0);
  EXPECT_EQ(t.failure_class, FailureClass::kNone);
}

// C1: a handler that finishes after the cancel was requested never hides it.
TEST(StateMachine, SucceedAfterACancelRequestEndsCanceledOrPartiallyCanceled) {
  ExecutionState s = Running(1);
  s.cancel_requested = true;
  ASSERT_OK_AND_ASSIGN(Transition none, Decide(s, Ev(EventKind::kSucceed)));
  EXPECT_EQ(none.to, ExecutionStatus::kCanceled);
  EXPECT_TRUE(none.finished);
  EXPECT_TRUE(none.clear_lease);
  Event escaped = Ev(EventKind::kSucceed);
  escaped.has_committed_effects = true;
  ASSERT_OK_AND_ASSIGN(Transition partial, Decide(s, escaped));
  EXPECT_EQ(partial.to, ExecutionStatus::kPartiallyCanceled);
  EXPECT_TRUE(partial.finished);
}

// ---------------------------------------------------------------------------
// Failures (Q1) and backoff

TEST(StateMachine, RetryableFailureRequeuesWithBackoff) {
  ExecutionState s = Running(1);
  s.consecutive_lease_expiries = 2;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Fail(FailureClass::kRetryable)));
  EXPECT_EQ(t.to, ExecutionStatus::kQueued);
  EXPECT_EQ(t.run_at, kNow + 5'000);
  EXPECT_EQ(t.attempt, 1);  // the attempt stays counted
  EXPECT_EQ(t.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(t.consecutive_lease_expiries, 0);  // the worker reported: it did not die
  EXPECT_TRUE(t.clear_lease);
  EXPECT_FALSE(t.finished);

  ASSERT_OK_AND_ASSIGN(Transition t2, Decide(Running(3), Fail(FailureClass::kRetryable)));
  EXPECT_EQ(t2.run_at, kNow + 20'000);

  Event jittered = Fail(FailureClass::kRetryable);
  jittered.jitter01 = 0.5;
  ASSERT_OK_AND_ASSIGN(Transition t3, Decide(Running(1), jittered));
  EXPECT_EQ(t3.run_at, kNow + 5'250);
}

TEST(StateMachine, RetryAfterExtendsButNeverShortensTheBackoff) {
  Event e = Fail(FailureClass::kRetryable);
  e.retry_after_ms = 60'000;
  ASSERT_OK_AND_ASSIGN(Transition longer, Decide(Running(1), e));
  EXPECT_EQ(longer.run_at, kNow + 60'000);
  e.retry_after_ms = 1'000;
  ASSERT_OK_AND_ASSIGN(Transition shorter, Decide(Running(1), e));
  EXPECT_EQ(shorter.run_at, kNow + 5'000);
}

TEST(StateMachine, RetryableFailuresExhaustIntoFailed) {
  ExecutionState s = State(ExecutionStatus::kQueued);
  std::vector<Millis> delays;
  Millis now = kNow;
  for (int i = 0; i < 10 && s.status == ExecutionStatus::kQueued; ++i) {
    ASSERT_OK_AND_ASSIGN(Transition claim, Decide(s, Ev(EventKind::kClaim, now)));
    s = Apply(s, claim);
    ASSERT_OK_AND_ASSIGN(Transition fail, Decide(s, Fail(FailureClass::kRetryable, now)));
    s = Apply(s, fail);
    if (fail.to == ExecutionStatus::kQueued) {
      delays.push_back(fail.run_at - now);
      now = fail.run_at;
    } else {
      EXPECT_TRUE(fail.finished);
    }
  }
  EXPECT_EQ(s.status, ExecutionStatus::kFailed);
  EXPECT_EQ(s.attempt, 5);
  EXPECT_EQ(s.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(delays, (std::vector<Millis>{5'000, 10'000, 20'000, 40'000}));
}

TEST(StateMachine, PermanentFailureQuarantinesAtItsBound) {
  // Default bound 1: the first permanent failure quarantines.
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(Running(1), Fail(FailureClass::kPermanent)));
  EXPECT_EQ(t.to, ExecutionStatus::kQuarantined);
  EXPECT_EQ(t.failure_class, FailureClass::kPermanent);
  EXPECT_EQ(t.permanent_failures, 1);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.clear_lease);

  // Bound 3 (unsupported schema, Q1): two retries, then quarantine.
  ExecutionState s = Running(1);
  s.retry.max_permanent_attempts = 3;
  ASSERT_OK_AND_ASSIGN(Transition first, Decide(s, Fail(FailureClass::kPermanent)));
  EXPECT_EQ(first.to, ExecutionStatus::kQueued);
  EXPECT_EQ(first.permanent_failures, 1);
  EXPECT_EQ(first.run_at, kNow + 5'000);
  s.attempt = 2;
  s.permanent_failures = 1;
  ASSERT_OK_AND_ASSIGN(Transition second, Decide(s, Fail(FailureClass::kPermanent)));
  EXPECT_EQ(second.to, ExecutionStatus::kQueued);
  EXPECT_EQ(second.permanent_failures, 2);
  s.attempt = 3;
  s.permanent_failures = 2;
  ASSERT_OK_AND_ASSIGN(Transition third, Decide(s, Fail(FailureClass::kPermanent)));
  EXPECT_EQ(third.to, ExecutionStatus::kQuarantined);
  EXPECT_EQ(third.permanent_failures, 3);

  // Retryable failures do not count toward the permanent bound.
  s.permanent_failures = 2;
  ASSERT_OK_AND_ASSIGN(Transition retryable, Decide(s, Fail(FailureClass::kRetryable)));
  EXPECT_EQ(retryable.permanent_failures, 2);
  EXPECT_EQ(retryable.to, ExecutionStatus::kQueued);
}

TEST(StateMachine, PermanentFailureOnTheLastAttemptIsQuarantinedNotFailed) {
  ExecutionState s = Running(5);
  s.retry.max_permanent_attempts = 3;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Fail(FailureClass::kPermanent)));
  EXPECT_EQ(t.to, ExecutionStatus::kQuarantined);
}

TEST(StateMachine, AmbiguousFailureQuarantinesAtItsBound) {
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(Running(1), Fail(FailureClass::kAmbiguous)));
  EXPECT_EQ(t.to, ExecutionStatus::kQuarantined);
  EXPECT_EQ(t.failure_class, FailureClass::kAmbiguous);
  EXPECT_EQ(t.ambiguous_failures, 1);
  EXPECT_TRUE(t.finished);

  ExecutionState s = Running(1);
  s.retry.max_ambiguous_attempts = 2;
  ASSERT_OK_AND_ASSIGN(Transition first, Decide(s, Fail(FailureClass::kAmbiguous)));
  EXPECT_EQ(first.to, ExecutionStatus::kQueued);
  EXPECT_EQ(first.ambiguous_failures, 1);
  EXPECT_EQ(first.permanent_failures, 0);
  s = Apply(s, first);
  s.status = ExecutionStatus::kRunning;
  s.attempt = 2;
  ASSERT_OK_AND_ASSIGN(Transition second, Decide(s, Fail(FailureClass::kAmbiguous)));
  EXPECT_EQ(second.to, ExecutionStatus::kQuarantined);
  EXPECT_EQ(second.ambiguous_failures, 2);

  ExecutionState last = Running(5);
  last.retry.max_ambiguous_attempts = 3;
  ASSERT_OK_AND_ASSIGN(Transition exhausted, Decide(last, Fail(FailureClass::kAmbiguous)));
  EXPECT_EQ(exhausted.to, ExecutionStatus::kQuarantined);
}

TEST(StateMachine, WorkersCannotReportNoneOrLeaseExpiredAsFailureClass) {
  for (FailureClass c : {FailureClass::kNone, FailureClass::kLeaseExpired}) {
    const Result<Transition> r = Decide(Running(1), Fail(c));
    ASSERT_FALSE(r.ok()) << ToString(c);
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  }
}

// ---------------------------------------------------------------------------
// Lease expiry (L4)

TEST(StateMachine, LeaseExpiryRequeuesWithBackoff) {
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(Running(2), Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(t.to, ExecutionStatus::kQueued);
  EXPECT_EQ(t.run_at, kNow + 10'000);
  EXPECT_EQ(t.consecutive_lease_expiries, 1);
  EXPECT_EQ(t.failure_class, FailureClass::kLeaseExpired);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_TRUE(t.clear_lease);
  EXPECT_FALSE(t.finished);
}

TEST(StateMachine, LeaseExpiryOnTheLastAttemptFails) {
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(Running(5), Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(t.to, ExecutionStatus::kFailed);
  EXPECT_EQ(t.failure_class, FailureClass::kLeaseExpired);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.clear_lease);
}

// L4: prefetched work of a node that died: the handler never started, so the
// expiry burns no attempt and counts toward no poison limit.
TEST(StateMachine, LeaseExpiryOfAHandlerThatNeverStartedIsAFreeRequeue) {
  ExecutionState s = Running(5);  // the last attempt, and two expiries in a row
  s.consecutive_lease_expiries = 2;
  s.failure_class = FailureClass::kRetryable;
  s.handler_started = false;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(t.to, ExecutionStatus::kQueued);
  EXPECT_EQ(t.run_at, kNow) << "due at once: no backoff";
  EXPECT_EQ(t.attempt, 4) << "the attempt is given back";
  EXPECT_EQ(t.consecutive_lease_expiries, 2) << "no expiry counted";
  EXPECT_EQ(t.failure_class, FailureClass::kRetryable) << "the last real failure is kept";
  EXPECT_TRUE(t.clear_lease);
  EXPECT_FALSE(t.finished);

  s.cancel_requested = true;  // C1 still holds: the sweeper finishes the cancel
  ASSERT_OK_AND_ASSIGN(Transition canceled, Decide(s, Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(canceled.to, ExecutionStatus::kCanceled);
}

TEST(StateMachine, ThreeLeaseExpiriesInARowQuarantine) {
  ExecutionState s = State(ExecutionStatus::kQueued);
  s.retry.max_attempts = 10;
  std::vector<ExecutionStatus> outcomes;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Transition claim, Decide(s, Ev(EventKind::kClaim)));
    s = Apply(s, claim);
    ASSERT_OK_AND_ASSIGN(Transition expired, Decide(s, Ev(EventKind::kLeaseExpired)));
    s = Apply(s, expired);
    outcomes.push_back(s.status);
  }
  EXPECT_EQ(outcomes,
            (std::vector<ExecutionStatus>{ExecutionStatus::kQueued, ExecutionStatus::kQueued,
                                          ExecutionStatus::kQuarantined}));
  EXPECT_EQ(s.consecutive_lease_expiries, 3);
  EXPECT_EQ(s.failure_class, FailureClass::kLeaseExpired);
}

TEST(StateMachine, PoisonQuarantineWinsOverExhaustion) {
  ExecutionState s = Running(5);
  s.consecutive_lease_expiries = 2;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(t.to, ExecutionStatus::kQuarantined);
}

TEST(StateMachine, AReportedFailureBreaksTheLeaseExpiryStreak) {
  ExecutionState s = State(ExecutionStatus::kQueued);
  s.retry.max_attempts = 10;
  const auto step = [&](const Event& e) {
    const Result<Transition> t = Decide(s, e);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    s = Apply(s, *t);
  };
  step(Ev(EventKind::kClaim));
  step(Ev(EventKind::kLeaseExpired));
  step(Ev(EventKind::kClaim));
  step(Ev(EventKind::kLeaseExpired));
  EXPECT_EQ(s.consecutive_lease_expiries, 2);
  step(Ev(EventKind::kClaim));
  step(Fail(FailureClass::kRetryable));
  EXPECT_EQ(s.consecutive_lease_expiries, 0);
  step(Ev(EventKind::kClaim));
  step(Ev(EventKind::kLeaseExpired));
  EXPECT_EQ(s.status, ExecutionStatus::kQueued);
  EXPECT_EQ(s.consecutive_lease_expiries, 1);
}

TEST(StateMachine, LeaseExpiryWhileCancelRequestedFinishesTheCancellation) {
  ExecutionState s = Running(1);
  s.cancel_requested = true;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(t.to, ExecutionStatus::kCanceled);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.clear_lease);
  Event with_effects = Ev(EventKind::kLeaseExpired);
  with_effects.has_committed_effects = true;
  ASSERT_OK_AND_ASSIGN(Transition p, Decide(s, with_effects));
  EXPECT_EQ(p.to, ExecutionStatus::kPartiallyCanceled);
}

// ---------------------------------------------------------------------------
// Release (L6)

// The trigger of the next attempt (seed 001's triggerType): every requeue
// that starts a new attempt is a retry, a replay a replay; a requeue that
// gives the attempt back, a claim or an end keep the stored trigger.
TEST(StateMachine, RequeuesSetTheTriggerOfTheNextAttempt) {
  for (FailureClass c :
       {FailureClass::kRetryable, FailureClass::kPermanent, FailureClass::kAmbiguous}) {
    ExecutionState s = Running(1);
    s.retry.max_permanent_attempts = 3;
    s.retry.max_ambiguous_attempts = 3;
    ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Fail(c)));
    ASSERT_EQ(t.to, ExecutionStatus::kQueued) << ToString(c);
    EXPECT_EQ(t.trigger, Trigger::kRetry) << ToString(c);
  }
  ASSERT_OK_AND_ASSIGN(Transition expired, Decide(Running(1), Ev(EventKind::kLeaseExpired)));
  EXPECT_EQ(expired.trigger, Trigger::kRetry);
  ASSERT_OK_AND_ASSIGN(Transition replay,
                       Decide(State(ExecutionStatus::kFailed, 5), Ev(EventKind::kReplay)));
  EXPECT_EQ(replay.trigger, Trigger::kReplay);

  ExecutionState prefetched = Running(1);
  prefetched.handler_started = false;
  ASSERT_OK_AND_ASSIGN(Transition given_back, Decide(prefetched, Ev(EventKind::kLeaseExpired)));
  EXPECT_FALSE(given_back.trigger.has_value());
  ASSERT_OK_AND_ASSIGN(Transition released, Decide(Running(1), Ev(EventKind::kRelease)));
  EXPECT_FALSE(released.trigger.has_value());
  ASSERT_OK_AND_ASSIGN(Transition claim,
                       Decide(State(ExecutionStatus::kQueued), Ev(EventKind::kClaim)));
  EXPECT_FALSE(claim.trigger.has_value());
  ASSERT_OK_AND_ASSIGN(Transition exhausted, Decide(Running(5), Fail(FailureClass::kRetryable)));
  ASSERT_EQ(exhausted.to, ExecutionStatus::kFailed);
  EXPECT_FALSE(exhausted.trigger.has_value());
}

TEST(StateMachine, ReleaseGivesTheAttemptBack) {
  ExecutionState s = Running(3);
  s.consecutive_lease_expiries = 1;
  s.permanent_failures = 1;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kRelease)));
  EXPECT_EQ(t.to, ExecutionStatus::kQueued);
  EXPECT_EQ(t.attempt, 2);
  EXPECT_EQ(t.run_at, kNow);  // claimable at once
  EXPECT_TRUE(t.clear_lease);
  EXPECT_FALSE(t.finished);
  EXPECT_EQ(t.consecutive_lease_expiries, 1);
  EXPECT_EQ(t.permanent_failures, 1);

  ASSERT_OK_AND_ASSIGN(Transition never_negative, Decide(Running(0), Ev(EventKind::kRelease)));
  EXPECT_EQ(never_negative.attempt, 0);
}

TEST(StateMachine, ReleaseThenClaimRunsTheSameAttemptAgain) {
  ExecutionState s = State(ExecutionStatus::kQueued, 1);
  ASSERT_OK_AND_ASSIGN(Transition claim, Decide(s, Ev(EventKind::kClaim)));
  s = Apply(s, claim);
  ASSERT_OK_AND_ASSIGN(Transition release, Decide(s, Ev(EventKind::kRelease)));
  s = Apply(s, release);
  ASSERT_OK_AND_ASSIGN(Transition again, Decide(s, Ev(EventKind::kClaim)));
  EXPECT_EQ(again.attempt, 2);
}

TEST(StateMachine, ReleaseWhileCancelRequestedCancels) {
  ExecutionState s = Running(1);
  s.cancel_requested = true;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kRelease)));
  EXPECT_EQ(t.to, ExecutionStatus::kCanceled);
  EXPECT_TRUE(t.finished);
}

// ---------------------------------------------------------------------------
// Cancellation (C1)

// O1: an operator unblocks a lane by canceling its failed or quarantined head.
TEST(StateMachine, CancelOfFailedOrQuarantinedEndsIt) {
  for (ExecutionStatus from : {ExecutionStatus::kFailed, ExecutionStatus::kQuarantined}) {
    ASSERT_OK_AND_ASSIGN(Transition t, Decide(State(from), Ev(EventKind::kCancel)));
    EXPECT_EQ(t.to, ExecutionStatus::kCanceled);
    EXPECT_TRUE(t.finished);
    Event e = Ev(EventKind::kCancel);
    e.has_committed_effects = true;
    ASSERT_OK_AND_ASSIGN(Transition p, Decide(State(from), e));
    EXPECT_EQ(p.to, ExecutionStatus::kPartiallyCanceled);
  }
}

TEST(StateMachine, CancelOfQueuedCancelsAtOnce) {
  ASSERT_OK_AND_ASSIGN(Transition t,
                       Decide(State(ExecutionStatus::kQueued), Ev(EventKind::kCancel)));
  EXPECT_EQ(t.to, ExecutionStatus::kCanceled);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.changed);
  EXPECT_TRUE(t.cancel_requested);

  // A queued retry whose earlier attempt committed an effect.
  Event e = Ev(EventKind::kCancel);
  e.has_committed_effects = true;
  ASSERT_OK_AND_ASSIGN(Transition p, Decide(State(ExecutionStatus::kQueued, 1), e));
  EXPECT_EQ(p.to, ExecutionStatus::kPartiallyCanceled);
  EXPECT_TRUE(p.finished);
}

TEST(StateMachine, CancelOfRunningOnlyRequestsIt) {
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(Running(1), Ev(EventKind::kCancel)));
  EXPECT_EQ(t.to, ExecutionStatus::kRunning);
  EXPECT_TRUE(t.cancel_requested);
  EXPECT_TRUE(t.changed);
  EXPECT_FALSE(t.finished);
  EXPECT_FALSE(t.clear_lease);

  ExecutionState requested = Running(1);
  requested.cancel_requested = true;
  ASSERT_OK_AND_ASSIGN(Transition again, Decide(requested, Ev(EventKind::kCancel)));
  EXPECT_FALSE(again.changed);  // idempotent
  EXPECT_EQ(again.to, ExecutionStatus::kRunning);
  EXPECT_TRUE(again.cancel_requested);
}

TEST(StateMachine, CancelAckEndsTheExecution) {
  ExecutionState s = Running(1);
  s.cancel_requested = true;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kCancelAck)));
  EXPECT_EQ(t.to, ExecutionStatus::kCanceled);
  EXPECT_TRUE(t.finished);
  EXPECT_TRUE(t.clear_lease);
  Event e = Ev(EventKind::kCancelAck);
  e.has_committed_effects = true;
  ASSERT_OK_AND_ASSIGN(Transition p, Decide(s, e));
  EXPECT_EQ(p.to, ExecutionStatus::kPartiallyCanceled);

  const Result<Transition> unrequested = Decide(Running(1), Ev(EventKind::kCancelAck));
  ASSERT_FALSE(unrequested.ok());
  EXPECT_EQ(unrequested.status().code(), ErrorCode::kConflict);
}

TEST(StateMachine, FailureWhileCancelRequestedCancels) {
  ExecutionState s = Running(1);
  s.cancel_requested = true;
  for (FailureClass c :
       {FailureClass::kRetryable, FailureClass::kPermanent, FailureClass::kAmbiguous}) {
    Event e = Fail(c);
    e.has_committed_effects = c == FailureClass::kAmbiguous;
    ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, e));
    EXPECT_EQ(t.to, c == FailureClass::kAmbiguous ? ExecutionStatus::kPartiallyCanceled
                                                  : ExecutionStatus::kCanceled)
        << ToString(c);
    EXPECT_TRUE(t.finished);
  }
}

// ---------------------------------------------------------------------------
// Replay (R1)

TEST(StateMachine, ReplayResetsCounters) {
  for (ExecutionStatus from : {ExecutionStatus::kFailed, ExecutionStatus::kQuarantined}) {
    ExecutionState s = State(from, 5);
    s.consecutive_lease_expiries = 3;
    s.permanent_failures = 1;
    s.ambiguous_failures = 1;
    s.failure_class = FailureClass::kAmbiguous;
    s.cancel_requested = true;
    ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, Ev(EventKind::kReplay)));
    EXPECT_EQ(t.to, ExecutionStatus::kQueued) << ToString(from);
    EXPECT_EQ(t.run_at, kNow);
    EXPECT_EQ(t.attempt, 0);
    EXPECT_EQ(t.consecutive_lease_expiries, 0);
    EXPECT_EQ(t.permanent_failures, 0);
    EXPECT_EQ(t.ambiguous_failures, 0);
    EXPECT_EQ(t.failure_class, FailureClass::kNone);
    EXPECT_FALSE(t.cancel_requested);
    EXPECT_FALSE(t.finished);
    EXPECT_TRUE(t.changed);

    // The replayed execution has its full retry budget again.
    ExecutionState replayed = Apply(s, t);
    ASSERT_OK_AND_ASSIGN(Transition claim, Decide(replayed, Ev(EventKind::kClaim)));
    EXPECT_EQ(claim.attempt, 1);
  }
}

TEST(StateMachine, ReplayOfOtherStatusesIsAConflict) {
  for (ExecutionStatus from :
       {ExecutionStatus::kQueued, ExecutionStatus::kRunning, ExecutionStatus::kSucceeded,
        ExecutionStatus::kCanceled, ExecutionStatus::kPartiallyCanceled}) {
    const Result<Transition> r = Decide(State(from), Ev(EventKind::kReplay));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kConflict);
    EXPECT_NE(r.status().message().find(std::string(ToString(from))), std::string::npos);
  }
}

// ---------------------------------------------------------------------------
// ExecutionState::Of

TEST(StateMachine, StateOfCopiesTheFieldsItReads) {
  Execution e;
  e.status = ExecutionStatus::kRunning;
  e.attempt = 4;
  e.consecutive_lease_expiries = 2;
  e.permanent_failures = 1;
  e.ambiguous_failures = 3;
  e.cancel_requested = true;
  e.failure_class = FailureClass::kPermanent;
  e.retry.max_attempts = 9;
  e.retry.backoff_base_ms = 7;
  const ExecutionState s = ExecutionState::Of(e);
  EXPECT_EQ(s.status, ExecutionStatus::kRunning);
  EXPECT_EQ(s.attempt, 4);
  EXPECT_EQ(s.consecutive_lease_expiries, 2);
  EXPECT_EQ(s.permanent_failures, 1);
  EXPECT_EQ(s.ambiguous_failures, 3);
  EXPECT_TRUE(s.cancel_requested);
  EXPECT_EQ(s.failure_class, FailureClass::kPermanent);
  EXPECT_EQ(s.retry.max_attempts, 9);
  EXPECT_EQ(s.retry.backoff_base_ms, 7);
}

// ---------------------------------------------------------------------------
// Backoff (L5)

TEST(Backoff, DoublesFromBaseUpToTheCap) {
  const RetryPolicy p;  // base 5 s, cap 1 h
  const std::vector<Millis> want = {5'000,   10'000,  20'000,    40'000,    80'000,    160'000,
                                    320'000, 640'000, 1'280'000, 2'560'000, 3'600'000, 3'600'000};
  for (int attempt = 1; attempt <= static_cast<int>(want.size()); ++attempt) {
    EXPECT_EQ(BackoffDelay(p, attempt, 0.0), want[attempt - 1]) << "attempt " << attempt;
  }
}

TEST(Backoff, JitterAddsAtMostTenPercent) {
  const RetryPolicy p;
  for (int attempt = 1; attempt <= 15; ++attempt) {
    const Millis d = BackoffDelay(p, attempt, 0.0);
    for (double j : {0.0, 0.1, 0.25, 0.5, 0.75, 0.999, 0.9999999999}) {
      const Millis jd = BackoffDelay(p, attempt, j);
      EXPECT_GE(jd, d) << attempt << " " << j;
      EXPECT_LE(jd, d + d / 10) << attempt << " " << j;
    }
  }
  EXPECT_EQ(BackoffDelay(p, 1, 0.5), 5'250);
  EXPECT_EQ(BackoffDelay(p, 20, 0.5), 3'780'000);
  // Samples outside [0,1) are clamped, never shrink the delay or exceed 10%.
  EXPECT_EQ(BackoffDelay(p, 1, -3.0), 5'000);
  EXPECT_EQ(BackoffDelay(p, 1, 7.0), 5'500);
  EXPECT_EQ(BackoffDelay(p, 1, std::numeric_limits<double>::quiet_NaN()), 5'000);
}

TEST(Backoff, NoOverflowForLargeAttempts) {
  const RetryPolicy p;
  for (int attempt : {31, 32, 62, 63, 64, 100, 1000, INT_MAX}) {
    EXPECT_EQ(BackoffDelay(p, attempt, 0.0), 3'600'000) << attempt;
    EXPECT_LE(BackoffDelay(p, attempt, 0.999), 3'960'000) << attempt;
  }
  // Attempts below 1 use the base.
  EXPECT_EQ(BackoffDelay(p, 0, 0.0), 5'000);
  EXPECT_EQ(BackoffDelay(p, INT_MIN, 0.0), 5'000);
}

TEST(Backoff, ExtremePolicies) {
  RetryPolicy p;
  p.backoff_base_ms = 0;
  EXPECT_EQ(BackoffDelay(p, 3, 0.9), 0);
  p.backoff_base_ms = 10'000;
  p.backoff_cap_ms = 1'000;  // base above the cap: the cap wins
  EXPECT_EQ(BackoffDelay(p, 1, 0.0), 1'000);
  p.backoff_base_ms = -5;  // nonsense is treated as zero, never negative
  p.backoff_cap_ms = -5;
  EXPECT_EQ(BackoffDelay(p, 2, 0.5), 0);

  // An effectively unbounded cap: exact doubling as far as int64 allows,
  // saturating instead of overflowing.
  p.backoff_base_ms = 1;
  p.backoff_cap_ms = kMaxMillis;
  EXPECT_EQ(BackoffDelay(p, 11, 0.0), 1'024);
  EXPECT_EQ(BackoffDelay(p, 63, 0.0), Millis{1} << 62);
  EXPECT_EQ(BackoffDelay(p, 64, 0.0), kMaxMillis);
  EXPECT_EQ(BackoffDelay(p, 1000, 0.999), kMaxMillis);
  p.backoff_base_ms = kMaxMillis;
  EXPECT_EQ(BackoffDelay(p, 1, 0.999), kMaxMillis);
}

TEST(Backoff, RequeueTimeSaturates) {
  ExecutionState s = Running(100);
  s.retry.max_attempts = 1000;
  s.retry.backoff_cap_ms = kMaxMillis;
  Event e = Fail(FailureClass::kRetryable);
  e.jitter01 = 0.5;
  ASSERT_OK_AND_ASSIGN(Transition t, Decide(s, e));
  EXPECT_EQ(t.to, ExecutionStatus::kQueued);
  EXPECT_EQ(t.run_at, kMaxMillis);
}

}  // namespace
}  // namespace taskengine
