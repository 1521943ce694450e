// Conformance cases for tenants (product.md §1) and the scheduler's storage
// (T3, T4): the expiring leader lock, per-job schedule state, and
// CommitSchedule (admissions and states in one transaction).
#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

Tenant MakeTenant(const std::string& id, const std::string& name = "", bool active = true) {
  Tenant t;
  t.id = TenantId(id);
  t.name = name;
  t.active = active;
  return t;
}

std::string DescribeTenant(const Tenant& t) {
  return t.id.value + "|" + t.name + "|" + (t.active ? "active" : "inactive") + "|" +
         std::to_string(t.created_at);
}

std::vector<std::string> DescribeTenants(const std::vector<Tenant>& tenants) {
  std::vector<std::string> out;
  for (const Tenant& t : tenants) out.push_back(DescribeTenant(t));
  return out;
}

std::string DescribeState(const ScheduleState& s) {
  return s.job.value + " last_fire_at=" + std::to_string(s.last_fire_at) +
         " last_evaluated_at=" + std::to_string(s.last_evaluated_at) +
         " skipped_fires=" + std::to_string(s.skipped_fires) +
         " last_skipped_at=" + std::to_string(s.last_skipped_at);
}

ScheduleUpdate MakeUpdate(const std::string& job, Millis last_fire_at, Millis evaluated_until,
                          std::int64_t skipped = 0, Millis last_skipped_at = 0) {
  ScheduleUpdate u;
  u.job = JobName(job);
  u.last_fire_at = last_fire_at;
  u.evaluated_until = evaluated_until;
  u.skipped = skipped;
  u.last_skipped_at = last_skipped_at;
  return u;
}

// A scheduled admission as the scheduler makes it.
AdmitRequest Scheduled(AdmitRequest r, Millis fire) {
  r.trigger = Trigger::kScheduled;
  r.scheduled_at = fire;
  r.requester = "system:scheduler";
  return r;
}

}  // namespace

// --- tenants ---

TEST_P(StoreConformance, Tenants_UpsertGetAndListActiveOnly) {
  ASSERT_OK_AND_ASSIGN(std::vector<Tenant> none, store().ListTenants(false));
  EXPECT_TRUE(none.empty());
  const Millis created = Now();
  ASSERT_OK(store().UpsertTenant(MakeTenant("globex", "Globex Corp", /*active=*/false)));
  ASSERT_OK(store().UpsertTenant(MakeTenant("acme", "Acme")));
  ASSERT_OK(store().UpsertTenant(MakeTenant("initech")));

  ASSERT_OK_AND_ASSIGN(Tenant acme, store().GetTenant(TenantId("acme")));
  EXPECT_EQ(DescribeTenant(acme), "acme|Acme|active|" + std::to_string(created));

  ASSERT_OK_AND_ASSIGN(std::vector<Tenant> all, store().ListTenants(/*active_only=*/false));
  const std::string at = std::to_string(created);
  EXPECT_EQ(DescribeTenants(all),
            (std::vector<std::string>{"acme|Acme|active|" + at, "globex|Globex Corp|inactive|" + at,
                                      "initech||active|" + at}))
      << "by id";
  ASSERT_OK_AND_ASSIGN(std::vector<Tenant> active, store().ListTenants(/*active_only=*/true));
  EXPECT_EQ(DescribeTenants(active),
            (std::vector<std::string>{"acme|Acme|active|" + at, "initech||active|" + at}));
}

TEST_P(StoreConformance, Tenants_UpsertUpdatesNameAndActiveAndKeepsCreatedAt) {
  const Millis created = Now();
  ASSERT_OK(store().UpsertTenant(MakeTenant("acme", "Acme")));
  Advance(kSecond);
  ASSERT_OK(store().UpsertTenant(MakeTenant("acme", "Acme Inc", /*active=*/false)));
  ASSERT_OK_AND_ASSIGN(Tenant got, store().GetTenant(TenantId("acme")));
  EXPECT_EQ(DescribeTenant(got), "acme|Acme Inc|inactive|" + std::to_string(created));
  ASSERT_OK_AND_ASSIGN(std::vector<Tenant> active, store().ListTenants(true));
  EXPECT_TRUE(active.empty());

  ASSERT_OK(store().UpsertTenant(MakeTenant("acme", "Acme Inc", /*active=*/true)));
  ASSERT_OK_AND_ASSIGN(active, store().ListTenants(true));
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].id.value, "acme");
}

