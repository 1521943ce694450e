// Conformance cases for the effect ledger: E1 (what reserve and commit answer
// and record), E2 (one effect across a redelivery: drill RD2 at store level),
// E3 (the current claim confirms an ambiguous reservation through an
// idempotent sink) and RD3 (two claims race: only the current one reserves and
// commits).
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

// A job of the default queue and policy whose lease is kCaseLeaseMs.
JobDefinition NotifyJob() {
  JobDefinition job;
  job.name = JobName("notify");
  job.handler = "noop";
  job.lease_ms = kCaseLeaseMs;
  return job;
}

}  // namespace

// --- E1: reserve and commit ---

TEST_P(StoreConformance, E1_FirstReserveProceedsWithTheEffectKey) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  EXPECT_TRUE(Effects(id).empty());
  Advance(kSecond);
  const Millis reserved_at = Now();

  const EffectReply first = Reserve(lease, "send-email");
  EXPECT_EQ(first.answer, EffectAnswer::kProceed);
  EXPECT_EQ(first.key, std::to_string(id.value) + ":send-email");
  EXPECT_EQ(first.key, EffectKey(id, "send-email"));

  std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_EQ(effects[0].execution, id);
  EXPECT_EQ(effects[0].name, "send-email");
  EXPECT_EQ(effects[0].key, first.key);
  EXPECT_FALSE(effects[0].committed);
  EXPECT_EQ(effects[0].reserved_by, lease.version);
  EXPECT_EQ(effects[0].attempt, 1);
  EXPECT_EQ(effects[0].reserved_at, reserved_at);
  EXPECT_EQ(effects[0].committed_at, 0);
  EXPECT_EQ(effects[0].detail, "");

  // The same claim asking again (a worker retrying its own call) proceeds.
  Advance(kSecond);
  const EffectReply again = Reserve(lease, "send-email");
  EXPECT_EQ(again.answer, EffectAnswer::kProceed);
  EXPECT_EQ(again.key, first.key);
  effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u) << "one key, one record";
  EXPECT_FALSE(effects[0].committed);
  EXPECT_EQ(effects[0].reserved_by, lease.version);
}

TEST_P(StoreConformance, E1_CommitRecordsTheDetailAndLaterReservesAreAlreadyDone) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  const Millis reserved_at = Now();
  ASSERT_EQ(Reserve(lease, "send-email").answer, EffectAnswer::kProceed);
  Advance(2 * kSecond);
  const Millis committed_at = Now();

  ASSERT_OK_AND_ASSIGN(EffectRecord rec, store().CommitEffect(Ref(lease), "send-email", "msg-17"));
  EXPECT_EQ(rec.execution, id);
  EXPECT_EQ(rec.name, "send-email");
  EXPECT_EQ(rec.key, EffectKey(id, "send-email"));
  EXPECT_TRUE(rec.committed);
  EXPECT_EQ(rec.reserved_by, lease.version);
  EXPECT_EQ(rec.attempt, 1);
  EXPECT_EQ(rec.reserved_at, reserved_at);
  EXPECT_EQ(rec.committed_at, committed_at);
  EXPECT_EQ(rec.detail, "msg-17");
  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_EQ(DescribeEffect(effects[0]), DescribeEffect(rec)) << "the ledger holds what commit said";

  Advance(kSecond);
  const EffectReply done = Reserve(lease, "send-email");
  EXPECT_EQ(done.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(done.key, rec.key);
  EXPECT_EQ(done.detail, "msg-17");
  EXPECT_EQ(done.committed_at, committed_at);
  EXPECT_EQ(Effects(id).size(), 1u);
}

