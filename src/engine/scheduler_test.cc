// Scheduler cycles (T3-T5) on a real SQLite store with a FakeClock.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "core/mutex.h"
#include "core/time_text.h"
#include "storage/sqlite/sqlite_store.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

constexpr Millis kSecond = 1000;
constexpr Millis kMinute = 60 * kSecond;
constexpr Millis kHour = 60 * kMinute;
constexpr Millis kDay = 24 * kHour;
// FakeClock's default start: 2026-01-01T00:00:00Z.
constexpr Millis kT0 = 1'767'225'600'000;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions o;
    o.path = dir_.File("te.db");
    o.clock = &clock_;
    ASSERT_OK_AND_ASSIGN(store_, OpenSqliteStore(o));
    ASSERT_OK(store_->Migrate());
  }

  Store& store() { return *store_; }
  void Advance(Millis ms) { clock_.Advance(std::chrono::milliseconds(ms)); }
  void SetNow(Millis t) { clock_.Set(t); }

  static JobDefinition MakeJob(const std::string& name, const std::string& schedule) {
    JobDefinition j;
    j.name = JobName(name);
    j.handler = "noop";
    j.schedule = schedule;
    return j;
  }
  void Define(const JobDefinition& job) { ASSERT_OK(store_->UpsertJob(job)); }
  void AddTenant(const std::string& id, bool active = true) {
    Tenant t;
    t.id = TenantId(id);
    t.active = active;
    ASSERT_OK(store_->UpsertTenant(t));
  }

  std::unique_ptr<Scheduler> MakeScheduler(const std::string& node = "node-a",
                                           std::size_t chunk = 20'000) {
    SchedulerOptions o;
    o.node_id = node;
    o.max_admissions_per_commit = chunk;
    return std::make_unique<Scheduler>(store_.get(), &clock_, o);
  }

  // One locked cycle; fails the test unless it ran as leader.
  CycleReport Cycle(Scheduler& s) {
    Result<CycleReport> r = s.RunCycle();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return {};
    EXPECT_TRUE(r->leader);
    for (const ScheduleError& e : r->errors) ADD_FAILURE() << "schedule error: " << e.message;
    return *r;
  }

  // Every execution, oldest first.
  std::vector<Execution> All() {
    std::vector<Execution> all;
    ExecutionFilter f;
    f.limit = 1000;
    while (true) {
      Result<ExecutionPage> page = store_->ListExecutions(f);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (Execution& e : page->items) all.push_back(std::move(e));
      if (page->next_before.value == 0) break;
      f.before = page->next_before;
    }
    std::reverse(all.begin(), all.end());
    return all;
  }
  std::vector<std::string> Keys() {
    std::vector<std::string> keys;
    for (const Execution& e : All()) keys.push_back(e.idempotency_key);
    return keys;
  }
  std::map<std::string, ScheduleState> States() {
    std::map<std::string, ScheduleState> out;
    Result<std::vector<ScheduleState>> states = store_->ListScheduleStates();
    EXPECT_TRUE(states.ok()) << states.status().ToString();
    if (states.ok()) {
      for (const ScheduleState& s : *states) out[s.job.value] = s;
    }
    return out;
  }

  TempDir dir_;
  FakeClock clock_{kT0};
  std::unique_ptr<Store> store_;
};

// --- formats and checks --------------------------------------------------------

