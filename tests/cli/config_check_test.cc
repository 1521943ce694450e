// `taskengine config:check` (issue 14, item 8) through the real binary: a
// good file prints the summary (text and --json) and exit 0; every kind of
// mistake serve would refuse at start exits 1 naming the file, line, column
// and key; nothing touches the database (its file and directory are never
// created, a PostgreSQL URL is never connected to).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_harness.h"

namespace taskengine::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kGood = R"(
[http]
host = "127.0.0.1"
port = 8181
metrics_open = true

[[queue]]
name = "default"

[[queue]]
name = "reports"
priority = 5
concurrency = 2

[[command_profile]]
name = "report"
argv = ["/bin/sh", "-c", "cat > /dev/null"]

[[http_target]]
name = "hook"
url = "https://hooks.example.com/in"
allow_hosts = ["hooks.example.com"]

[[job]]
name = "hello"
handler = "command"
config = { argv = ["/bin/true"] }

[[job]]
name = "nightly-report"
handler = "command"
queue = "reports"
schedule = "0 3 * * *"
timezone = "Europe/Paris"
config = { profile = "report" }

[[job]]
name = "notify"
handler = "http"
config = { target = "hook" }
)";

// A [[job]] with `extra` lines after name and handler.
std::string Job(const std::string& extra, const std::string& handler = "command") {
  return "[engine]\nworker_threads = 1\n\n[[job]]\nname = \"a\"\nhandler = \"" + handler + "\"\n" +
         extra;
}

// The 1-based line of the first line of `text` that starts with `prefix`.
int LineOf(const std::string& text, const std::string& prefix) {
  int line = 1;
  for (std::size_t start = 0; start < text.size(); ++line) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (text.compare(start, prefix.size(), prefix) == 0) return line;
    start = end + 1;
  }
  ADD_FAILURE() << "no line starts with " << prefix;
  return 0;
}

// Runs `config:check` (plus `args`) on `toml` in a fresh installation,
// without --db unless `args` gives it, with no DATABASE_URL from outside.
ProcessResult Check(const TaskengineInstall& te, std::vector<std::string> args = {},
                    std::vector<std::string> env = {}) {
  std::vector<std::string> argv = {TASKENGINE_BIN, "--config", te.config_path(), "config:check"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.push_back("DATABASE_URL=");
  return RunProcess(argv, "", kCliTimeout, ChildEnvironment(env), te.dir().path().string());
}

// Expects exit 1 with "taskengine: <config>:<line>:" and every one of `parts` on stderr.
void ExpectRefused(const TaskengineInstall& te, const ProcessResult& r, int line,
                   std::initializer_list<const char*> parts) {
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err,
              HasSubstr("taskengine: " + te.config_path() + ":" + std::to_string(line) + ":"))
      << r.err;
  for (const char* p : parts) EXPECT_THAT(r.err, HasSubstr(p));
  EXPECT_EQ(r.out, "");
}

