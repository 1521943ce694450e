#include "server/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/operations.h"
#include "server/views.h"
#include "storage/store.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;

ServerConfig ConfigWithHello(const TempDir& dir) {
  ServerConfig c;
  c.database_path = dir.File("db/te.db");
  c.queues = {QueueConfig{}};
  JobDefinition hello;
  hello.name = JobName("hello");
  hello.handler = "command";
  hello.config_json = R"({"argv":["/bin/true"]})";
  c.jobs.push_back(hello);
  return c;
}

TEST(OpenEngineTest, ClientModeRefusesAMissingDatabaseAndCreatesNothing) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  auto r = OpenEngine(c, EngineMode::kClient);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("taskengine migrate"));
  EXPECT_FALSE(std::filesystem::exists(c.database_path));
}

TEST(OpenEngineTest, MigrateSeedsJobsAndClientSeesThem) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  {
    ASSERT_OK_AND_ASSIGN(auto engine, OpenEngine(c, EngineMode::kMigrate));
    ASSERT_OK_AND_ASSIGN(int version, engine->store().SchemaVersion());
    EXPECT_GT(version, 0);
  }
  // The client does not seed: a job only in its config is not defined.
  ServerConfig client = c;
  JobDefinition other = c.jobs[0];
  other.name = JobName("other");
  client.jobs.push_back(other);
  ASSERT_OK_AND_ASSIGN(auto engine, OpenEngine(client, EngineMode::kClient));
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> jobs, engine->store().ListJobs());
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name.value, "hello");
  EXPECT_EQ(jobs[0].handler, "command");
}

TEST(OpenEngineTest, ClientModeDispatchesWithoutRunning) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  { ASSERT_OK(OpenEngine(c, EngineMode::kMigrate)); }
  ASSERT_OK_AND_ASSIGN(auto engine, OpenEngine(c, EngineMode::kClient));
  CliDispatch in;
  in.job = "hello";
  in.payload_json = R"({"n": 1})";
  ASSERT_OK_AND_ASSIGN(DispatchRequest req, BuildCliDispatch(in));
  EXPECT_EQ(req.trigger, Trigger::kManual);
  EXPECT_THAT(req.requester, HasSubstr("cli:"));
  ASSERT_OK_AND_ASSIGN(DispatchResult res, engine->Dispatch(req));
  EXPECT_TRUE(res.created);
  ASSERT_OK_AND_ASSIGN(ExecutionDetail d, ShowExecution(*engine, res.id, 100));
  EXPECT_EQ(d.execution.status, ExecutionStatus::kQueued);
  EXPECT_EQ(d.execution.trigger, Trigger::kManual);
  nlohmann::ordered_json j = ExecutionDetailToJson(d);
  EXPECT_EQ(j["status"], "queued");
  EXPECT_EQ(j["payload"], nlohmann::ordered_json::parse(R"({"n":1})"));
  EXPECT_TRUE(j["started_at"].is_null());
  EXPECT_TRUE(j["logs"].is_array());

  auto missing = ShowExecution(*engine, ExecutionId(res.id.value + 100), 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);

  ASSERT_OK_AND_ASSIGN(std::vector<QueueStatusRow> rows,
                       QueueStatus(engine->store(), c, /*now=*/d.execution.queued_at + 2000));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].queue, "default");
  EXPECT_EQ(rows[0].queued, 1);
  EXPECT_EQ(rows[0].oldest_age_ms, 2000);
}

TEST(OpenEngineTest, UnopenableDatabaseIsUnavailable) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  {
    std::ofstream f(dir.File("file"));
    f << "not a directory";
  }
  c.database_path = dir.File("file/te.db");  // a regular file as the parent: fails even for root
  auto r = OpenEngine(c, EngineMode::kMigrate);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr(c.database_path));
}

TEST(OpenEngineTest, SeedsAreCheckedAgainstTheHandlers) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  c.jobs[0].handler = "http";
  auto r = OpenEngine(c, EngineMode::kMigrate);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("handler 'http'"));
  EXPECT_FALSE(std::filesystem::exists(c.database_path)) << "a bad seed opens nothing";

  c.jobs[0].handler = "command";
  for (const char* config : {R"({})", R"({"argv":[]})", R"({"argv":"x"})", R"({"argv":[1]})",
                             R"({"argv":["sh","-c","x"]})"}) {
    c.jobs[0].config_json = config;
    Status s = CheckJobsAgainstHandlers(c);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << config;
    EXPECT_THAT(s.message(), HasSubstr("job 'hello'")) << config;
  }
  c.jobs[0].config_json = R"({"argv":["/bin/sh","-c","echo hi"]})";
  EXPECT_OK(CheckJobsAgainstHandlers(c));
}

TEST(CliDispatchTest, DelayAndRunAt) {
  CliDispatch in;
  in.job = "hello";
  in.delay_seconds = 1.5;
  ASSERT_OK_AND_ASSIGN(DispatchRequest a, BuildCliDispatch(in));
  EXPECT_EQ(a.delay_ms, 1500);
  in.run_at = "2030-01-01T00:00:00Z";
  EXPECT_EQ(BuildCliDispatch(in).status().code(), ErrorCode::kInvalidArgument);
  in.delay_seconds.reset();
  ASSERT_OK_AND_ASSIGN(DispatchRequest b, BuildCliDispatch(in));
  EXPECT_EQ(b.run_at, 1'893'456'000'000);
  in.run_at = "next tuesday";
  EXPECT_EQ(BuildCliDispatch(in).status().code(), ErrorCode::kInvalidArgument);
  in.run_at.clear();
  in.delay_seconds = -1;
  EXPECT_EQ(BuildCliDispatch(in).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace taskengine
