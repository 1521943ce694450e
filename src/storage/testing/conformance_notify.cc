// Conformance cases for failure notifications (I6): an execution that ends
// failed, quarantined or partially_canceled waits in the outbox from the
// transaction of its ending, and the notifier's steps are durable.
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

std::vector<std::int64_t> PendingIds(const NotifyOutbox& outbox) {
  std::vector<std::int64_t> ids;
  for (const NotifyPending& p : outbox.pending) ids.push_back(p.execution.value);
  return ids;
}

}  // namespace

TEST_P(StoreConformance, I6_FailedQuarantinedAndPartiallyCanceledEndingsWaitInTheOutbox) {
  JobDefinition once = MakeJob("once");
  once.retry.max_attempts = 1;
  DefineJob(once);
  DefineJob("a");
  const ExecutionId failed = AdmitOne(MakeRequest("once", 1));
  const ExecutionId quarantined = AdmitOne(MakeRequest("a", 2));
  const ExecutionId partial = AdmitOne(MakeRequest("a", 3));
  const ExecutionId succeeded = AdmitOne(MakeRequest("a", 4));
  const ExecutionId canceled = AdmitOne(MakeRequest("a", 5));
  const ExecutionId ambiguous = AdmitOne(MakeRequest("a", 6));
  ASSERT_OK(store().RequestCancel(canceled, By("ops")));
  const Millis ended_at = Now();
  for (const Lease& l : ClaimN("default", 10)) {
    if (l.id == failed) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "timeout"));
    } else if (l.id == quarantined) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad input"));
    } else if (l.id == partial) {
      ReserveAndCommit(l, "charge", "ch_1");
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "flaky"));  // queued again
    } else if (l.id == ambiguous) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kAmbiguous, "reset after the request"));
    } else if (l.id == succeeded) {
      ASSERT_OK(store().Complete(Ref(l), "{}"));
    } else {
      FAIL() << "claimed " << l.id.value;
    }
  }
  ASSERT_OK(store().RequestCancel(partial, By("ops")));
  ASSERT_EQ(Get(failed).status, ExecutionStatus::kFailed);
  ASSERT_EQ(Get(quarantined).status, ExecutionStatus::kQuarantined);
  ASSERT_EQ(Get(partial).status, ExecutionStatus::kPartiallyCanceled);
  ASSERT_EQ(Get(ambiguous).status, ExecutionStatus::kQuarantined);

  ASSERT_OK_AND_ASSIGN(NotifyOutbox outbox, store().ReadNotifyOutbox(100));
  EXPECT_EQ(PendingIds(outbox), (std::vector<std::int64_t>{failed.value, quarantined.value,
                                                           partial.value, ambiguous.value}));
  for (const NotifyPending& p : outbox.pending) {
    EXPECT_EQ(p.job.value, p.execution == failed ? "once" : "a");
    EXPECT_EQ(p.ended_at, ended_at);
  }
  EXPECT_TRUE(outbox.jobs.empty());
  ASSERT_OK_AND_ASSIGN(NotifyOutbox first, store().ReadNotifyOutbox(1));
  EXPECT_EQ(PendingIds(first), (std::vector<std::int64_t>{failed.value}));
}

