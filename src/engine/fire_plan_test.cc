// PlanFires (T2-T5) as a table: each row is a schedule, a policy, the last
// evaluation and now; the expected claims, coalesced and skipped fires.
#include "engine/fire_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace taskengine {
namespace {

constexpr Millis kMinute = 60'000;
constexpr Millis kHour = 60 * kMinute;
constexpr Millis kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

struct Row {
  std::string name;
  std::string cron;
  CatchUpPolicy catch_up;
  Millis catch_up_window_ms;
  Millis window_ms;
  Millis from;  // the last evaluation
  Millis now;
  std::vector<Millis> claims;
  std::vector<Millis> fires;
  std::int64_t coalesced;
  std::int64_t skipped;
  Millis last_skipped_at;
  Millis latest_fire;
  std::int64_t fires_seen;
};

// On time = at most one cycle (1 s) old.
constexpr Millis kCycle = 1000;

const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
      // A fire that just happened is admitted, whatever the policy.
      {"on time",
       "* * * * *",
       CatchUpPolicy::kNone,
       0,
       0,
       kT0 + 5 * kMinute - 500,
       kT0 + 5 * kMinute + 200,
       {kT0 + 5 * kMinute},
       {kT0 + 5 * kMinute},
       0,
       0,
       0,
       kT0 + 5 * kMinute,
       1},
      // Nothing due yet.
      {"no fire",
       "0 * * * *",
       CatchUpPolicy::kAll,
       kHour,
       0,
       kT0 + kMinute,
       kT0 + 2 * kMinute,
       {},
       {},
       0,
       0,
       0,
       0,
       0},
      // Paused 3 minutes, window 1 hour: `all` admits each missed fire.
      {"all",
       "* * * * *",
       CatchUpPolicy::kAll,
       kHour,
       0,
       kT0,
       kT0 + 3 * kMinute + 5000,
       {kT0 + kMinute, kT0 + 2 * kMinute, kT0 + 3 * kMinute},
       {kT0 + kMinute, kT0 + 2 * kMinute, kT0 + 3 * kMinute},
       0,
       0,
       0,
       kT0 + 3 * kMinute,
       3},
      // `coalesce` admits the latest missed fire and counts the rest.
      {"coalesce",
       "* * * * *",
       CatchUpPolicy::kCoalesce,
       kHour,
       0,
       kT0,
       kT0 + 3 * kMinute + 5000,
       {kT0 + 3 * kMinute},
       {kT0 + 3 * kMinute},
       2,
       0,
       0,
       kT0 + 3 * kMinute,
       3},
      // `coalesce` with a fire on time: the missed ones fold into it.
      {"coalesce into on time",
       "* * * * *",
       CatchUpPolicy::kCoalesce,
       kHour,
       0,
       kT0,
       kT0 + 3 * kMinute + 200,
       {kT0 + 3 * kMinute},
       {kT0 + 3 * kMinute},
       2,
       0,
       0,
       kT0 + 3 * kMinute,
       3},
      // `none` skips the missed fires and remembers the latest.
      {"none",
       "* * * * *",
       CatchUpPolicy::kNone,
       kHour,
       0,
       kT0,
       kT0 + 3 * kMinute + 5000,
       {},
       {},
       0,
       3,
       kT0 + 3 * kMinute,
       0,
       3},
      // Fires older than the catch-up window are stale: skipped even by `all`.
      {"stale",
       "* * * * *",
       CatchUpPolicy::kAll,
       2 * kMinute,
       0,
       kT0,
       kT0 + 5 * kMinute + 5000,
       {kT0 + 4 * kMinute, kT0 + 5 * kMinute},
       {kT0 + 4 * kMinute, kT0 + 5 * kMinute},
       0,
       3,
       kT0 + 3 * kMinute,
       kT0 + 5 * kMinute,
       5},
      // Windows (T5): each fire claims the latest complete hourly window;
      // the fires at :20 and :40 claim the one the fire at :00 claimed.
      {"window",
       "*/20 * * * *",
       CatchUpPolicy::kAll,
       2 * kHour,
       kHour,
       kT0 + 30 * kMinute,
       kT0 + 2 * kHour + 5000,
       {kT0 - kHour, kT0, kT0 + kHour},
       {kT0 + 40 * kMinute, kT0 + kHour, kT0 + 2 * kHour},
       2,
       0,
       0,
       kT0 + 2 * kHour,
       5},
      // Evaluated up to now already: nothing.
      {"up to date",
       "* * * * *",
       CatchUpPolicy::kAll,
       kHour,
       0,
       kT0 + kMinute,
       kT0 + kMinute,
       {},
       {},
       0,
       0,
       0,
       0,
       0},
  };
  return rows;
}

TEST(FirePlanTest, Table) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    auto schedule = Schedule::Create(row.cron, "UTC");
    ASSERT_TRUE(schedule.ok()) << schedule.status().ToString();
    FirePolicy policy;
    policy.catch_up = row.catch_up;
    policy.catch_up_window_ms = row.catch_up_window_ms;
    policy.window_ms = row.window_ms;
    policy.on_time_ms = kCycle;
    const FirePlan plan = PlanFires(*schedule, policy, row.from, row.now);
    EXPECT_EQ(plan.claims, row.claims);
    EXPECT_EQ(plan.fires, row.fires);
    EXPECT_EQ(plan.coalesced, row.coalesced);
    EXPECT_EQ(plan.skipped, row.skipped);
    EXPECT_EQ(plan.last_skipped_at, row.last_skipped_at);
    EXPECT_EQ(plan.latest_fire, row.latest_fire);
    EXPECT_EQ(plan.fires_seen, row.fires_seen);
    EXPECT_FALSE(plan.skipped_count_capped);
  }
}

// More stale fires than can be counted: the count stops at the bound and says so.
TEST(FirePlanTest, StaleCountIsBounded) {
  auto schedule = Schedule::Create("* * * * *", "UTC");
  ASSERT_TRUE(schedule.ok());
  FirePolicy policy;
  policy.catch_up = CatchUpPolicy::kNone;
  policy.catch_up_window_ms = kMinute;
  policy.on_time_ms = kCycle;
  const Millis now = kT0 + (kMaxCountedFires + 100) * kMinute + 5000;  // no fire on time
  const FirePlan plan = PlanFires(*schedule, policy, kT0, now);
  EXPECT_TRUE(plan.skipped_count_capped);
  EXPECT_GE(plan.skipped, kMaxCountedFires);
  EXPECT_TRUE(plan.claims.empty());
}

TEST(FirePlanTest, ClaimedWindowIsTheLatestCompleteOne) {
  EXPECT_EQ(ClaimedWindow(kT0 + 90 * kMinute, kHour), std::make_pair(kT0, kT0 + kHour));
  EXPECT_EQ(ClaimedWindow(kT0 + kHour, kHour), std::make_pair(kT0, kT0 + kHour));
  EXPECT_EQ(ClaimedWindow(kT0 + kHour - 1, kHour), std::make_pair(kT0 - kHour, kT0));
}

}  // namespace
}  // namespace taskengine
