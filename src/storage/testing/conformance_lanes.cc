// Conformance cases for lanes (O1): at most one execution of a lane runs,
// strictly in id order; a failed or quarantined head blocks its lane (and only
// its lane, Q2) until an operator replays or cancels it.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

AdmitRequest InLane(AdmitRequest r, const std::string& lane) {
  r.lane_key = lane;
  return r;
}

std::set<std::int64_t> IdsOf(const std::vector<Lease>& leases) {
  std::set<std::int64_t> ids;
  for (const Lease& l : leases) ids.insert(l.id.value);
  return ids;
}

}  // namespace

TEST_P(StoreConformance, O1_OnlyTheLaneHeadIsClaimable) {
  DefineJob("sync");
  const ExecutionId a = AdmitOne(InLane(MakeRequest("sync", 1), "meeting:1"));
  const ExecutionId b = AdmitOne(InLane(MakeRequest("sync", 2), "meeting:1"));
  const ExecutionId c = AdmitOne(InLane(MakeRequest("sync", 3), "meeting:1"));
  const ExecutionId free = AdmitOne(MakeRequest("sync", 4));

  std::vector<Lease> leases = ClaimN("default", 10);
  EXPECT_EQ(IdsOf(leases), (std::set<std::int64_t>{a.value, free.value}))
      << "the lane head and the lane-less one";
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(), "meeting:1"));
  EXPECT_EQ(lane.lane, "meeting:1");
  EXPECT_EQ(lane.head, a);
  EXPECT_EQ(lane.head_status, ExecutionStatus::kRunning);
  EXPECT_FALSE(lane.blocked);
  EXPECT_EQ(lane.queued, 2);
  EXPECT_EQ(lane.running, 1);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "b waits for a";

  for (const Lease& l : leases) ASSERT_OK(store().Complete(Ref(l), "{}"));
  leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, b);
  ASSERT_OK_AND_ASSIGN(lane, store().GetLane(TenantId(), "meeting:1"));
  EXPECT_EQ(lane.head, b);
  EXPECT_EQ(lane.queued, 1);
  EXPECT_EQ(lane.running, 1);

  ASSERT_OK(store().Complete(Ref(leases[0]), "{}"));
  leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, c);
  ASSERT_OK(store().Complete(Ref(leases[0]), "{}"));

  EXPECT_TRUE(ClaimN("default", 10).empty());
  ASSERT_OK_AND_ASSIGN(lane, store().GetLane(TenantId(), "meeting:1"));
  EXPECT_EQ(lane.head, ExecutionId()) << "every member is done";
  EXPECT_FALSE(lane.blocked);
  EXPECT_EQ(lane.queued, 0);
  EXPECT_EQ(lane.running, 0);
}

TEST_P(StoreConformance, O1_AdmitBatchIntoOneLaneKeepsIdOrder) {
  DefineJob("sync");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(InLane(MakeRequest("sync", i), "doc:7"));
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> admitted, store().AdmitBatch(requests));
  ASSERT_EQ(admitted.size(), 4u);
  std::vector<ExecutionId> ids;
  for (const AdmitResult& r : admitted) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());

  for (ExecutionId expected : ids) {
    const std::vector<Lease> leases = ClaimN("default", 10);
    ASSERT_EQ(leases.size(), 1u);
    EXPECT_EQ(leases[0].id, expected);
    ASSERT_OK(store().Complete(Ref(leases[0]), "{}"));
  }
  EXPECT_TRUE(ClaimN("default", 10).empty());
}

TEST_P(StoreConformance, O1_LaneOrderIsByIdNeverByTime) {
  DefineJob("sync");
  AdmitRequest delayed = InLane(MakeRequest("sync", 1), "account:9");
  delayed.run_at = Now() + 10'000;
  const ExecutionId first = AdmitOne(delayed);
  const ExecutionId second = AdmitOne(InLane(MakeRequest("sync", 2), "account:9"));

  EXPECT_TRUE(ClaimN("default", 10).empty())
      << "the second is due, but the first (older id) is not yet";
  Advance(10'000);
  Lease lease = ClaimOne();
  EXPECT_EQ(lease.id, first);

  // The head backs off after a retryable failure: it keeps its place.
  ASSERT_OK(store().Fail(Ref(lease), FailureClass::kRetryable, "503"));
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "the head is backing off";
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(), "account:9"));
  EXPECT_EQ(lane.head, first);
  EXPECT_EQ(lane.head_status, ExecutionStatus::kQueued);
  EXPECT_FALSE(lane.blocked);
  Advance(kFirstBackoffMs);
  lease = ClaimOne();
  EXPECT_EQ(lease.id, first);

  // Given back (shutdown) it still keeps its place.
  ASSERT_OK(store().Release(Ref(lease)));
  lease = ClaimOne();
  EXPECT_EQ(lease.id, first);
  ASSERT_OK(store().Complete(Ref(lease), "{}"));
  EXPECT_EQ(ClaimOne().id, second);
}

