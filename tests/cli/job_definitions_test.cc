// Job definitions as runtime data (product.md §1, issue 14 bug 1 and item 6),
// through the real `taskengine` binary and its HTTP API:
//   - a runtime edit survives restarts: seeding never overwrites it, the log
//     names where the database and the file differ, `migrate --sync-jobs
//     --dry-run` shows the differences field by field and `migrate
//     --sync-jobs` applies the file, audited;
//   - a job nobody edited follows the file;
//   - job:create / job:edit / job:enable / job:disable / job:delete and
//     POST / PATCH / DELETE /api/v1/jobs, .../enable, .../disable: one set of
//     rules (the load-time check), each change audited with before and after;
//   - what runs on the server comes from its configuration: an API-created
//     job names a [[command_profile]] or [[http_target]].
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "cli_harness.h"
#include "storage/sqlite/sqlite_store.h"
#include "taskengine/clock.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::TestClient;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kProfiles = R"(
[engine]
worker_threads = 1
poll_interval_ms = 50
sweep_interval_ms = 200
shutdown_grace_ms = 5000

[[queue]]
name = "default"

# Only remote workers lease from it (remote jobs).
[[queue]]
name = "apps"
pool = false

[[command_profile]]
name = "echo"
argv = ["/bin/sh", "-c", "cat > /dev/null; echo '{\"result\": \"profiled\"}'"]

[[http_target]]
name = "hook"
url = "https://hooks.example.com/in"
allow_hosts = ["hooks.example.com"]
)";

const std::string kJobs = R"(
[[job]]
name = "hello"
handler = "command"
config = { argv = ["/bin/sh", "-c", "cat > /dev/null; echo hi"] }

[[job]]
name = "other"
handler = "command"
max_attempts = 4
config = { profile = "echo" }
)";

class JobDefinitionsTest : public ::testing::Test {
 protected:
  JobDefinitionsTest() : te_(kProfiles + kJobs) {}

  void SetUp() override {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  void TearDown() override { StopServe(); }

  // Starts `serve` on a fresh log (the port is read from it); earlier logs
  // are kept in ServeLogs().
  void StartServe() {
    past_logs_ += ReadFile(te_.serve_log());
    std::ofstream(te_.serve_log(), std::ios::trunc).flush();
    port_ = te_.StartServeOnEphemeralPort(&serve_);
    ASSERT_NE(port_, 0);
    client_ = std::make_unique<TestClient>(port_);
  }

  void StopServe() {
    if (!serve_.running()) return;
    serve_.Signal(SIGTERM);
    std::optional<int> status = serve_.Wait(std::chrono::seconds(20));
    EXPECT_TRUE(status.has_value()) << "serve did not stop";
  }

  std::string Token(const std::string& name, const std::string& scopes,
                    const std::string& tenant = "") {
    std::vector<std::string> args = {"token:create", "--name=" + name, "--scopes=" + scopes};
    if (!tenant.empty()) args.push_back("--tenant=" + tenant);
    json t = te_.RunJson(args);
    return t.is_object() ? t.value("secret", "") : "";
  }

  // The job:list --json entry of `name` (null when absent).
  json ListedJob(const std::string& name) {
    json list = te_.RunJson({"job:list", "--show-secrets"});
    for (const json& j : list.value("items", json::array())) {
      if (j.value("name", "") == name) return j;
    }
    return nullptr;
  }

  // The audit records of job `name`, newest first.
  std::vector<json> JobAudit(const std::string& name) {
    json audit = te_.RunJson({"audit:list"});
    std::vector<json> out;
    for (const json& r : audit.value("items", json::array())) {
      if (r.value("target", "") == "job:" + name) out.push_back(r);
    }
    return out;
  }

  std::string ServeLogs() const { return past_logs_ + ReadFile(te_.serve_log()); }

  void RewriteConfig(const std::string& toml) { std::ofstream(te_.config_path()) << toml; }

  TaskengineInstall te_;
  ChildProcess serve_;
  int port_ = 0;
  std::unique_ptr<TestClient> client_;
  std::string past_logs_;
};

// Bug 1: a PATCH over HTTP stays in force across restarts of `serve` and
// `migrate`; the file is applied only on purpose, with --sync-jobs.
TEST_F(JobDefinitionsTest, RuntimeEditSurvivesRestartUntilSyncJobsAppliesTheFile) {
  const std::string admin = Token("root", "admin");
  StartServe();
  ClientResponse patched =
      client_->Patch("/api/v1/jobs/hello", admin,
                     {{"schedule", "*/5 * * * *"}, {"max_attempts", 9}, {"reason", "ops"}});
  ASSERT_EQ(patched.status, 200) << patched.body;
  StopServe();

  StartServe();  // a restart seeds the file again
  ClientResponse after = client_->Get("/api/v1/jobs/hello", admin);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.json()["schedule"], "*/5 * * * *");
  EXPECT_EQ(after.json()["max_attempts"], 9);
  StopServe();
  EXPECT_THAT(ServeLogs(), HasSubstr("differs from the config file"));
  EXPECT_THAT(ServeLogs(), HasSubstr("job=hello"));