TEST(SchedulerFormatTest, KeysAndTimes) {
  EXPECT_EQ(FormatKeyMinute(kT0), "2026-01-01T00:00Z");
  EXPECT_EQ(FormatKeyMinute(kT0 + 5 * kMinute + 59'999), "2026-01-01T00:05Z");
  EXPECT_EQ(FormatTimeSeconds(kT0 + 5 * kMinute + 7'999), "2026-01-01T00:05:07Z");
  EXPECT_EQ(FormatTimeSeconds(kT0 - 1), "2025-12-31T23:59:59Z");
  EXPECT_EQ(ScheduledKey(JobName("tick"), kT0 + kMinute, TenantId()), "tick:2026-01-01T00:01Z");
  EXPECT_EQ(ScheduledKey(JobName("tick"), kT0 + kMinute, TenantId("acme")),
            "tick:2026-01-01T00:01Z:acme");
  EXPECT_EQ(WindowKey(JobName("digest"), TenantId("acme"), kT0), "digest:acme:2026-01-01T00:00Z");
  EXPECT_EQ(WindowKey(JobName("digest"), TenantId(), kT0), "digest:2026-01-01T00:00Z");
  // The latest complete window at the fire time, aligned to the epoch.
  EXPECT_EQ(ClaimedWindow(kT0 + 2 * kHour, kDay), std::make_pair(kT0 - kDay, kT0));
  EXPECT_EQ(ClaimedWindow(kT0, kDay), std::make_pair(kT0 - kDay, kT0));
  EXPECT_EQ(ClaimedWindow(kT0 + kDay - 1, kDay), std::make_pair(kT0 - kDay, kT0));
  EXPECT_EQ(ClaimedWindow(kT0 + 61 * kMinute, kHour), std::make_pair(kT0, kT0 + kHour));
}

TEST(SchedulerFormatTest, CheckJobScheduleNamesTheJobAndTheProblem) {
  JobDefinition j;
  j.name = JobName("nightly");
  j.schedule = "0 24 * * *";
  Result<std::optional<Schedule>> r = CheckJobSchedule(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "job 'nightly': schedule \"0 24 * * *\": hour field at position 3: value 24 out of "
            "range 0-23");

  j.schedule = "0 3 * * *";
  j.timezone = "Mars/Olympus";
  r = CheckJobSchedule(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job 'nightly': timezone: "), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("Mars/Olympus"), std::string::npos);

  j.schedule.clear();  // the zone is checked even without a schedule
  EXPECT_FALSE(CheckJobSchedule(j).ok());

  j.timezone = "Europe/Berlin";
  ASSERT_OK_AND_ASSIGN(std::optional<Schedule> none, CheckJobSchedule(j));
  EXPECT_FALSE(none.has_value());

  j.schedule = "@daily";
  j.window_ms = 90 * kSecond;
  r = CheckJobSchedule(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("whole number of minutes"), std::string::npos);
  j.window_ms = kDay;
  ASSERT_OK_AND_ASSIGN(std::optional<Schedule> daily, CheckJobSchedule(j));
  ASSERT_TRUE(daily.has_value());
  EXPECT_EQ(daily->zone_name(), "Europe/Berlin");
}

// --- T3: one execution per fire --------------------------------------------------

TEST_F(SchedulerTest, PerMinuteJobFiresOncePerMinute) {
  Define(MakeJob("tick", "* * * * *"));
  auto scheduler = MakeScheduler();
  std::vector<std::string> expected;
  for (int minute = 1; minute <= 10; ++minute) {
    SetNow(kT0 + minute * kMinute + kSecond);
    CycleReport r = Cycle(*scheduler);
    EXPECT_EQ(r.jobs_evaluated, 1);
    EXPECT_EQ(r.fires, 1) << "minute " << minute;
    EXPECT_EQ(r.executions_created, 1) << "minute " << minute;
    EXPECT_EQ(r.skipped, 0);
    EXPECT_EQ(r.coalesced, 0);
    expected.push_back(ScheduledKey(JobName("tick"), kT0 + minute * kMinute, TenantId()));
  }
  EXPECT_EQ(Keys(), expected);

  const std::vector<Execution> all = All();
  const Execution& e = all.front();
  EXPECT_EQ(e.idempotency_key, "tick:2026-01-01T00:01Z");
  EXPECT_EQ(e.job.value, "tick");
  EXPECT_TRUE(e.tenant.empty());
  EXPECT_EQ(e.trigger, Trigger::kScheduled);
  EXPECT_EQ(e.requester, "system:scheduler");
  EXPECT_EQ(e.scheduled_at, kT0 + kMinute);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.payload_json, R"({"fire_time":"2026-01-01T00:01:00Z"})");
  ASSERT_OK_AND_ASSIGN(std::string canonical, CanonicalizeJson(e.payload_json));
  EXPECT_EQ(canonical, e.payload_json);
  EXPECT_EQ(e.fingerprint, AdmissionFingerprint(e.payload_json, "system:scheduler"));

  const ScheduleState st = States()["tick"];
  EXPECT_EQ(st.last_fire_at, kT0 + 10 * kMinute);
  EXPECT_EQ(st.last_evaluated_at, kT0 + 10 * kMinute + kSecond);
  EXPECT_EQ(st.skipped_fires, 0);
}

// Lifecycle lines (issue 14 item 9): one execution.dispatched per execution
// a cycle created, across commit chunks; duplicates report nothing.
TEST_F(SchedulerTest, CreatedExecutionsAreDispatchedLifecycleEvents) {
  JobDefinition job = MakeJob("fan", "* * * * *");
  job.scope = JobScope::kPerTenant;
  job.queue = "reports";
  Define(job);
  for (const char* t : {"a", "b", "c"}) AddTenant(t);
  SchedulerOptions o;
  o.node_id = "node-a";
  o.max_admissions_per_commit = 2;  // two chunks
  std::vector<LifecycleEvent> events;
  o.lifecycle = [&events](const LifecycleEvent& e) { events.push_back(e); };
  Scheduler scheduler(store_.get(), &clock_, o);
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(scheduler).executions_created, 3);
  ASSERT_EQ(events.size(), 3u);
  std::set<std::string> tenants;
  std::set<std::int64_t> ids;
  for (const LifecycleEvent& e : events) {
    EXPECT_EQ(e.kind, LifecycleKind::kDispatched);
    EXPECT_EQ(e.job.value, "fan");
    EXPECT_EQ(e.queue, "reports");
    EXPECT_EQ(e.trigger, Trigger::kScheduled);
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    tenants.insert(e.tenant.value);
    ids.insert(e.id.value);
  }
  EXPECT_EQ(tenants, (std::set<std::string>{"a", "b", "c"}));
  std::set<std::int64_t> stored;
  for (const Execution& e : All()) stored.insert(e.id.value);
  EXPECT_EQ(ids, stored);
  EXPECT_EQ(Cycle(scheduler).executions_created, 0);
  EXPECT_EQ(events.size(), 3u) << "a second cycle in the minute creates nothing";
}

TEST_F(SchedulerTest, SecondCycleInTheSameMinuteCreatesNothing) {
  Define(MakeJob("tick", "* * * * *"));
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 1);
  SetNow(kT0 + kMinute + 40 * kSecond);
  CycleReport again = Cycle(*scheduler);
  EXPECT_EQ(again.fires, 0);
  EXPECT_EQ(again.admissions, 0);
  EXPECT_EQ(again.executions_created, 0);
  EXPECT_EQ(All().size(), 1u);
}

TEST_F(SchedulerTest, TheSameFireDecidedTwiceIsADuplicate) {
  // Two plans from the same stored state (as two schedulers that both believe
  // they lead would make): the second commit creates nothing.
  Define(MakeJob("tick", "* * * * *"));
  auto a = MakeScheduler("node-a");
  auto b = MakeScheduler("node-b");
  SetNow(kT0 + kMinute + kSecond);
  ASSERT_OK_AND_ASSIGN(CyclePlan plan_a, a->Evaluate());
  ASSERT_OK_AND_ASSIGN(CyclePlan plan_b, b->Evaluate());
  ASSERT_EQ(plan_a.admissions.size(), 1u);
  ASSERT_EQ(plan_b.admissions.size(), 1u);
  ASSERT_OK_AND_ASSIGN(CycleReport ra, a->Commit(std::move(plan_a)));
  ASSERT_OK_AND_ASSIGN(CycleReport rb, b->Commit(std::move(plan_b)));
  EXPECT_EQ(ra.executions_created, 1);
  EXPECT_EQ(rb.executions_created, 0);
  EXPECT_EQ(rb.duplicates, 1);
  EXPECT_FALSE(ra.leader) << "Evaluate/Commit take no lock";
  EXPECT_EQ(All().size(), 1u);
}

TEST_F(SchedulerTest, PerTenantJobsFanOutToActiveTenantsOnly) {
  JobDefinition job = MakeJob("report", "* * * * *");
  job.scope = JobScope::kPerTenant;
  Define(job);
  AddTenant("acme");
  AddTenant("globex");
  AddTenant("initech", /*active=*/false);
  auto scheduler = MakeScheduler();

  SetNow(kT0 + kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 1);
  EXPECT_EQ(r.admitted_fires, 1);
  EXPECT_EQ(r.executions_created, 2);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"report:2026-01-01T00:01Z:acme",
                                              "report:2026-01-01T00:01Z:globex"}));
  for (const Execution& e : All()) {
    EXPECT_EQ(e.idempotency_key, "report:2026-01-01T00:01Z:" + e.tenant.value);
    EXPECT_EQ(e.payload_json, R"({"fire_time":"2026-01-01T00:01:00Z"})");
  }

  AddTenant("globex", /*active=*/false);
  AddTenant("initech", /*active=*/true);
  SetNow(kT0 + 2 * kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 2);
  SetNow(kT0 + 3 * kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 2);

  std::map<std::string, int> per_tenant;
  for (const Execution& e : All()) ++per_tenant[e.tenant.value];
  EXPECT_EQ(per_tenant, (std::map<std::string, int>{{"acme", 3}, {"globex", 1}, {"initech", 2}}))
      << "no executions for globex once disabled; initech only once enabled";
}