TEST(ConfigCheckTest, AGoodFilePrintsTheSummaryAndCreatesNoDatabase) {
  TaskengineInstall te(kGood);
  // The summary is of the configuration in force: the file's port 8181 is
  // overridden from the environment.
  const std::vector<std::string> env = {"TASKENGINE_HTTP_PORT=9191"};
  ProcessResult r = Check(te, {}, env);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("config " + te.config_path() + ": ok"));
  EXPECT_THAT(r.out, HasSubstr("database: sqlite ./data/taskengine.db (sync full); directory "
                               "./data does not exist; migrate or serve creates it"));
  EXPECT_THAT(r.out, HasSubstr("listen: host 127.0.0.1, port 9191"));
  EXPECT_THAT(r.out, HasSubstr("auth: on; metrics_open: true"));
  EXPECT_THAT(r.out, HasSubstr("queues: default (priority 0, concurrency all), reports (priority "
                               "5, concurrency 2)"));
  EXPECT_THAT(r.out, HasSubstr("handlers used: command, http"));
  EXPECT_THAT(r.out, HasSubstr("command profiles: report"));
  EXPECT_THAT(r.out, HasSubstr("http targets: hook"));
  EXPECT_THAT(r.out, HasSubstr("jobs: 3"));
  EXPECT_THAT(r.out, HasSubstr("nightly-report  command  0 3 * * * (Europe/Paris)  reports"));

  ProcessResult j = Check(te, {"--json"}, env);
  ASSERT_EQ(j.exit_code, 0) << j.Describe();
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["config"], te.config_path());
  EXPECT_EQ(doc["backend"], "sqlite");
  EXPECT_EQ(doc["database"]["path"], "./data/taskengine.db");
  EXPECT_EQ(doc["database"]["directory_exists"], false);
  EXPECT_EQ(doc["database"]["file_exists"], false);
  EXPECT_EQ(doc["listen"], json({{"host", "127.0.0.1"}, {"port", 9191}}));
  EXPECT_EQ(doc["auth"], true);
  EXPECT_EQ(doc["metrics_open"], true);
  EXPECT_EQ(doc["handlers"]["used"], json({"command", "http"}));
  EXPECT_EQ(doc["queues"].size(), 2u);
  EXPECT_EQ(doc["job_count"], 3);
  ASSERT_EQ(doc["jobs"].size(), 3u);
  EXPECT_EQ(doc["jobs"][1], json({{"name", "nightly-report"},
                                  {"handler", "command"},
                                  {"schedule", "0 3 * * *"},
                                  {"timezone", "Europe/Paris"},
                                  {"queue", "reports"},
                                  {"scope", "global"},
                                  {"enabled", true}}));
  EXPECT_EQ(doc["jobs"][0]["schedule"], nullptr);

  // Neither check created the database or its directory.
  EXPECT_FALSE(std::filesystem::exists(te.dir().File("data")));

  // With --db the file named is the one reported; an existing one is said to exist.
  std::filesystem::create_directories(te.dir().File("data"));
  ProcessResult with_db = Check(te, {"--db", te.db_path()});
  ASSERT_EQ(with_db.exit_code, 0) << with_db.Describe();
  EXPECT_THAT(with_db.out, HasSubstr("sqlite " + te.db_path() + " (sync full); directory " +
                                     te.dir().File("data") + " exists; the file does not exist"));
  EXPECT_FALSE(std::filesystem::exists(te.db_path()));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ProcessResult migrated = Check(te, {"--db", te.db_path()});
  EXPECT_THAT(migrated.out, HasSubstr("(sync full); the file exists")) << migrated.Describe();
}

TEST(ConfigCheckTest, ABadCronExpressionNamesTheLineOfTheSchedule) {
  const std::string toml = Job("timeout_ms = 1000\nschedule = \"61 * * * *\"\n");
  TaskengineInstall te(toml);
  ExpectRefused(te, Check(te), LineOf(toml, "schedule"),
                {"job[0].schedule", "61 * * * *", "out of range"});
  // A schedule that parses but can never fire is refused at its line too.
  const std::string never =
      Job("\nschedule = \"0 0 30 2 *\"\nconfig = { argv = [\"/bin/true\"] }\n");
  TaskengineInstall te2(never);
  ExpectRefused(te2, Check(te2), LineOf(never, "schedule"), {"job[0].schedule", "never fires"});
  EXPECT_FALSE(std::filesystem::exists(te2.dir().File("data")));
}

TEST(ConfigCheckTest, AnUnknownKeyIsNamedWithItsLine) {
  const std::string toml = "[engine]\nworker_threads = 1\nworkers = 3\n";
  TaskengineInstall te(toml);
  ExpectRefused(te, Check(te), 3, {"unknown key 'engine.workers'"});
  const std::string in_job = Job("config = { argv = [\"/bin/true\"] }\nretries = 3\n");
  TaskengineInstall te2(in_job);
  ExpectRefused(te2, Check(te2), LineOf(in_job, "retries"), {"unknown key 'job[0].retries'"});
}

TEST(ConfigCheckTest, ABadTimeZoneNamesItsLine) {
  const std::string toml =
      Job("schedule = \"0 3 * * *\"\ntimezone = \"Europe/Atlantis\"\n"
          "config = { argv = [\"/bin/true\"] }\n");
  TaskengineInstall te(toml);
  ExpectRefused(te, Check(te), LineOf(toml, "timezone"), {"job[0].timezone", "Europe/Atlantis"});
}