TEST_P(StoreConformance, E1_LaterClaimAfterARetrySeesAlreadyDone) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne();
  ReserveAndCommit(first, "charge", "ch_1");
  const Millis committed_at = Now();
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "sink 503 after the charge"));
  Advance(kFirstBackoffMs);

  const Lease second = ClaimOne("default", "w2");
  ASSERT_EQ(second.id, id);
  ASSERT_EQ(second.attempt, 2);
  const EffectReply reply = Reserve(second, "charge");
  EXPECT_EQ(reply.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(reply.detail, "ch_1");
  EXPECT_EQ(reply.committed_at, committed_at);
  EXPECT_EQ(reply.key, EffectKey(id, "charge"));

  ASSERT_OK(store().Complete(Ref(second), "{}"));
  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].detail, "ch_1");
  EXPECT_EQ(effects[0].reserved_by, first.version) << "the claim that did it";
  EXPECT_EQ(effects[0].attempt, 1);
}

TEST_P(StoreConformance, E1_UnconfirmedReservationOfAnEarlierClaimIsAmbiguous) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne();
  ASSERT_EQ(Reserve(first, "charge").answer, EffectAnswer::kProceed);
  // The sink timed out: the worker cannot tell whether the charge happened.
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "timeout"));
  Advance(kFirstBackoffMs);

  const Lease second = ClaimOne("default", "w2");
  ASSERT_EQ(second.id, id);
  const EffectReply reply = Reserve(second, "charge");
  EXPECT_EQ(reply.answer, EffectAnswer::kAmbiguous);
  EXPECT_EQ(reply.key, EffectKey(id, "charge"));
  EXPECT_EQ(Reserve(second, "receipt").answer, EffectAnswer::kProceed)
      << "an effect the earlier claim never reserved is new";

  for (const EffectRecord& r : Effects(id)) {
    EXPECT_FALSE(r.committed) << r.name << ": nothing confirmed it";
  }
}

TEST_P(StoreConformance, E1_CancelRequestedStopsNewEffectsButReportsDoneOnes) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "first-notice", "msg-1");
  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(id, By("alice")));
  ASSERT_EQ(status, ExecutionStatus::kRunning);

  EXPECT_EQ(Reserve(lease, "second-notice").answer, EffectAnswer::kCanceled);
  const EffectReply done = Reserve(lease, "first-notice");
  EXPECT_EQ(done.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(done.detail, "msg-1");

  for (const EffectRecord& r : Effects(id)) {
    if (r.name == "second-notice") {
      EXPECT_FALSE(r.committed);
    }
  }
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_TRUE(e.cancel_requested);
}

TEST_P(StoreConformance, E1_StaleClaimIsAnsweredStaleAndRecordsNothing) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  AdmitRequest later = MakeRequest("notify", 2);
  later.run_at = Now() + 3'600'000;  // never due in this case
  const ExecutionId never_claimed = AdmitOne(later);
  const Lease first = ClaimOne();
  ASSERT_EQ(first.id, id);

  auto expect_stale = [&](const LeaseRef& ref, const std::string& what) {
    SCOPED_TRACE(what);
    const std::string before = Snapshot();
    Result<EffectReply> r = store().ReserveEffect(ref, "send-email");
    ASSERT_OK(r);
    EXPECT_EQ(r->answer, EffectAnswer::kStale);
    EXPECT_EQ(Snapshot(), before) << "a stale reservation recorded something";
  };
  expect_stale(LeaseRef{id, ClaimVersion(first.version.value + 1)}, "a version not yet issued");
  expect_stale(LeaseRef{id, ClaimVersion(first.version.value - 1)}, "an older version");
  expect_stale(LeaseRef{never_claimed, Get(never_claimed).claim_version}, "a queued execution");

  Advance(kCaseLeaseMs + 1);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  expect_stale(Ref(first), "the expired claim, requeued");
  Advance(kFirstBackoffMs);
  std::vector<Lease> leases = ClaimN("default", 1, "w2");
  ASSERT_EQ(leases.size(), 1u);
  const Lease second = leases[0];
  ASSERT_EQ(second.id, id);
  expect_stale(Ref(first), "the expired claim, reclaimed by another");

  ASSERT_OK(store().Complete(Ref(second), "{}"));
  expect_stale(Ref(second), "the claim that completed");
  EXPECT_TRUE(Effects(id).empty());
}