TEST_P(StoreConformance, I6_DecidedEndingsLeaveTheOutboxButALaterEndingStays) {
  DefineJob("a");
  const ExecutionId id = AdmitOne(MakeRequest("a", 1));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox before, store().ReadNotifyOutbox(10));
  ASSERT_EQ(before.pending.size(), 1u);
  const NotifyPending first = before.pending[0];

  // Replayed and quarantined again before the notifier decided the first ending.
  Advance(5 * kSecond);
  ASSERT_OK(store().Replay(ReplayRequest{id, By("ops", "fixed")}));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "still bad"));
  ASSERT_OK(store().UpdateNotifyOutbox(NotifyOutboxUpdate{{first}, {}}));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox after, store().ReadNotifyOutbox(10));
  ASSERT_EQ(after.pending.size(), 1u);
  EXPECT_EQ(after.pending[0].execution, id);
  EXPECT_EQ(after.pending[0].ended_at, first.ended_at + 5 * kSecond);

  ASSERT_OK(store().UpdateNotifyOutbox(NotifyOutboxUpdate{{after.pending[0]}, {}}));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox empty, store().ReadNotifyOutbox(10));
  EXPECT_TRUE(empty.pending.empty());

  // An operator closing out the told failure is no new notice.
  ASSERT_OK(store().RequestCancel(id, By("ops")));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox closed, store().ReadNotifyOutbox(10));
  EXPECT_TRUE(closed.pending.empty());
}

TEST_P(StoreConformance, I6_NotifierStatesRoundTripAndAnEmptyOneIsDeleted) {
  NotifyJobState a{JobName("a"), {1000, 2000, 3000}, 0, 0};
  NotifyJobState b{JobName("b"), {}, 7, 1500};
  ASSERT_OK(store().UpdateNotifyOutbox(NotifyOutboxUpdate{{}, {b, a}}));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox read, store().ReadNotifyOutbox(10));
  ASSERT_EQ(read.jobs.size(), 2u);
  EXPECT_EQ(read.jobs[0].job.value, "a");
  EXPECT_EQ(read.jobs[0].sent_at, (std::vector<Millis>{1000, 2000, 3000}));
  EXPECT_EQ(read.jobs[0].suppressed, 0);
  EXPECT_EQ(read.jobs[1].job.value, "b");
  EXPECT_TRUE(read.jobs[1].sent_at.empty());
  EXPECT_EQ(read.jobs[1].suppressed, 7);
  EXPECT_EQ(read.jobs[1].suppressed_since, 1500);

  a.sent_at = {4000};
  ASSERT_OK(store().UpdateNotifyOutbox(
      NotifyOutboxUpdate{{}, {a, NotifyJobState{JobName("b"), {}, 0, 0}}}));
  ASSERT_OK_AND_ASSIGN(NotifyOutbox after, store().ReadNotifyOutbox(10));
  ASSERT_EQ(after.jobs.size(), 1u);
  EXPECT_EQ(after.jobs[0].job.value, "a");
  EXPECT_EQ(after.jobs[0].sent_at, (std::vector<Millis>{4000}));
}

TEST_P(StoreConformance, I6_OutboxLimitIsChecked) {
  EXPECT_EQ(store().ReadNotifyOutbox(0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().ReadNotifyOutbox(10'001).status().code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformance, I6_JobNotifyFieldsRoundTripAndBadTargetsAreRefused) {
  JobDefinition job = MakeJob("a");
  job.notify_on_failure = false;
  job.notify_targets = {"ops@example.com", "webhook:hook", "slack:team"};
  DefineJob(job);
  ASSERT_OK_AND_ASSIGN(JobDefinition read, store().GetJob(JobName("a")));
  EXPECT_FALSE(read.notify_on_failure);
  EXPECT_EQ(read.notify_targets, job.notify_targets);

  JobDefinition plain = MakeJob("b");
  DefineJob(plain);
  ASSERT_OK_AND_ASSIGN(JobDefinition b, store().GetJob(JobName("b")));
  EXPECT_TRUE(b.notify_on_failure);
  EXPECT_TRUE(b.notify_targets.empty());

  for (const std::string bad : std::vector<std::string>{
           "not an address", "x@y,z@w", "webhook:Bad Name", "sms:123", "a@b\r\nBcc: x@y"}) {
    JobDefinition refused = MakeJob("c");
    refused.notify_targets = {bad};
    EXPECT_EQ(store().UpsertJob(refused).code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(store().GetJob(JobName("c")).status().code(), ErrorCode::kNotFound);
}

}  // namespace taskengine