TEST(ConfigCheckTest, AJobNamingAnUndefinedProfileIsRefusedAtItsConfig) {
  const std::string toml = Job("display_name = \"A\"\nconfig = { profile = \"nope\" }\n");
  TaskengineInstall te(toml);
  ExpectRefused(te, Check(te), LineOf(toml, "config"),
                {"job[0].config", "'nope'", "[[command_profile]]"});
  // An undefined http target and an unknown handler alike.
  const std::string target = Job("config = { target = \"nope\" }\n", "http");
  TaskengineInstall te2(target);
  ExpectRefused(te2, Check(te2), LineOf(target, "config"), {"job[0].config", "[[http_target]]"});
  const std::string handler = Job("", "smtp");
  TaskengineInstall te3(handler);
  ExpectRefused(te3, Check(te3), LineOf(handler, "handler"), {"job[0].handler", "'smtp'"});
  // A profile that could not run is named at its table.
  const std::string profile = "[[command_profile]]\nname = \"r\"\nargv = [\"relative\"]\n";
  TaskengineInstall te4(profile);
  ExpectRefused(te4, Check(te4), 1, {"command_profile[0]", "absolute path"});
  // serve and migrate refuse it with the same location, before any database exists.
  ProcessResult migrate = te.Run({"migrate"});
  EXPECT_EQ(migrate.exit_code, 1) << migrate.Describe();
  EXPECT_THAT(migrate.err,
              HasSubstr(te.config_path() + ":" + std::to_string(LineOf(toml, "config")) + ":"));
  EXPECT_FALSE(std::filesystem::exists(te.db_path()));
}

TEST(ConfigCheckTest, ABadDatabaseUrlIsRefusedWithoutItsPassword) {
  const std::string toml = "[database]\nurl = \"postgres://te:s3cret@db.internal:99999/jobs\"\n";
  TaskengineInstall te(toml);
  ProcessResult r = Check(te);
  ExpectRefused(te, r, 2, {"database.url", "port 99999"});
  EXPECT_THAT(r.err, Not(HasSubstr("s3cret")));
  // From the environment: named by its variable.
  TaskengineInstall plain("");
  ProcessResult env = Check(plain, {}, {"TASKENGINE_DATABASE_URL=postgres://te@db:x/jobs"});
  EXPECT_EQ(env.exit_code, 1) << env.Describe();
  EXPECT_THAT(env.err, HasSubstr("TASKENGINE_DATABASE_URL"));
  EXPECT_THAT(env.err, HasSubstr("port 'x'"));
}

TEST(ConfigCheckTest, AGoodDatabaseUrlIsNotConnectedTo) {
  // Nothing listens on port 1: a connection attempt would fail.
  const std::string toml =
      "[database]\nurl = \"postgres://te:s3cret@127.0.0.1:1/jobs?connect_timeout=2\"\n"
      "schema = \"ops\"\n";
  TaskengineInstall te(toml);
  ProcessResult r = Check(te);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("database: postgresql postgres://te:***@127.0.0.1:1/jobs"));
  EXPECT_THAT(r.out, HasSubstr("(schema ops); not connected"));
  EXPECT_THAT(r.out + r.err, Not(HasSubstr("s3cret")));
  ProcessResult j = Check(te, {"--json"});
  ASSERT_EQ(j.exit_code, 0) << j.Describe();
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["backend"], "postgresql");
  EXPECT_EQ(doc["database"]["url"], "postgres://te:***@127.0.0.1:1/jobs?connect_timeout=2");
  EXPECT_EQ(doc["database"]["schema"], "ops");
  EXPECT_THAT(j.out, Not(HasSubstr("s3cret")));
}

TEST(ConfigCheckTest, ADatabaseDirectoryThatCannotBeCreatedIsRefused) {
  const std::string toml = "[database]\npath = \"blocker/sub/te.db\"\n";
  TaskengineInstall te(toml);
  std::ofstream(te.dir().File("blocker")) << "a file, not a directory";
  ExpectRefused(te, Check(te), 2, {"database.path", "blocker is not a directory"});
  // The path from --db is named as such.
  ProcessResult r = Check(te, {"--db", te.dir().File("blocker/te.db")});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("taskengine: --db: the database directory"));
}

TEST(ConfigCheckTest, AuthOffOnANonLoopbackHostIsRefusedAsServeWould) {
  const std::string toml = "[http]\nhost = \"0.0.0.0\"\nauth = false\n";
  TaskengineInstall te(toml);
  ExpectRefused(te, Check(te), 3, {"http.auth", "loopback"});
}

TEST(ConfigCheckTest, AMissingConfigFileIsAnError) {
  TaskengineInstall te("");
  ProcessResult r =
      RunProcess({TASKENGINE_BIN, "--config", te.dir().File("nope.toml"), "config:check"}, "",
                 kCliTimeout, ChildEnvironment({"DATABASE_URL="}), te.dir().path().string());
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("cannot read config file"));
}

}  // namespace
}  // namespace taskengine::testing
