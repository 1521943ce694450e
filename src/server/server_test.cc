#include "server/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "server/operations.h"
#ifdef TE_SERVER_TEST_POSTGRES
#include "storage/postgres/pg_conn.h"
#endif
#include "engine/engine_internal.h"
#include "storage/store.h"
#include "testing_support/test_util.h"
#include "views/views.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;

// A configuration with one `command` job "hello" and the default queue; no
// database chosen.
ServerConfig ConfigWithHello() {
  ServerConfig c;
  c.queues = {QueueConfig{}};
  JobDefinition hello;
  hello.name = JobName("hello");
  hello.handler = "command";
  hello.config_json = R"({"argv":["/bin/true"]})";
  c.jobs.push_back(hello);
  return c;
}

// The same on the SQLite file <dir>/db/te.db.
ServerConfig ConfigWithHello(const TempDir& dir) {
  ServerConfig c = ConfigWithHello();
  c.database_path = dir.File("db/te.db");
  return c;
}

#ifdef TE_SERVER_TEST_POSTGRES
// A1 (issue 14 bug 5): `migrate` and `serve` make [engine] max_payload_bytes
// the limit of PostgreSQL's enqueue() from SQL; a CLI client does not.
TEST(PayloadLimitTest, MigrateSetsTheLimitOfEnqueueFromSql) {
  const char* url = std::getenv("TASKENGINE_TEST_PG_URL");
  if (url == nullptr || *url == '\0') {
    const char* optional = std::getenv("TASKENGINE_TEST_PG_OPTIONAL");
    if (optional != nullptr && std::string(optional) == "1") GTEST_SKIP();
    FAIL() << "TASKENGINE_TEST_PG_URL is not set";
  }
  const std::string schema = "te_payload_limit";
  pg::PgConn admin;
  ASSERT_OK(admin.Connect(url, ""));
  ASSERT_OK(admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE").status());
  ServerConfig c = ConfigWithHello();
  c.database_url = url;
  c.database_schema = schema;
  c.max_payload_bytes = 4096;
  { ASSERT_OK(OpenEngine(c, EngineMode::kMigrate)); }
  c.max_payload_bytes = 1 << 20;
  { ASSERT_OK(OpenEngine(c, EngineMode::kClient)); }
  const std::string over = "{\"x\":\"" + std::string(5000, 'a') + "\"}";
  auto refused = admin.Exec("SELECT " + schema + ".enqueue('hello', '" + over + "')");
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("more than 4096"));
  { ASSERT_OK(OpenEngine(c, EngineMode::kMigrate)); }
  EXPECT_OK(admin.Exec("SELECT " + schema + ".enqueue('hello', '" + over + "')").status());
  ASSERT_OK(admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE").status());
}
#endif

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
    ASSERT_OK_AND_ASSIGN(int version, StoreOf(*engine).SchemaVersion());
    EXPECT_GT(version, 0);
  }
  // The client does not seed: a job only in its config is not defined.
  ServerConfig client = c;
  JobDefinition other = c.jobs[0];
  other.name = JobName("other");
  client.jobs.push_back(other);
  ASSERT_OK_AND_ASSIGN(auto engine, OpenEngine(client, EngineMode::kClient));
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> jobs, StoreOf(*engine).ListJobs());
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

  ASSERT_OK_AND_ASSIGN(std::vector<QueueView> rows,
                       QueueStatus(StoreOf(*engine), c, /*now=*/d.execution.queued_at + 2000));
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
  c.jobs[0].handler = "smtp";
  auto r = OpenEngine(c, EngineMode::kMigrate);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("handler 'smtp'"));
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

  // An http job's config is checked too (url scheme, allow_hosts).
  c.jobs[0].handler = "http";
  c.jobs[0].config_json =
      R"({"url":"http://hooks.example.com/in","allow_hosts":["hooks.example.com"]})";
  Status s = CheckJobsAgainstHandlers(c);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("job 'hello' (handler http)"));
  c.jobs[0].config_json =
      R"({"url":"https://hooks.example.com/in","allow_hosts":["hooks.example.com"]})";
  EXPECT_OK(CheckJobsAgainstHandlers(c));
}