TEST_F(SchedulerTest, PerTenantJobWithoutActiveTenantsCreatesNothing) {
  JobDefinition job = MakeJob("report", "* * * * *");
  job.scope = JobScope::kPerTenant;
  Define(job);
  AddTenant("acme", /*active=*/false);
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 1);
  EXPECT_EQ(r.admissions, 0);
  EXPECT_TRUE(All().empty());
}

TEST_F(SchedulerTest, ScheduleUsesTheJobsTimeZone) {
  JobDefinition job = MakeJob("morning", "0 9 * * *");
  job.timezone = "Europe/Berlin";  // UTC+1 in January
  Define(job);
  auto scheduler = MakeScheduler();
  SetNow(kT0 + 8 * kHour - kMinute);
  EXPECT_EQ(Cycle(*scheduler).fires, 0);
  SetNow(kT0 + 8 * kHour + kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 1);
  EXPECT_EQ(Keys(), std::vector<std::string>{"morning:2026-01-01T08:00Z"});
}

// --- T4: bounded catch-up --------------------------------------------------------

struct CatchUpCase {
  CatchUpPolicy policy;
  std::int64_t created;
  std::int64_t skipped;
  std::int64_t coalesced;
  std::vector<std::string> minutes;  // fire minutes (HH:MM on 2026-01-01) that got executions
};