TEST_P(StoreConformance, Tenants_InvalidIdIsInvalidArgumentAndStoresNothing) {
  for (const std::string& bad :
       {std::string(), std::string("Acme"), std::string("-lead"), std::string("_lead"),
        std::string("a b"), std::string("a.b"), std::string("a/b"), std::string(51, 'a')}) {
    Status s = store().UpsertTenant(MakeTenant(bad));
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "id '" << bad << "': " << s.ToString();
  }
  // The longest valid id, and the characters the rule allows.
  EXPECT_OK(store().UpsertTenant(MakeTenant(std::string(50, 'a'))));
  EXPECT_OK(store().UpsertTenant(MakeTenant("0-a_b")));
  ASSERT_OK_AND_ASSIGN(std::vector<Tenant> all, store().ListTenants(false));
  EXPECT_EQ(all.size(), 2u);
}

TEST_P(StoreConformance, Tenants_OverlongNameIsInvalidArgument) {
  Status s = store().UpsertTenant(MakeTenant("acme", std::string(201, 'n')));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(store().GetTenant(TenantId("acme")).status().code(), ErrorCode::kNotFound);
  EXPECT_OK(store().UpsertTenant(MakeTenant("acme", std::string(200, 'n'))));
}

TEST_P(StoreConformance, Tenants_GetMissingIsNotFound) {
  ASSERT_OK(store().UpsertTenant(MakeTenant("acme")));
  Result<Tenant> r = store().GetTenant(TenantId("globex"));
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound) << r.status().ToString();
}

// --- the leader lock (T3) ---

