// Drill RD8 (quality.md §2): the scheduler is paused for two days, then
// resumed. Catch-up must be bounded per policy (T4): fires older than the
// catch-up window are skipped, counted and recorded in the schedule state;
// `coalesce` creates one execution, `all` at most the window's fires, `none`
// none of the missed ones. No burst. Invariant C holds throughout: exactly
// one execution per (job, fire time or window, tenant).
#include <iostream>
#include <set>
#include <tuple>

#include "scheduler_drill.h"

namespace taskengine::drill {
namespace {

// "HH:MM" on day `day` (1 = 2026-01-01), UTC.
Millis At(int day, int hour, int minute) {
  return kT0 + (day - 1) * kDay + hour * kHour + minute * kMinute;
}

class Rd8PauseDrill : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = db_.Open();
    ASSERT_NE(store_, nullptr);
    db_.Define(DrillDatabase::Job("tick-coalesce", "* * * * *", CatchUpPolicy::kCoalesce));
    db_.Define(DrillDatabase::Job("tick-all", "* * * * *", CatchUpPolicy::kAll));
    db_.Define(DrillDatabase::Job("tick-none", "* * * * *", CatchUpPolicy::kNone));
    db_.Define(DrillDatabase::Job("quarter", "*/15 * * * *", CatchUpPolicy::kCoalesce));
    JobDefinition report = DrillDatabase::Job("report", "*/5 * * * *", CatchUpPolicy::kCoalesce);
    report.scope = JobScope::kPerTenant;
    db_.Define(report);
    JobDefinition digest = DrillDatabase::Job("digest", "0 * * * *", CatchUpPolicy::kAll);
    digest.scope = JobScope::kPerTenant;
    digest.window_ms = kDay;
    digest.catch_up_window_ms = 3 * kHour;
    db_.Define(digest);
    JobDefinition local = DrillDatabase::Job("ny-morning", "30 2 * * *", CatchUpPolicy::kAll);
    local.timezone = "America/New_York";  // 02:30 EST = 07:30Z
    db_.Define(local);
    db_.AddTenant("acme");
    db_.AddTenant("globex");
    db_.AddTenant("initech", /*active=*/false);
  }

  std::unique_ptr<Scheduler> NewScheduler() {
    SchedulerOptions o;
    o.node_id = "node-a";
    return std::make_unique<Scheduler>(store_, &db_.clock(), o);
  }

  CycleReport CycleAt(Scheduler& s, Millis t) {
    db_.clock().Set(t);
    Result<CycleReport> r = s.RunCycle();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_TRUE(r->leader);
    EXPECT_TRUE(r->errors.empty());
    return *r;
  }

  std::map<std::string, int> CreatedPerJob(std::size_t from_index) {
    std::map<std::string, int> out;
    std::vector<Execution> all = db_.Executions();
    for (std::size_t i = from_index; i < all.size(); ++i) ++out[all[i].job.value];
    return out;
  }

  // Invariant C: one execution per (job, fire time or window, tenant), and
  // every key names exactly its (job, fire or window, tenant).
  void CheckInvariantC() {
    std::set<std::tuple<std::string, Millis, std::string>> seen;
    for (const Execution& e : db_.Executions()) {
      Millis slot = e.scheduled_at;
      std::string expected_key = ScheduledKey(e.job, e.scheduled_at, e.tenant);
      if (e.job.value == "digest") {
        slot = ClaimedWindow(e.scheduled_at, kDay).first;
        expected_key = WindowKey(e.job, e.tenant, slot);
      }
      EXPECT_EQ(e.idempotency_key, expected_key);
      EXPECT_TRUE(seen.emplace(e.job.value, slot, e.tenant.value).second)
          << "two executions for " << e.idempotency_key;
      EXPECT_NE(e.tenant.value, "initech") << "inactive tenants get nothing";
    }
  }

  DrillDatabase db_;
  Store* store_ = nullptr;
};