void PrintTo(const CatchUpCase& c, std::ostream* os) { *os << ToString(c.policy); }

class SchedulerCatchUpTest : public SchedulerTest,
                             public ::testing::WithParamInterface<CatchUpCase> {};

TEST_P(SchedulerCatchUpTest, ThirtyMinutePauseWithATenMinuteWindow) {
  const CatchUpCase& c = GetParam();
  JobDefinition job = MakeJob("tick", "* * * * *");
  job.catch_up = c.policy;
  Define(job);
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  ASSERT_EQ(Cycle(*scheduler).executions_created, 1);

  // Paused until 00:31:01: fires 00:02 .. 00:31. 00:31 is on time; 00:22 ..
  // 00:30 are missed within the 10-minute window; 00:02 .. 00:21 are stale.
  SetNow(kT0 + 31 * kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 30);
  EXPECT_EQ(r.executions_created, c.created);
  EXPECT_EQ(r.skipped, c.skipped);
  EXPECT_EQ(r.coalesced, c.coalesced);
  EXPECT_EQ(r.fires, r.skipped + r.coalesced + r.admitted_fires);

  std::vector<std::string> expected = {"tick:2026-01-01T00:01Z"};
  for (const std::string& m : c.minutes) expected.push_back("tick:2026-01-01T" + m + "Z");
  EXPECT_EQ(Keys(), expected);
  const ScheduleState st = States()["tick"];
  EXPECT_EQ(st.skipped_fires, c.skipped);
  EXPECT_EQ(st.last_skipped_at,
            c.policy == CatchUpPolicy::kNone ? kT0 + 30 * kMinute : kT0 + 21 * kMinute);
  EXPECT_EQ(st.last_fire_at, kT0 + 31 * kMinute);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, SchedulerCatchUpTest,
    ::testing::Values(CatchUpCase{CatchUpPolicy::kCoalesce, 1, 20, 9, {"00:31"}},
                      CatchUpCase{CatchUpPolicy::kAll,
                                  10,
                                  20,
                                  0,
                                  {"00:22", "00:23", "00:24", "00:25", "00:26", "00:27", "00:28",
                                   "00:29", "00:30", "00:31"}},
                      CatchUpCase{CatchUpPolicy::kNone, 1, 29, 0, {"00:31"}}),
    [](const ::testing::TestParamInfo<CatchUpCase>& info) {
      return std::string(ToString(info.param.policy));
    });