TEST_P(StoreConformance, O1_AnExpiredHeadKeepsItsPlace) {
  JobDefinition job = MakeJob("sync");
  job.lease_ms = 10'000;
  DefineJob(job);
  const ExecutionId first = AdmitOne(InLane(MakeRequest("sync", 1), "lane-x"));
  const ExecutionId second = AdmitOne(InLane(MakeRequest("sync", 2), "lane-x"));
  ASSERT_EQ(ClaimOne().id, first);
  Advance(10'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  Advance(3'600'000);
  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, first);
  EXPECT_NE(leases[0].id, second);
}

TEST_P(StoreConformance, O1_AFailedOrQuarantinedHeadBlocksOnlyItsLane) {
  JobDefinition job = MakeJob("sync");
  job.retry.max_attempts = 1;
  DefineJob(job);
  const ExecutionId q1 = AdmitOne(InLane(MakeRequest("sync", 1), "lane-q"));
  const ExecutionId f1 = AdmitOne(InLane(MakeRequest("sync", 2), "lane-f"));
  const ExecutionId k1 = AdmitOne(InLane(MakeRequest("sync", 3), "lane-ok"));
  const ExecutionId free = AdmitOne(MakeRequest("sync", 4));
  AdmitOne(InLane(MakeRequest("sync", 5), "lane-q"));
  AdmitOne(InLane(MakeRequest("sync", 6), "lane-f"));
  const ExecutionId k2 = AdmitOne(InLane(MakeRequest("sync", 7), "lane-ok"));

  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(IdsOf(leases), (std::set<std::int64_t>{q1.value, f1.value, k1.value, free.value}));
  for (const Lease& l : leases) {
    if (l.id == q1) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad input"));
    }
    if (l.id == f1) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "exhausted"));
    }
    if (l.id == k1 || l.id == free) {
      ASSERT_OK(store().Complete(Ref(l), "{}"));
    }
  }
  ASSERT_EQ(Get(q1).status, ExecutionStatus::kQuarantined);
  ASSERT_EQ(Get(f1).status, ExecutionStatus::kFailed);
  // Admitted behind a blocked head: waits too.
  AdmitOne(InLane(MakeRequest("sync", 8), "lane-q"));
  // Q2: other work keeps moving.
  const ExecutionId free2 = AdmitOne(MakeRequest("sync", 9));

  EXPECT_EQ(IdsOf(ClaimN("default", 10)), (std::set<std::int64_t>{k2.value, free2.value}));
  Advance(3'600'000);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "blocked lanes stay blocked";

  ASSERT_OK_AND_ASSIGN(LaneStatus q, store().GetLane(TenantId(), "lane-q"));
  EXPECT_EQ(q.head, q1);
  EXPECT_EQ(q.head_status, ExecutionStatus::kQuarantined);
  EXPECT_TRUE(q.blocked);
  EXPECT_EQ(q.queued, 2);
  EXPECT_EQ(q.running, 0);
  ASSERT_OK_AND_ASSIGN(LaneStatus f, store().GetLane(TenantId(), "lane-f"));
  EXPECT_EQ(f.head, f1);
  EXPECT_EQ(f.head_status, ExecutionStatus::kFailed);
  EXPECT_TRUE(f.blocked);
  EXPECT_EQ(f.queued, 1);
  ASSERT_OK_AND_ASSIGN(LaneStatus ok, store().GetLane(TenantId(), "lane-ok"));
  EXPECT_EQ(ok.head, k2);
  EXPECT_EQ(ok.head_status, ExecutionStatus::kRunning);
  EXPECT_FALSE(ok.blocked);
}