// A remote job (run by a worker SDK that knows it by name) has no config and
// a queue that only remote workers lease from: the pool would fail it.
TEST(OpenEngineTest, RemoteJobsNeedAQueueThePoolLeavesAlone) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  c.jobs[0].handler = "remote";
  c.jobs[0].config_json = "{}";
  Status s = CheckJobsAgainstHandlers(c);  // queue "default": the pool claims from it
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("job 'hello': queue 'default' is claimed by this server's "
                                     "worker pool, which cannot run a remote job"));
  EXPECT_THAT(s.message(), HasSubstr("pool = false"));

  QueueConfig apps;
  apps.name = "apps";
  apps.pool = false;
  c.queues.push_back(apps);
  c.jobs[0].queue = "apps";
  EXPECT_OK(CheckJobsAgainstHandlers(c));
  c.jobs[0].config_json = "";  // a definition without config reads as {}
  EXPECT_OK(CheckJobsAgainstHandlers(c));

  for (const char* config : {R"({"argv":["/bin/true"]})", R"({"profile":"x"})", "[]"}) {
    c.jobs[0].config_json = config;
    s = CheckJobsAgainstHandlers(c);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << config;
    EXPECT_THAT(s.message(), HasSubstr("job 'hello' (handler remote): a remote job has no config"))
        << config;
  }

  // `migrate` seeds it; nothing in the server runs it.
  c.jobs[0].config_json = "{}";
  auto opened = OpenEngine(c, EngineMode::kMigrate);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
}

// The command handler's children learn where the database and the binary are.
TEST(CommandEnvironmentTest, AbsoluteDatabaseSyncAndBinary) {
  ServerConfig c;
  c.database_path = "rel/dir/../te.db";
  c.sync = SyncMode::kNormal;
  std::map<std::string, std::string> env = CommandEnvironment(c);
  ASSERT_EQ(env.count("TASKENGINE_DB"), 1u);
  const std::filesystem::path db(env["TASKENGINE_DB"]);
  EXPECT_TRUE(db.is_absolute()) << db;
  EXPECT_EQ(db, (std::filesystem::current_path() / "rel/te.db").lexically_normal());
  EXPECT_EQ(env["TASKENGINE_SYNC"], "normal");
  EXPECT_EQ(env["TASKENGINE_BIN"], std::filesystem::read_symlink("/proc/self/exe").string());
  EXPECT_EQ(env.size(), 3u);
}

TEST(OpenEngineTest, ReplayRequiresApprovalReachesTheEngine) {
  ServerConfig c;
  EXPECT_FALSE(ToEngineOptions(c, EngineMode::kClient).replay_requires_approval);
  c.replay_requires_approval = true;
  for (EngineMode mode : {EngineMode::kServe, EngineMode::kMigrate, EngineMode::kClient}) {
    EXPECT_TRUE(ToEngineOptions(c, mode).replay_requires_approval);
  }
}