TEST_F(SchedulerTest, CoalesceWithoutAnOnTimeFireAdmitsTheLatestMissedFire) {
  for (CatchUpPolicy policy :
       {CatchUpPolicy::kCoalesce, CatchUpPolicy::kAll, CatchUpPolicy::kNone}) {
    JobDefinition job = MakeJob("every5-" + std::string(ToString(policy)), "*/5 * * * *");
    job.catch_up = policy;
    Define(job);
  }
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).fires, 0);
  // 00:13:01: 00:05 and 00:10 were missed (within the window); none is on time.
  SetNow(kT0 + 13 * kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 6);
  EXPECT_EQ(r.executions_created, 1 + 2 + 0);
  EXPECT_EQ(r.coalesced, 1);
  EXPECT_EQ(r.skipped, 2);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"every5-all:2026-01-01T00:05Z",
                                              "every5-all:2026-01-01T00:10Z",
                                              "every5-coalesce:2026-01-01T00:10Z"}));
}

TEST_F(SchedulerTest, ANewJobDoesNotCatchUpOnTimeBeforeItExisted) {
  SetNow(kT0 + 10 * kMinute + 30 * kSecond);
  JobDefinition job = MakeJob("tick", "* * * * *");
  job.catch_up = CatchUpPolicy::kAll;
  Define(job);  // created at 00:10:30
  auto scheduler = MakeScheduler();
  SetNow(kT0 + 11 * kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 1);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(Keys(), std::vector<std::string>{"tick:2026-01-01T00:11Z"});
}

TEST_F(SchedulerTest, ANewJobNeverEvaluatedCountsTheFiresItMissed) {
  Define(MakeJob("tick", "* * * * *"));  // created at 00:00, no scheduler ran for a day
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kDay + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.fires, 1440);
  EXPECT_EQ(r.executions_created, 1);
  EXPECT_EQ(r.coalesced, 9);
  EXPECT_EQ(r.skipped, 1440 - 10);
  EXPECT_EQ(States()["tick"].skipped_fires, 1430);
}

TEST_F(SchedulerTest, ZeroCatchUpWindowAndPolicyNoneStillFireOnTime) {
  JobDefinition job = MakeJob("tick", "* * * * *");
  job.catch_up = CatchUpPolicy::kNone;
  job.catch_up_window_ms = 0;
  Define(job);
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + 2 * kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 1);
  SetNow(kT0 + 4 * kMinute + 2 * kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.executions_created, 1) << "00:04 is on time";
  EXPECT_EQ(r.skipped, 2) << "00:02 and 00:03 were missed and there is no window";
}

// --- T5: window claims -------------------------------------------------------------

