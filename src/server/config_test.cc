#include "server/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "server/server.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;

EnvLookup NoEnv() {
  return [](const char*) -> std::optional<std::string> { return std::nullopt; };
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// Expects kInvalidArgument whose message contains every one of `parts`.
void ExpectInvalid(const Result<ServerConfig>& r, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(r.ok()) << "expected an error";
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << r.status().ToString();
  for (const char* p : parts) EXPECT_THAT(r.status().message(), HasSubstr(p));
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_EQ(c.database_path, "./data/taskengine.db");
  EXPECT_EQ(c.sync, SyncMode::kFull);
  EXPECT_EQ(c.worker_threads, 4);
  ASSERT_EQ(c.queues.size(), 1u);
  EXPECT_EQ(c.queues[0].name, "default");
  EXPECT_EQ(c.poll_interval_ms, 1000);
  EXPECT_EQ(c.sweep_interval_ms, 1000);
  EXPECT_EQ(c.shutdown_grace_ms, 10'000);
  EXPECT_FALSE(c.replay_requires_approval);
  EXPECT_EQ(c.log_format, LogFormat::kText);
  EXPECT_TRUE(c.jobs.empty());
  EXPECT_EQ(c.source, "t.toml");
}

TEST(ConfigTest, ReadsEverySection) {
  constexpr const char* kToml = R"(
[database]
path = "/var/lib/te/x.db"
sync = "normal"

[engine]
worker_threads = 2
poll_interval_ms = 250
sweep_interval_ms = 500
shutdown_grace_ms = 3000
replay_requires_approval = true

[log]
format = "json"

[[queue]]
name = "high"
priority = 10
concurrency = 1

[[queue]]
name = "default"

[[queue]]
name = "remote"
pool = false
)";
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig(kToml, "t.toml", NoEnv()));
  EXPECT_EQ(c.database_path, "/var/lib/te/x.db");
  EXPECT_EQ(c.sync, SyncMode::kNormal);
  EXPECT_EQ(c.worker_threads, 2);
  EXPECT_EQ(c.poll_interval_ms, 250);
  EXPECT_EQ(c.sweep_interval_ms, 500);
  EXPECT_EQ(c.shutdown_grace_ms, 3000);
  EXPECT_TRUE(c.replay_requires_approval);
  EXPECT_EQ(c.log_format, LogFormat::kJson);
  ASSERT_EQ(c.queues.size(), 3u);
  EXPECT_EQ(c.queues[0].name, "high");
  EXPECT_EQ(c.queues[0].priority, 10);
  EXPECT_EQ(c.queues[0].concurrency, 1);
  EXPECT_TRUE(c.queues[0].pool);
  EXPECT_EQ(c.queues[1].name, "default");
  EXPECT_EQ(c.queues[1].priority, 0);
  EXPECT_EQ(c.queues[1].concurrency, 0);
  EXPECT_TRUE(c.queues[1].pool);
  EXPECT_EQ(c.queues[2].name, "remote");
  EXPECT_FALSE(c.queues[2].pool);
  EXPECT_EQ(DescribeQueues(c.queues),
            "high (priority 10, concurrency 1), default (priority 0, concurrency all), remote "
            "(priority 0, remote workers only)");
}

TEST(ConfigTest, QueuePoolMustBeABoolean) {
  ExpectInvalid(ParseConfig("[[queue]]\nname = \"remote\"\npool = 0\n", "t.toml", NoEnv()),
                {"t.toml:3:", "pool", "true or false"});
}

TEST(ConfigTest, ReplayRequiresApprovalMustBeABoolean) {
  ExpectInvalid(ParseConfig("[engine]\nreplay_requires_approval = \"yes\"\n", "t.toml", NoEnv()),
                {"t.toml:2:", "engine.replay_requires_approval", "true or false"});
}