TEST_P(StoreConformance, E1_MissingExecutionIsNotFound) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "send-email", "msg-1");
  const LeaseRef missing{ExecutionId(id.value + 1000), lease.version};
  const std::string before = Snapshot();

  EXPECT_EQ(store().ReserveEffect(missing, "send-email").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().CommitEffect(missing, "send-email", "x").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().ReleaseEffect(missing, "send-email").code(), ErrorCode::kNotFound);
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(StoreConformance, E1_BadEffectNamesAreInvalidArgument) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  const std::string before = Snapshot();
  for (const std::string& bad :
       {std::string(), std::string("has space"), std::string("slash/name"), std::string("semi;"),
        std::string("tab\tname"), std::string("caf\xc3\xa9"), std::string("quote\""),
        std::string(121, 'a')}) {
    SCOPED_TRACE("name '" + bad + "'");
    EXPECT_EQ(store().ReserveEffect(Ref(lease), bad).status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(store().CommitEffect(Ref(lease), bad, "d").status().code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(store().ReleaseEffect(Ref(lease), bad).code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(Snapshot(), before);

  // The edges of the rule are valid.
  for (const std::string& good : {std::string(120, 'z'), std::string("A.b_c:d-9")}) {
    const EffectReply reply = Reserve(lease, good);
    EXPECT_EQ(reply.answer, EffectAnswer::kProceed) << good;
    EXPECT_EQ(reply.key, EffectKey(id, good));
  }
  EXPECT_EQ(Effects(id).size(), 2u);
}

TEST_P(StoreConformance, E1_CommitWithoutReservationIsConflict) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  ASSERT_EQ(Reserve(lease, "reserved").answer, EffectAnswer::kProceed);
  const std::string before = Snapshot();
  EXPECT_EQ(store().CommitEffect(Ref(lease), "never-reserved", "d").status().code(),
            ErrorCode::kConflict);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Effects(id).size(), 1u);
}

TEST_P(StoreConformance, E1_CommitTwiceKeepsTheFirstDetail) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease lease = ClaimOne();
  ASSERT_EQ(Reserve(lease, "send-email").answer, EffectAnswer::kProceed);
  ASSERT_OK_AND_ASSIGN(EffectRecord first, store().CommitEffect(Ref(lease), "send-email", "first"));
  const std::string before = Snapshot();
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(EffectRecord second,
                       store().CommitEffect(Ref(lease), "send-email", "second"));
  EXPECT_TRUE(second.committed);
  EXPECT_EQ(second.detail, "first");
  EXPECT_EQ(second.committed_at, first.committed_at);
  EXPECT_EQ(Snapshot(), before) << "an idempotent commit changes nothing";
  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_EQ(effects[0].detail, "first");
}

