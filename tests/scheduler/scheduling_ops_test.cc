// The operator actions behind the scheduling verbs (src/server/scheduling.h)
// and the scheduling keys of taskengine.toml, on a real SQLite store with a
// FakeClock.
#include <gmock/gmock.h>

#include "core/time_text.h"
#include "scheduler_drill.h"
#include "server/config.h"
#include "server/scheduling.h"
#include "views/views.h"

namespace taskengine::drill {
namespace {

using ::testing::HasSubstr;

EnvLookup NoEnv() {
  return [](const char*) -> std::optional<std::string> { return std::nullopt; };
}

std::vector<std::string> Utc(const SchedulePreview& p) {
  std::vector<std::string> out;
  for (const PreviewFire& f : p.fires) out.push_back(FormatTimeSeconds(f.utc));
  return out;
}

// --- schedule:preview ---

TEST(SchedulePreviewTest, SpringForwardShiftsAndSaysSo) {
  // 2026-03-08: New York jumps from 02:00 EST to 03:00 EDT.
  ASSERT_OK_AND_ASSIGN(SchedulePreview p,
                       PreviewSchedule("30 2 * * *", "America/New_York", kT0 + 65 * kDay,
                                       /*count=*/3));  // from 2026-03-07
  EXPECT_EQ(p.normalized, "30 2 * * *");
  EXPECT_TRUE(p.can_ever_fire);
  EXPECT_EQ(Utc(p), (std::vector<std::string>{"2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z",
                                              "2026-03-09T06:30:00Z"}));
  ASSERT_EQ(p.fires.size(), 3u);
  EXPECT_EQ(p.fires[0].local, "2026-03-07 02:30");
  EXPECT_EQ(p.fires[0].offset, "-05:00");
  EXPECT_EQ(p.fires[0].abbrev, "EST");
  EXPECT_FALSE(p.fires[0].shifted);
  EXPECT_EQ(p.fires[1].local, "2026-03-08 03:30") << "02:30 did not exist";
  EXPECT_EQ(p.fires[1].offset, "-04:00");
  EXPECT_EQ(p.fires[1].abbrev, "EDT");
  EXPECT_TRUE(p.fires[1].shifted);
  EXPECT_EQ(p.fires[2].local, "2026-03-09 02:30");
  EXPECT_FALSE(p.fires[2].shifted);
}

TEST(SchedulePreviewTest, FallBackFiresOnceAtTheFirstOccurrence) {
  // 2026-11-01: 01:30 happens twice in New York; it fires at the first (EDT).
  ASSERT_OK_AND_ASSIGN(SchedulePreview p,
                       PreviewSchedule("30 1 * * *", "America/New_York", kT0 + 303 * kDay,
                                       /*count=*/3));  // from 2026-10-31
  EXPECT_EQ(Utc(p), (std::vector<std::string>{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z",
                                              "2026-11-02T06:30:00Z"}));
  ASSERT_EQ(p.fires.size(), 3u);
  EXPECT_EQ(p.fires[1].local, "2026-11-01 01:30");
  EXPECT_EQ(p.fires[1].abbrev, "EDT");
  EXPECT_FALSE(p.fires[1].shifted);
  EXPECT_EQ(p.fires[2].abbrev, "EST");
}

TEST(SchedulePreviewTest, ErrorsAndNeverFiringExpressions) {
  Result<SchedulePreview> bad = PreviewSchedule("0 24 * * *", "UTC", kT0, 5);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "invalid cron expression \"0 24 * * *\": hour field at position 3: value 24 out of "
            "range 0-23");
  bad = PreviewSchedule("* * * * *", "Mars/Olympus", kT0, 5);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("Mars/Olympus"));
  EXPECT_EQ(PreviewSchedule("* * * * *", "UTC", kT0, 0).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(PreviewSchedule("* * * * *", "UTC", kT0, kMaxPreviewCount + 1).status().code(),
            ErrorCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(SchedulePreview never, PreviewSchedule("0 0 30 2 *", "UTC", kT0, 3));
  EXPECT_FALSE(never.can_ever_fire);
  EXPECT_TRUE(never.fires.empty());
  ASSERT_OK_AND_ASSIGN(SchedulePreview many, PreviewSchedule("@hourly", "UTC", kT0, 1000));
  EXPECT_EQ(many.fires.size(), 1000u);
  EXPECT_EQ(SchedulePreviewToJson(many)["fires"][0]["utc"], "2026-01-01T01:00:00.000Z");
}

// --- tenants, scheduler:run, job:list ---

class SchedulingOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = db_.Open();
    ASSERT_NE(store_, nullptr);
  }