TEST(ConfigTest, RetentionDefaultsAndBounds) {
  ASSERT_OK_AND_ASSIGN(ServerConfig d, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_TRUE(d.retention.enabled);
  EXPECT_EQ(d.retention.executions_ms, 30 * kRetentionDayMs);
  EXPECT_EQ(d.retention.logs_ms, 7 * kRetentionDayMs);
  EXPECT_EQ(d.retention.audit_ms, 365 * kRetentionDayMs);
  EXPECT_EQ(d.retention.batch, 500);
  EXPECT_EQ(d.retention.interval_ms, 60'000);
  ASSERT_OK_AND_ASSIGN(
      ServerConfig c,
      ParseConfig("[retention]\nenabled = false\nexecutions_days = 90\nlogs_days = 0\n"
                  "audit_days = 730\nbatch = 1000\ninterval_seconds = 300\n",
                  "t.toml", NoEnv()));
  EXPECT_FALSE(c.retention.enabled);
  EXPECT_EQ(c.retention.executions_ms, 90 * kRetentionDayMs);
  EXPECT_EQ(c.retention.logs_ms, 0);
  EXPECT_EQ(c.retention.audit_ms, 730 * kRetentionDayMs);
  EXPECT_EQ(c.retention.batch, 1000);
  EXPECT_EQ(c.retention.interval_ms, 300'000);
  ExpectInvalid(ParseConfig("[retention]\nbatch = 0\n", "t.toml", NoEnv()),
                {"t.toml:2:", "retention.batch"});
  ExpectInvalid(ParseConfig("[retention]\nexecutions_days = -1\n", "t.toml", NoEnv()),
                {"t.toml:2:", "retention.executions_days"});
  ExpectInvalid(ParseConfig("[retention]\nkeep = 3\n", "t.toml", NoEnv()), {"keep"});
}

TEST(ConfigTest, NotificationsDefaultsKeysAndChecks) {
  ASSERT_OK_AND_ASSIGN(ServerConfig d, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_TRUE(d.notifications.enabled);
  EXPECT_EQ(d.notifications.per_job_per_hour, 10);
  EXPECT_EQ(d.notifications.orphan_threshold, 5);
  EXPECT_TRUE(d.notifications.targets.empty());
  EXPECT_EQ(d.notifications.smtp_tls, SmtpTls::kRequired);
  const std::string file =
      "[notifications]\nenabled = false\nper_job_per_hour = 3\norphan_threshold = 20\n"
      "targets = [\"ops@example.com\", \"slack:team\"]\n"
      "dashboard_url = \"https://jobs.example.com\"\nfrom = \"te@example.com\"\n"
      "smtp_url = \"smtp://mail.example.com:587\"\nsmtp_tls = \"off\"\n"
      "smtp_username = \"te\"\nsmtp_password_env = \"TE_SMTP\"\n"
      "sendmail = [\"/usr/sbin/sendmail\", \"-t\"]\n"
      "[[http_target]]\nname = \"team\"\nurl = \"https://hooks.example.com/x\"\n"
      "allow_hosts = [\"hooks.example.com\"]\n"
      "[[job]]\nname = \"a\"\nhandler = \"command\"\nconfig = { argv = [\"/bin/true\"] }\n"
      "notify_on_failure = false\nnotify_targets = [\"webhook:team\"]\n";
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig(file, "t.toml", NoEnv()));
  EXPECT_FALSE(c.notifications.enabled);
  EXPECT_EQ(c.notifications.per_job_per_hour, 3);
  EXPECT_EQ(c.notifications.orphan_threshold, 20);
  EXPECT_EQ(c.notifications.targets, (std::vector<std::string>{"ops@example.com", "slack:team"}));
  EXPECT_EQ(c.notifications.smtp_tls, SmtpTls::kOff);
  EXPECT_EQ(c.notifications.smtp_password_env, "TE_SMTP");
  EXPECT_EQ(c.notifications.sendmail, (std::vector<std::string>{"/usr/sbin/sendmail", "-t"}));
  ASSERT_EQ(c.jobs.size(), 1u);
  EXPECT_FALSE(c.jobs[0].notify_on_failure);
  EXPECT_EQ(c.jobs[0].notify_targets, (std::vector<std::string>{"webhook:team"}));
  EXPECT_OK(CheckJobsAgainstHandlers(c));

  ExpectInvalid(ParseConfig("[notifications]\nper_job_per_hour = 0\n", "t.toml", NoEnv()),
                {"t.toml:2:", "notifications.per_job_per_hour"});
  ExpectInvalid(ParseConfig("[notifications]\ntargets = [\"not an address\"]\n", "t.toml", NoEnv()),
                {"notify target", "not an address"});
  ExpectInvalid(ParseConfig("[notifications]\nsmtp_url = \"http://x\"\n", "t.toml", NoEnv()),
                {"smtp_url"});
  ExpectInvalid(ParseConfig("[notifications]\nsmtp_tls = \"maybe\"\n", "t.toml", NoEnv()),
                {"smtp_tls"});
  ExpectInvalid(ParseConfig("[notifications]\nsendmail = [\"sendmail\"]\n", "t.toml", NoEnv()),
                {"sendmail[0] must be an absolute path"});
  ExpectInvalid(ParseConfig("[notifications]\nsmtp_password = \"x\"\n", "t.toml", NoEnv()),
                {"smtp_password"});
  ExpectInvalid(ParseConfig("[[job]]\nname = \"a\"\nhandler = \"command\"\n"
                            "notify_targets = [\"a@b.example\", \"a@b.example\"]\n",
                            "t.toml", NoEnv()),
                {"job[0].notify_targets", "twice"});
  ExpectInvalid(ParseConfig("[[queue]]\nname = \"taskengine\"\n", "t.toml", NoEnv()), {"reserved"});
  // Webhook and Slack targets must name an [[http_target]]; the server's
  // own job names are reserved.
  ASSERT_OK_AND_ASSIGN(
      ServerConfig unknown,
      ParseConfig("[notifications]\ntargets = [\"webhook:nope\"]\n", "t.toml", NoEnv()));
  EXPECT_THAT(CheckJobsAgainstHandlers(unknown).message(), HasSubstr("webhook:nope"));
  ASSERT_OK_AND_ASSIGN(ServerConfig job_unknown,
                       ParseConfig("[[job]]\nname = \"a\"\nhandler = \"command\"\n"
                                   "config = { argv = [\"/bin/true\"] }\n"
                                   "notify_targets = [\"slack:nope\"]\n",
                                   "t.toml", NoEnv()));
  EXPECT_THAT(CheckJobsAgainstHandlers(job_unknown).message(), HasSubstr("slack:nope"));
  ASSERT_OK_AND_ASSIGN(ServerConfig reserved,
                       ParseConfig("[[job]]\nname = \"taskengine.x\"\nhandler = \"command\"\n"
                                   "config = { argv = [\"/bin/true\"] }\n",
                                   "t.toml", NoEnv()));
  EXPECT_THAT(CheckJobsAgainstHandlers(reserved).message(), HasSubstr("reserved"));
}

TEST(ConfigTest, MaxPayloadBytesIsBounded) {
  ASSERT_OK_AND_ASSIGN(ServerConfig d, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_EQ(d.max_payload_bytes, 256u * 1024);
  ASSERT_OK_AND_ASSIGN(ServerConfig c,
                       ParseConfig("[engine]\nmax_payload_bytes = 1048576\n", "t.toml", NoEnv()));
  EXPECT_EQ(c.max_payload_bytes, 1048576u);
  EXPECT_EQ(ToEngineOptions(c, EngineMode::kServe).max_payload_bytes, 1048576u);
  ExpectInvalid(ParseConfig("[engine]\nmax_payload_bytes = 100\n", "t.toml", NoEnv()),
                {"t.toml:2:", "engine.max_payload_bytes"});
  ExpectInvalid(ParseConfig("[engine]\nmax_payload_bytes = 16777217\n", "t.toml", NoEnv()),
                {"t.toml:2:", "engine.max_payload_bytes"});
}

TEST(ConfigTest, RedactionKeys) {
  ASSERT_OK_AND_ASSIGN(ServerConfig none, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_TRUE(none.redact_keys.empty());
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig("[redaction]\nkeys = [\"signing_key\", "
                                                   "\"dsn\"]\n",
                                                   "t.toml", NoEnv()));
  EXPECT_EQ(c.redact_keys, (std::vector<std::string>{"signing_key", "dsn"}));
  ExpectInvalid(ParseConfig("[redaction]\nkeys = \"x\"\n", "t.toml", NoEnv()),
                {"t.toml:2:", "redaction.keys", "array of strings"});
  ExpectInvalid(ParseConfig("[redaction]\nkeys = [\"\"]\n", "t.toml", NoEnv()),
                {"redaction.keys", "non-empty"});
  ExpectInvalid(ParseConfig("[redaction]\nkey = []\n", "t.toml", NoEnv()), {"redaction.key"});
}

TEST(ConfigTest, ReadsEveryJobField) {
  constexpr const char* kToml = R"(
[[queue]]
name = "slow"

[[job]]
name = "report.nightly"
display_name = "Nightly report"
handler = "command"
queue = "slow"
scope = "per_tenant"
schedule = "0 3 * * *"
timezone = "Europe/Berlin"
timeout_ms = 60000
lease_ms = 5000
max_attempts = 7
backoff_base_ms = 100
backoff_cap_ms = 2000
max_permanent_attempts = 2
max_unsupported_schema_attempts = 5
max_ambiguous_attempts = 3
max_consecutive_lease_expiries = 4
accepted_schema_versions = [1, 2]
lane_template = "tenant:{tenant}"
enabled = false
config = { argv = ["/bin/echo", "hi"], env = { A = "1" }, n = 3, f = 1.5, ok = true }
)";
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig(kToml, "t.toml", NoEnv()));
  ASSERT_EQ(c.jobs.size(), 1u);
  const JobDefinition& j = c.jobs[0];
  EXPECT_EQ(j.name.value, "report.nightly");
  EXPECT_EQ(j.display_name, "Nightly report");
  EXPECT_EQ(j.handler, "command");
  EXPECT_EQ(j.queue, "slow");
  EXPECT_EQ(j.scope, JobScope::kPerTenant);
  EXPECT_EQ(j.schedule, "0 3 * * *");
  EXPECT_EQ(j.timezone, "Europe/Berlin");
  EXPECT_EQ(j.timeout_ms, 60000);
  EXPECT_EQ(j.lease_ms, 5000);
  EXPECT_EQ(j.retry.max_attempts, 7);
  EXPECT_EQ(j.retry.backoff_base_ms, 100);
  EXPECT_EQ(j.retry.backoff_cap_ms, 2000);
  EXPECT_EQ(j.retry.max_permanent_attempts, 2);
  EXPECT_EQ(j.retry.max_unsupported_schema_attempts, 5);
  EXPECT_EQ(j.retry.max_ambiguous_attempts, 3);
  EXPECT_EQ(j.accepted_schema_versions, (std::vector<int>{1, 2}));
  EXPECT_EQ(j.retry.max_consecutive_lease_expiries, 4);
  EXPECT_EQ(j.lane_template, "tenant:{tenant}");
  EXPECT_FALSE(j.enabled);
  nlohmann::json config = nlohmann::json::parse(j.config_json);
  EXPECT_EQ(config, nlohmann::json::parse(
                        R"({"argv":["/bin/echo","hi"],"env":{"A":"1"},"n":3,"f":1.5,"ok":true})"));
}

TEST(ConfigTest, JobDefaultsAreTheDefinitionDefaults) {
  ASSERT_OK_AND_ASSIGN(ServerConfig c,
                       ParseConfig("[[job]]\nname = \"a\"\nhandler = \"command\"\n", "t", NoEnv()));
  ASSERT_EQ(c.jobs.size(), 1u);
  const JobDefinition defaults;
  const JobDefinition& j = c.jobs[0];
  EXPECT_EQ(j.queue, "default");
  EXPECT_EQ(j.scope, JobScope::kGlobal);
  EXPECT_EQ(j.timezone, "UTC");
  EXPECT_EQ(j.timeout_ms, defaults.timeout_ms);
  EXPECT_EQ(j.lease_ms, defaults.lease_ms);
  EXPECT_EQ(j.retry.max_attempts, defaults.retry.max_attempts);
  EXPECT_EQ(j.config_json, "{}");
  EXPECT_TRUE(j.enabled);
}

TEST(ConfigTest, DatabaseUrlAndSchemaSelectPostgres) {
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_EQ(c.database_url, "");
  EXPECT_EQ(c.database_schema, "taskengine");
  EXPECT_THAT(DescribeDatabase(c), HasSubstr("sqlite ./data/taskengine.db"));

  ASSERT_OK_AND_ASSIGN(
      c,
      ParseConfig("[database]\nurl = \"postgres://app:s3cret@db:5432/jobs\"\nschema = \"te_a\"\n",
                  "t.toml", NoEnv()));
  EXPECT_EQ(c.database_url, "postgres://app:s3cret@db:5432/jobs");
  EXPECT_EQ(c.database_schema, "te_a");
  // Logs and `migrate` name the backend and never the password.
  EXPECT_EQ(DescribeDatabase(c), "postgresql postgres://app:***@db:5432/jobs (schema te_a)");

  ExpectInvalid(ParseConfig("[database]\nurl = \"redis://x\"\n", "t.toml", NoEnv()),
                {"t.toml:2", "url", "postgres://", "mysql://"});
  // mysql:// and mariadb:// select MariaDB; its database holds the tables.
  ASSERT_OK_AND_ASSIGN(
      c, ParseConfig("[database]\nurl = \"mysql://app:s3cret@db:3306/jobs\"\n", "t.toml", NoEnv()));
  EXPECT_EQ(BackendName(c), "mariadb");
  EXPECT_EQ(DescribeDatabase(c), "mariadb mysql://app:***@db:3306/jobs");
  ExpectInvalid(ParseConfig("[database]\nschema = \"Bad-Name\"\n", "t.toml", NoEnv()),
                {"schema", "[a-z_]"});
}

TEST(ConfigTest, DatabaseUrlFromTheEnvironmentWinsInOrder) {
  const char* kToml = "[database]\nurl = \"postgres://file@h/db\"\n";
  ASSERT_OK_AND_ASSIGN(
      ServerConfig c,
      ParseConfig(kToml, "t.toml", Env({{"DATABASE_URL", "postgresql://generic@h/db"}})));
  EXPECT_EQ(c.database_url, "postgresql://generic@h/db");
  ASSERT_OK_AND_ASSIGN(c, ParseConfig(kToml, "t.toml",
                                      Env({{"DATABASE_URL", "postgresql://generic@h/db"},
                                           {"TASKENGINE_DATABASE_URL", "postgres://te@h/db"},
                                           {"TASKENGINE_DATABASE_SCHEMA", "other"}})));
  EXPECT_EQ(c.database_url, "postgres://te@h/db");
  EXPECT_EQ(c.database_schema, "other");
  // Set but empty counts as unset.
  ASSERT_OK_AND_ASSIGN(c, ParseConfig(kToml, "t.toml", Env({{"TASKENGINE_DATABASE_URL", ""}})));
  EXPECT_EQ(c.database_url, "postgres://file@h/db");
  ASSERT_OK_AND_ASSIGN(c,
                       ParseConfig(kToml, "t.toml", Env({{"DATABASE_URL", "mariadb://u@h/db"}})));
  EXPECT_EQ(BackendName(c), "mariadb");
  // A wrong scheme is refused by variable name, with the password redacted.
  auto bad = ParseConfig("", "t.toml", Env({{"DATABASE_URL", "mssql://u:pw@h/db"}}));
  ExpectInvalid(bad, {"DATABASE_URL", "mssql://u:***@h/db"});
  EXPECT_THAT(bad.status().message(), ::testing::Not(HasSubstr(":pw@")));
  ExpectInvalid(ParseConfig("", "t.toml", Env({{"TASKENGINE_DATABASE_SCHEMA", "1x"}})),
                {"TASKENGINE_DATABASE_SCHEMA"});
}

TEST(ConfigTest, MetricsOpenIsABooleanOfHttp) {
  ASSERT_OK_AND_ASSIGN(ServerConfig d, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_FALSE(d.http.metrics_open);
  ASSERT_OK_AND_ASSIGN(ServerConfig c,
                       ParseConfig("[http]\nmetrics_open = true\n", "t.toml", NoEnv()));
  EXPECT_TRUE(c.http.metrics_open);
  EXPECT_FALSE(ParseConfig("[http]\nmetrics_open = 1\n", "t.toml", NoEnv()).ok());
}

// Issue 13: the names served besides loopback (DNS rebinding), the login
// pool and the connection limits.
TEST(ConfigTest, HttpHardeningKeys) {
  ASSERT_OK_AND_ASSIGN(ServerConfig d, ParseConfig("", "t.toml", NoEnv()));
  EXPECT_TRUE(d.http.public_hosts.empty());
  EXPECT_EQ(d.http.login_threads, 2);
  EXPECT_EQ(d.http.max_connections_per_client, 128);
  EXPECT_EQ(d.http.header_timeout_ms, 10'000);
  ASSERT_OK_AND_ASSIGN(
      ServerConfig c,
      ParseConfig("[http]\npublic_hosts = [\"te.example.com\", \"10.0.0.5\", \"2001:db8::1\", "
                  "\"[2001:db8::2]\"]\nlogin_threads = 3\nlogin_queue = 4\nlogin_per_second = 7\n"
                  "login_lockout_after = 0\nmax_connections = 500\nmax_connections_per_client = 9\n"
                  "header_timeout_ms = 2000\n",
                  "t.toml", NoEnv()));
  EXPECT_EQ(c.http.public_hosts, (std::vector<std::string>{"te.example.com", "10.0.0.5",
                                                           "2001:db8::1", "[2001:db8::2]"}));
  EXPECT_EQ(c.http.login_threads, 3);
  EXPECT_EQ(c.http.login_queue, 4);
  EXPECT_EQ(c.http.login_per_second, 7);
  EXPECT_EQ(c.http.login_lockout_after, 0);
  EXPECT_EQ(c.http.max_connections, 500);
  EXPECT_EQ(c.http.max_connections_per_client, 9);
  EXPECT_EQ(c.http.header_timeout_ms, 2000);
  for (const char* bad :
       {"\"te.example.com:443\"", "\"http://te.example.com\"", "\"\"", "\"a b\"", "1"}) {
    ExpectInvalid(
        ParseConfig(std::string("[http]\npublic_hosts = [") + bad + "]\n", "t.toml", NoEnv()),
        {"http.public_hosts"});
  }
  ExpectInvalid(ParseConfig("[http]\npublic_hosts = \"x\"\n", "t.toml", NoEnv()),
                {"http.public_hosts"});
  ExpectInvalid(ParseConfig("[http]\nlogin_threads = 0\n", "t.toml", NoEnv()),
                {"http.login_threads"});
  ASSERT_OK_AND_ASSIGN(
      ServerConfig e,
      ParseConfig("", "t.toml", Env({{"TASKENGINE_HTTP_PUBLIC_HOSTS", " a.example , 10.0.0.9 "}})));
  EXPECT_EQ(e.http.public_hosts, (std::vector<std::string>{"a.example", "10.0.0.9"}));
  ExpectInvalid(ParseConfig("", "t.toml", Env({{"TASKENGINE_HTTP_PUBLIC_HOSTS", "a.example:1"}})),
                {"TASKENGINE_HTTP_PUBLIC_HOSTS"});
}

TEST(ConfigTest, SyntaxErrorNamesFileLineAndColumn) {
  ExpectInvalid(ParseConfig("[engine]\nworker_threads = = 3\n", "conf/te.toml", NoEnv()),
                {"conf/te.toml:2:"});
}

TEST(ConfigTest, UnknownKeysAreRefusedByName) {
  ExpectInvalid(ParseConfig("colour = 1\n", "t.toml", NoEnv()),
                {"t.toml:1:1", "unknown key 'colour'"});
  ExpectInvalid(ParseConfig("[engine]\nworkers = 1\n", "t.toml", NoEnv()),
                {"t.toml:2:1", "unknown key 'engine.workers'"});
  ExpectInvalid(
      ParseConfig("[[job]]\nname = \"a\"\nhandler = \"command\"\ntimeout = 5\n", "t.toml", NoEnv()),
      {"t.toml:4:1", "unknown key 'job[0].timeout'"});
  ExpectInvalid(ParseConfig("[[queue]]\nname = \"q\"\nweight = 5\n", "t.toml", NoEnv()),
                {"unknown key 'queue[0].weight'"});
  ExpectInvalid(ParseConfig("[http]\nlisten = \"x\"\n", "t.toml", NoEnv()),
                {"unknown key 'http.listen'"});
}

TEST(ConfigTest, WrongTypesAndRangesAreRefused) {
  ExpectInvalid(ParseConfig("[engine]\nworker_threads = \"4\"\n", "t", NoEnv()),
                {"t:2:", "engine.worker_threads must be an integer"});
  ExpectInvalid(ParseConfig("[engine]\nworker_threads = 100000\n", "t", NoEnv()),
                {"engine.worker_threads must be between 0 and 256"});
  ExpectInvalid(ParseConfig("[engine]\npoll_interval_ms = 0\n", "t", NoEnv()),
                {"engine.poll_interval_ms"});
  ExpectInvalid(ParseConfig("[database]\nsync = \"off\"\n", "t", NoEnv()),
                {"database.sync", "\"full\" or \"normal\""});
  ExpectInvalid(ParseConfig("[database]\npath = \"\"\n", "t", NoEnv()), {"database.path"});
  ExpectInvalid(ParseConfig("[log]\nformat = \"xml\"\n", "t", NoEnv()), {"log.format"});
  ExpectInvalid(ParseConfig("engine = 3\n", "t", NoEnv()), {"engine must be a table"});
  ExpectInvalid(ParseConfig("job = \"x\"\n", "t", NoEnv()), {"[[job]]"});
}

TEST(ConfigTest, BadJobsAreRefused) {
  auto job = [](const std::string& extra) {
    return "[[job]]\nname = \"a\"\nhandler = \"command\"\n" + extra;
  };
  ExpectInvalid(ParseConfig("[[job]]\nhandler = \"command\"\n", "t", NoEnv()),
                {"job[0].name is required"});
  ExpectInvalid(ParseConfig("[[job]]\nname = \"Bad Name\"\nhandler = \"command\"\n", "t", NoEnv()),
                {"not a valid job name"});
  ExpectInvalid(ParseConfig("[[job]]\nname = \"a\"\n", "t", NoEnv()),
                {"job[0].handler is required"});
  ExpectInvalid(ParseConfig(job("scope = \"tenant\"\n"), "t", NoEnv()), {"job[0].scope"});
  ExpectInvalid(ParseConfig(job("timeout_ms = 0\n"), "t", NoEnv()), {"job[0].timeout_ms"});
  ExpectInvalid(ParseConfig(job("lease_ms = 5\n"), "t", NoEnv()), {"job[0].lease_ms"});
  ExpectInvalid(ParseConfig(job("max_attempts = 0\n"), "t", NoEnv()), {"job[0].max_attempts"});
  ExpectInvalid(ParseConfig(job("backoff_base_ms = 500\nbackoff_cap_ms = 100\n"), "t", NoEnv()),
                {"backoff_cap_ms", "must not be below backoff_base_ms"});
  ExpectInvalid(ParseConfig(job("accepted_schema_versions = 1\n"), "t", NoEnv()),
                {"job[0].accepted_schema_versions must be an array"});
  ExpectInvalid(ParseConfig(job("accepted_schema_versions = [1, 0]\n"), "t", NoEnv()),
                {"job[0].accepted_schema_versions must hold integers"});
  ExpectInvalid(ParseConfig(job("accepted_schema_versions = [2, 2]\n"), "t", NoEnv()),
                {"lists 2 twice"});
  ExpectInvalid(ParseConfig(job("enabled = 1\n"), "t", NoEnv()),
                {"job[0].enabled must be true or false"});
  ExpectInvalid(ParseConfig(job("config = \"argv\"\n"), "t", NoEnv()),
                {"job[0].config must be a table"});
  ExpectInvalid(ParseConfig(job("config = { at = 1979-05-27 }\n"), "t", NoEnv()),
                {"job[0].config.at", "date or time"});
  ExpectInvalid(ParseConfig(job("config = { x = nan }\n"), "t", NoEnv()),
                {"job[0].config.x", "finite"});
  ExpectInvalid(ParseConfig(job("queue = \"nowhere\"\n"), "t", NoEnv()),
                {"queue 'nowhere'", "no [[queue]] declares"});
  ExpectInvalid(ParseConfig(job("") + job(""), "t", NoEnv()), {"'a' is defined twice"});
  ExpectInvalid(ParseConfig("[[queue]]\nname = \"q\"\n[[queue]]\nname = \"q\"\n", "t", NoEnv()),
                {"'q' is declared twice"});
}

TEST(ConfigTest, ScheduleErrorsNameTheKeyTheSchedulerRefused) {
  constexpr const char* kJob = "[[job]]\nname = \"a\"\nhandler = \"command\"\n";
  ExpectInvalid(ParseConfig(std::string(kJob) + "schedule = \"61 * * * *\"\n", "t.toml", NoEnv()),
                {"t.toml:4:12: job[0].schedule: ", "61 * * * *"});
  ExpectInvalid(ParseConfig(std::string(kJob) + "schedule = \"0 3 * * *\"\ntimezone = \"Mars/X\"\n",
                            "t.toml", NoEnv()),
                {"t.toml:5:12: job[0].timezone: ", "Mars/X"});
  ExpectInvalid(ParseConfig(std::string(kJob) + "window_ms = 1000\n", "t.toml", NoEnv()),
                {"t.toml:4:13: job[0].window_ms: ", "whole number of minutes"});
}

TEST(ConfigTest, LocationsNameWhereTheFileDefinesTablesAndKeys) {
  ASSERT_OK_AND_ASSIGN(
      ServerConfig c,
      ParseConfig("[http]\nport = 9000\n\n[[job]]\nname = \"a\"\nhandler = \"command\"\n"
                  "schedule = \"0 3 * * *\"\n",
                  "t.toml", NoEnv()));
  EXPECT_EQ(ConfigLocation(c, "job", "a", "schedule"), "t.toml:7:12: job[0].schedule");
  EXPECT_EQ(ConfigLocation(c, "job", "a", "timeout_ms"), "t.toml:4:1: job[0]");  // not set
  EXPECT_EQ(ConfigLocation(c, "job", "a"), "t.toml:4:1: job[0]");
  EXPECT_EQ(ConfigLocation(c, "http", "", "port"), "t.toml:2:8: http.port");
  EXPECT_EQ(ConfigLocation(c, "job", "b"), "");
  EXPECT_EQ(Located(InvalidArgument("bad"), c, "job", "a", "schedule").message(),
            "t.toml:7:12: job[0].schedule: bad");
  EXPECT_EQ(Located(InvalidArgument("bad"), ServerConfig{}, "job", "a").message(), "bad");
}

TEST(ConfigTest, ConfigKeysAreTheKeysTheParserAccepts) {
  const std::vector<std::string> keys = ConfigKeys();
  for (const char* k : {"[database] path", "[database] url", "[http] metrics_open",
                        "[engine] replay_requires_approval", "[[queue]] concurrency",
                        "[[command_profile]] argv", "[[http_target]] allow_private",
                        "[[job]] schedule", "[[job]] max_consecutive_lease_expiries"}) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  }
  // Every listed key of a plain table is accepted, and any other refused.
  for (const std::string& k : keys) {
    if (k.starts_with("[[")) continue;
    const std::string section = k.substr(0, k.find(' '));
    const std::string key = k.substr(k.find(' ') + 1);
    auto parsed = ParseConfig(section + "\n" + key + " = {}\n", "t.toml", NoEnv());
    ASSERT_FALSE(parsed.ok()) << k;  // a table is the wrong type for every key
    EXPECT_THAT(parsed.status().message(), ::testing::Not(HasSubstr("unknown key"))) << k;
  }
}

TEST(ConfigTest, PostgresUrlsAreCheckedAsLibpqReadsThem) {
  for (const char* good :
       {"postgres://u@h/db", "postgresql://u:p%40ss@h:5432/db", "postgres:///db",
        "postgres://h1:5432,h2:5433/db?sslmode=require&connect_timeout=2",
        "postgres://[::1]:5432/db", "postgres://%2Fvar%2Frun%2Fpostgresql/db", "postgres://"}) {
    EXPECT_TRUE(CheckPostgresUrl(good).ok()) << good << ": " << CheckPostgresUrl(good).message();
  }
  for (const char* bad : {"postgres://u@h:99999/db", "postgres://u@h:x/db", "postgres://u@h:0/db",
                          "postgres://u:p%4@h/db", "postgres://u@[::1/db", "postgres://u@h/db?x",
                          "postgres://u@h/db?=1", "postgres://u:sec ret@h/db", "mysql://h/db"}) {
    EXPECT_FALSE(CheckPostgresUrl(bad).ok()) << bad;
  }
  // Never the password in the message.
  EXPECT_THAT(CheckPostgresUrl("postgres://u:sec%zzret@h/db").message(),
              ::testing::Not(HasSubstr("sec")));
  ExpectInvalid(ParseConfig("[database]\nurl = \"postgres://u@h:70000/db\"\n", "t.toml", NoEnv()),
                {"t.toml:2:7: database.url", "port 70000"});
  ExpectInvalid(ParseConfig("", "t", Env({{"DATABASE_URL", "postgres://u@h:x/db"}})),
                {"DATABASE_URL", "port 'x'"});
}

TEST(ConfigTest, EnvironmentOverridesTheFile) {
  constexpr const char* kToml = "[database]\npath = \"a.db\"\n[engine]\nworker_threads = 2\n";
  ASSERT_OK_AND_ASSIGN(ServerConfig c, ParseConfig(kToml, "t",
                                                   Env({{"TASKENGINE_DB", "/tmp/b.db"},
                                                        {"TASKENGINE_SYNC", "normal"},
                                                        {"TASKENGINE_WORKERS", "0"}})));
  EXPECT_EQ(c.database_path, "/tmp/b.db");
  EXPECT_EQ(c.sync, SyncMode::kNormal);
  EXPECT_EQ(c.worker_threads, 0);
}

TEST(ConfigTest, BadEnvironmentOverridesAreRefusedByName) {
  ExpectInvalid(ParseConfig("", "t", Env({{"TASKENGINE_WORKERS", "many"}})),
                {"TASKENGINE_WORKERS='many'"});
  ExpectInvalid(ParseConfig("", "t", Env({{"TASKENGINE_WORKERS", "-1"}})), {"TASKENGINE_WORKERS"});
  ExpectInvalid(ParseConfig("", "t", Env({{"TASKENGINE_WORKERS", "3x"}})), {"TASKENGINE_WORKERS"});
  ExpectInvalid(ParseConfig("", "t", Env({{"TASKENGINE_SYNC", "fast"}})),
                {"TASKENGINE_SYNC='fast'"});
  ExpectInvalid(ParseConfig("", "t", Env({{"TASKENGINE_DB", ""}})), {"TASKENGINE_DB"});
}

TEST(ConfigTest, LoadConfigReadsTheFile) {
  TempDir dir;
  const std::string path = dir.File("te.toml");
  {
    std::ofstream out(path);
    out << "[engine]\nworker_threads = 3\n";
  }
  ASSERT_OK_AND_ASSIGN(ServerConfig c, LoadConfig(path, NoEnv()));
  EXPECT_EQ(c.worker_threads, 3);
  EXPECT_EQ(c.source, path);

  ASSERT_OK_AND_ASSIGN(ServerConfig none, LoadConfig("", NoEnv()));
  EXPECT_EQ(none.source, "");
  EXPECT_EQ(none.worker_threads, 4);

  ExpectInvalid(LoadConfig(dir.File("missing.toml"), NoEnv()), {"missing.toml"});
  ExpectInvalid(LoadConfig(dir.path().string(), NoEnv()), {"directory"});
}

TEST(ConfigTest, RepositoryExampleConfigIsValid) {
  const char* src = std::getenv("TASKENGINE_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "TASKENGINE_SOURCE_DIR is not set (run through ctest)";
  ASSERT_OK_AND_ASSIGN(ServerConfig c, LoadConfig(std::string(src) + "/taskengine.toml", NoEnv()));
  bool has_hello = false;
  for (const JobDefinition& j : c.jobs) has_hello = has_hello || j.name.value == "hello";
  EXPECT_TRUE(has_hello) << "the demo config must define the `hello` job used by ./run.sh";
}

}  // namespace
}  // namespace taskengine