TEST_P(StoreConformance, E1_CommitWithAStaleClaimIsStale) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne();
  ASSERT_EQ(Reserve(first, "send-email").answer, EffectAnswer::kProceed);
  Advance(kCaseLeaseMs + 1);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);

  std::string before = Snapshot();
  EXPECT_EQ(store().CommitEffect(Ref(first), "send-email", "late").status().code(),
            ErrorCode::kStale)
      << "requeued: the claim is over";
  EXPECT_EQ(Snapshot(), before);

  Advance(kFirstBackoffMs);
  const Lease second = ClaimOne("default", "w2");
  ASSERT_EQ(second.id, id);
  before = Snapshot();
  EXPECT_EQ(store().CommitEffect(Ref(first), "send-email", "late").status().code(),
            ErrorCode::kStale)
      << "another claim holds the execution";
  EXPECT_EQ(store().ReleaseEffect(Ref(first), "send-email").code(), ErrorCode::kStale);
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(StoreConformance, E1_EffectsAreKeyedPerExecutionAndListedByReservationTime) {
  DefineJob(NotifyJob());
  const ExecutionId a = AdmitOne(MakeRequest("notify", 1));
  const ExecutionId b = AdmitOne(MakeRequest("notify", 2));
  const std::vector<Lease> leases = ClaimN("default", 2);
  ASSERT_EQ(leases.size(), 2u);
  const Lease& la = leases[0].id == a ? leases[0] : leases[1];
  const Lease& lb = leases[0].id == a ? leases[1] : leases[0];
  ASSERT_EQ(la.id, a);
  ASSERT_EQ(lb.id, b);

  ASSERT_EQ(Reserve(la, "zeta").answer, EffectAnswer::kProceed);
  Advance(kSecond);
  ASSERT_EQ(Reserve(la, "alpha").answer, EffectAnswer::kProceed);
  ReserveAndCommit(lb, "zeta", "b-zeta");
  ASSERT_OK(store().CommitEffect(Ref(la), "alpha", "a-alpha"));

  const std::vector<EffectRecord> ea = Effects(a);
  ASSERT_EQ(ea.size(), 2u);
  EXPECT_EQ(ea[0].name, "zeta") << "by reservation time, not by name or commit";
  EXPECT_FALSE(ea[0].committed) << "b's commit of its own zeta is not a's";
  EXPECT_EQ(ea[1].name, "alpha");
  EXPECT_EQ(ea[1].detail, "a-alpha");
  const std::vector<EffectRecord> eb = Effects(b);
  ASSERT_EQ(eb.size(), 1u);
  EXPECT_EQ(eb[0].key, EffectKey(b, "zeta"));
  EXPECT_NE(eb[0].key, ea[0].key);
  EXPECT_TRUE(eb[0].committed);
}

TEST_P(StoreConformance, E1_ReleaseEffectDropsOnlyTheCurrentClaimsReservation) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne();
  ASSERT_EQ(Reserve(first, "dropped").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().ReleaseEffect(Ref(first), "dropped"));
  for (const EffectRecord& r : Effects(id)) EXPECT_NE(r.name, "dropped");

  ReserveAndCommit(first, "done", "msg-1");
  std::string before = Snapshot();
  ASSERT_OK(store().ReleaseEffect(Ref(first), "done"));
  EXPECT_EQ(Snapshot(), before) << "a committed effect stays committed";

  ASSERT_EQ(Reserve(first, "unknown-outcome").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "timeout"));
  Advance(kFirstBackoffMs);
  const Lease second = ClaimOne("default", "w2");
  before = Snapshot();
  ASSERT_OK(store().ReleaseEffect(Ref(second), "unknown-outcome"));
  EXPECT_EQ(Snapshot(), before) << "another claim's reservation is not this claim's to drop";
  EXPECT_EQ(Reserve(second, "unknown-outcome").answer, EffectAnswer::kAmbiguous);
  EXPECT_EQ(Reserve(second, "dropped").answer, EffectAnswer::kProceed)
      << "a dropped reservation is not ambiguous";
  EXPECT_EQ(store().ReleaseEffect(Ref(first), "dropped").code(), ErrorCode::kStale);
}

// --- E3: an idempotent sink resolves `ambiguous` ---

TEST_P(StoreConformance, E3_CurrentClaimMayConfirmAnAmbiguousReservation) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne();
  ASSERT_EQ(Reserve(first, "publish").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "timeout"));
  Advance(kFirstBackoffMs);
  const Lease second = ClaimOne("default", "w2");
  ASSERT_EQ(Reserve(second, "publish").answer, EffectAnswer::kAmbiguous);

  // The handler is idempotent: it passed the effect key to the sink, which
  // deduplicated; the current claim confirms the effect.
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(EffectRecord rec,
                       store().CommitEffect(Ref(second), "publish", "sink-dedup:42"));
  EXPECT_TRUE(rec.committed);
  EXPECT_EQ(rec.detail, "sink-dedup:42");
  EXPECT_EQ(rec.committed_at, Now());

  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].detail, "sink-dedup:42");
  const EffectReply done = Reserve(second, "publish");
  EXPECT_EQ(done.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(done.detail, "sink-dedup:42");
}

// --- E2 / RD2: a crash after the effect, before the acknowledgement ---

