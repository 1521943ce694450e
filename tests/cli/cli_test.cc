// Process-level tests of the `taskengine` binary: every verb run as a real
// process against a throwaway config and database, then `serve` as a child
// process running a `command` job and stopping on SIGTERM (L6).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <ctime>
#include <filesystem>

#include "cli_harness.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The demo job of the repository's taskengine.toml, plus a slow one, a
// per-tenant one and a failing one. Polls fast so the tests are quick.
constexpr const char* kConfig = R"(
[engine]
worker_threads = 2
poll_interval_ms = 100
sweep_interval_ms = 200
shutdown_grace_ms = 10000

[[queue]]
name = "default"

[[job]]
name = "hello"
handler = "command"
timeout_ms = 20000
lease_ms = 5000
max_attempts = 3
backoff_base_ms = 100
backoff_cap_ms = 1000
config = { argv = ["/bin/sh", "-c", '''
payload=$(cat)
echo "hello from execution $TASKENGINE_EXECUTION_ID, attempt $TASKENGINE_ATTEMPT"
echo '{"progress": 50}'
printf '{"result": {"greeting": "hello", "payload": %s}}\n' "$payload"
'''] }

[[job]]
name = "slow"
handler = "command"
config = { argv = ["/bin/sh", "-c", "sleep 1.5; echo '{\"result\": \"slept\"}'"] }

[[job]]
name = "per-tenant"
handler = "command"
scope = "per_tenant"
config = { argv = ["/bin/true"] }

[[job]]
name = "broken"
handler = "command"
config = { argv = ["/bin/sh", "-c", "echo 'no such thing' >&2; exit 65"] }
)";

// The id in "accepted execution <id> (...)", or "" when `out` does not start so.
std::string AcceptedId(const std::string& out) {
  long long id = 0;
  if (std::sscanf(out.c_str(), "accepted execution %lld (", &id) != 1) return "";
  return std::to_string(id);
}

class CliTest : public ::testing::Test {
 protected:
  CliTest() : te_(kConfig) {}

  void Migrate() {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  // Dispatches and returns the new id (0 after a test failure).
  std::int64_t Dispatch(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"job:dispatch"};
    all.insert(all.end(), args.begin(), args.end());
    nlohmann::json j = te_.RunJson(all);
    if (!j.is_object()) return 0;
    return j.value("id", std::int64_t{0});
  }

  nlohmann::json Show(std::int64_t id) {
    return te_.RunJson({"execution:show", std::to_string(id)});
  }
  // execution:result: the result of a succeeded execution.
  nlohmann::json ResultOf(std::int64_t id) {
    nlohmann::json r = te_.RunJson({"execution:result", std::to_string(id)});
    EXPECT_EQ(r["id"], id) << r.dump();
    return r["result"];
  }

  std::size_t CountExecutions() {
    nlohmann::json j = te_.RunJson({"execution:list", "--limit", "1000"});
    return j.is_object() ? j["items"].size() : 0;
  }

  TaskengineInstall te_;
};

TEST_F(CliTest, HelpNamesEveryVerbAndExitCodes) {
  ProcessResult help = te_.Run({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.Describe();
  for (const char* verb : {"serve", "migrate", "job:list", "job:dispatch", "queue:status",
                           "execution:list", "execution:show"}) {
    EXPECT_THAT(help.out, HasSubstr(verb));
    ProcessResult verb_help = te_.Run({verb, "--help"});
    EXPECT_EQ(verb_help.exit_code, 0) << verb << ": " << verb_help.Describe();
    EXPECT_THAT(verb_help.out, HasSubstr("Usage")) << verb;
  }
  EXPECT_THAT(help.out, HasSubstr("Exit codes"));

  ProcessResult none = te_.Run({});
  EXPECT_EQ(none.exit_code, 1) << none.Describe();
  EXPECT_THAT(none.err, StartsWith("taskengine: "));
  ProcessResult unknown = te_.Run({"job:explode"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.Describe();
  EXPECT_THAT(unknown.err, HasSubstr("unknown verb 'job:explode'"));
  ProcessResult bad_flag = te_.Run({"job:list", "--frobnicate"});
  EXPECT_EQ(bad_flag.exit_code, 1) << bad_flag.Describe();
}

TEST_F(CliTest, VerbsBeforeMigrateAnswerUnavailableAndCreateNothing) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"job:list"},
                                               {"execution:list"},
                                               {"queue:status"},
                                               {"execution:show", "1"},
                                               {"job:dispatch", "hello"}}) {
    ProcessResult r = te_.Run(args);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.Describe();
    EXPECT_THAT(r.err, HasSubstr("taskengine: database")) << args[0];
    EXPECT_THAT(r.err, HasSubstr("taskengine migrate")) << args[0];
  }
  EXPECT_FALSE(std::filesystem::exists(te_.db_path()));
}