TEST_P(StoreConformance, O1_ReplayingTheHeadUnblocksItsLane) {
  DefineJob("sync");
  const ExecutionId head = AdmitOne(InLane(MakeRequest("sync", 1), "lane-r"));
  const ExecutionId next = AdmitOne(InLane(MakeRequest("sync", 2), "lane-r"));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  EXPECT_TRUE(ClaimN("default", 10).empty());

  ASSERT_OK(store().Replay(ReplayRequest{head, By("alice", "fixed")}));
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(), "lane-r"));
  EXPECT_EQ(lane.head, head);
  EXPECT_FALSE(lane.blocked);
  std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, head) << "the replayed head runs first, then the rest";
  ASSERT_OK(store().Complete(Ref(leases[0]), "{}"));
  leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, next);
}

TEST_P(StoreConformance, O1_CancelingTheHeadUnblocksItsLane) {
  DefineJob("sync");
  // Three lanes whose heads end canceled from three statuses.
  const ExecutionId quarantined = AdmitOne(InLane(MakeRequest("sync", 1), "lane-q"));
  const ExecutionId running = AdmitOne(InLane(MakeRequest("sync", 2), "lane-r"));
  AdmitRequest later = InLane(MakeRequest("sync", 3), "lane-w");
  later.run_at = Now() + 60'000;
  const ExecutionId waiting = AdmitOne(later);
  const ExecutionId after_q = AdmitOne(InLane(MakeRequest("sync", 4), "lane-q"));
  const ExecutionId after_r = AdmitOne(InLane(MakeRequest("sync", 5), "lane-r"));
  const ExecutionId after_w = AdmitOne(InLane(MakeRequest("sync", 6), "lane-w"));

  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(IdsOf(leases), (std::set<std::int64_t>{quarantined.value, running.value}));
  const Lease& lq = leases[0].id == quarantined ? leases[0] : leases[1];
  const Lease& lr = leases[0].id == quarantined ? leases[1] : leases[0];
  ASSERT_OK(store().Fail(Ref(lq), FailureClass::kPermanent, "bad input"));
  EXPECT_TRUE(ClaimN("default", 10).empty());

  ASSERT_OK_AND_ASSIGN(ExecutionStatus s1, store().RequestCancel(quarantined, By("alice")));
  EXPECT_EQ(s1, ExecutionStatus::kCanceled);
  ASSERT_OK_AND_ASSIGN(ExecutionStatus s2, store().RequestCancel(waiting, By("alice")));
  EXPECT_EQ(s2, ExecutionStatus::kCanceled);
  ASSERT_OK_AND_ASSIGN(ExecutionStatus s3, store().RequestCancel(running, By("alice")));
  EXPECT_EQ(s3, ExecutionStatus::kRunning);
  EXPECT_EQ(IdsOf(ClaimN("default", 10)), (std::set<std::int64_t>{after_q.value, after_w.value}))
      << "lane-r's head still runs until its worker stops";
  ASSERT_OK_AND_ASSIGN(FinishReply stopped, store().Release(Ref(lr)));
  EXPECT_EQ(stopped.status, ExecutionStatus::kCanceled);
  EXPECT_EQ(IdsOf(ClaimN("default", 10)), (std::set<std::int64_t>{after_r.value}));
}

TEST_P(StoreConformance, O1_TheSweeperMovesLaneHeadsLikeAWorkerWould) {
  JobDefinition job = MakeJob("sync");
  job.lease_ms = 10'000;
  job.retry.max_consecutive_lease_expiries = 1;  // one expiry quarantines
  DefineJob(job);
  const ExecutionId canceled = AdmitOne(InLane(MakeRequest("sync", 1), "lane-c"));
  const ExecutionId poison = AdmitOne(InLane(MakeRequest("sync", 2), "lane-p"));
  const ExecutionId after_c = AdmitOne(InLane(MakeRequest("sync", 3), "lane-c"));
  AdmitOne(InLane(MakeRequest("sync", 4), "lane-p"));
  ASSERT_EQ(IdsOf(ClaimN("default", 10)), (std::set<std::int64_t>{canceled.value, poison.value}));
  ASSERT_OK(store().RequestCancel(canceled, By("alice")));
  Advance(10'001);  // both workers die

  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.canceled, 1);
  EXPECT_EQ(report.quarantined, 1);
  EXPECT_EQ(IdsOf(ClaimN("default", 10)), (std::set<std::int64_t>{after_c.value}))
      << "a head canceled at expiry frees its lane; a head quarantined at expiry blocks it";
  ASSERT_OK_AND_ASSIGN(LaneStatus p, store().GetLane(TenantId(), "lane-p"));
  EXPECT_EQ(p.head, poison);
  EXPECT_TRUE(p.blocked);
}