// A running execution (claimed through the store, as a worker would) that
// commits an effect and is then canceled: `execution:show` lists the effect,
// the escaped effect, the attempt and the audit record.
TEST(ShowExecutionTest, EffectsEscapedEffectsAttemptsAndAudit) {
  TempDir dir;
  ServerConfig c = ConfigWithHello(dir);
  { ASSERT_OK(OpenEngine(c, EngineMode::kMigrate)); }
  ASSERT_OK_AND_ASSIGN(auto engine, OpenEngine(c, EngineMode::kClient));
  CliDispatch in;
  in.job = "hello";
  ASSERT_OK_AND_ASSIGN(DispatchRequest req, BuildCliDispatch(in));
  ASSERT_OK_AND_ASSIGN(DispatchResult res, engine->Dispatch(req));
  Store& store = StoreOf(*engine);
  ClaimRequest claim;
  claim.worker = WorkerId("test-worker");
  claim.slots = {QueueSlot{"default", 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store.Claim(claim));
  ASSERT_EQ(leases.size(), 1u);
  const LeaseRef lease{leases[0].id, leases[0].version};
  ASSERT_OK_AND_ASSIGN(EffectReply notice, store.ReserveEffect(lease, "notice"));
  EXPECT_EQ(notice.answer, EffectAnswer::kProceed);
  ASSERT_OK(store.CommitEffect(lease, "notice", "msg-1").status());
  ASSERT_OK_AND_ASSIGN(EffectReply draft, store.ReserveEffect(lease, "draft"));
  EXPECT_EQ(draft.answer, EffectAnswer::kProceed);

  ASSERT_OK_AND_ASSIGN(ExecutionDetail running, ShowExecution(*engine, res.id, 10));
  EXPECT_EQ(running.effects.size(), 2u);
  EXPECT_TRUE(running.EscapedEffects().empty()) << "not canceled: nothing escaped";

  ASSERT_OK_AND_ASSIGN(ExecutionStatus after, engine->Cancel(res.id, "cli:op", "wrong input"));
  EXPECT_EQ(after, ExecutionStatus::kRunning);
  ASSERT_OK_AND_ASSIGN(FinishReply finished, store.Release(lease));
  EXPECT_EQ(finished.status, ExecutionStatus::kPartiallyCanceled);

  ASSERT_OK_AND_ASSIGN(ExecutionDetail d, ShowExecution(*engine, res.id, 10));
  EXPECT_EQ(d.execution.status, ExecutionStatus::kPartiallyCanceled);
  ASSERT_EQ(d.effects.size(), 2u);
  // Both may have happened: the committed notice, and the draft reserved
  // but never confirmed before the worker gave its lease up (outcome unknown).
  // Effects come in reservation order (reserved_at, then name): the two
  // here may share a millisecond, so each is found by its key.
  std::vector<EffectRecord> escaped = d.EscapedEffects();
  ASSERT_EQ(escaped.size(), 2u);
  const std::string prefix = std::to_string(res.id.value) + ":";
  const bool notice_first = escaped[0].key == prefix + "notice";
  const EffectRecord& notice_record = escaped[notice_first ? 0 : 1];
  const EffectRecord& draft_record = escaped[notice_first ? 1 : 0];
  EXPECT_EQ(notice_record.key, prefix + "notice");
  EXPECT_GT(notice_record.committed_at, 0);
  EXPECT_EQ(draft_record.key, prefix + "draft");
  EXPECT_FALSE(draft_record.committed);
  EXPECT_LE(escaped[0].reserved_at, escaped[1].reserved_at);
  ASSERT_EQ(d.audit.size(), 1u);
  EXPECT_EQ(d.audit[0].action, "execution.cancel_requested");
  EXPECT_EQ(d.audit[0].actor, "cli:op");
  EXPECT_EQ(d.audit[0].reason, "wrong input");
  ASSERT_EQ(d.attempts.size(), 1u);
  EXPECT_EQ(d.attempts[0].worker, "test-worker");

  nlohmann::ordered_json j = ExecutionDetailToJson(d);
  EXPECT_EQ(j["status"], "partially_canceled");
  EXPECT_EQ(j["cancel_requested"], true);
  ASSERT_EQ(j["effects"].size(), 2u);
  ASSERT_EQ(j["escaped_effects"].size(), 2u);
  const auto& j_notice = j["escaped_effects"][notice_first ? 0 : 1];
  const auto& j_draft = j["escaped_effects"][notice_first ? 1 : 0];
  EXPECT_EQ(j_notice["name"], "notice");
  EXPECT_EQ(j_notice["state"], "committed");
  EXPECT_EQ(j_notice["detail"], "msg-1");
  EXPECT_TRUE(j_notice["committed_at"].is_string());
  EXPECT_EQ(j_draft["name"], "draft");
  EXPECT_EQ(j_draft["state"], "reserved");
  int reserved_only = 0;
  for (const auto& e : j["effects"]) {
    if (e["state"] == "reserved") {
      ++reserved_only;
      EXPECT_TRUE(e["committed_at"].is_null());
    }
  }
  EXPECT_EQ(reserved_only, 1);
  ASSERT_EQ(j["attempts"].size(), 1u);
  EXPECT_EQ(j["attempts"][0]["outcome"], "partially_canceled");
  ASSERT_EQ(j["audit"].size(), 1u);
  EXPECT_EQ(j["audit"][0]["target"], "execution:" + std::to_string(res.id.value));
}

TEST(LeaseFromEnvironmentTest, ReadsBothVariablesOrNamesTheMissingOne) {
  auto env = [](std::map<std::string, std::string> vars) -> EnvLookup {
    return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  };
  ASSERT_OK_AND_ASSIGN(LeaseRef ok, LeaseFromEnvironment(env({{"TASKENGINE_EXECUTION_ID", "42"},
                                                              {"TASKENGINE_CLAIM_VERSION", "7"}})));
  EXPECT_EQ(ok.id, ExecutionId(42));
  EXPECT_EQ(ok.version, ClaimVersion(7));

  auto missing = LeaseFromEnvironment(env({{"TASKENGINE_EXECUTION_ID", "42"}}));
  EXPECT_EQ(missing.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("TASKENGINE_CLAIM_VERSION is not set"));
  for (const char* bad : {"", "x", "0", "-3", "12abc", "99999999999999999999"}) {
    auto r = LeaseFromEnvironment(
        env({{"TASKENGINE_EXECUTION_ID", bad}, {"TASKENGINE_CLAIM_VERSION", "7"}}));
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("TASKENGINE_EXECUTION_ID")) << bad;
  }
}

TEST(CliActorTest, AsNameOrTheUnixUser) {
  ASSERT_OK_AND_ASSIGN(std::string me, CliActor(""));
  EXPECT_EQ(me, CliRequester());
  ASSERT_OK_AND_ASSIGN(std::string alice, CliActor("alice.ops@example"));
  EXPECT_EQ(alice, "cli:alice.ops@example");
  for (const char* bad : {"two words", "semi;colon", "x/y"}) {
    EXPECT_EQ(CliActor(bad).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(CliActor(std::string(65, 'a')).status().code(), ErrorCode::kInvalidArgument);
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