  std::vector<AuditRecord> Audit() {
    AuditFilter f;
    f.limit = 1000;
    Result<std::vector<AuditRecord>> r = store_->ListAudit(f);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<AuditRecord>{};
  }

  DrillDatabase db_;
  Store* store_ = nullptr;
};

TEST_F(SchedulingOpsTest, TenantAddRenamesAndAuditsOnlyChanges) {
  ASSERT_OK_AND_ASSIGN(TenantChange added, AddTenant(*store_, "acme", "Acme", "cli:alice"));
  EXPECT_TRUE(added.created);
  EXPECT_TRUE(added.changed);
  EXPECT_EQ(added.tenant.name, "Acme");
  EXPECT_TRUE(added.tenant.active);
  EXPECT_EQ(added.tenant.created_at, kT0);

  ASSERT_OK_AND_ASSIGN(TenantChange same, AddTenant(*store_, "acme", std::nullopt, "cli:alice"));
  EXPECT_FALSE(same.created);
  EXPECT_FALSE(same.changed);
  ASSERT_OK_AND_ASSIGN(same, AddTenant(*store_, "acme", std::string("Acme"), "cli:alice"));
  EXPECT_FALSE(same.changed);

  ASSERT_OK(SetTenantActive(*store_, "acme", false, "cli:bob"));
  ASSERT_OK_AND_ASSIGN(TenantChange renamed,
                       AddTenant(*store_, "acme", std::string("Acme Inc"), "cli:alice"));
  EXPECT_TRUE(renamed.changed);
  EXPECT_FALSE(renamed.tenant.active) << "tenant:add never re-activates";

  const std::vector<AuditRecord> audit = Audit();  // newest first
  ASSERT_EQ(audit.size(), 3u);
  EXPECT_EQ(audit[2].action, "tenant.add");
  EXPECT_EQ(audit[2].actor, "cli:alice");
  EXPECT_EQ(audit[2].target, "tenant:acme");
  EXPECT_EQ(audit[2].tenant, "acme");
  EXPECT_EQ(audit[2].before_json, "");
  EXPECT_EQ(audit[2].after_json, R"({"id":"acme","name":"Acme","active":true})");
  EXPECT_EQ(audit[1].action, "tenant.disable");
  EXPECT_EQ(audit[1].actor, "cli:bob");
  EXPECT_EQ(audit[1].before_json, R"({"id":"acme","name":"Acme","active":true})");
  EXPECT_EQ(audit[1].after_json, R"({"id":"acme","name":"Acme","active":false})");
  EXPECT_EQ(audit[0].action, "tenant.update");
  EXPECT_EQ(audit[0].after_json, R"({"id":"acme","name":"Acme Inc","active":false})");
}

