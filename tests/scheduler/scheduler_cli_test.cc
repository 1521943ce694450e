// The scheduling verbs of the `taskengine` binary run as processes:
// scheduler:run (exit 0 as the leader, 6 when another node holds the lock),
// schedule:preview, tenant:add|list|enable|disable, and the schedule columns
// of job:list.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "cli_harness.h"
#include "storage/sqlite/sqlite_store.h"
#include "taskengine/clock.h"

namespace taskengine::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kConfig = R"(
[[queue]]
name = "default"
)";

constexpr Millis kMinute = 60'000;

class SchedulerCliTest : public ::testing::Test {
 protected:
  SchedulerCliTest() : te_(kConfig) {}

  void Migrate() {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  // Defines `job` as if it had been created `age_ms` ago (the scheduler
  // starts a job's first evaluation at its creation time).
  void DefineCreatedAgo(const JobDefinition& job, Millis age_ms) {
    FakeClock clock(SystemClock::Get()->NowMillis() - age_ms);
    SqliteStoreOptions o;
    o.path = te_.db_path();
    o.clock = &clock;
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_OK((*store)->UpsertJob(job));
  }

  TaskengineInstall te_;
};

TEST_F(SchedulerCliTest, HelpNamesTheVerbsAndExitCode6) {
  ProcessResult help = te_.Run({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.Describe();
  for (const char* verb : {"scheduler:run", "schedule:preview", "tenant:add", "tenant:list",
                           "tenant:enable", "tenant:disable"}) {
    EXPECT_THAT(help.out, HasSubstr(verb));
  }
  ProcessResult run_help = te_.Run({"scheduler:run", "--help"});
  ASSERT_EQ(run_help.exit_code, 0) << run_help.Describe();
  EXPECT_THAT(run_help.out, HasSubstr("6 when another node holds the lock"));
  EXPECT_THAT(run_help.out, HasSubstr("--node"));
}

TEST_F(SchedulerCliTest, TenantVerbs) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ProcessResult r = te_.Run({"tenant:add", "acme", "--name", "Acme Corp"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("tenant acme added (active)"));
  nlohmann::json globex = te_.RunJson({"tenant:add", "globex"});
  EXPECT_EQ(globex["created"], true);
  EXPECT_EQ(globex["active"], true);

  r = te_.Run({"tenant:disable", "globex"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("tenant globex disabled (inactive)"));
  r = te_.Run({"tenant:list"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\nacme +Acme Corp +yes"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\nglobex +- +no"));

  nlohmann::json list = te_.RunJson({"tenant:list"});
  ASSERT_EQ(list["items"].size(), 2u);
  EXPECT_EQ(list["items"][1]["id"], "globex");
  EXPECT_EQ(list["items"][1]["active"], false);

  nlohmann::json enabled = te_.RunJson({"tenant:enable", "globex"});
  EXPECT_EQ(enabled["active"], true);
  EXPECT_EQ(enabled["changed"], true);

  r = te_.Run({"tenant:enable", "nobody"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("no tenant 'nobody'"));
  r = te_.Run({"tenant:add", "Not Valid"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("invalid tenant id 'Not Valid'"));
}

TEST_F(SchedulerCliTest, SchedulerRunAdmitsAsLeaderAndExits6ForAnotherNode) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ASSERT_EQ(te_.Run({"tenant:add", "acme"}).exit_code, 0);
  ASSERT_EQ(te_.Run({"tenant:add", "globex"}).exit_code, 0);
  ASSERT_EQ(te_.Run({"tenant:add", "initech"}).exit_code, 0);
  ASSERT_EQ(te_.Run({"tenant:disable", "initech"}).exit_code, 0);
  JobDefinition tick;
  tick.name = JobName("tick");
  tick.handler = "command";
  tick.config_json = R"({"argv":["/bin/true"]})";
  tick.schedule = "* * * * *";
  ASSERT_NO_FATAL_FAILURE(DefineCreatedAgo(tick, 10 * kMinute));
  JobDefinition report = tick;
  report.name = JobName("report");
  report.scope = JobScope::kPerTenant;
  ASSERT_NO_FATAL_FAILURE(DefineCreatedAgo(report, 10 * kMinute));

  nlohmann::json run = te_.RunJson({"scheduler:run", "--node", "node-1"});
  ASSERT_TRUE(run.is_object());
  EXPECT_EQ(run["leader"], true);
  EXPECT_EQ(run["node"], "node-1");
  EXPECT_EQ(run["jobs_evaluated"], 2);
  EXPECT_EQ(run["executions_created"], 3) << "coalesce: one for tick, one per active tenant";
  EXPECT_GE(run["fires"].get<int>(), 2 * 9);

  nlohmann::json executions = te_.RunJson({"execution:list", "--limit", "100"});
  ASSERT_EQ(executions["items"].size(), 3u);
  std::set<std::string> tenants;
  for (const auto& e : executions["items"]) {
    EXPECT_EQ(e["trigger"], "scheduled");
    EXPECT_EQ(e["requester"], "system:scheduler");
    const std::string key = e["idempotency_key"];
    EXPECT_EQ(key.rfind(e["job"].get<std::string>() + ":", 0), 0u) << key;
    if (!e["tenant"].is_null()) tenants.insert(e["tenant"].get<std::string>());
  }
  EXPECT_EQ(tenants, (std::set<std::string>{"acme", "globex"}));

  ProcessResult other = te_.Run({"scheduler:run", "--node", "node-2"});
  EXPECT_EQ(other.exit_code, 6) << other.Describe();
  EXPECT_THAT(other.err, HasSubstr("not the leader"));
  ProcessResult again = te_.Run({"scheduler:run", "--node", "node-1"});
  EXPECT_EQ(again.exit_code, 0) << again.Describe();
  EXPECT_THAT(again.out, HasSubstr("scheduler cycle as node-1"));

  nlohmann::json jobs = te_.RunJson({"job:list"});
  ASSERT_EQ(jobs["items"].size(), 2u);
  for (const auto& j : jobs["items"]) {
    EXPECT_FALSE(j["next_fire"].is_null()) << j.dump();
    EXPECT_FALSE(j["last_fire"].is_null()) << j.dump();
    EXPECT_EQ(j["catch_up"], "coalesce");
    EXPECT_TRUE(j["schedule_error"].is_null());
  }
  ProcessResult table = te_.Run({"job:list"});
  ASSERT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_THAT(table.out, HasSubstr("NEXT FIRE"));
  EXPECT_THAT(table.out, HasSubstr("SKIPPED FIRES"));
}

TEST_F(SchedulerCliTest, SchedulePreviewNeedsNoDatabase) {
  ProcessResult r = te_.Run({"schedule:preview", "30 2 * * *", "--tz", "America/New_York", "--from",
                             "2026-03-07T00:00:00Z", "--count", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("2026-03-07T07:30:00Z  2026-03-07 02:30 EST  -05:00"));
  EXPECT_THAT(r.out, HasSubstr("2026-03-08T07:30:00Z  2026-03-08 03:30 EDT  -04:00  shifted"));

  nlohmann::json j =
      te_.RunJson({"schedule:preview", "@daily", "--from", "2026-01-01T10:00:00Z", "--count", "1"});
  ASSERT_EQ(j["fires"].size(), 1u);
  EXPECT_EQ(j["fires"][0]["utc"], "2026-01-02T00:00:00.000Z");
  EXPECT_EQ(j["normalized"], "0 0 * * *");

  r = te_.Run({"schedule:preview", "0 24 * * *"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("hour field at position 3: value 24 out of range 0-23"));
  r = te_.Run({"schedule:preview", "* * * * *", "--tz", "Nowhere/Land"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("Nowhere/Land"));
  r = te_.Run({"schedule:preview", "* * * * *", "--from", "yesterday"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("--from"));
}

TEST_F(SchedulerCliTest, ASeededJobWithABadScheduleIsRefusedByName) {
  TaskengineInstall bad(R"(
[[job]]
name = "nightly"
handler = "command"
schedule = "0 3 * * MON-FOO"
config = { argv = ["/bin/true"] }
)");
  ProcessResult r = bad.Run({"migrate"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("job 'nightly': schedule \"0 3 * * MON-FOO\": day-of-week field"));
}

}  // namespace
}  // namespace taskengine::testing