TEST_F(Rd8PauseDrill, TwoDayPauseCatchesUpBoundedlyAndCountsSkippedFires) {
  auto scheduler = NewScheduler();
  // An hour of normal operation: a cycle one second after each minute.
  for (int m = 1; m <= 60; ++m) {
    CycleReport r = CycleAt(*scheduler, kT0 + m * kMinute + kSecond);
    EXPECT_EQ(r.skipped, 0) << "minute " << m;
    EXPECT_EQ(r.coalesced, 0) << "minute " << m;
  }
  std::map<std::string, int> first_hour = CreatedPerJob(0);
  EXPECT_EQ(first_hour, (std::map<std::string, int>{{"digest", 2},
                                                    {"quarter", 4},
                                                    {"report", 24},
                                                    {"tick-all", 60},
                                                    {"tick-coalesce", 60},
                                                    {"tick-none", 60}}));
  for (const auto& [job, state] : db_.States()) EXPECT_EQ(state.skipped_fires, 0) << job;
  const std::size_t before_pause = db_.Executions().size();

  // Paused (the process is gone) from 01:00:01 on day 1 until 01:07:01 on
  // day 3. A new process resumes with an empty cache.
  scheduler = NewScheduler();
  const Millis resume = At(3, 1, 7) + kSecond;
  CycleReport r = CycleAt(*scheduler, resume);
  std::map<std::string, int> created = CreatedPerJob(before_pause);
  EXPECT_EQ(created,
            (std::map<std::string, int>{{"digest", 4},     // windows Jan 1 and Jan 2, two tenants
                                        {"quarter", 1},    // 01:00 (missed, within the window)
                                        {"report", 2},     // 01:05 for the two active tenants
                                        {"tick-all", 10},  // 00:58 .. 01:07: the window's fires
                                        {"tick-coalesce", 1},  // 01:07
                                        {"tick-none", 1}}))    // 01:07 (on time); ny-morning: none
      << "no burst";
  EXPECT_EQ(r.executions_created, 19);
  EXPECT_EQ(r.duplicates, 0);
  EXPECT_EQ(r.fires, 3 * 2887 + 192 + 577 + 48 + 2);
  EXPECT_EQ(r.coalesced, 9 + 0 + 1 + 1);  // tick-coalesce, quarter, report, digest (same window)
  EXPECT_EQ(r.skipped, 2877 + 2877 + 2886 + 191 + 575 + 45 + 2);
  EXPECT_EQ(r.fires, r.skipped + r.coalesced + r.admitted_fires);
  EXPECT_FALSE(r.skipped_count_capped);
  std::cout << "RD8 resume cycle: " << r.fires << " fires decided, " << r.executions_created
            << " executions, " << r.skipped << " skipped; evaluation " << r.evaluation_time.count()
            << " us, commit " << r.commit_time.count() << " us" << std::endl;

  // The skipped fires are recorded per job.
  std::map<std::string, ScheduleState> states = db_.States();
  struct Expect {
    std::int64_t skipped;
    Millis last_skipped_at;
    Millis last_fire_at;
  };
  const std::map<std::string, Expect> expected = {
      {"tick-coalesce", {2877, At(3, 0, 57), At(3, 1, 7)}},
      {"tick-all", {2877, At(3, 0, 57), At(3, 1, 7)}},
      {"tick-none", {2886, At(3, 1, 6), At(3, 1, 7)}},
      {"quarter", {191, At(3, 0, 45), At(3, 1, 0)}},
      {"report", {575, At(3, 0, 55), At(3, 1, 5)}},
      {"digest", {45, At(2, 22, 0), At(3, 1, 0)}},
      {"ny-morning", {2, At(2, 7, 30), 0}},
  };
  for (const auto& [job, e] : expected) {
    const ScheduleState& s = states[job];
    EXPECT_EQ(s.skipped_fires, e.skipped) << job;
    EXPECT_EQ(s.last_skipped_at, e.last_skipped_at) << job;
    EXPECT_EQ(s.last_fire_at, e.last_fire_at) << job;
    EXPECT_EQ(s.last_evaluated_at, resume) << job;
  }

  // Back to normal: one execution per minute again, nothing more skipped.
  const std::size_t after_resume = db_.Executions().size();
  for (int m = 8; m <= 20; ++m) {
    CycleReport n = CycleAt(*scheduler, At(3, 1, m) + kSecond);
    EXPECT_EQ(n.skipped, 0);
    EXPECT_EQ(n.coalesced, 0);
  }
  std::map<std::string, int> later = CreatedPerJob(after_resume);
  EXPECT_EQ(later["tick-all"], 13);
  EXPECT_EQ(later["tick-coalesce"], 13);
  EXPECT_EQ(later["tick-none"], 13);
  EXPECT_EQ(later["report"], 2 * 3);  // 01:10, 01:15, 01:20
  EXPECT_EQ(later["quarter"], 1);     // 01:15
  EXPECT_EQ(db_.States()["tick-none"].skipped_fires, 2886);

  // Resuming again within the same minute creates nothing.
  CycleReport again = CycleAt(*scheduler, At(3, 1, 20) + 30 * kSecond);
  EXPECT_EQ(again.admissions, 0);
  CheckInvariantC();
}

TEST_F(Rd8PauseDrill, APauseShorterThanTheWindowLosesNothingUnderPolicyAll) {
  auto scheduler = NewScheduler();
  CycleAt(*scheduler, kT0 + kMinute + kSecond);
  // Down for 8 minutes: everything missed is within the 10-minute window.
  CycleReport r = CycleAt(*scheduler, kT0 + 9 * kMinute + kSecond);
  std::set<Millis> fires;
  for (const Execution& e : db_.Executions()) {
    if (e.job.value == "tick-all") fires.insert(e.scheduled_at);
  }
  EXPECT_EQ(fires.size(), 9u);
  for (int m = 1; m <= 9; ++m) EXPECT_EQ(fires.count(kT0 + m * kMinute), 1u) << m;
  EXPECT_EQ(db_.States()["tick-all"].skipped_fires, 0);
  EXPECT_EQ(db_.States()["tick-none"].skipped_fires, 7);
  EXPECT_EQ(db_.States()["tick-coalesce"].skipped_fires, 0);
  EXPECT_EQ(r.skipped, 7);
  CheckInvariantC();
}

}  // namespace
}  // namespace taskengine::drill
