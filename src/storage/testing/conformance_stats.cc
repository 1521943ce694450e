// Conformance cases for the counters behind GetStats (P8): after any mix of
// transitions they equal a count over the executions themselves.
#include <map>
#include <string>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

// The ground truth: counts per (queue, status) from the executions.
std::map<std::pair<std::string, int>, std::int64_t> CountByHand(const std::vector<Execution>& all) {
  std::map<std::pair<std::string, int>, std::int64_t> out;
  for (const Execution& e : all) out[{e.queue, static_cast<int>(e.status)}] += 1;
  return out;
}

std::map<std::pair<std::string, int>, std::int64_t> CountByStats(const StoreStats& stats) {
  std::map<std::pair<std::string, int>, std::int64_t> out;
  for (const QueueStats& q : stats.queues) {
    for (int s = 0; s < kExecutionStatusCount; ++s) {
      if (q.by_status[s] != 0) out[{q.queue, s}] = q.by_status[s];
    }
  }
  return out;
}

}  // namespace

TEST_P(StoreConformance, P8_StatsCountersMatchTheExecutions) {
  DefineJob("a", "default");
  DefineJob("b", "high");
  for (int i = 0; i < 12; ++i) AdmitOne(MakeRequest(i % 2 ? "a" : "b", i));
  // Duplicates and conflicts change no counter.
  AdmitRequest dup = MakeRequest("a", 100, "", "k");
  AdmitOne(dup);
  ASSERT_OK(store().Admit(dup));
  ASSERT_OK(store().Admit(MakeRequest("a", 101, "", "k")));
  // A batch that fails (an undefined job at its end) admits none and counts none.
  std::vector<AdmitRequest> doomed = {MakeRequest("a", 200), MakeRequest("a", 201),
                                      MakeRequest("nope", 202)};
  EXPECT_FALSE(store().AdmitBatch(doomed).ok());

  std::vector<Lease> a = ClaimN("default", 5);
  std::vector<Lease> b = ClaimN("high", 4);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_OK(store().Complete({a[0].id, a[0].version}, ""));
  ASSERT_OK(store().Fail({a[1].id, a[1].version}, FailureClass::kRetryable, "again"));
  ASSERT_OK(store().Fail({a[2].id, a[2].version}, FailureClass::kPermanent, "bad"));
  ASSERT_OK(store().Release({b[0].id, b[0].version}));
  ASSERT_OK(store().RequestCancel(b[1].id, OperatorAction{"ops", ""}));
  ASSERT_OK(store().Release({b[1].id, b[1].version}));  // ends canceled
  // A stale finish changes no counter.
  EXPECT_FALSE(store().Complete({a[0].id, a[0].version}, "").ok());
  ASSERT_OK(store().Replay(ReplayRequest{a[2].id, OperatorAction{"ops", "fixed"}}));
  // Leases of a[3], a[4], b[2], b[3] expire; the sweeper requeues them.
  Advance(10 * 60'000);
  ASSERT_OK(store().SweepExpired(100));
  ASSERT_OK(store().RequestCancel(AdmitOne(MakeRequest("b", 50)), OperatorAction{"ops", ""}));

  ASSERT_OK_AND_ASSIGN(StoreStats stats, store().GetStats());
  const std::vector<Execution> all = All();
  EXPECT_EQ(CountByStats(stats), CountByHand(all));
  std::int64_t total = 0;
  for (std::int64_t n : stats.totals) total += n;
  EXPECT_EQ(total, static_cast<std::int64_t>(all.size()));
  EXPECT_EQ(stats.ended_last_24h[static_cast<int>(ExecutionStatus::kSucceeded)], 1);
  EXPECT_EQ(stats.ended_last_24h[static_cast<int>(ExecutionStatus::kCanceled)], 2);
  // The replayed execution was quarantined, then queued again: its quarantine
  // still counts as an outcome of the last 24 hours.
  EXPECT_EQ(stats.ended_last_24h[static_cast<int>(ExecutionStatus::kQuarantined)], 1);
  for (const QueueStats& q : stats.queues) {
    EXPECT_GT(q.oldest_due_at, 0) << q.queue;  // both queues have due work
    EXPECT_LE(q.oldest_due_at, Now());
  }
  // A day later the outcomes have aged out; the counts stay.
  Advance(25 * 3600'000);
  ASSERT_OK_AND_ASSIGN(StoreStats later, store().GetStats());
  EXPECT_EQ(later.ended_last_24h[static_cast<int>(ExecutionStatus::kSucceeded)], 0);
  EXPECT_EQ(CountByStats(later), CountByHand(All()));
}

TEST_P(StoreConformance, P8_StatsSurviveARestart) {
  if (!GetParam().shares_data_between_opens) GTEST_SKIP() << "needs reopen";
  DefineJob("a");
  for (int i = 0; i < 3; ++i) AdmitOne(MakeRequest("a", i));
  Lease l = ClaimOne();
  ASSERT_OK(store().Complete({l.id, l.version}, ""));
  Reopen();
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store().GetStats());
  EXPECT_EQ(CountByStats(stats), CountByHand(All()));
}

}  // namespace taskengine