  ProcessResult migrate = te_.Run({"migrate"});
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  EXPECT_THAT(migrate.err, HasSubstr("differs from the config file"));
  EXPECT_EQ(ListedJob("hello")["schedule"], "*/5 * * * *");

  ProcessResult dry = te_.Run({"migrate", "--sync-jobs", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.Describe();
  EXPECT_THAT(dry.out, HasSubstr("job hello: differs"));
  EXPECT_THAT(dry.out, HasSubstr("schedule: \"*/5 * * * *\" -> null"));
  EXPECT_THAT(dry.out, HasSubstr("max_attempts: 9 -> 5"));
  EXPECT_THAT(dry.out, HasSubstr("job other: in sync"));
  EXPECT_THAT(dry.out, HasSubstr("nothing changed"));
  EXPECT_EQ(ListedJob("hello")["schedule"], "*/5 * * * *");
  ASSERT_EQ(JobAudit("hello").size(), 1u);  // the PATCH only

  ProcessResult sync = te_.Run({"migrate", "--sync-jobs", "--as", "deployer"});
  ASSERT_EQ(sync.exit_code, 0) << sync.Describe();
  EXPECT_THAT(sync.out, HasSubstr("job hello: differs (database -> file), updated"));
  json hello = ListedJob("hello");
  EXPECT_TRUE(hello["schedule"].is_null()) << hello.dump();
  EXPECT_EQ(hello["max_attempts"], 5);
  std::vector<json> audit = JobAudit("hello");
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0]["action"], "job.sync");
  EXPECT_EQ(audit[0]["actor"], "cli:deployer");
  EXPECT_EQ(audit[0]["before"], json({{"schedule", "*/5 * * * *"}, {"max_attempts", 9}}));
  EXPECT_EQ(audit[0]["after"], json({{"schedule", nullptr}, {"max_attempts", 5}}));
  EXPECT_EQ(audit[1]["action"], "job.update");

  // In sync now: nothing left to apply, and a plain restart changes nothing.
  ProcessResult again = te_.Run({"migrate", "--sync-jobs", "--dry-run"});
  EXPECT_THAT(again.out, HasSubstr("job hello: in sync"));
  EXPECT_THAT(again.out, HasSubstr("0 differ, 0 missing"));
}

// A seeded job nobody edited follows the file; an edited one is kept.
TEST_F(JobDefinitionsTest, UneditedJobFollowsTheFileEditedOneIsKept) {
  ASSERT_EQ(
      te_.Run({"job:edit", "hello", "--set", "max_attempts=2", "--reason", "flaky"}).exit_code, 0);
  std::string changed = kJobs;
  changed.replace(changed.find("max_attempts = 4"), 16, "max_attempts = 7");
  changed.replace(changed.find("echo hi"), 7, "echo hey");
  RewriteConfig(kProfiles + changed);
  ProcessResult migrate = te_.Run({"migrate"});
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  EXPECT_EQ(ListedJob("other")["max_attempts"], 7);  // followed the file
  json hello = ListedJob("hello");                   // kept: edited at runtime
  EXPECT_EQ(hello["max_attempts"], 2);
  EXPECT_THAT(hello["config"].dump(), HasSubstr("echo hi"));
  EXPECT_THAT(migrate.err, HasSubstr("hello"));
  EXPECT_THAT(migrate.err, HasSubstr("max_attempts, config"));
  std::vector<json> other = JobAudit("other");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0]["action"], "job.seed");
  EXPECT_EQ(other[0]["after"], json({{"max_attempts", 7}}));
}