TEST_P(StoreConformance, O1_CancelingAMemberBehindTheHeadReleasesNothing) {
  DefineJob("sync");
  const ExecutionId a = AdmitOne(InLane(MakeRequest("sync", 1), "lane-m"));
  const ExecutionId b = AdmitOne(InLane(MakeRequest("sync", 2), "lane-m"));
  const ExecutionId c = AdmitOne(InLane(MakeRequest("sync", 3), "lane-m"));
  const Lease head = ClaimOne();
  ASSERT_EQ(head.id, a);

  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(b, By("alice")));
  EXPECT_EQ(status, ExecutionStatus::kCanceled);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "the head is still open";
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(), "lane-m"));
  EXPECT_EQ(lane.head, a);
  EXPECT_EQ(lane.queued, 1);
  EXPECT_EQ(lane.running, 1);

  ASSERT_OK(store().Complete(Ref(head), "{}"));
  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, c) << "the canceled member is skipped";
}

TEST_P(StoreConformance, O1_ListLanesPutsBlockedLanesFirst) {
  JobDefinition job = MakeJob("sync");
  job.retry.max_attempts = 1;
  DefineJob(job);
  // Flowing lanes sort before blocked ones by name, so only the contract's
  // order can put the blocked ones first.
  const ExecutionId a = AdmitOne(InLane(MakeRequest("sync", 1), "a-flow"));
  const ExecutionId b = AdmitOne(InLane(MakeRequest("sync", 2), "b-flow"));
  const ExecutionId y = AdmitOne(InLane(MakeRequest("sync", 3), "y-blocked"));
  const ExecutionId z = AdmitOne(InLane(MakeRequest("sync", 4), "z-blocked"));
  const ExecutionId done = AdmitOne(InLane(MakeRequest("sync", 5), "done"));
  AdmitOne(InLane(MakeRequest("sync", 6), "y-blocked"));
  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(IdsOf(leases),
            (std::set<std::int64_t>{a.value, b.value, y.value, z.value, done.value}));
  for (const Lease& l : leases) {
    if (l.id == y) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad input"));
    }
    if (l.id == z) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "exhausted"));
    }
    if (l.id == done) {
      ASSERT_OK(store().Complete(Ref(l), "{}"));
    }
  }

  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> all, store().ListLanes({.limit = 10}));
  ASSERT_EQ(all.size(), 4u) << "a lane whose work is all done is not listed";
  std::set<std::string> first_two{all[0].lane, all[1].lane};
  EXPECT_EQ(first_two, (std::set<std::string>{"y-blocked", "z-blocked"}));
  EXPECT_TRUE(all[0].blocked);
  EXPECT_TRUE(all[1].blocked);
  EXPECT_FALSE(all[2].blocked);
  EXPECT_FALSE(all[3].blocked);
  for (const LaneStatus& l : all) {
    if (l.lane == "y-blocked") {
      EXPECT_EQ(l.head, y);
      EXPECT_EQ(l.head_status, ExecutionStatus::kQuarantined);
      EXPECT_EQ(l.queued, 1);
    }
    if (l.lane == "a-flow") {
      EXPECT_EQ(l.head, a);
      EXPECT_EQ(l.running, 1);
    }
  }

  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> two, store().ListLanes({.limit = 2}));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_TRUE(two[0].blocked) << two[0].lane;
  EXPECT_TRUE(two[1].blocked) << two[1].lane << ": the limit keeps the blocked lanes";
  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> one, store().ListLanes({.limit = 1}));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].blocked) << one[0].lane;
}

TEST_P(StoreConformance, O1_UnknownLaneHasNoHead) {
  DefineJob("sync");
  AdmitOne(InLane(MakeRequest("sync", 1), "known"));
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(), "unknown"));
  EXPECT_EQ(lane.head, ExecutionId());
  EXPECT_FALSE(lane.blocked);
  EXPECT_EQ(lane.queued, 0);
  EXPECT_EQ(lane.running, 0);
}