TEST_F(SchedulerTest, WindowClaimsCoalesceIntoOneExecutionPerTenantAndWindow) {
  JobDefinition job = MakeJob("digest", "0 * * * *");  // hourly triggers
  job.scope = JobScope::kPerTenant;
  job.window_ms = kDay;
  job.catch_up = CatchUpPolicy::kAll;
  job.catch_up_window_ms = 4 * kHour;
  Define(job);
  AddTenant("acme");
  AddTenant("globex");
  auto scheduler = MakeScheduler();

  SetNow(kT0 + kHour + kSecond);
  CycleReport first = Cycle(*scheduler);
  EXPECT_EQ(first.executions_created, 2);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"digest:acme:2025-12-31T00:00Z",
                                              "digest:globex:2025-12-31T00:00Z"}));
  for (const Execution& e : All()) {
    EXPECT_EQ(e.payload_json,
              R"({"window_end":"2026-01-01T00:00:00Z","window_start":"2025-12-31T00:00:00Z"})");
    EXPECT_EQ(e.scheduled_at, kT0 + kHour);
    ASSERT_OK_AND_ASSIGN(std::string canonical, CanonicalizeJson(e.payload_json));
    EXPECT_EQ(canonical, e.payload_json);
  }

  // The next trigger claims the same window: the keys answer duplicate.
  SetNow(kT0 + 2 * kHour + kSecond);
  CycleReport second = Cycle(*scheduler);
  EXPECT_EQ(second.executions_created, 0);
  EXPECT_EQ(second.duplicates, 2);
  EXPECT_EQ(second.conflicts, 0) << "every trigger of a window carries the same payload";

  // Three triggers in one cycle (policy all) claim one window once.
  SetNow(kT0 + 5 * kHour + kSecond);
  CycleReport third = Cycle(*scheduler);
  EXPECT_EQ(third.fires, 3);
  EXPECT_EQ(third.coalesced, 2);
  EXPECT_EQ(third.admissions, 2);
  EXPECT_EQ(third.duplicates, 2);

  // A new day: a new window.
  SetNow(kT0 + kDay + kSecond);
  CycleReport next_day = Cycle(*scheduler);
  EXPECT_EQ(next_day.executions_created, 2);
  EXPECT_EQ(All().size(), 4u);
  EXPECT_EQ(All().back().idempotency_key, "digest:globex:2026-01-01T00:00Z");
}

// --- definitions at runtime ---------------------------------------------------------

TEST_F(SchedulerTest, DefinitionEditsTakeEffect) {
  JobDefinition job = MakeJob("edit", "0 * * * *");
  Define(job);
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).fires, 0);

  job.schedule = "* * * * *";  // same instant as the cycle: updated_at may not move
  Define(job);
  SetNow(kT0 + 2 * kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).executions_created, 1);

  job.schedule = "30 * * * *";
  Define(job);
  SetNow(kT0 + 3 * kMinute + kSecond);
  EXPECT_EQ(Cycle(*scheduler).fires, 0);

  job.timezone = "Asia/Kolkata";  // UTC+05:30: local minute 30 is UTC minute 0
  job.schedule = "30 * * * *";
  Define(job);
  SetNow(kT0 + kHour + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.executions_created, 1);
  EXPECT_EQ(Keys(), (std::vector<std::string>{"edit:2026-01-01T00:02Z", "edit:2026-01-01T01:00Z"}));
}

TEST_F(SchedulerTest, DisabledJobDoesNotFireAndDoesNotCatchUpWhenEnabled) {
  JobDefinition job = MakeJob("tick", "* * * * *");
  job.enabled = false;
  job.catch_up = CatchUpPolicy::kAll;
  Define(job);
  auto scheduler = MakeScheduler();
  for (int minute = 1; minute <= 5; ++minute) {
    SetNow(kT0 + minute * kMinute + kSecond);
    CycleReport r = Cycle(*scheduler);
    EXPECT_EQ(r.jobs_evaluated, 0);
    EXPECT_EQ(r.fires, 0);
  }
  EXPECT_TRUE(All().empty());
  EXPECT_EQ(States()["tick"].last_evaluated_at, kT0 + 5 * kMinute + kSecond);

  job.enabled = true;
  SetNow(kT0 + 5 * kMinute + 30 * kSecond);
  Define(job);
  SetNow(kT0 + 6 * kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.executions_created, 1);
  EXPECT_EQ(r.skipped, 0);
  EXPECT_EQ(Keys(), std::vector<std::string>{"tick:2026-01-01T00:06Z"})
      << "the minutes it was disabled are not caught up";
}