TEST_P(StoreConformance, Lock_FreeLockIsAcquiredAndAnotherHolderIsRefused) {
  ASSERT_OK_AND_ASSIGN(bool a, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  EXPECT_TRUE(a);
  ASSERT_OK_AND_ASSIGN(bool b, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_FALSE(b) << "held by node-a: refused, not an error";
  // Another lock name is another lock.
  ASSERT_OK_AND_ASSIGN(bool other, store().AcquireLock("retention", "node-b", 60 * kSecond));
  EXPECT_TRUE(other);
}

TEST_P(StoreConformance, Lock_ExpiredLockIsTakenOver) {
  ASSERT_OK_AND_ASSIGN(bool a, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  ASSERT_TRUE(a);
  Advance(60 * kSecond - 1);
  ASSERT_OK_AND_ASSIGN(bool early, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_FALSE(early) << "held until now + ttl";
  Advance(1);
  ASSERT_OK_AND_ASSIGN(bool taken, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_TRUE(taken) << "at now + ttl the lock has expired";
  ASSERT_OK_AND_ASSIGN(bool back, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  EXPECT_FALSE(back) << "node-b holds it now";
}

TEST_P(StoreConformance, Lock_HolderRenewsItsLock) {
  ASSERT_OK_AND_ASSIGN(bool a, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  ASSERT_TRUE(a);
  Advance(50 * kSecond);
  ASSERT_OK_AND_ASSIGN(bool renewed, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  EXPECT_TRUE(renewed);
  Advance(30 * kSecond);  // past the first expiry, before the renewed one
  ASSERT_OK_AND_ASSIGN(bool b, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_FALSE(b) << "the renewal extended the lock to 110 s";
  Advance(30 * kSecond);
  ASSERT_OK_AND_ASSIGN(b, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_TRUE(b);
}

TEST_P(StoreConformance, Lock_HolderMayShortenItsLock) {
  // Renewal sets the expiry to now + ttl, even when that is sooner.
  ASSERT_OK_AND_ASSIGN(bool a, store().AcquireLock("scheduler", "node-a", 600 * kSecond));
  ASSERT_TRUE(a);
  ASSERT_OK_AND_ASSIGN(a, store().AcquireLock("scheduler", "node-a", kSecond));
  ASSERT_TRUE(a);
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(bool b, store().AcquireLock("scheduler", "node-b", kSecond));
  EXPECT_TRUE(b);
}

TEST_P(StoreConformance, Lock_OnlyTheHolderReleases) {
  ASSERT_OK_AND_ASSIGN(bool a, store().AcquireLock("scheduler", "node-a", 60 * kSecond));
  ASSERT_TRUE(a);
  ASSERT_OK(store().ReleaseLock("scheduler", "node-b"));  // not the holder: a no-op
  ASSERT_OK_AND_ASSIGN(bool b, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_FALSE(b);
  ASSERT_OK(store().ReleaseLock("scheduler", "node-a"));
  ASSERT_OK_AND_ASSIGN(b, store().AcquireLock("scheduler", "node-b", 60 * kSecond));
  EXPECT_TRUE(b) << "released: free at once, without waiting for the ttl";
  ASSERT_OK(store().ReleaseLock("never-taken", "node-a"));  // a no-op as well
}

TEST_P(StoreConformance, Lock_InvalidArgumentsAreRefused) {
  EXPECT_EQ(store().AcquireLock("", "node-a", kSecond).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().AcquireLock("scheduler", "", kSecond).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().AcquireLock("scheduler", "node-a", 0).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().AcquireLock("scheduler", "node-a", -5).status().code(),
            ErrorCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(bool b, store().AcquireLock("scheduler", "node-b", kSecond));
  EXPECT_TRUE(b) << "the refused calls took nothing";
}

TEST_P(StoreConformance, Lock_ConcurrentAcquirersOnTwoStoresHaveOneHolder) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot open a second store over the same data";
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> other, OpenAnother());
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    const std::string name = "lock-" + std::to_string(round);
    std::atomic<int> winners{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      Store* s = t % 2 == 0 ? &store() : other.get();
      threads.emplace_back([&, s, t] {
        Result<bool> r = s->AcquireLock(name, "node-" + std::to_string(t), 60 * kSecond);
        if (!r.ok()) {
          ++errors;
        } else if (*r) {
          ++winners;
        }
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(winners.load(), 1) << name;
  }
}

// --- schedule state and CommitSchedule (T3, T4) ---

TEST_P(StoreConformance, Schedule_CommitAdmitsAndRecordsStatesTogether) {
  DefineJob("tick");
  DefineJob("report");
  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> none, store().ListScheduleStates());
  EXPECT_TRUE(none.empty());

  const Millis fire = Now() - 30 * kSecond;
  std::vector<AdmitRequest> admissions = {
      Scheduled(MakeRequest("tick", 1, "", "tick:2026-01-01T00:00Z"), fire),
      Scheduled(MakeRequest("report", 2, "acme", "report:2026-01-01T00:00Z:acme"), fire),
      Scheduled(MakeRequest("report", 2, "globex", "report:2026-01-01T00:00Z:globex"), fire)};
  std::vector<ScheduleUpdate> updates = {MakeUpdate("tick", fire, Now(), 3, fire - kSecond),
                                         MakeUpdate("report", fire, Now())};
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> results,
                       store().CommitSchedule(admissions, updates));
  ASSERT_EQ(results.size(), 3u);
  std::set<std::int64_t> ids;
  for (const AdmitResult& r : results) {
    EXPECT_EQ(r.outcome, AdmitOutcome::kCreated);
    EXPECT_EQ(r.status, ExecutionStatus::kQueued);
    ids.insert(r.id.value);
  }
  EXPECT_EQ(ids.size(), 3u);

  const Execution e = Get(results[1].id);
  EXPECT_EQ(e.job.value, "report");
  EXPECT_EQ(e.tenant.value, "acme");
  EXPECT_EQ(e.trigger, Trigger::kScheduled);
  EXPECT_EQ(e.scheduled_at, fire);
  EXPECT_EQ(e.requester, "system:scheduler");
  EXPECT_EQ(e.idempotency_key, "report:2026-01-01T00:00Z:acme");
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);

  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> states, store().ListScheduleStates());
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(DescribeState(states[0]),
            DescribeState(ScheduleState{JobName("report"), fire, Now(), 0, 0}))
      << "by job name";
  EXPECT_EQ(DescribeState(states[1]),
            DescribeState(ScheduleState{JobName("tick"), fire, Now(), 3, fire - kSecond}));
}

TEST_P(StoreConformance, Schedule_StateKeepsMaximaAndSumsSkippedFires) {
  ASSERT_OK(store().CommitSchedule({}, {MakeUpdate("tick", 1'000, 2'000, 3, 500)}));
  // Lower times are kept at their maxima (0 = "no new value"); skipped counts add up.
  ASSERT_OK(store().CommitSchedule({}, {MakeUpdate("tick", 0, 1'500, 2, 400)}));
  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> states, store().ListScheduleStates());
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(DescribeState(states[0]),
            DescribeState(ScheduleState{JobName("tick"), 1'000, 2'000, 5, 500}));

  ASSERT_OK(store().CommitSchedule({}, {MakeUpdate("tick", 3'000, 4'000, 0, 0)}));
  ASSERT_OK_AND_ASSIGN(states, store().ListScheduleStates());
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(DescribeState(states[0]),
            DescribeState(ScheduleState{JobName("tick"), 3'000, 4'000, 5, 500}));
}

TEST_P(StoreConformance, Schedule_RepeatedKeysAnswerDuplicateOrConflictAndCreateNothing) {
  DefineJob("tick");
  const AdmitRequest r = Scheduled(MakeRequest("tick", 1, "", "tick:2026-01-01T00:00Z"), Now());
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> first, store().CommitSchedule({r}, {}));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].outcome, AdmitOutcome::kCreated);

  AdmitRequest other_payload = r;
  other_payload.payload_json = "{\"n\":2}";
  other_payload.fingerprint = MakeRequest("tick", 2).fingerprint;
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> again,
                       store().CommitSchedule({r, other_payload}, {MakeUpdate("tick", 1, 2)}));
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(again[0].id, first[0].id);
  EXPECT_EQ(again[1].outcome, AdmitOutcome::kConflict);
  EXPECT_EQ(again[1].id, first[0].id);
  EXPECT_EQ(CountExecutions(), 1);
  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> states, store().ListScheduleStates());
  EXPECT_EQ(states.size(), 1u) << "duplicates and conflicts do not fail the commit";
}

TEST_P(StoreConformance, Schedule_DuplicateKeysWithinOneCommitCreateOnce) {
  DefineJob("tick");
  const AdmitRequest r = Scheduled(MakeRequest("tick", 1, "", "tick:2026-01-01T00:00Z"), Now());
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> results, store().CommitSchedule({r, r}, {}));
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(results[1].outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(results[1].id, results[0].id);
  EXPECT_EQ(CountExecutions(), 1);
}

TEST_P(StoreConformance, Schedule_AFailedCommitAdmitsNothingAndRecordsNoState) {
  DefineJob("tick");
  const std::string before = Snapshot();
  std::vector<AdmitRequest> admissions = {
      Scheduled(MakeRequest("tick", 1, "", "tick:2026-01-01T00:00Z"), Now()),
      Scheduled(MakeRequest("undefined", 1, "", "undefined:2026-01-01T00:00Z"), Now())};
  Result<std::vector<AdmitResult>> r =
      store().CommitSchedule(admissions, {MakeUpdate("tick", Now(), Now(), 4, Now())});
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound) << r.status().ToString();
  EXPECT_EQ(Snapshot(), before);
  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> states, store().ListScheduleStates());
  EXPECT_TRUE(states.empty()) << "one transaction: the state update went with the admissions";
}

TEST_P(StoreConformance, Schedule_StatesSurviveARestart) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot reopen a store over the same data";
  }
  ASSERT_OK(store().CommitSchedule({}, {MakeUpdate("tick", 1'000, 2'000, 3, 500)}));
  ASSERT_OK(store().UpsertTenant(MakeTenant("acme", "Acme", false)));
  Reopen();
  ASSERT_OK_AND_ASSIGN(std::vector<ScheduleState> states, store().ListScheduleStates());
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(DescribeState(states[0]),
            DescribeState(ScheduleState{JobName("tick"), 1'000, 2'000, 3, 500}));
  ASSERT_OK_AND_ASSIGN(Tenant acme, store().GetTenant(TenantId("acme")));
  EXPECT_FALSE(acme.active);
}

TEST_P(StoreConformance, Schedule_RacingCommitsOnTwoStoresCreateEachKeyOnce) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot open a second store over the same data";
  }
  DefineJob("tick");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> other, OpenAnother());
  constexpr int kFires = 50;
  std::atomic<int> created{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    Store* s = t % 2 == 0 ? &store() : other.get();
    threads.emplace_back([&, s] {
      for (int i = 0; i < kFires; ++i) {
        const std::string key = "tick:fire-" + std::to_string(i);
        Result<std::vector<AdmitResult>> r = s->CommitSchedule(
            {Scheduled(MakeRequest("tick", i, "", key), Now())}, {MakeUpdate("tick", i, i)});
        if (!r.ok()) {
          ++failures;
        } else if ((*r)[0].outcome == AdmitOutcome::kCreated) {
          ++created;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(created.load(), kFires);
  EXPECT_EQ(CountExecutions(), kFires);
}

// --- scheduling fields of job definitions ---

TEST_P(StoreConformance, Jobs_SchedulingFieldsRoundTrip) {
  JobDefinition job = MakeJob("digest");
  job.scope = JobScope::kPerTenant;
  job.schedule = "0 2 * * *";
  job.timezone = "America/New_York";
  job.catch_up = CatchUpPolicy::kAll;
  job.catch_up_window_ms = 3'600'000;
  job.window_ms = 86'400'000;
  DefineJob(job);
  ASSERT_OK_AND_ASSIGN(JobDefinition got, store().GetJob(job.name));
  EXPECT_EQ(got.catch_up, CatchUpPolicy::kAll);
  EXPECT_EQ(got.catch_up_window_ms, 3'600'000);
  EXPECT_EQ(got.window_ms, 86'400'000);
  EXPECT_EQ(got.schedule, "0 2 * * *");
  EXPECT_EQ(got.timezone, "America/New_York");

  JobDefinition defaults = MakeJob("tick");
  DefineJob(defaults);
  ASSERT_OK_AND_ASSIGN(got, store().GetJob(defaults.name));
  EXPECT_EQ(got.catch_up, CatchUpPolicy::kCoalesce);
  EXPECT_EQ(got.catch_up_window_ms, 600'000) << "T4: default window 10 min";
  EXPECT_EQ(got.window_ms, 0);
}

TEST_P(StoreConformance, Jobs_OutOfRangeSchedulingFieldsAreInvalidArgument) {
  for (int i = 0; i < 4; ++i) {
    JobDefinition job = MakeJob("tick");
    if (i == 0) job.catch_up_window_ms = -1;
    if (i == 1) job.catch_up_window_ms = 7LL * 24 * 3600 * 1000 + 1;
    if (i == 2) job.window_ms = -1;
    if (i == 3) job.window_ms = 366LL * 24 * 3600 * 1000 + 1;
    Status s = store().UpsertJob(job);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "case " << i << ": " << s.ToString();
  }
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  EXPECT_TRUE(all.empty());
}

TEST_P(StoreConformance, Jobs_UpdateKeepsCreatedAtAndMovesUpdatedAt) {
  // The scheduler starts a job's first evaluation at its created_at and
  // re-parses its schedule when updated_at moves.
  const Millis created = Now();
  DefineJob("tick");
  Advance(5 * kSecond);
  JobDefinition job = MakeJob("tick");
  job.schedule = "* * * * *";
  DefineJob(job);
  ASSERT_OK_AND_ASSIGN(JobDefinition got, store().GetJob(job.name));
  EXPECT_EQ(got.created_at, created);
  EXPECT_EQ(got.updated_at, Now());
}

}  // namespace taskengine