TEST_F(CliTest, MigrateSeedsJobsAndJobListShowsThem) {
  ProcessResult r = te_.Run({"migrate"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("schema version"));
  EXPECT_THAT(r.out, HasSubstr("seeded 4 job definitions"));

  nlohmann::json again = te_.RunJson({"migrate"});  // idempotent
  ASSERT_TRUE(again.is_object());
  EXPECT_GT(again["schema_version"].get<int>(), 0);
  EXPECT_EQ(again["database"], te_.db_path());

  ProcessResult table = te_.Run({"job:list"});
  ASSERT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_THAT(table.out, HasSubstr("NAME"));
  EXPECT_THAT(table.out, HasSubstr("MAX ATTEMPTS"));
  EXPECT_THAT(table.out, ContainsRegex("\n"
                                       R"(hello +command +default +global +- +yes +3 +20\.0s)"))
      << table.out;
  EXPECT_THAT(table.out, ContainsRegex("\n"
                                       R"(per-tenant +command +default +per_tenant)"))
      << table.out;

  nlohmann::json list = te_.RunJson({"job:list"});
  ASSERT_TRUE(list.is_object());
  ASSERT_EQ(list["items"].size(), 4u);
  std::vector<std::string> names;
  for (const auto& j : list["items"]) names.push_back(j["name"]);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("hello", "slow", "per-tenant", "broken"));
  for (const auto& j : list["items"]) {
    if (j["name"] != "hello") continue;
    EXPECT_EQ(j["handler"], "command");
    EXPECT_EQ(j["timeout_ms"], 20000);
    EXPECT_EQ(j["max_attempts"], 3);
    EXPECT_EQ(j["config"]["argv"][0], "/bin/sh");
  }
}

TEST_F(CliTest, DispatchAdmitsAQueuedExecutionAndShowDisplaysIt) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ProcessResult r = te_.Run({"job:dispatch", "hello", "--payload", R"({"name": "world"})"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  ASSERT_THAT(r.out, ContainsRegex("^accepted execution [0-9]+ \\(created\\)\n$"));
  const std::string id = AcceptedId(r.out);

  ProcessResult show = te_.Run({"execution:show", id});
  ASSERT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_THAT(show.out, HasSubstr("execution " + id));
  EXPECT_THAT(show.out, ContainsRegex(R"(status +queued)")) << show.out;
  EXPECT_THAT(show.out, ContainsRegex(R"(trigger +manual)")) << show.out;
  EXPECT_THAT(show.out, ContainsRegex(R"(requester +cli:)")) << show.out;
  EXPECT_THAT(show.out, ContainsRegex(R"(attempt +0 of 3)")) << show.out;
  EXPECT_THAT(
      show.out,
      ContainsRegex(
          R"(queued at +[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]{3}Z)"))
      << show.out;
  EXPECT_THAT(show.out, HasSubstr(R"({"name":"world"})"));
  EXPECT_THAT(show.out, HasSubstr("logs (0)"));

  nlohmann::json j = Show(std::stoll(id));
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["id"], std::stoll(id));
  EXPECT_EQ(j["job"], "hello");
  EXPECT_EQ(j["status"], "queued");
  EXPECT_EQ(j["trigger"], "manual");
  EXPECT_THAT(j["requester"].get<std::string>(), StartsWith("cli:"));
  EXPECT_EQ(j["attempt"], 0);
  EXPECT_EQ(j["payload"], nlohmann::json::parse(R"({"name":"world"})"));
  EXPECT_TRUE(j["result_url"].is_null());
  EXPECT_FALSE(j.contains("result")) << "the result is served by execution:result";
  EXPECT_TRUE(j["started_at"].is_null());
  EXPECT_TRUE(j["duration_ms"].is_null());
  EXPECT_TRUE(j["queued_at"].is_string());
  EXPECT_EQ(j["logs"], nlohmann::json::array());

  nlohmann::json list = te_.RunJson({"execution:list"});
  ASSERT_TRUE(list.is_object());
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["id"], std::stoll(id));
  ProcessResult table = te_.Run({"execution:list"});
  EXPECT_THAT(table.out, ContainsRegex("\n" + id + R"( +hello +- +queued +0/3)")) << table.out;

  nlohmann::json queues = te_.RunJson({"queue:status"});
  ASSERT_TRUE(queues.is_object());
  ASSERT_EQ(queues["items"].size(), 1u);
  EXPECT_EQ(queues["items"][0]["queue"], "default");
  EXPECT_EQ(queues["items"][0]["queued"], 1);
  EXPECT_EQ(queues["items"][0]["due"], 1);
  EXPECT_EQ(queues["items"][0]["running"], 0);
  EXPECT_TRUE(queues["items"][0]["oldest_queued_age_ms"].is_number());
  ProcessResult qtable = te_.Run({"queue:status"});
  EXPECT_THAT(qtable.out, ContainsRegex("\n"
                                        R"(default +0 +all +1 +1 +0 +[^ ]+)"))
      << qtable.out;
}

