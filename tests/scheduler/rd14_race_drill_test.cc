// Drill RD14 (quality.md §2): two schedulers race on the same fire times.
// Invariant C: exactly one execution per (job, fire time or window, tenant).
//
// Two Scheduler instances ("node-a", "node-b"), each over its own Store
// object on the same SQLite file (as two processes would be), run cycles from
// several threads at once over a few hundred simulated minutes. Now and then
// the leader "crashes" (stops cycling) for longer than the lock's ttl, so the
// lock expires and leadership moves to the other node, which catches up.
// The second variant bypasses the lock entirely (both nodes decide and commit
// the same fires at the same time) to show that the keys alone prevent a
// double fire.
#include <barrier>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "scheduler_drill.h"

namespace taskengine::drill {
namespace {

constexpr int kMinutes = 300;
const std::vector<std::string> kTenants = {"acme", "globex", "initech"};

std::uint64_t Seed() {
  const char* env = std::getenv("TASKENGINE_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 14;
}

class Rd14RaceDrill : public ::testing::Test {
 protected:
  void SetUp() override {
    store_a_ = db_.Open();
    store_b_ = db_.Open();
    ASSERT_NE(store_a_, nullptr);
    ASSERT_NE(store_b_, nullptr);
    db_.Define(DrillDatabase::Job("tick", "* * * * *", CatchUpPolicy::kAll));
    JobDefinition report = DrillDatabase::Job("report", "* * * * *", CatchUpPolicy::kAll);
    report.scope = JobScope::kPerTenant;
    db_.Define(report);
    JobDefinition digest = DrillDatabase::Job("digest", "*/10 * * * *", CatchUpPolicy::kAll);
    digest.scope = JobScope::kPerTenant;
    digest.window_ms = kHour;
    db_.Define(digest);
    for (const std::string& t : kTenants) db_.AddTenant(t);
    SchedulerOptions a;
    a.node_id = "node-a";
    SchedulerOptions b;
    b.node_id = "node-b";
    node_a_ = std::make_unique<Scheduler>(store_a_, &db_.clock(), a);
    node_b_ = std::make_unique<Scheduler>(store_b_, &db_.clock(), b);
  }

  // Invariant C over everything created, against the exact expected set:
  // every minute 1..kMinutes for tick, per tenant for report, and one digest
  // per tenant and hourly window claimed by the */10 fires.
  void CheckInvariantC() {
    std::set<std::tuple<std::string, Millis, std::string>> seen;
    std::set<std::string> keys;
    for (const Execution& e : db_.Executions()) {
      Millis slot = e.scheduled_at;
      if (e.job.value == "digest") slot = ClaimedWindow(e.scheduled_at, kHour).first;
      EXPECT_TRUE(seen.emplace(e.job.value, slot, e.tenant.value).second)
          << "double fire: " << e.idempotency_key << " (execution " << e.id.value << ")";
      EXPECT_TRUE(keys.insert(e.job.value + "|" + e.tenant.value + "|" + e.idempotency_key).second);
    }
    std::set<std::tuple<std::string, Millis, std::string>> expected;
    for (int m = 1; m <= kMinutes; ++m) {
      const Millis fire = kT0 + m * kMinute;
      expected.emplace("tick", fire, "");
      for (const std::string& t : kTenants) {
        expected.emplace("report", fire, t);
        if (m % 10 == 0) expected.emplace("digest", ClaimedWindow(fire, kHour).first, t);
      }
    }
    EXPECT_EQ(seen.size(), expected.size());
    EXPECT_TRUE(seen == expected) << "missing or unexpected executions";
  }

  DrillDatabase db_;
  Store* store_a_ = nullptr;
  Store* store_b_ = nullptr;
  std::unique_ptr<Scheduler> node_a_;
  std::unique_ptr<Scheduler> node_b_;
};

TEST_F(Rd14RaceDrill, RacingLeadersWithLockHandoverFireEachSlotOnce) {
  const std::uint64_t seed = Seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (TASKENGINE_TEST_SEED)");
  std::mt19937_64 rng(seed);
  // The leader stops cycling for 4 or 5 minutes from these minutes on: the
  // 3-minute lock expires and the other node takes over.
  const std::set<int> crashes = {40, 100, 160, 220};
  Scheduler* nodes[2] = {node_a_.get(), node_b_.get()};
  int leader = -1;     // index of the node that acted last
  int down = -1;       // index of the crashed node
  int down_until = 0;  // first minute it cycles again
  int handovers = 0;
  std::int64_t created = 0;
  std::int64_t refused = 0;

  for (int m = 1; m <= kMinutes; ++m) {
    if (crashes.count(m) > 0 && leader >= 0) {
      down = leader;
      down_until = m + 4 + static_cast<int>(rng() % 2);
    }
    if (m >= down_until) down = -1;
    db_.clock().Set(kT0 + m * kMinute + kSecond + static_cast<Millis>(rng() % 20'000));

    // Two threads per running node call RunCycle at once, in random order.
    std::vector<int> callers;
    for (int n = 0; n < 2; ++n) {
      if (n != down) callers.insert(callers.end(), {n, n});
    }
    std::shuffle(callers.begin(), callers.end(), rng);
    std::vector<Result<CycleReport>> results(callers.size(), Status(ErrorCode::kInternal, "unset"));
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < callers.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = nodes[callers[i]]->RunCycle(); });
    }
    for (std::thread& t : threads) t.join();

    std::set<int> leaders;
    for (std::size_t i = 0; i < callers.size(); ++i) {
      ASSERT_TRUE(results[i].ok()) << "minute " << m << ": " << results[i].status().ToString();
      const CycleReport& r = *results[i];
      EXPECT_TRUE(r.errors.empty());
      EXPECT_EQ(r.conflicts, 0);
      if (r.leader) {
        leaders.insert(callers[i]);
        created += r.executions_created;
      } else {
        ++refused;
        EXPECT_EQ(r.admissions, 0) << "a node without the lock does nothing";
      }
    }
    EXPECT_LE(leaders.size(), 1u) << "minute " << m << ": two leaders at once";
    if (leaders.size() == 1) {
      const int now_leader = *leaders.begin();
      if (leader >= 0 && now_leader != leader) ++handovers;
      leader = now_leader;
    }
  }
  std::cout << "RD14 (seed " << seed << "): " << kMinutes << " minutes, " << handovers
            << " handovers, " << created << " executions, " << refused << " cycles refused the lock"
            << std::endl;
  EXPECT_GE(handovers, 4) << "leadership must have moved at every crash";
  EXPECT_EQ(created, static_cast<std::int64_t>(db_.Executions().size()));
  CheckInvariantC();
}

TEST_F(Rd14RaceDrill, WithoutTheLockTheKeysAlonePreventADoubleFire) {
  const std::uint64_t seed = Seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (TASKENGINE_TEST_SEED)");
  std::mt19937_64 rng(seed);
  Scheduler* nodes[2] = {node_a_.get(), node_b_.get()};
  constexpr int kThreads = 4;  // two per node
  std::int64_t created = 0;
  std::int64_t duplicates = 0;
  int m = 1;
  while (m <= kMinutes) {
    db_.clock().Set(kT0 + m * kMinute + kSecond + static_cast<Millis>(rng() % 20'000));
    // Every thread decides from the same stored state before any commits:
    // all of them believe they lead and all of them fire.
    std::barrier decided(kThreads);
    std::vector<Result<CycleReport>> results(kThreads, Status(ErrorCode::kInternal, "unset"));
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        Result<CyclePlan> plan = nodes[i % 2]->Evaluate();
        decided.arrive_and_wait();
        if (!plan.ok()) {
          results[i] = plan.status();
          return;
        }
        results[i] = nodes[i % 2]->Commit(std::move(plan).value());
      });
    }
    for (std::thread& t : threads) t.join();
    for (const Result<CycleReport>& r : results) {
      ASSERT_TRUE(r.ok()) << "minute " << m << ": " << r.status().ToString();
      EXPECT_EQ(r->conflicts, 0);
      created += r->executions_created;
      duplicates += r->duplicates;
    }
    // Now and then both nodes are down for a few minutes (within the window).
    m += rng() % 10 == 0 ? 2 + static_cast<int>(rng() % 3) : 1;
  }
  // Decide whatever the last jump left open.
  db_.clock().Set(kT0 + kMinutes * kMinute + 30 * kSecond);
  ASSERT_OK_AND_ASSIGN(CyclePlan plan, node_a_->Evaluate());
  ASSERT_OK_AND_ASSIGN(CycleReport last, node_a_->Commit(std::move(plan)));
  created += last.executions_created;
  std::cout << "RD14 without the lock (seed " << seed << "): " << created << " executions, "
            << duplicates << " double decisions answered duplicate" << std::endl;
  EXPECT_GE(duplicates, 3 * created / 2) << "the race must really have happened";
  EXPECT_EQ(created, static_cast<std::int64_t>(db_.Executions().size()));
  CheckInvariantC();
}

}  // namespace
}  // namespace taskengine::drill