TEST_F(SchedulingOpsTest, TenantEnableDisableAndErrors) {
  ASSERT_OK(AddTenant(*store_, "acme", std::nullopt, "cli:alice"));
  ASSERT_OK_AND_ASSIGN(TenantChange off, SetTenantActive(*store_, "acme", false, "cli:alice"));
  EXPECT_TRUE(off.changed);
  EXPECT_FALSE(off.tenant.active);
  ASSERT_OK_AND_ASSIGN(off, SetTenantActive(*store_, "acme", false, "cli:alice"));
  EXPECT_FALSE(off.changed) << "already inactive";
  ASSERT_OK_AND_ASSIGN(TenantChange on, SetTenantActive(*store_, "acme", true, "cli:alice"));
  EXPECT_TRUE(on.tenant.active);
  EXPECT_EQ(Audit().size(), 3u) << "add, disable, enable (the no-op is not audited)";

  EXPECT_EQ(SetTenantActive(*store_, "nobody", true, "cli:alice").status().code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(AddTenant(*store_, "Bad Id", std::nullopt, "cli:alice").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(AddTenant(*store_, "ok", std::string(201, 'n'), "cli:alice").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(SetTenantActive(*store_, "Bad Id", true, "cli:alice").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(TenantToJson(on.tenant).dump(),
            R"({"id":"acme","name":"","active":true,"created_at":"2026-01-01T00:00:00.000Z"})");
}

TEST_F(SchedulingOpsTest, RunSchedulerCycleAndJobSchedules) {
  JobDefinition tick = DrillDatabase::Job("tick", "* * * * *", CatchUpPolicy::kNone);
  db_.Define(tick);
  JobDefinition off = DrillDatabase::Job("off", "0 9 * * *", CatchUpPolicy::kCoalesce);
  off.enabled = false;
  db_.Define(off);
  db_.Define(DrillDatabase::Job("bad", "* * * *", CatchUpPolicy::kCoalesce));
  JobDefinition berlin = DrillDatabase::Job("berlin", "0 9 * * *", CatchUpPolicy::kAll);
  berlin.timezone = "Europe/Berlin";
  db_.Define(berlin);
  db_.Define(DrillDatabase::Job("manual", "", CatchUpPolicy::kCoalesce));

  EXPECT_EQ(RunSchedulerCycle(*store_, db_.clock(), "").status().code(),
            ErrorCode::kInvalidArgument);
  db_.clock().Set(kT0 + 5 * kMinute + kSecond);  // 00:05:01: 00:01 .. 00:04 missed, 00:05 on time
  ASSERT_OK_AND_ASSIGN(CycleReport r, RunSchedulerCycle(*store_, db_.clock(), "host-a"));
  EXPECT_TRUE(r.leader);
  EXPECT_EQ(r.executions_created, 1);
  EXPECT_EQ(r.skipped, 4);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_THAT(r.errors[0].message, HasSubstr("job 'bad': schedule \"* * * *\""));
  ASSERT_OK_AND_ASSIGN(CycleReport other, RunSchedulerCycle(*store_, db_.clock(), "host-b"));
  EXPECT_FALSE(other.leader) << "host-a keeps the lock after its run";
  ASSERT_OK_AND_ASSIGN(r, RunSchedulerCycle(*store_, db_.clock(), "host-a"));
  EXPECT_TRUE(r.leader) << "the same node renews it";

  const nlohmann::ordered_json j = CycleReportToJson(r, "host-a");
  EXPECT_EQ(j["node"], "host-a");
  EXPECT_EQ(j["leader"], true);
  EXPECT_EQ(j["now"], "2026-01-01T00:05:01.000Z");
  EXPECT_EQ(j["errors"][0]["job"], "bad");

  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> jobs, store_->ListJobs());
  ASSERT_OK_AND_ASSIGN(auto infos, JobSchedules(*store_, jobs, db_.clock().NowMillis()));
  EXPECT_EQ(infos["tick"].next_fire, kT0 + 6 * kMinute);
  EXPECT_EQ(infos["tick"].last_fire_at, kT0 + 5 * kMinute);
  EXPECT_EQ(infos["tick"].skipped_fires, 4);
  EXPECT_EQ(infos["tick"].last_skipped_at, kT0 + 4 * kMinute);
  EXPECT_EQ(infos["berlin"].next_fire, kT0 + 8 * kHour);
  EXPECT_FALSE(infos["off"].next_fire.has_value()) << "disabled";
  EXPECT_FALSE(infos["manual"].next_fire.has_value());
  EXPECT_FALSE(infos["bad"].next_fire.has_value());
  EXPECT_THAT(infos["bad"].error, HasSubstr("job 'bad'"));

  const nlohmann::ordered_json tick_json = JobToJson(tick, infos["tick"]);
  EXPECT_EQ(tick_json["catch_up"], "none");
  EXPECT_EQ(tick_json["catch_up_window_ms"], 600000);
  EXPECT_EQ(tick_json["window_ms"], 0);
  EXPECT_EQ(tick_json["next_fire"], "2026-01-01T00:06:00.000Z");
  EXPECT_EQ(tick_json["last_fire"], "2026-01-01T00:05:00.000Z");
  EXPECT_EQ(tick_json["skipped_fires"], 4);
  EXPECT_EQ(tick_json["last_skipped_at"], "2026-01-01T00:04:00.000Z");
  EXPECT_TRUE(tick_json["schedule_error"].is_null());
}

// --- taskengine.toml ---

TEST(SchedulingConfigTest, CatchUpAndWindowKeysAreRead) {
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig(R"(
[[job]]
name = "digest"
handler = "command"
scope = "per_tenant"
schedule = "0 2 * * *"
timezone = "Europe/Berlin"
catch_up = "all"
catch_up_window_ms = 3600000
window_ms = 86400000

[[job]]
name = "plain"
handler = "command"
)",
                                                   "t.toml", NoEnv()));
  ASSERT_EQ(c.jobs.size(), 2u);
  EXPECT_EQ(c.jobs[0].catch_up, CatchUpPolicy::kAll);
  EXPECT_EQ(c.jobs[0].catch_up_window_ms, 3'600'000);
  EXPECT_EQ(c.jobs[0].window_ms, 86'400'000);
  EXPECT_EQ(c.jobs[1].catch_up, CatchUpPolicy::kCoalesce);
  EXPECT_EQ(c.jobs[1].catch_up_window_ms, 600'000);
  EXPECT_EQ(c.jobs[1].window_ms, 0);
}

// Each names the line and column of the key the scheduler refused.
TEST(SchedulingConfigTest, BadSchedulingKeysNameTheJobAndTheProblem) {
  struct Case {
    std::string keys;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"(schedule = "0 24 * * *")",
       "t.toml:5:12: job[0].schedule: job 'nightly': schedule \"0 24 * * *\": hour field at "
       "position 3: value 24 out of range 0-23"},
      {"schedule = \"0 2 * * *\"\ntimezone = \"Europe/Nowhere\"",
       "t.toml:6:12: job[0].timezone: job 'nightly': timezone: unknown time zone "
       "\"Europe/Nowhere\""},
      {R"(timezone = "Europe/Nowhere")",
       "t.toml:5:12: job[0].timezone: job 'nightly': timezone: unknown time zone "
       "\"Europe/Nowhere\""},
      {R"(catch_up = "sometimes")",
       "t.toml:5:12: job[0].catch_up must be \"coalesce\", \"all\" or \"none\""},
      {R"(catch_up_window_ms = 604800001)",
       "t.toml:5:22: job[0].catch_up_window_ms must be between 0 and 604800000 (got 604800001)"},
      {R"(window_ms = 90000)",
       "t.toml:5:13: job[0].window_ms: job 'nightly': window_ms must be a whole number of "
       "minutes (got 90000)"},
      {R"(window_ms = -60000)",
       "t.toml:5:13: job[0].window_ms must be between 0 and 31622400000 (got -60000)"},
  };
  for (const Case& c : cases) {
    const std::string toml =
        "\n[[job]]\nname = \"nightly\"\nhandler = \"command\"\n" + c.keys + "\n";
    Result<ServerConfig> r = ParseConfig(toml, "t.toml", NoEnv());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << c.keys;
    EXPECT_EQ(r.status().message(), c.message) << c.keys;
  }
}

}  // namespace
}  // namespace taskengine::drill