TEST_F(CliTest, DispatchOptions) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  nlohmann::json delayed = Show(Dispatch({"hello", "--delay=60"}));
  ASSERT_TRUE(delayed.is_object());
  EXPECT_NE(delayed["run_at"], delayed["queued_at"]);

  // Two days ahead (dispatch refuses more than 366 days), whole seconds.
  const std::time_t later = std::time(nullptr) + 2 * 86'400;
  std::tm tm{};
  gmtime_r(&later, &tm);
  char run_at[32];
  std::strftime(run_at, sizeof(run_at), "%Y-%m-%dT%H:%M:%S", &tm);
  nlohmann::json at = Show(Dispatch({"hello", std::string("--run-at=") + run_at + "Z"}));
  ASSERT_TRUE(at.is_object());
  EXPECT_EQ(at["run_at"], std::string(run_at) + ".000Z");

  nlohmann::json lane = Show(Dispatch({"hello", "--lane=meeting:7", "--key=k-1"}));
  ASSERT_TRUE(lane.is_object());
  EXPECT_EQ(lane["lane_key"], "meeting:7");
  EXPECT_EQ(lane["idempotency_key"], "k-1");

  nlohmann::json tenant = Show(Dispatch({"per-tenant", "--tenant=acme"}));
  ASSERT_TRUE(tenant.is_object());
  EXPECT_EQ(tenant["tenant"], "acme");

  ProcessResult stdin_payload =
      te_.Run({"job:dispatch", "hello", "--payload=-", "--json"}, R"({"from": "stdin"})");
  ASSERT_EQ(stdin_payload.exit_code, 0) << stdin_payload.Describe();
  nlohmann::json created = nlohmann::json::parse(stdin_payload.out);
  EXPECT_EQ(created["created"], true);
  EXPECT_EQ(created["status"], "queued");
  EXPECT_EQ(Show(created["id"])["payload"]["from"], "stdin");

  const std::size_t before = CountExecutions();
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"hello", "--delay=60", "--run-at=2099-01-01T00:00:00Z"},
        {"hello", "--run-at=tomorrow"},
        {"hello", "--run-at=2099-01-01T00:00:00"},  // no zone
        {"hello", "--delay=-5"},
        {"hello", "--tenant=acme"},  // global job
        {"per-tenant"},              // tenant missing
        {"per-tenant", "--tenant=Not Valid"},
        {"hello", "--key=has space"}}) {
    std::vector<std::string> args = {"job:dispatch"};
    args.insert(args.end(), bad.begin(), bad.end());
    ProcessResult r = te_.Run(args);
    EXPECT_EQ(r.exit_code, 1) << bad.back() << ": " << r.Describe();
    EXPECT_THAT(r.err, StartsWith("taskengine: ")) << bad.back();
  }
  EXPECT_EQ(CountExecutions(), before) << "a refused dispatch must create nothing";
}

