// Conformance cases for retention (I7): Store::Purge removes only ended
// executions that no lane and no pending replay needs, with everything that
// belongs to them, in bounded batches, and keeps the status counters exact.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

constexpr Millis kDay = 24 * 3600'000;

std::array<std::int64_t, kExecutionStatusCount> CountedByStats(Store& store) {
  auto stats = store.GetStats();
  EXPECT_TRUE(stats.ok()) << stats.status().ToString();
  return stats.ok() ? stats->totals : std::array<std::int64_t, kExecutionStatusCount>{};
}

std::array<std::int64_t, kExecutionStatusCount> CountedByHand(const std::vector<Execution>& all) {
  std::array<std::int64_t, kExecutionStatusCount> out{};
  for (const Execution& e : all) ++out[static_cast<int>(e.status)];
  return out;
}

}  // namespace

TEST_P(StoreConformance, I7_PurgeRemovesOldEndedExecutionsAndWhatBelongsToThem) {
  DefineJob("a");
  // Old, and due for purge: a success with a log line and an effect, a
  // quarantined one outside any lane, one canceled while queued.
  const ExecutionId done = AdmitOne(MakeRequest("a", 1, "t1", "key-1"));
  const ExecutionId poisoned = AdmitOne(MakeRequest("a", 2));
  const ExecutionId canceled = AdmitOne(MakeRequest("a", 3));
  // Old, and kept: queued work, a lane's failed head and the member behind it.
  const ExecutionId queued = AdmitOne(MakeRequest("a", 4));
  AdmitRequest head_request = MakeRequest("a", 5);
  head_request.lane_key = "L";
  const ExecutionId head = AdmitOne(head_request);
  AdmitRequest behind_request = MakeRequest("a", 6);
  behind_request.lane_key = "L";
  const ExecutionId behind = AdmitOne(behind_request);
  ASSERT_OK(store().RequestCancel(canceled, By("ops")));

  std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 4u);  // not the lane member behind its head
  for (const Lease& l : leases) {
    if (l.id == done) {
      ASSERT_OK(store().AppendLog(Ref(l), LogLevel::kInfo, "hello"));
      ReserveAndCommit(l, "notice", "sent");
      ASSERT_OK(store().Complete(Ref(l), "{}"));
    } else if (l.id == poisoned || l.id == head) {
      ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad input"));
    } else if (l.id == queued) {
      ASSERT_OK(store().Release(Ref(l)));
    } else {
      FAIL() << "claimed " << l.id.value;
    }
  }
  ASSERT_EQ(Get(head).status, ExecutionStatus::kQuarantined);
  ASSERT_EQ(Get(queued).status, ExecutionStatus::kQueued);

  Advance(31 * kDay);
  // Young: ended a moment ago.
  const ExecutionId young = AdmitOne(MakeRequest("a", 7));
  {
    std::vector<Lease> more = ClaimN("default", 5);
    for (const Lease& l : more) {
      if (l.id == young) {
        ASSERT_OK(store().Complete(Ref(l), "{}"));
      } else {
        ASSERT_OK(store().Release(Ref(l)));
      }
    }
  }
  ASSERT_EQ(Get(young).status, ExecutionStatus::kSucceeded);

  RetentionCutoffs cutoffs;
  cutoffs.executions_ended_before = Now() - 30 * kDay;
  const std::string before = Snapshot();
  ASSERT_OK_AND_ASSIGN(PurgeReport dry, store().Purge(cutoffs, 500, /*dry_run=*/true));
  EXPECT_EQ(dry.executions, 3);
  EXPECT_EQ(dry.logs, 1);
  EXPECT_EQ(dry.effects, 1);
  EXPECT_EQ(dry.attempts, 1);  // the quarantined one's failed attempt
  EXPECT_GT(dry.oldest_ended_at, 0);
  EXPECT_LE(dry.oldest_ended_at, dry.newest_ended_at);
  EXPECT_EQ(Snapshot(), before) << "a dry run removed something";

  ASSERT_OK_AND_ASSIGN(PurgeReport report, store().Purge(cutoffs, 500, /*dry_run=*/false));
  EXPECT_EQ(report.executions, 3);
  EXPECT_EQ(report.logs, dry.logs);
  EXPECT_EQ(report.effects, dry.effects);
  EXPECT_EQ(report.attempts, dry.attempts);
  EXPECT_FALSE(report.more);
  for (ExecutionId gone : {done, poisoned, canceled}) {
    EXPECT_EQ(store().GetExecution(gone).status().code(), ErrorCode::kNotFound) << gone.value;
  }
  EXPECT_EQ(store().GetLogs(done, 10).status().code(), ErrorCode::kNotFound);
  for (ExecutionId kept : {queued, head, behind, young}) {
    EXPECT_TRUE(store().GetExecution(kept).ok()) << kept.value;
  }
  // The lane is still blocked by its head.
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store().GetLane(TenantId(""), "L"));
  EXPECT_TRUE(lane.blocked);
  // The idempotency key of a purged execution admits anew.
  ASSERT_OK_AND_ASSIGN(AdmitResult again, store().Admit(MakeRequest("a", 1, "t1", "key-1")));
  EXPECT_EQ(again.outcome, AdmitOutcome::kCreated);
  EXPECT_NE(again.id, done);
  // The counters lost exactly the purged executions.
  EXPECT_EQ(CountedByStats(store()), CountedByHand(All()));
  // Nothing is left to purge.
  ASSERT_OK_AND_ASSIGN(PurgeReport none, store().Purge(cutoffs, 500, false));
  EXPECT_EQ(none.executions, 0);
  EXPECT_FALSE(none.more);
}

