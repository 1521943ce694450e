// Conformance cases for the counters behind GetStats (P8): after any mix of
// transitions they equal a count over the executions themselves.
#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <random>
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

// Counts per (tenant, status) from the executions.
std::map<std::pair<std::string, int>, std::int64_t> CountByTenantByHand(
    const std::vector<Execution>& all) {
  std::map<std::pair<std::string, int>, std::int64_t> out;
  for (const Execution& e : all) out[{e.tenant.value, static_cast<int>(e.status)}] += 1;
  return out;
}

std::map<std::pair<std::string, int>, std::int64_t> CountByTenantStats(const StoreStats& stats) {
  std::map<std::pair<std::string, int>, std::int64_t> out;
  for (const TenantStats& t : stats.tenants) {
    for (int s = 0; s < kExecutionStatusCount; ++s) {
      if (t.by_status[s] != 0) out[{t.tenant.value, s}] = t.by_status[s];
    }
  }
  return out;
}

// Only the executions of `tenants`.
std::vector<Execution> OfTenants(const std::vector<Execution>& all,
                                 const std::vector<std::string>& tenants) {
  std::vector<Execution> out;
  for (const Execution& e : all) {
    if (std::find(tenants.begin(), tenants.end(), e.tenant.value) != tenants.end()) {
      out.push_back(e);
    }
  }
  return out;
}

}  // namespace

// X2: the counters per tenant equal a count over the executions after a
// random mix of admissions, claims, finishes, cancels, replays and lease
// expiries; a scoped read counts its tenants only, in every figure.
TEST_P(StoreConformance, X2_TenantCountersMatchTheExecutionsAfterARandomMix) {
  const unsigned seed = std::random_device{}();
  std::cout << "X2_TenantCounters seed " << seed << std::endl;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  DefineJob("a", "default");
  DefineJob("b", "high");
  const std::vector<std::string> tenants = {"", "t1", "t2", "t3"};
  const std::vector<std::string> queues = {"default", "high"};
  int n = 0;
  for (int round = 0; round < 40; ++round) {
    switch (pick(6)) {
      case 0:
      case 1: {  // admissions
        std::vector<AdmitRequest> batch;
        for (int i = pick(4) + 1; i > 0; --i) {
          batch.push_back(MakeRequest(pick(2) ? "a" : "b", n++, tenants[pick(4)]));
        }
        ASSERT_OK(store().AdmitBatch(batch));
        break;
      }
      case 2: {  // claims and finishes of every kind
        for (const Lease& l : ClaimN(queues[pick(2)], pick(3) + 1)) {
          switch (pick(5)) {
            case 0:
              ASSERT_OK(store().Complete(Ref(l), ""));
              break;
            case 1:
              ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "again"));
              break;
            case 2:
              ASSERT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad"));
              break;
            case 3:
              ASSERT_OK(store().Release(Ref(l)));
              break;
            default:
              break;  // left running: its lease may expire
          }
        }
        break;
      }
      case 3: {  // cancels (queued, running, failed ...)
        const std::vector<Execution> all = All();
        if (all.empty()) break;
        (void)store().RequestCancel(all[pick(static_cast<int>(all.size()))].id, By("ops"));
        break;
      }
      case 4: {  // replays of failed or quarantined work
        for (const Execution& e : All()) {
          if (e.status == ExecutionStatus::kFailed || e.status == ExecutionStatus::kQuarantined) {
            ASSERT_OK(store().Replay(ReplayRequest{e.id, By("ops", "fixed")}));
            break;
          }
        }
        break;
      }
      default:  // lease expiries
        Advance(pick(2) ? 10 * 60'000 : 1000);
        ASSERT_OK(store().SweepExpired(100));
        break;
    }
  }

  const std::vector<Execution> all = All();
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store().GetStats());
  EXPECT_EQ(CountByTenantStats(stats), CountByTenantByHand(all));
  EXPECT_EQ(CountByStats(stats), CountByHand(all));
  std::array<std::int64_t, kExecutionStatusCount> ended{};
  for (const TenantStats& t : stats.tenants) {
    for (int s = 0; s < kExecutionStatusCount; ++s) ended[s] += t.ended_last_24h[s];
  }
  EXPECT_EQ(ended, stats.ended_last_24h);
  for (std::size_t i = 1; i < stats.tenants.size(); ++i) {
    EXPECT_LT(stats.tenants[i - 1].tenant.value, stats.tenants[i].tenant.value);
  }

  // Scoped to t1 and t3: their executions only, in queues, totals and outcomes.
  const std::vector<std::string> granted = {"t1", "t3"};
  TenantScope scope;
  scope.tenants = std::vector<TenantId>{TenantId("t1"), TenantId("t3")};
  ASSERT_OK_AND_ASSIGN(StoreStats scoped, store().GetStats(scope));
  const std::vector<Execution> mine = OfTenants(all, granted);
  EXPECT_EQ(CountByHand(mine), CountByStats(scoped));
  EXPECT_EQ(CountByTenantByHand(mine), CountByTenantStats(scoped));
  std::int64_t total = 0;
  for (std::int64_t c : scoped.totals) total += c;
  EXPECT_EQ(total, static_cast<std::int64_t>(mine.size()));
  std::array<std::int64_t, kExecutionStatusCount> scoped_ended{};
  for (const TenantStats& t : scoped.tenants) {
    EXPECT_TRUE(t.tenant.value == "t1" || t.tenant.value == "t3") << t.tenant.value;
    for (int s = 0; s < kExecutionStatusCount; ++s) scoped_ended[s] += t.ended_last_24h[s];
  }
  EXPECT_EQ(scoped_ended, scoped.ended_last_24h);
  for (const QueueStats& q : scoped.queues) EXPECT_EQ(q.oldest_due_at, 0) << q.queue;
  // Every terminal execution of the scope ended within the last 24 hours.
  for (int s = 0; s < kExecutionStatusCount; ++s) {
    std::int64_t terminal = 0;
    for (const Execution& e : mine) terminal += static_cast<int>(e.status) == s ? 1 : 0;
    if (IsTerminal(static_cast<ExecutionStatus>(s))) {
      EXPECT_GE(scoped.ended_last_24h[s], terminal) << s;
    }
  }

  // Queue depths of the scope: its queued and running executions only.
  ASSERT_OK_AND_ASSIGN(std::vector<QueueDepth> depths, store().QueueDepths(scope));
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_hand, by_store;
  for (const Execution& e : mine) {
    if (e.status == ExecutionStatus::kQueued) by_hand[e.queue].first += 1;
    if (e.status == ExecutionStatus::kRunning) by_hand[e.queue].second += 1;
  }
  for (const QueueDepth& d : depths) by_store[d.queue] = {d.queued, d.running};
  EXPECT_EQ(by_store, by_hand);

  // An empty scope counts nothing.
  TenantScope none;
  none.tenants.emplace();
  ASSERT_OK_AND_ASSIGN(StoreStats empty, store().GetStats(none));
  EXPECT_TRUE(empty.queues.empty());
  EXPECT_TRUE(empty.tenants.empty());
}

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