TEST_F(SchedulerTest, ABadScheduleIsReportedAndOtherJobsStillFire) {
  Define(MakeJob("bad", "61 * * * *"));  // the store does not parse schedules
  JobDefinition zone = MakeJob("zone", "* * * * *");
  zone.timezone = "Nowhere/Land";
  Define(zone);
  Define(MakeJob("good", "* * * * *"));
  auto scheduler = MakeScheduler();
  SetNow(kT0 + kMinute + kSecond);
  ASSERT_OK_AND_ASSIGN(CycleReport r, scheduler->RunCycle());
  EXPECT_EQ(r.jobs_evaluated, 1);
  EXPECT_EQ(r.executions_created, 1);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].job.value, "bad");
  EXPECT_NE(r.errors[0].message.find("job 'bad': schedule \"61 * * * *\""), std::string::npos)
      << r.errors[0].message;
  EXPECT_EQ(r.errors[1].job.value, "zone");
  EXPECT_EQ(States().count("bad"), 0u) << "its state is left alone";
}

// --- the leader lock ---------------------------------------------------------------------

TEST_F(SchedulerTest, OnlyTheLockHolderActs) {
  Define(MakeJob("tick", "* * * * *"));
  auto a = MakeScheduler("node-a");
  auto b = MakeScheduler("node-b");
  EXPECT_EQ(a->lock_ttl_ms(), 3 * kMinute);
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(*a).executions_created, 1);

  SetNow(kT0 + 2 * kMinute + kSecond);
  ASSERT_OK_AND_ASSIGN(CycleReport rb, b->RunCycle());
  EXPECT_FALSE(rb.leader);
  EXPECT_EQ(rb.admissions, 0);
  EXPECT_EQ(All().size(), 1u) << "node-b did nothing";
  EXPECT_EQ(Cycle(*a).executions_created, 1);

  // node-a stops cycling (crashed); its lock expires 3 minutes after its last
  // cycle and node-b takes over, catching up on what node-a missed.
  SetNow(kT0 + 4 * kMinute + kSecond);
  ASSERT_OK_AND_ASSIGN(rb, b->RunCycle());
  EXPECT_FALSE(rb.leader);
  SetNow(kT0 + 5 * kMinute + 2 * kSecond);
  ASSERT_OK_AND_ASSIGN(rb, b->RunCycle());
  EXPECT_TRUE(rb.leader);
  EXPECT_EQ(rb.executions_created, 1) << "coalesced catch-up of 00:03 .. 00:05";
  EXPECT_EQ(rb.coalesced, 2);
  ASSERT_OK_AND_ASSIGN(CycleReport ra, a->RunCycle());
  EXPECT_FALSE(ra.leader) << "node-a came back: node-b holds the lock now";
}

TEST_F(SchedulerTest, HugeCyclesCommitInChunks) {
  JobDefinition job = MakeJob("report", "* * * * *");
  job.scope = JobScope::kPerTenant;
  Define(job);
  for (int i = 0; i < 7; ++i) AddTenant("t" + std::to_string(i));
  auto scheduler = MakeScheduler("node-a", /*chunk=*/3);
  SetNow(kT0 + kMinute + kSecond);
  CycleReport r = Cycle(*scheduler);
  EXPECT_EQ(r.admissions, 7);
  EXPECT_EQ(r.executions_created, 7);
  EXPECT_EQ(All().size(), 7u);
  EXPECT_EQ(States()["report"].last_fire_at, kT0 + kMinute);
  SetNow(kT0 + kMinute + 30 * kSecond);
  EXPECT_EQ(Cycle(*scheduler).admissions, 0);
}

// --- the loop -----------------------------------------------------------------------------