TEST_P(StoreConformance, I7_PurgeWorksInBoundedBatches) {
  DefineJob("a");
  for (int i = 0; i < 5; ++i)
    ASSERT_OK(store().RequestCancel(AdmitOne(MakeRequest("a", i)), By("ops")));
  Advance(31 * kDay);
  RetentionCutoffs cutoffs;
  cutoffs.executions_ended_before = Now() - 30 * kDay;
  std::vector<std::int64_t> removed;
  std::vector<bool> more;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(PurgeReport r, store().Purge(cutoffs, 2, false));
    removed.push_back(r.executions);
    more.push_back(r.more);
  }
  EXPECT_EQ(removed, (std::vector<std::int64_t>{2, 2, 1}));
  EXPECT_EQ(more, (std::vector<bool>{true, true, false}));
  EXPECT_EQ(CountExecutions(), 0);
  EXPECT_EQ(CountedByStats(store()), CountedByHand(All()));
}

TEST_P(StoreConformance, I7_LogsAndAuditArePurgedByTheirOwnAge) {
  DefineJob("a");
  const ExecutionId id = AdmitOne(MakeRequest("a", 1));
  const Lease l = ClaimOne();
  ASSERT_OK(store().AppendLog(Ref(l), LogLevel::kInfo, "old line"));
  AuditRecord ancient;
  ancient.at = Now() - 400 * kDay;
  ancient.actor = "ops";
  ancient.action = "test";
  ancient.target = Target(id);
  ASSERT_OK(store().AppendAudit(ancient));
  AuditRecord recent = ancient;
  recent.at = Now();
  ASSERT_OK(store().AppendAudit(recent));
  Advance(8 * kDay);
  ASSERT_OK(store().Heartbeat(Ref(l), std::nullopt));
  ASSERT_OK(store().AppendLog(Ref(l), LogLevel::kInfo, "new line"));

  RetentionCutoffs cutoffs;
  cutoffs.logs_before = Now() - 7 * kDay;
  cutoffs.audit_before = Now() - 365 * kDay;
  ASSERT_OK_AND_ASSIGN(PurgeReport r, store().Purge(cutoffs, 500, false));
  EXPECT_EQ(r.executions, 0);
  EXPECT_EQ(r.logs, 1);
  EXPECT_EQ(r.audit, 1);
  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> logs, store().GetLogs(id, 10));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].message, "new line");
  std::vector<AuditRecord> audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].at, recent.at);
  // The running execution itself is untouched.
  EXPECT_EQ(Get(id).status, ExecutionStatus::kRunning);
}

TEST_P(StoreConformance, I7_AnExecutionWithAReplayAwaitingApprovalIsKept) {
  DefineJob("a");
  const ExecutionId waiting = AdmitOne(MakeRequest("a", 1));
  const ExecutionId plain = AdmitOne(MakeRequest("a", 2));
  for (const Lease& l : ClaimN("default", 2)) {
    ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad input"));
  }
  ASSERT_EQ(Get(waiting).status, ExecutionStatus::kQuarantined);
  ReplayRequest replay{waiting, By("ops", "fixed"), /*require_approval=*/true};
  ASSERT_OK_AND_ASSIGN(ReplayReply pending, store().Replay(replay));
  ASSERT_EQ(pending.outcome, ReplayOutcome::kPendingApproval);
  Advance(31 * kDay);
  RetentionCutoffs cutoffs;
  cutoffs.executions_ended_before = Now() - 30 * kDay;
  ASSERT_OK_AND_ASSIGN(PurgeReport r, store().Purge(cutoffs, 500, false));
  EXPECT_EQ(r.executions, 1);
  EXPECT_EQ(store().GetExecution(plain).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Get(waiting).status, ExecutionStatus::kQuarantined);
}

TEST_P(StoreConformance, I7_PurgeRefusesBadArgumentsAndChangesNothing) {
  DefineJob("a");
  ASSERT_OK(store().RequestCancel(AdmitOne(MakeRequest("a", 1)), By("ops")));
  Advance(31 * kDay);
  RetentionCutoffs cutoffs;
  cutoffs.executions_ended_before = Now();
  EXPECT_EQ(store().Purge(cutoffs, 0, false).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().Purge(cutoffs, 10'001, false).status().code(), ErrorCode::kInvalidArgument);
  RetentionCutoffs negative;
  negative.logs_before = -1;
  EXPECT_EQ(store().Purge(negative, 10, false).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(CountExecutions(), 1);
}

// ReclaimSpace gives freed space back in bounded steps (0 pages: nothing to
// give back, or a backend whose database reuses it by itself).
TEST_P(StoreConformance, I7_ReclaimSpaceIsBoundedAndChecksItsArgument) {
  DefineJob("a");
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK(store().RequestCancel(AdmitOne(MakeRequest("a", i)), By("ops")));
  }
  Advance(31 * kDay);
  RetentionCutoffs cutoffs;
  cutoffs.executions_ended_before = Now();
  ASSERT_OK_AND_ASSIGN(PurgeReport purged, store().Purge(cutoffs, 100, false));
  EXPECT_EQ(purged.executions, 50);
  ASSERT_OK_AND_ASSIGN(std::int64_t first, store().ReclaimSpace(1));
  EXPECT_GE(first, 0);
  EXPECT_LE(first, 1);
  ASSERT_OK_AND_ASSIGN(std::int64_t rest, store().ReclaimSpace(1'000'000));
  EXPECT_GE(rest, 0);
  ASSERT_OK_AND_ASSIGN(std::int64_t none, store().ReclaimSpace(1'000'000));
  EXPECT_EQ(none, 0);
  EXPECT_EQ(store().ReclaimSpace(0).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().ReclaimSpace(1'000'001).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace taskengine