TEST_F(CliTest, BadPayloadIsRefusedClearlyAndCreatesNothing) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ProcessResult malformed = te_.Run({"job:dispatch", "hello", "--payload", "{not json"});
  EXPECT_EQ(malformed.exit_code, 1) << malformed.Describe();
  EXPECT_THAT(malformed.err, HasSubstr("taskengine: payload must be a JSON object"));
  EXPECT_EQ(malformed.out, "");

  ProcessResult array = te_.Run({"job:dispatch", "hello", "--payload", "[1, 2]"});
  EXPECT_EQ(array.exit_code, 1) << array.Describe();
  EXPECT_THAT(array.err, HasSubstr("payload must be a JSON object"));

  const std::string huge = R"({"blob": ")" + std::string(300 * 1024, 'x') + R"("})";
  ProcessResult oversized = te_.Run({"job:dispatch", "hello", "--payload=-"}, huge);
  EXPECT_EQ(oversized.exit_code, 1) << oversized.Describe();
  EXPECT_THAT(oversized.err, HasSubstr("exceeds the limit"));

  EXPECT_EQ(CountExecutions(), 0u);
}

// A1: [engine] max_payload_bytes sets the limit (default 256 KiB, above).
TEST(CliPayloadLimitTest, TheConfiguredLimitHolds) {
  std::string config = kConfig;
  config.replace(config.find("[engine]\n"), 9, "[engine]\nmax_payload_bytes = 2048\n");
  TaskengineInstall te(config);
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  const auto payload = [](std::size_t bytes) {
    return R"({"b":")" + std::string(bytes - 8, 'x') + R"("})";
  };
  ProcessResult fits = te.Run({"job:dispatch", "hello", "--payload=-"}, payload(2048));
  EXPECT_EQ(fits.exit_code, 0) << fits.Describe();
  ProcessResult over = te.Run({"job:dispatch", "hello", "--payload=-"}, payload(2049));
  EXPECT_EQ(over.exit_code, 1) << over.Describe();
  EXPECT_THAT(over.err, HasSubstr("exceeds the limit of 2048"));

  std::string bad = kConfig;
  bad.replace(bad.find("[engine]\n"), 9, "[engine]\nmax_payload_bytes = 10\n");
  TaskengineInstall refused(bad);
  ProcessResult r = refused.Run({"migrate"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("max_payload_bytes"));
}

TEST_F(CliTest, UnknownJobAndExecutionAreNotFound) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ProcessResult job = te_.Run({"job:dispatch", "no-such-job"});
  EXPECT_EQ(job.exit_code, 2) << job.Describe();
  EXPECT_THAT(job.err, StartsWith("taskengine: "));
  EXPECT_THAT(job.err, HasSubstr("no-such-job"));

  ProcessResult zero = te_.Run({"execution:show", "0"});
  EXPECT_EQ(zero.exit_code, 1) << zero.Describe();
  EXPECT_THAT(zero.err, HasSubstr("positive"));
  ProcessResult execution = te_.Run({"execution:show", "424242"});
  EXPECT_EQ(execution.exit_code, 2) << execution.Describe();
  EXPECT_THAT(execution.err, HasSubstr("taskengine: no execution 424242"));
  EXPECT_EQ(CountExecutions(), 0u);
}

TEST_F(CliTest, IdempotencyKeyReturnsTheSameExecutionAndConflictsExit4) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ProcessResult first = te_.Run({"job:dispatch", "hello", "--key=order-7", "--payload={\"a\":1}"});
  ASSERT_EQ(first.exit_code, 0) << first.Describe();
  ASSERT_THAT(first.out, ContainsRegex(R"(accepted execution [0-9]+ \(created\))"));
  const std::string id = AcceptedId(first.out);

  // Same key, same payload (different whitespace): the same execution.
  ProcessResult second =
      te_.Run({"job:dispatch", "hello", "--key=order-7", "--payload={ \"a\" : 1 }"});
  ASSERT_EQ(second.exit_code, 0) << second.Describe();
  EXPECT_THAT(second.out, HasSubstr("accepted execution " + id + " (existing"));
  nlohmann::json again =
      te_.RunJson({"job:dispatch", "hello", "--key=order-7", "--payload={\"a\":1}"});
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["id"], std::stoll(id));
  EXPECT_EQ(again["created"], false);

  // Same key, different payload: conflict, nothing created.
  ProcessResult conflict =
      te_.Run({"job:dispatch", "hello", "--key=order-7", "--payload={\"a\":2}"});
  EXPECT_EQ(conflict.exit_code, 4) << conflict.Describe();
  EXPECT_THAT(conflict.err, HasSubstr("taskengine: "));
  EXPECT_THAT(conflict.err, HasSubstr("execution " + id));
  EXPECT_EQ(conflict.out, "");
  EXPECT_EQ(CountExecutions(), 1u);
}