TEST_P(StoreConformance, RD2_RedeliveryAfterACrashLeavesOneEffect) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease first = ClaimOne("default", "w1");
  ReserveAndCommit(first, "notice", "msg-1");
  const Millis committed_at = Now();
  // w1 dies before Complete: its lease expires and the sweeper requeues.
  Advance(kCaseLeaseMs + 1);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  Advance(kFirstBackoffMs);

  const Lease second = ClaimOne("default", "w2");
  ASSERT_EQ(second.id, id);
  const EffectReply reply = Reserve(second, "notice");
  EXPECT_EQ(reply.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(reply.detail, "msg-1");
  EXPECT_EQ(reply.committed_at, committed_at);
  ASSERT_OK_AND_ASSIGN(FinishReply done, store().Complete(Ref(second), "{\"notice\":\"msg-1\"}"));
  EXPECT_EQ(done.status, ExecutionStatus::kSucceeded);

  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u) << "exactly one effect";
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].detail, "msg-1");
  EXPECT_EQ(effects[0].reserved_by, first.version);
}

// --- E2 / RD3: the lease expires while worker 1 still runs ---

TEST_P(StoreConformance, RD3_OnlyTheCurrentClaimReservesAndCommits) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease w1 = ClaimOne("default", "w1");
  Advance(kCaseLeaseMs + 1);  // w1 stalls before its effect
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  Advance(kFirstBackoffMs);
  const Lease w2 = ClaimOne("default", "w2");
  ASSERT_EQ(w2.id, id);

  std::string before = Snapshot();
  ASSERT_OK_AND_ASSIGN(EffectReply late, store().ReserveEffect(Ref(w1), "publish"));
  EXPECT_EQ(late.answer, EffectAnswer::kStale);
  EXPECT_EQ(Snapshot(), before);

  EXPECT_EQ(Reserve(w2, "publish").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().CommitEffect(Ref(w2), "publish", "by-w2"));

  before = Snapshot();
  EXPECT_EQ(store().CommitEffect(Ref(w1), "publish", "by-w1").status().code(), ErrorCode::kStale);
  ASSERT_OK_AND_ASSIGN(EffectReply again, store().ReserveEffect(Ref(w1), "publish"));
  EXPECT_EQ(again.answer, EffectAnswer::kStale) << "stale even for a committed effect";
  EXPECT_EQ(Snapshot(), before);

  ASSERT_OK(store().Complete(Ref(w2), "{}"));
  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u) << "one effect";
  EXPECT_EQ(effects[0].detail, "by-w2");
  EXPECT_EQ(effects[0].reserved_by, w2.version);
  EXPECT_EQ(effects[0].attempt, 2);
}

TEST_P(StoreConformance, RD3_AReservationOfTheExpiredClaimIsAmbiguousToTheNextOne) {
  DefineJob(NotifyJob());
  const ExecutionId id = AdmitOne(MakeRequest("notify", 1));
  const Lease w1 = ClaimOne("default", "w1");
  ASSERT_EQ(Reserve(w1, "publish").answer, EffectAnswer::kProceed);
  Advance(kCaseLeaseMs + 1);  // w1 stalls inside the effect
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  Advance(kFirstBackoffMs);
  const Lease w2 = ClaimOne("default", "w2");
  ASSERT_EQ(w2.id, id);

  EXPECT_EQ(Reserve(w2, "publish").answer, EffectAnswer::kAmbiguous);
  std::string before = Snapshot();
  EXPECT_EQ(store().CommitEffect(Ref(w1), "publish", "by-w1").status().code(), ErrorCode::kStale)
      << "w1 woke up: too late to confirm";
  EXPECT_EQ(Snapshot(), before);
  for (const EffectRecord& r : Effects(id)) EXPECT_FALSE(r.committed);

  // w2's sink is idempotent on the effect key: it confirms.
  ASSERT_OK(store().CommitEffect(Ref(w2), "publish", "by-w2"));
  ASSERT_OK(store().Complete(Ref(w2), "{}"));
  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].detail, "by-w2");
}

}  // namespace taskengine