TEST_P(StoreConformance, O1_AdmittingIntoADrainedLaneIsClaimableAtOnce) {
  DefineJob("sync");
  AdmitOne(InLane(MakeRequest("sync", 1), "lane-d"));
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}"));
  const ExecutionId canceled = AdmitOne(InLane(MakeRequest("sync", 2), "lane-d"));
  ASSERT_OK(store().RequestCancel(canceled, By("alice")));

  const ExecutionId next = AdmitOne(InLane(MakeRequest("sync", 3), "lane-d"));
  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u) << "succeeded and canceled members do not hold the lane";
  EXPECT_EQ(leases[0].id, next);
}

// O1: a lane is (tenant, lane key). One tenant's blocked or delayed head
// never holds another tenant's lane of the same key.
TEST_P(StoreConformance, O1_LanesArePerTenant_AFailedHeadBlocksOnlyItsTenantsLane) {
  JobDefinition job = MakeJob("sync");
  job.scope = JobScope::kPerTenant;
  job.retry.max_attempts = 1;
  DefineJob(job);
  const ExecutionId a1 = AdmitOne(InLane(MakeRequest("sync", 1, "a"), "orders"));
  const ExecutionId a2 = AdmitOne(InLane(MakeRequest("sync", 2, "a"), "orders"));
  Lease head = ClaimOne();
  ASSERT_EQ(head.id, a1);
  ASSERT_OK(store().Fail(Ref(head), FailureClass::kPermanent, "bad input"));

  const ExecutionId b1 = AdmitOne(InLane(MakeRequest("sync", 3, "b"), "orders"));
  const ExecutionId b2 = AdmitOne(InLane(MakeRequest("sync", 4, "b"), "orders"));
  std::vector<Lease> leases = ClaimN("default", 10);
  EXPECT_EQ(IdsOf(leases), (std::set<std::int64_t>{b1.value}))
      << "b's head runs; a's second waits behind a's quarantined head";
  ASSERT_EQ(leases.size(), 1u);
  ASSERT_OK(store().Complete(Ref(leases[0]), "{}"));
  leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, b2);
  EXPECT_EQ(leases[0].tenant, TenantId("b"));

  ASSERT_OK_AND_ASSIGN(LaneStatus of_a, store().GetLane(TenantId("a"), "orders"));
  EXPECT_EQ(of_a.tenant, TenantId("a"));
  EXPECT_EQ(of_a.head, a1);
  EXPECT_TRUE(of_a.blocked);
  EXPECT_EQ(of_a.queued, 1);
  ASSERT_OK_AND_ASSIGN(LaneStatus of_b, store().GetLane(TenantId("b"), "orders"));
  EXPECT_EQ(of_b.head, b2);
  EXPECT_FALSE(of_b.blocked);
  EXPECT_EQ(of_b.running, 1);
  EXPECT_EQ(of_b.queued, 0);
  ASSERT_OK_AND_ASSIGN(LaneStatus global, store().GetLane(TenantId(), "orders"));
  EXPECT_EQ(global.head, ExecutionId()) << "no global job uses the key";

  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> all, store().ListLanes({.limit = 10}));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].tenant, TenantId("a")) << "blocked first";
  EXPECT_TRUE(all[0].blocked);
  EXPECT_EQ(all[1].tenant, TenantId("b"));
  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> only_b,
                       store().ListLanes({.tenant = TenantId("b"), .limit = 10}));
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(only_b[0].tenant, TenantId("b"));
  EXPECT_EQ(only_b[0].lane, "orders");
  ASSERT_OK_AND_ASSIGN(std::vector<LaneStatus> none,
                       store().ListLanes({.tenant = TenantId("c"), .limit = 10}));
  EXPECT_TRUE(none.empty());

  // The operator unblocks a's lane; its next member follows in order.
  ASSERT_OK(store().RequestCancel(a1, By("alice")));
  leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, a2);
}

TEST_P(StoreConformance, O1_LanesArePerTenant_ADelayedHeadDelaysOnlyItsTenantsLane) {
  JobDefinition job = MakeJob("sync");
  job.scope = JobScope::kPerTenant;
  DefineJob(job);
  AdmitRequest delayed = InLane(MakeRequest("sync", 1, "a"), "orders");
  delayed.run_at = Now() + 3'600'000;
  AdmitOne(delayed);
  const ExecutionId b1 = AdmitOne(InLane(MakeRequest("sync", 2, "b"), "orders"));
  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, b1);
}

}  // namespace taskengine