TEST_F(CliTest, ExecutionListFiltersAndPages) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(Dispatch({"hello", "--payload={\"i\":" + std::to_string(i) + "}"}));
  ids.push_back(Dispatch({"per-tenant", "--tenant=acme"}));

  nlohmann::json page1 = te_.RunJson({"execution:list", "--limit=2"});
  ASSERT_TRUE(page1.is_object());
  ASSERT_EQ(page1["items"].size(), 2u);
  EXPECT_EQ(page1["items"][0]["id"], ids[3]);  // newest first
  EXPECT_EQ(page1["items"][1]["id"], ids[2]);
  ASSERT_TRUE(page1["next_cursor"].is_string());

  ProcessResult table = te_.Run({"execution:list", "--limit=2"});
  EXPECT_THAT(table.out, HasSubstr("more: --before=" + page1["next_cursor"].get<std::string>()));

  nlohmann::json page2 = te_.RunJson(
      {"execution:list", "--limit=2", "--before=" + page1["next_cursor"].get<std::string>()});
  ASSERT_TRUE(page2.is_object());
  ASSERT_EQ(page2["items"].size(), 2u);
  EXPECT_EQ(page2["items"][0]["id"], ids[1]);
  EXPECT_EQ(page2["items"][1]["id"], ids[0]);

  nlohmann::json by_job = te_.RunJson({"execution:list", "--job=per-tenant"});
  ASSERT_TRUE(by_job.is_object());
  ASSERT_EQ(by_job["items"].size(), 1u);
  EXPECT_EQ(by_job["items"][0]["tenant"], "acme");
  nlohmann::json by_tenant = te_.RunJson({"execution:list", "--tenant=acme"});
  ASSERT_TRUE(by_tenant.is_object());
  EXPECT_EQ(by_tenant["items"].size(), 1u);
  nlohmann::json succeeded = te_.RunJson({"execution:list", "--status=succeeded"});
  ASSERT_TRUE(succeeded.is_object());
  EXPECT_EQ(succeeded["items"].size(), 0u);
  nlohmann::json queued = te_.RunJson({"execution:list", "--status=queued"});
  ASSERT_TRUE(queued.is_object());
  EXPECT_EQ(queued["items"].size(), 4u);

  ProcessResult bad_status = te_.Run({"execution:list", "--status=done"});
  EXPECT_EQ(bad_status.exit_code, 1) << bad_status.Describe();
  EXPECT_THAT(bad_status.err, HasSubstr("unknown status 'done'"));
  EXPECT_EQ(te_.Run({"execution:list", "--limit=0"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"execution:list", "--limit=1001"}).exit_code, 1);
}

// I1: execution:list takes the API's search criteria as flags (several
// statuses and triggers, time ranges, offset pages with a total) and names a
// bad flag on exit 1.
TEST_F(CliTest, I1_ExecutionListSearchesWithOffsetAndTotal) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(Dispatch({"hello", "--payload={\"i\":" + std::to_string(i) + "}"}));
  ids.push_back(Dispatch({"per-tenant", "--tenant=acme"}));

  nlohmann::json page = te_.RunJson(
      {"execution:list", "--status=queued,running", "--trigger=manual", "--offset=1", "--limit=2"});
  ASSERT_TRUE(page.is_object());
  EXPECT_EQ(page["total"], 5) << page.dump();
  EXPECT_EQ(page["total_is_lower_bound"], false);
  ASSERT_EQ(page["items"].size(), 2u);
  EXPECT_EQ(page["items"][0]["id"], ids[3]);
  EXPECT_EQ(page["items"][1]["id"], ids[2]);

  ProcessResult table = te_.Run({"execution:list", "--job=hello", "--offset=0", "--limit=1"});
  EXPECT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_THAT(table.out, HasSubstr("total: 4"));

  nlohmann::json none = te_.RunJson(
      {"execution:list", "--queued-from=2000-01-01T00:00:00Z", "--queued-to=2000-01-02T00:00:00Z"});
  ASSERT_TRUE(none.is_object());
  EXPECT_TRUE(none["items"].empty());
  nlohmann::json ended = te_.RunJson({"execution:list", "--ended-from=2000-01-01T00:00:00Z"});
  ASSERT_TRUE(ended.is_object());
  EXPECT_TRUE(ended["items"].empty()) << "nothing ended yet";

  for (const auto& [args, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--trigger=cron"}, "--trigger"},
           {{"--status=queued,"}, "--status"},
           {{"--offset=10001"}, "--offset"},
           {{"--offset=1", "--before=3"}, "--offset"},
           {{"--ended-to=soon"}, "--ended-to"},
           {{"--queued-from=2000-01-02T00:00:00Z", "--queued-to=2000-01-01T00:00:00Z"},
            "--queued-to"}}) {
    std::vector<std::string> argv = {"execution:list"};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = te_.Run(argv);
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_THAT(r.err, HasSubstr(flag)) << r.Describe();
  }
}