TEST_F(SchedulerTest, LoopRunsACycleAtStartAndAfterEachMinuteThenReleasesTheLock) {
  Define(MakeJob("tick", "* * * * *"));
  SetNow(kT0 + kMinute + 30 * kSecond);
  SchedulerOptions o;
  o.node_id = "node-a";
  o.loop_tick_ms = 5;
  std::atomic<int> admitted{0};
  o.on_admitted = [&] { ++admitted; };
  Scheduler scheduler(store_.get(), &clock_, o);
  Mutex mu;
  std::vector<Millis> cycle_times;
  ASSERT_OK(scheduler.Start([&](const Result<CycleReport>& r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    MutexLock lock(mu);
    cycle_times.push_back(r->now);
  }));
  EXPECT_EQ(scheduler.Start().code(), ErrorCode::kConflict);
  auto cycles = [&] {
    MutexLock lock(mu);
    return cycle_times.size();
  };
  auto wait_for = [&](std::size_t n) {
    for (int i = 0; i < 2000 && cycles() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return cycles() >= n;
  };
  ASSERT_TRUE(wait_for(1)) << "the first cycle runs at once";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cycles(), 1u) << "nothing more before the next minute";
  SetNow(kT0 + 2 * kMinute + kSecond);  // the boundary plus the offset
  ASSERT_TRUE(wait_for(2));
  SetNow(kT0 + 3 * kMinute + kSecond);
  ASSERT_TRUE(wait_for(3));
  scheduler.Stop();
  {
    MutexLock lock(mu);
    EXPECT_EQ(cycle_times,
              (std::vector<Millis>{kT0 + kMinute + 30 * kSecond, kT0 + 2 * kMinute + kSecond,
                                   kT0 + 3 * kMinute + kSecond}));
  }
  EXPECT_EQ(Keys(), (std::vector<std::string>{"tick:2026-01-01T00:01Z", "tick:2026-01-01T00:02Z",
                                              "tick:2026-01-01T00:03Z"}));
  EXPECT_EQ(admitted.load(), 3);
  // Stop released the lock: another node leads at once.
  ASSERT_OK_AND_ASSIGN(bool taken, store_->AcquireLock("scheduler", "node-b", kMinute));
  EXPECT_TRUE(taken);
  scheduler.Stop();  // idempotent
}

// Failover within the minute: with a ttl shorter than the interval, a
// follower whose leader died tries again every ttl/3, takes over once the
// dead leader's lock expired and admits the fire the leader missed on time,
// not a minute later (where the default coalesce policy would fold it into
// the next fire).
TEST_F(SchedulerTest, FollowerTakesOverSoonAfterTheLeaderDiedAndFiresOnTime) {
  Define(MakeJob("tick", "* * * * *"));
  SchedulerOptions o;
  o.lock_ttl_ms = 15 * kSecond;
  o.loop_tick_ms = 5;
  o.node_id = "node-a";
  Scheduler a(store_.get(), &clock_, o);
  o.node_id = "node-b";
  Scheduler b(store_.get(), &clock_, o);
  // node-a leads and admits 00:01; its last sign of life is at 00:01:50
  // (its lock lasts until 00:02:05), then it dies without releasing it.
  SetNow(kT0 + kMinute + kSecond);
  EXPECT_EQ(Cycle(a).executions_created, 1);
  SetNow(kT0 + kMinute + 50 * kSecond);
  ASSERT_TRUE(Cycle(a).leader);

  Mutex mu;
  std::vector<std::pair<Millis, bool>> cycles;  // (when, leader)
  ASSERT_OK(b.Start([&](const Result<CycleReport>& r) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    MutexLock lock(mu);
    cycles.emplace_back(r->now, r->leader);
  }));
  auto wait_for = [&](std::size_t n) {
    for (int i = 0; i < 2000; ++i) {
      {
        MutexLock lock(mu);
        if (cycles.size() >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  };
  // (Each pause lets the loop compute its next cycle time from the clock
  // before the test moves the clock.)
  ASSERT_TRUE(wait_for(1));  // at once: node-a holds the lock
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SetNow(kT0 + 2 * kMinute + kSecond);
  ASSERT_TRUE(wait_for(2));  // the boundary: node-a's lock is still live
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  SetNow(kT0 + 2 * kMinute + 7 * kSecond);  // past 00:02:05 and ttl/3 after the last try
  ASSERT_TRUE(wait_for(3));
  b.Stop();
  MutexLock lock(mu);
  EXPECT_EQ(cycles,
            (std::vector<std::pair<Millis, bool>>{{kT0 + kMinute + 50 * kSecond, false},
                                                  {kT0 + 2 * kMinute + kSecond, false},
                                                  {kT0 + 2 * kMinute + 7 * kSecond, true}}));
  EXPECT_EQ(Keys(), (std::vector<std::string>{"tick:2026-01-01T00:01Z", "tick:2026-01-01T00:02Z"}))
      << "00:02 fired in its own minute, on time";
}

}  // namespace
}  // namespace taskengine