// Item 6 must-show: job:disable stops the scheduler, job:enable resumes it.
TEST_F(JobDefinitionsTest, DisableStopsTheSchedulerAndEnableResumesIt) {
  {
    // Created 5 minutes ago: every minute since is due.
    FakeClock clock(SystemClock::Get()->NowMillis() - 5 * 60'000);
    SqliteStoreOptions o;
    o.path = te_.db_path();
    o.clock = &clock;
    Result<std::unique_ptr<Store>> store = OpenSqliteStore(o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    JobDefinition tick;
    tick.name = JobName("tick");
    tick.handler = "command";
    tick.schedule = "* * * * *";
    tick.config_json = R"({"profile":"echo"})";
    ASSERT_OK((*store)->UpsertJob(tick));
  }
  auto scheduled = [&] {
    json list = te_.RunJson({"execution:list", "--job", "tick"});
    return list.value("items", json::array()).size();
  };

  ProcessResult disable = te_.Run({"job:disable", "tick", "--reason", "maintenance"});
  ASSERT_EQ(disable.exit_code, 0) << disable.Describe();
  EXPECT_THAT(disable.out, HasSubstr("job tick is now disabled"));
  EXPECT_EQ(ListedJob("tick")["enabled"], false);
  ProcessResult table = te_.Run({"job:list"});
  EXPECT_THAT(table.out, ::testing::ContainsRegex("tick +command .* no "));
  std::vector<json> audit = JobAudit("tick");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0]["action"], "job.disable");
  EXPECT_EQ(audit[0]["reason"], "maintenance");
  EXPECT_EQ(audit[0]["before"], json({{"enabled", true}}));
  EXPECT_EQ(audit[0]["after"], json({{"enabled", false}}));
  // A disable without a reason is refused.
  EXPECT_EQ(te_.Run({"job:disable", "tick"}).exit_code, 1);

  ASSERT_EQ(te_.Run({"scheduler:run"}).exit_code, 0);
  EXPECT_EQ(scheduled(), 0u) << "a disabled job fired";
  ProcessResult dispatch = te_.Run({"job:dispatch", "tick"});
  EXPECT_EQ(dispatch.exit_code, 1) << dispatch.Describe();
  EXPECT_THAT(dispatch.err, HasSubstr("disabled"));

  ProcessResult enable = te_.Run({"job:enable", "tick", "--reason", "done"});
  ASSERT_EQ(enable.exit_code, 0) << enable.Describe();
  EXPECT_EQ(ListedJob("tick")["enabled"], true);
  EXPECT_EQ(JobAudit("tick")[0]["action"], "job.enable");
  // The next minute boundary (at most 61 s away) fires it again.
  const Millis now = SystemClock::Get()->NowMillis();
  const Millis boundary = (now / 60'000 + 1) * 60'000;
  std::this_thread::sleep_for(std::chrono::milliseconds(boundary - now + 1'000));
  ASSERT_EQ(te_.Run({"scheduler:run"}).exit_code, 0);
  EXPECT_EQ(scheduled(), 1u);
}

// Item 6: job:create with bad input exits 1 naming the field, and creates
// nothing; good input runs what its profile says.
TEST_F(JobDefinitionsTest, CreateChecksLikeTheConfigFileAndRunsTheProfile) {
  struct Bad {
    std::vector<std::string> args;
    const char* names;
  };
  const Bad bad[] = {
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"profile":"echo"})",
        "--schedule", "61 * * * *"},
       "schedule"},
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"profile":"echo"})",
        "--schedule", "0 3 * * *", "--timezone", "Mars/Olympus"},
       "timezone"},
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"profile":"nope"})"},
       "profile"},
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"argv":["/bin/true"]})"},
       "config.argv"},
      {{"job:create", "nightly", "--handler", "python", "--config", "{}"}, "handler"},
      {{"job:create", "Bad Name", "--handler", "command", "--config", R"({"profile":"echo"})"},
       "name"},
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"profile":"echo"})",
        "--queue", "nowhere"},
       "queue"},
      {{"job:create", "nightly", "--handler", "command", "--config", R"({"profile":"echo"})",
        "--set", "max_attempts=0"},
       "max_attempts"},
      {{"job:create", "hello", "--handler", "command", "--config", R"({"profile":"echo"})"},
       "already exists"},
  };
  for (const Bad& b : bad) {
    ProcessResult r = te_.Run(b.args);
    EXPECT_NE(r.exit_code, 0) << r.Describe();
    if (std::string(b.names) != "already exists") EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_THAT(r.err, HasSubstr(b.names)) << r.Describe();
  }
  EXPECT_TRUE(ListedJob("nightly").is_null());
  for (const json& r : te_.RunJson({"audit:list"}).value("items", json::array())) {
    EXPECT_NE(r.value("action", ""), "job.create") << r.dump();
  }

  ProcessResult ok =
      te_.Run({"job:create", "nightly", "--handler", "command", "--config",
               R"({"profile":"echo","timeout_ms":20000})", "--schedule", "0 3 * * *", "--timezone",
               "Europe/Paris", "--set", "max_attempts=3", "--reason", "new report"});
  ASSERT_EQ(ok.exit_code, 0) << ok.Describe();
  json nightly = ListedJob("nightly");
  EXPECT_EQ(nightly["schedule"], "0 3 * * *");
  EXPECT_EQ(nightly["timezone"], "Europe/Paris");
  EXPECT_EQ(nightly["max_attempts"], 3);
  std::vector<json> audit = JobAudit("nightly");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0]["action"], "job.create");
  EXPECT_EQ(audit[0]["after"]["schedule"], "0 3 * * *");

  // It runs what the profile says.
  StartServe();
  ASSERT_EQ(te_.Run({"job:dispatch", "nightly"}).exit_code, 0);
  std::string status;
  WaitUntil(std::chrono::seconds(20), [&] {
    json list = te_.RunJson({"execution:list", "--job", "nightly"});
    auto items = list.value("items", json::array());
    status = items.empty() ? "" : items[0].value("status", "");
    return status == "succeeded" || status == "failed" || status == "quarantined";
  });
  EXPECT_EQ(status, "succeeded");

  // Delete: refused while an execution is open, then done.
  ASSERT_EQ(te_.Run({"job:dispatch", "nightly", "--delay", "3600"}).exit_code, 0);
  ProcessResult busy = te_.Run({"job:delete", "nightly"});
  EXPECT_EQ(busy.exit_code, 4) << busy.Describe();
  EXPECT_THAT(busy.err, HasSubstr("1 open execution"));
  EXPECT_FALSE(ListedJob("nightly").is_null());
  json list = te_.RunJson({"execution:list", "--job", "nightly", "--status", "queued"});
  for (const json& e : list.value("items", json::array())) {
    ASSERT_EQ(
        te_.Run({"execution:cancel", std::to_string(e.value("id", 0)), "--reason", "x"}).exit_code,
        0);
  }
  ProcessResult deleted = te_.Run({"job:delete", "nightly", "--reason", "retired"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.Describe();
  EXPECT_TRUE(ListedJob("nightly").is_null());
  EXPECT_EQ(JobAudit("nightly")[0]["action"], "job.delete");
}

// Item 6 through the API: the routes, their scope and tenant rules, audit
// records with before and after.
TEST_F(JobDefinitionsTest, ApiCreatesEditsEnablesDisablesAndDeletes) {
  const std::string admin = Token("root", "admin");
  const std::string reader = Token("reader", "read");
  const std::string tenant_admin = Token("ta", "admin", "a");
  StartServe();
  const json body = {{"name", "digest"},
                     {"handler", "command"},
                     {"scope", "per_tenant"},
                     {"schedule", "0 6 * * *"},
                     {"config", {{"profile", "echo"}}},
                     {"reason", "new"}};
  EXPECT_EQ(client_->Post("/api/v1/jobs", reader, body).status, 403);
  EXPECT_EQ(client_->Post("/api/v1/jobs", tenant_admin, body).status, 403);
  EXPECT_EQ(client_->Post("/api/v1/jobs", "", body).status, 401);

  json bad_cron = body;
  bad_cron["schedule"] = "0 25 * * *";
  ClientResponse r = client_->Post("/api/v1/jobs", admin, bad_cron);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["details"].value("field", ""), "schedule") << r.body;
  json argv = body;
  argv["config"] = {{"argv", {"/bin/sh", "-c", "id"}}};
  r = client_->Post("/api/v1/jobs", admin, argv);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["details"].value("field", ""), "config.argv") << r.body;
  json unknown = body;
  unknown["config"] = {{"profile", "nope"}};
  r = client_->Post("/api/v1/jobs", admin, unknown);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("nope"));
  json url = {{"name", "hook2"}, {"handler", "http"}, {"config", {{"url", "http://10.0.0.1/"}}}};
  r = client_->Post("/api/v1/jobs", admin, url);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(client_->Get("/api/v1/jobs/digest", admin).status, 404);

  r = client_->Post("/api/v1/jobs", admin, body);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["scope"], "per_tenant");
  EXPECT_EQ(client_->Post("/api/v1/jobs", admin, body).status, 409);
  json target = {{"name", "hook2"}, {"handler", "http"}, {"config", {{"target", "hook"}}}};
  EXPECT_EQ(client_->Post("/api/v1/jobs", admin, target).status, 201);

  // A remote job (a worker SDK knows it by name): no config, and a queue
  // that the server's pool leaves alone.
  json remote = {{"name", "sms"}, {"handler", "remote"}, {"reason", "sdk"}};
  r = client_->Post("/api/v1/jobs", admin, remote);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["details"].value("field", ""), "queue") << r.body;
  EXPECT_THAT(r.body, HasSubstr("pool = false"));
  remote["queue"] = "apps";
  remote["config"] = {{"argv", {"/bin/true"}}};
  r = client_->Post("/api/v1/jobs", admin, remote);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["details"].value("field", ""), "config") << r.body;
  remote.erase("config");
  r = client_->Post("/api/v1/jobs", admin, remote);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["handler"], "remote");
  EXPECT_EQ(r.json()["queue"], "apps");

  // PATCH: editable fields, scope fixed, read-only and tenant-bound refused.
  const json edit = {{"timezone", "Asia/Tokyo"}, {"catch_up", "none"}, {"reason", "tokyo"}};
  EXPECT_EQ(client_->Patch("/api/v1/jobs/digest", reader, edit).status, 403);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/digest", tenant_admin, edit).status, 403);
  r = client_->Patch("/api/v1/jobs/digest", admin, {{"scope", "global"}});
  EXPECT_EQ(r.status, 400) << r.body;
  r = client_->Patch("/api/v1/jobs/digest", admin, {{"timezone", "Nowhere/City"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["details"].value("field", ""), "timezone") << r.body;
  r = client_->Patch("/api/v1/jobs/digest", admin, edit);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["timezone"], "Asia/Tokyo");
  EXPECT_EQ(r.json()["catch_up"], "none");

  // Disable needs a reason; enable does not.
  EXPECT_EQ(client_->Post("/api/v1/jobs/digest/disable", reader, json::object()).status, 403);
  r = client_->Post("/api/v1/jobs/digest/disable", admin, json::object());
  EXPECT_EQ(r.status, 400) << r.body;
  r = client_->Post("/api/v1/jobs/digest/disable", admin, {{"reason", "maintenance"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["enabled"], false);
  r = client_->Post("/api/v1/jobs/digest/dispatch", admin, {{"tenant", "a"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("disabled"));
  r = client_->Post("/api/v1/jobs/digest/enable", admin, json::object());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["enabled"], true);

  // DELETE: 409 naming the open executions, then 200.
  ASSERT_EQ(te_.Run({"job:dispatch", "digest", "--tenant", "a", "--delay", "3600"}).exit_code, 0);
  EXPECT_EQ(client_->Request("DELETE", "/api/v1/jobs/digest", reader).status, 403);
  r = client_->Request("DELETE", "/api/v1/jobs/digest", admin);
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_THAT(r.body, HasSubstr("1 open execution"));
  EXPECT_EQ(client_->Get("/api/v1/jobs/digest", admin).status, 200);
  json queued = te_.RunJson({"execution:list", "--job", "digest"});
  for (const json& e : queued.value("items", json::array())) {
    ASSERT_EQ(
        te_.Run({"execution:cancel", std::to_string(e.value("id", 0)), "--reason", "x"}).exit_code,
        0);
  }
  r = client_->Request("DELETE", "/api/v1/jobs/digest", admin, R"({"reason":"retired"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(client_->Get("/api/v1/jobs/digest", admin).status, 404);

  std::vector<json> audit = JobAudit("digest");
  ASSERT_EQ(audit.size(), 5u);
  EXPECT_EQ(audit[0]["action"], "job.delete");
  EXPECT_EQ(audit[0]["reason"], "retired");
  EXPECT_EQ(audit[0]["before"]["schedule"], "0 6 * * *");
  EXPECT_EQ(audit[audit.size() - 1]["action"], "job.create");
  EXPECT_EQ(audit[audit.size() - 1]["before"], json::object());
  EXPECT_EQ(audit[audit.size() - 2]["action"], "job.update");
  EXPECT_EQ(audit[audit.size() - 2]["before"],
            json({{"timezone", "UTC"}, {"catch_up", "coalesce"}}));
  EXPECT_EQ(audit[audit.size() - 2]["after"],
            json({{"timezone", "Asia/Tokyo"}, {"catch_up", "none"}}));
  EXPECT_EQ(audit[audit.size() - 2]["reason"], "tokyo");
  EXPECT_EQ(audit[audit.size() - 3]["action"], "job.disable");
  EXPECT_EQ(audit[audit.size() - 4]["action"], "job.enable");
}

}  // namespace
}  // namespace taskengine::testing