TEST_F(CliTest, BadConfigurationIsAUsageErrorNamingTheProblem) {
  TaskengineInstall bad("[engine]\nworker_threads = 2\nworkers = 3\n");
  ProcessResult r = bad.Run({"migrate"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr(bad.config_path() + ":3:1: unknown key 'engine.workers'"));

  ProcessResult env = te_.Run({"migrate"}, "", {"TASKENGINE_WORKERS=lots"});
  EXPECT_EQ(env.exit_code, 1) << env.Describe();
  EXPECT_THAT(env.err, HasSubstr("TASKENGINE_WORKERS='lots'"));

  ProcessResult missing = RunProcess(
      {TASKENGINE_BIN, "--config", te_.dir().File("nope.toml"), "job:list"}, "", kCliTimeout);
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_THAT(missing.err, HasSubstr("nope.toml"));

  TaskengineInstall bad_seed(
      "[[job]]\nname = \"x\"\nhandler = \"command\"\nconfig = { argv = [\"sh\"] }\n");
  ProcessResult seed = bad_seed.Run({"migrate"});
  EXPECT_EQ(seed.exit_code, 1) << seed.Describe();
  EXPECT_THAT(seed.err, HasSubstr("absolute path"));
}

TEST_F(CliTest, EnvironmentSelectsTheDatabaseAndDbFlagWins) {
  const std::string env_db = te_.dir().File("env.db");
  ProcessResult r = RunProcess({TASKENGINE_BIN, "--config", te_.config_path(), "migrate", "--json"},
                               "", kCliTimeout, ChildEnvironment({"TASKENGINE_DB=" + env_db}));
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(nlohmann::json::parse(r.out)["database"], env_db);
  EXPECT_TRUE(std::filesystem::exists(env_db));
  // te_.Run passes --db, which wins over TASKENGINE_DB.
  ProcessResult flag = te_.Run({"migrate", "--json"}, "", {"TASKENGINE_DB=" + env_db});
  ASSERT_EQ(flag.exit_code, 0) << flag.Describe();
  EXPECT_EQ(nlohmann::json::parse(flag.out)["database"], te_.db_path());
}

TEST_F(CliTest, ServeExits3WhenTheDatabaseCannotBeOpened) {
  std::ofstream(te_.dir().File("plainfile")) << "not a directory";
  ProcessResult r = RunProcess({TASKENGINE_BIN, "--config", te_.config_path(), "--db",
                                te_.dir().File("plainfile/te.db"), "serve"},
                               "", kCliTimeout);
  EXPECT_EQ(r.exit_code, 3) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("taskengine: cannot open database"));
  EXPECT_THAT(r.err, HasSubstr("plainfile/te.db"));
}