// I5/I6: the age of the oldest quarantined execution, for an alert on
// executions that wait for an operator.
TEST_P(StoreConformance, P8_StatsNameWhenTheOldestQuarantinedExecutionEnded) {
  DefineJob("a");
  ASSERT_OK_AND_ASSIGN(StoreStats none, store().GetStats());
  EXPECT_EQ(none.oldest_quarantined_at, 0);
  for (int i = 0; i < 3; ++i) AdmitOne(MakeRequest("a", i));
  std::vector<Lease> leases = ClaimN("default", 3);
  ASSERT_EQ(leases.size(), 3u);
  ASSERT_OK(store().Fail({leases[0].id, leases[0].version}, FailureClass::kPermanent, "bad"));
  const Millis first = Now();
  Advance(60'000);
  ASSERT_OK(store().Fail({leases[1].id, leases[1].version}, FailureClass::kAmbiguous, "unknown"));
  ASSERT_OK_AND_ASSIGN(StoreStats two, store().GetStats());
  EXPECT_EQ(two.oldest_quarantined_at, first);
  // A tenant scope leaves it out (no index serves it per tenant).
  ASSERT_OK_AND_ASSIGN(StoreStats scoped,
                       store().GetStats(TenantScope{std::vector<TenantId>{TenantId("t1")}}));
  EXPECT_EQ(scoped.oldest_quarantined_at, 0);
  // Replayed, the first leaves quarantine; the second is now the oldest.
  ASSERT_OK(store().Replay(ReplayRequest{leases[0].id, OperatorAction{"ops", "fixed"}}));
  ASSERT_OK_AND_ASSIGN(StoreStats one, store().GetStats());
  EXPECT_EQ(one.oldest_quarantined_at, first + 60'000);
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