// Serve runs a dispatched `command` job (payload on stdin, progress and result
// on stdout) and stops with exit 0 on SIGTERM.
TEST_F(CliTest, ServeRunsADispatchedCommandJobAndStopsOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te_.StartServe(&serve));
  ASSERT_TRUE(te_.WaitServing(1, milliseconds(15'000))) << ReadFile(te_.serve_log());

  const std::int64_t id = Dispatch({"hello", "--payload", R"({"name": "world"})"});
  ASSERT_GT(id, 0);
  nlohmann::json j;
  const bool done = WaitUntil(
      milliseconds(20'000),
      [&] {
        j = Show(id);
        return j.is_object() && j["status"] != "queued" && j["status"] != "running";
      },
      milliseconds(100));
  ASSERT_TRUE(done) << "not finished in 20 s: " << j.dump() << "\nserve log:\n"
                    << ReadFile(te_.serve_log());
  EXPECT_EQ(j["status"], "succeeded") << j.dump();
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["progress"], 100);
  EXPECT_EQ(ResultOf(id),
            nlohmann::json::parse(R"({"greeting": "hello", "payload": {"name": "world"}})"));
  EXPECT_TRUE(j["started_at"].is_string());
  EXPECT_TRUE(j["finished_at"].is_string());
  EXPECT_TRUE(j["duration_ms"].is_number());
  ASSERT_GE(j["logs"].size(), 1u) << j.dump();
  EXPECT_EQ(j["logs"][0]["message"], "hello from execution " + std::to_string(id) + ", attempt 1");
  EXPECT_EQ(j["logs"][0]["attempt"], 1);

  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  ASSERT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_THAT(show.out, ContainsRegex(R"(status +succeeded)")) << show.out;
  EXPECT_THAT(show.out, ContainsRegex(R"(progress +100%)")) << show.out;
  EXPECT_THAT(show.out, HasSubstr(R"({"greeting":"hello","payload":{"name":"world"}})"));
  EXPECT_THAT(show.out, HasSubstr("hello from execution " + std::to_string(id)));
  EXPECT_THAT(show.out, Not(HasSubstr("finished at         -")));

  // A failing command is shown with its class and error.
  const std::int64_t broken = Dispatch({"broken"});
  ASSERT_TRUE(WaitUntil(
      milliseconds(20'000),
      [&] {
        j = Show(broken);
        return j.is_object() && j["status"] != "queued" && j["status"] != "running";
      },
      milliseconds(100)))
      << j.dump();
  EXPECT_EQ(j["status"], "quarantined") << j.dump();
  EXPECT_EQ(j["failure_class"], "permanent");
  EXPECT_TRUE(j["error"].is_string());

  const auto t0 = std::chrono::steady_clock::now();
  serve.Signal(SIGTERM);
  std::optional<int> status = serve.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << "serve did not exit within 15 s of SIGTERM";
  const auto stop_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  EXPECT_LT(stop_ms.count(), 5'000) << "an idle serve should stop promptly";
  const std::string log = ReadFile(te_.serve_log());
  EXPECT_THAT(log, HasSubstr("received SIGTERM"));
  EXPECT_THAT(log, HasSubstr("stopped"));
  EXPECT_THAT(log, HasSubstr(te_.db_path()));
  std::printf("[ measure ] idle serve stopped %lld ms after SIGTERM\n",
              static_cast<long long>(stop_ms.count()));
}

// L6: SIGTERM while a job runs lets it finish within the grace period, then exits 0.
TEST_F(CliTest, SigtermLetsTheRunningJobFinish) {
  ASSERT_NO_FATAL_FAILURE(Migrate());
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te_.StartServe(&serve));
  ASSERT_TRUE(te_.WaitServing(1, milliseconds(15'000))) << ReadFile(te_.serve_log());
  const std::int64_t id = Dispatch({"slow"});
  nlohmann::json j;
  ASSERT_TRUE(WaitUntil(
      milliseconds(15'000),
      [&] {
        j = Show(id);
        return j.is_object() && j["status"] == "running";
      },
      milliseconds(20)))
      << j.dump();

  serve.Signal(SIGINT);
  std::optional<int> status = serve.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << "serve did not exit within 15 s of SIGINT";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
  j = Show(id);
  EXPECT_EQ(j["status"], "succeeded") << j.dump() << "\n" << ReadFile(te_.serve_log());
  EXPECT_EQ(ResultOf(id), "slept");
  EXPECT_THAT(ReadFile(te_.serve_log()), HasSubstr("received SIGINT"));
}

TEST_F(CliTest, JsonLogFormatWritesOneObjectPerLine) {
  TaskengineInstall te("[log]\nformat = \"json\"\n[engine]\nworker_threads = 1\n");
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());
  serve.Signal(SIGTERM);
  std::optional<int> status = serve.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  std::istringstream lines(ReadFile(te.serve_log()));
  int count = 0;
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    EXPECT_TRUE(j["time"].is_string());
    EXPECT_TRUE(j["level"].is_string());
    EXPECT_TRUE(j["msg"].is_string());
    ++count;
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace taskengine::testing
