// Regression tests for the findings of the outside probe of the live API
// (issue 13), against the real `taskengine serve` and the real CLI, with
// tokens made by `token:create`. Each case is named after its finding:
//   F2  what runs on the server comes from its configuration only: the API
//       cannot set argv/cwd/env of `command` jobs nor the target, headers and
//       SSRF allowances of `http` jobs, and every config edit is checked as
//       at load time;
//   F3  lanes belong to a tenant (O1): another tenant's blocked or delayed
//       lane head never stalls a lane of the same name;
//   F4  secrets in job configs (headers, env) are masked for everyone but the
//       global admin, in the API, the CLI and the audit log;
//   F9  control characters (C0, C1, DEL) never reach the operator's terminal
//       from the CLI's text output; --json stays exact JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>

#include "cli_harness.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::TestClient;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kEnvSecret[] = "env-secret-5f1c";
constexpr char kHeaderSecret[] = "Bearer header-secret-9a7e";

// "lanes": fails permanently (-> quarantined at once) when its payload has
// "fail", succeeds otherwise.
const std::string kConfig = std::string(R"(
[engine]
worker_threads = 2
poll_interval_ms = 50
sweep_interval_ms = 200
shutdown_grace_ms = 5000

[[job]]
name = "hello"
handler = "command"
scope = "per_tenant"
config = { argv = ["/bin/sh", "-c", "cat > /dev/null; echo hi"], env = { API_TOKEN = ")") +
                            kEnvSecret + R"(" }, timeout_ms = 10000 }

[[job]]
name = "hook"
handler = "http"
scope = "per_tenant"
config = { url = "https://hooks.example.com/in", allow_hosts = ["hooks.example.com"], headers = { Authorization = ")" +
                            kHeaderSecret + R"(" } }

[[job]]
name = "lanes"
handler = "command"
scope = "per_tenant"
max_permanent_attempts = 1
config = { argv = ["/bin/sh", "-c", "p=$(cat); case \"$p\" in *fail*) exit 65;; esac; echo ok"] }
)";

bool HasControlBytes(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return true;
    // U+0080..U+009F in UTF-8 (C1), and raw bytes 0x80..0x9F outside a sequence.
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      return true;
    }
  }
  return false;
}

class SecurityProbeTest : public ::testing::Test {
 protected:
  SecurityProbeTest() : te_(kConfig) {}

  void SetUp() override {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    admin_ = Token("root", "admin", "");
    reader_a_ = Token("reader-a", "read", "a");
    ops_a_ = Token("ops-a", "read,dispatch,operate", "a");
    ops_b_ = Token("ops-b", "read,dispatch,operate", "b");
    ASSERT_FALSE(HasFailure());
    port_ = te_.StartServeOnEphemeralPort(&serve_);
    ASSERT_NE(port_, 0);
    client_ = std::make_unique<TestClient>(port_);
  }

  void TearDown() override {
    if (serve_.pid() <= 0) return;
    serve_.Signal(SIGTERM);
    std::optional<int> status = serve_.Wait(std::chrono::seconds(20));
    EXPECT_TRUE(status.has_value()) << "serve did not stop";
  }

  std::string Token(const std::string& name, const std::string& scopes, const std::string& tenant) {
    std::vector<std::string> args = {"token:create", "--name=" + name, "--scopes=" + scopes};
    if (!tenant.empty()) args.push_back("--tenant=" + tenant);
    json t = te_.RunJson(args);
    EXPECT_TRUE(t.is_object());
    return t.is_object() ? t.value("secret", "") : "";
  }

  std::int64_t Dispatch(const std::string& job, const json& body, const std::string& token) {
    ClientResponse r = client_->Post("/api/v1/jobs/" + job + "/dispatch", token, body);
    EXPECT_EQ(r.status, 202) << r.body;
    return r.json().value("id", std::int64_t{0});
  }

  // Polls the execution (as admin) until its status is `status`; returns the last one seen.
  std::string WaitStatus(std::int64_t id, const std::string& status,
                         std::chrono::seconds timeout = std::chrono::seconds(20)) {
    std::string seen;
    WaitUntil(timeout, [&] {
      ClientResponse r = client_->Get("/api/v1/executions/" + std::to_string(id), admin_);
      seen = r.status == 200 ? r.json().value("status", "") : "";
      return seen == status;
    });
    return seen;
  }

  json Job(const std::string& name, const std::string& token) {
    ClientResponse r = client_->Get("/api/v1/jobs/" + name, token);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json();
  }

  TaskengineInstall te_;
  ChildProcess serve_;
  int port_ = 0;
  std::unique_ptr<TestClient> client_;
  std::string admin_, reader_a_, ops_a_, ops_b_;
};

// --- F2 ---------------------------------------------------------------------

TEST_F(SecurityProbeTest, F2_ApiCannotSetWhatRunsOnTheServer) {
  const json hello_before = Job("hello", admin_);
  const json hook_before = Job("hook", admin_);
  const std::string pwned = te_.dir().File("pwned.txt");
  struct Refusal {
    const char* job;
    json config;
    const char* field;
  };
  const Refusal refusals[] = {
      {"hello", {{"argv", {"/bin/sh", "-c", "id > '" + pwned + "'"}}}, "config.argv"},
      {"hello", {{"cwd", "/"}}, "config.cwd"},
      {"hello", {{"env", {{"LD_PRELOAD", "/tmp/x.so"}}}}, "config.env"},
      {"hook", {{"url", "https://evil.example/x"}}, "config.url"},
      {"hook",
       {{"url", "https://evil.example/x"}, {"allow_hosts", {"evil.example"}}},
       "config.allow_hosts"},
      {"hook", {{"allow_private", {"127.0.0.1"}}}, "config.allow_private"},
      {"hook", {{"allow_http", true}}, "config.allow_http"},
      {"hook", {{"allow_hosts", {"hooks.example.com", "169.254.169.254"}}}, "config.allow_hosts"},
      {"hook", {{"headers", {{"Host", "internal.example"}}}}, "config.headers"},
  };
  for (const Refusal& r : refusals) {
    ClientResponse p = client_->Patch(std::string("/api/v1/jobs/") + r.job, admin_,
                                      {{"config", r.config}, {"reason", "probe"}});
    EXPECT_EQ(p.status, 400) << r.job << " " << r.config.dump() << ": " << p.body;
    EXPECT_EQ(p.error_code(), "invalid_argument");
    EXPECT_EQ(p.json()["error"]["details"].value("field", ""), r.field) << p.body;
    EXPECT_THAT(p.json()["error"].value("message", ""), HasSubstr(r.field)) << p.body;
  }
  // Configs that load-time checks refuse are refused too (they were stored before).
  const std::pair<const char*, json> invalid[] = {
      {"hello", {{"timeout_ms", -5}}},
      {"hello", {{"bogus", 1}}},
      {"hook", {{"method", "DELETE"}}},
      {"hook", {{"max_response_bytes", "lots"}}},
  };
  for (const auto& [job, config] : invalid) {
    ClientResponse p =
        client_->Patch(std::string("/api/v1/jobs/") + job, admin_, {{"config", config}});
    EXPECT_EQ(p.status, 400) << job << " " << config.dump() << ": " << p.body;
  }
  // Nothing changed, nothing was audited.
  EXPECT_EQ(Job("hello", admin_)["config"], hello_before["config"]);
  EXPECT_EQ(Job("hook", admin_)["config"], hook_before["config"]);
  json audit = te_.RunJson({"audit:list"});
  for (const auto& r : audit.value("items", json::array())) {
    EXPECT_NE(r.value("action", ""), "job.update") << r.dump();
  }

  // The editable settings can still be edited, and what runs stays as configured.
  ClientResponse ok = client_->Patch("/api/v1/jobs/hello", admin_,
                                     {{"config", {{"timeout_ms", 20000}}}, {"reason", "slower"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.json()["config"]["timeout_ms"], 20000);
  EXPECT_EQ(ok.json()["config"]["argv"], hello_before["config"]["argv"]);
  EXPECT_EQ(ok.json()["config"]["env"], hello_before["config"]["env"]);
  // Repeating an owned key unchanged is fine (a GET, edit, PATCH round trip).
  json round_trip = ok.json()["config"];
  round_trip["timeout_ms"] = 30000;
  ClientResponse again = client_->Patch("/api/v1/jobs/hello", admin_, {{"config", round_trip}});
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["config"]["timeout_ms"], 30000);
  ClientResponse hook_ok =
      client_->Patch("/api/v1/jobs/hook", admin_, {{"config", {{"method", "PUT"}}}});
  ASSERT_EQ(hook_ok.status, 200) << hook_ok.body;
  EXPECT_EQ(hook_ok.json()["config"]["url"], hook_before["config"]["url"]);
  EXPECT_EQ(hook_ok.json()["config"]["allow_hosts"], hook_before["config"]["allow_hosts"]);

  const std::int64_t id = Dispatch("hello", {{"tenant", "a"}}, ops_a_);
  EXPECT_EQ(WaitStatus(id, "succeeded"), "succeeded");
  EXPECT_FALSE(std::filesystem::exists(pwned));
}

// --- F3 ---------------------------------------------------------------------

TEST_F(SecurityProbeTest, F3_O1_LanesArePerTenant) {
  // Tenant a: a failed head on lane "orders", a far-delayed head on lane "slow".
  const std::int64_t a_failed =
      Dispatch("lanes", {{"tenant", "a"}, {"lane", "orders"}, {"payload", {{"fail", 1}}}}, ops_a_);
  ASSERT_EQ(WaitStatus(a_failed, "quarantined"), "quarantined");
  const std::int64_t a_next = Dispatch("lanes", {{"tenant", "a"}, {"lane", "orders"}}, ops_a_);
  const std::int64_t a_delayed =
      Dispatch("lanes", {{"tenant", "a"}, {"lane", "slow"}, {"delay_ms", 3'600'000}}, ops_a_);

  // Tenant b's lanes of the same names run.
  const std::int64_t b_orders = Dispatch("lanes", {{"tenant", "b"}, {"lane", "orders"}}, ops_b_);
  const std::int64_t b_slow = Dispatch("lanes", {{"tenant", "b"}, {"lane", "slow"}}, ops_b_);
  EXPECT_EQ(WaitStatus(b_orders, "succeeded"), "succeeded");
  EXPECT_EQ(WaitStatus(b_slow, "succeeded"), "succeeded");
  // Tenant a's own lane stays blocked behind its head (O1).
  ClientResponse next = client_->Get("/api/v1/executions/" + std::to_string(a_next), ops_a_);
  EXPECT_EQ(next.json().value("status", ""), "queued") << next.body;

  // Each tenant sees its own lanes, and only those.
  ClientResponse b_lanes = client_->Get("/api/v1/lanes", ops_b_);
  ASSERT_EQ(b_lanes.status, 200) << b_lanes.body;
  EXPECT_TRUE(b_lanes.json()["items"].empty()) << b_lanes.body;
  EXPECT_THAT(b_lanes.body, Not(HasSubstr(std::to_string(a_failed))));
  ClientResponse a_lanes = client_->Get("/api/v1/lanes", ops_a_);
  ASSERT_EQ(a_lanes.status, 200) << a_lanes.body;
  ASSERT_EQ(a_lanes.json()["items"].size(), 2u) << a_lanes.body;
  const json orders = a_lanes.json()["items"][0];  // blocked first
  EXPECT_EQ(orders["tenant"], "a");
  EXPECT_EQ(orders["lane"], "orders");
  EXPECT_EQ(orders["head"], a_failed);
  EXPECT_EQ(orders["blocked"], true);
  EXPECT_EQ(a_lanes.json()["items"][1]["head"], a_delayed);
  EXPECT_EQ(client_->Get("/api/v1/lanes?tenant=b", ops_a_).status, 403);
  ClientResponse global = client_->Get("/api/v1/lanes", admin_);
  ASSERT_EQ(global.status, 200) << global.body;
  EXPECT_EQ(global.json()["items"].size(), 2u) << global.body;

  // The CLI names the tenant of each lane and takes it to pick one.
  json all = te_.RunJson({"lane:status"});
  ASSERT_EQ(all["items"].size(), 2u) << all.dump();
  EXPECT_EQ(all["items"][0]["tenant"], "a");
  json one = te_.RunJson({"lane:status", "orders", "--tenant=b"});
  ASSERT_EQ(one["items"].size(), 1u) << one.dump();
  EXPECT_EQ(one["items"][0]["head"], nullptr) << "b's lane orders is done";
  json blocked = te_.RunJson({"lane:status", "orders", "--tenant=a"});
  EXPECT_EQ(blocked["items"][0]["head"], a_failed);
  ProcessResult text = te_.Run({"lane:status"});
  EXPECT_THAT(text.out, HasSubstr("TENANT"));
}

// --- F4 ---------------------------------------------------------------------

TEST_F(SecurityProbeTest, F4_SecretsInConfigsAreMaskedForAllButTheGlobalAdmin) {
  const std::string redacted = "[redacted]";
  for (const std::string& token : {reader_a_, ops_a_}) {
    json hook = Job("hook", token);
    EXPECT_EQ(hook["config"]["headers"]["Authorization"], redacted) << hook.dump();
    EXPECT_EQ(hook["config"]["url"], "https://hooks.example.com/in");
    json hello = Job("hello", token);
    EXPECT_EQ(hello["config"]["env"]["API_TOKEN"], redacted) << hello.dump();
    EXPECT_EQ(hello["config"]["argv"][0], "/bin/sh");
    ClientResponse list = client_->Get("/api/v1/jobs", token);
    ASSERT_EQ(list.status, 200);
    EXPECT_THAT(list.body, Not(HasSubstr(kEnvSecret)));
    EXPECT_THAT(list.body, Not(HasSubstr("header-secret")));
  }
  // The global admin sees them (it owns the configuration anyway).
  EXPECT_EQ(Job("hook", admin_)["config"]["headers"]["Authorization"], kHeaderSecret);
  EXPECT_EQ(Job("hello", admin_)["config"]["env"]["API_TOKEN"], kEnvSecret);

  // An edit's audit record keeps no secret.
  ClientResponse edit =
      client_->Patch("/api/v1/jobs/hello", admin_, {{"config", {{"timeout_ms", 15000}}}});
  ASSERT_EQ(edit.status, 200) << edit.body;
  ClientResponse audit = client_->Get("/api/v1/audit", admin_);
  ASSERT_EQ(audit.status, 200);
  EXPECT_THAT(audit.body, HasSubstr("job.update"));
  EXPECT_THAT(audit.body, Not(HasSubstr(kEnvSecret)));

  // The CLI masks them unless asked.
  ProcessResult jobs = te_.Run({"job:list", "--json"});
  ASSERT_EQ(jobs.exit_code, 0) << jobs.Describe();
  EXPECT_THAT(jobs.out, Not(HasSubstr(kEnvSecret)));
  EXPECT_THAT(jobs.out, Not(HasSubstr("header-secret")));
  EXPECT_THAT(jobs.out, HasSubstr(redacted));
  ProcessResult shown = te_.Run({"job:list", "--json", "--show-secrets"});
  EXPECT_THAT(shown.out, HasSubstr(kEnvSecret));
  ProcessResult audit_text = te_.Run({"audit:list", "--json"});
  EXPECT_THAT(audit_text.out, Not(HasSubstr(kEnvSecret)));
  EXPECT_THAT(ReadFile(te_.serve_log()), Not(HasSubstr(kEnvSecret)));
  EXPECT_THAT(ReadFile(te_.serve_log()), Not(HasSubstr("header-secret")));
}

// --- F9 ---------------------------------------------------------------------

TEST_F(SecurityProbeTest, F9_ControlCharactersNeverReachTheTerminal) {
  // ESC ] 0 ; ... BEL (window title), ESC [ 2 J (clear), C1 CSI (U+009B), DEL, CR.
  const std::string evil =
      "\x1b]0;PWNED\x07\x1b[2J\xc2\x9b"
      "31m\x7f\r done";
  // Lane keys are names operators read: control characters are refused.
  ClientResponse bad_lane = client_->Post("/api/v1/jobs/lanes/dispatch", ops_a_,
                                          {{"tenant", "a"}, {"lane", "lane\x1b[2J"}});
  EXPECT_EQ(bad_lane.status, 400) << bad_lane.body;
  EXPECT_EQ(te_.Run({"job:dispatch", "lanes", "--tenant=a", "--lane",
                     "x\xc2\x9b"
                     "1"})
                .exit_code,
            1);
  const std::int64_t id =
      Dispatch("lanes", {{"tenant", "a"}, {"lane", "lane-e"}, {"delay_ms", 3'600'000}}, ops_a_);
  ClientResponse cancel = client_->Post("/api/v1/executions/" + std::to_string(id) + "/cancel",
                                        ops_a_, {{"reason", evil}});
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  // A second execution left queued on the lane, for lane:status.
  Dispatch("lanes", {{"tenant", "a"}, {"lane", "lane-e"}, {"delay_ms", 3'600'000}}, ops_a_);

  const std::vector<std::vector<std::string>> verbs = {
      {"audit:list"},      {"execution:show", std::to_string(id)},
      {"execution:list"},  {"lane:status"},
      {"quarantine:list"},
  };
  for (const auto& verb : verbs) {
    ProcessResult text = te_.Run(verb);
    ASSERT_EQ(text.exit_code, 0) << text.Describe();
    EXPECT_FALSE(HasControlBytes(text.out)) << verb[0] << ":\n" << text.out;
    EXPECT_FALSE(HasControlBytes(text.err)) << verb[0] << ":\n" << text.err;
    std::vector<std::string> with_json = verb;
    with_json.push_back("--json");
    ProcessResult j = te_.Run(with_json);
    ASSERT_EQ(j.exit_code, 0) << j.Describe();
    EXPECT_FALSE(HasControlBytes(j.out)) << verb[0] << " --json:\n" << j.out;
    EXPECT_FALSE(json::parse(j.out, nullptr, false).is_discarded()) << j.out;
  }
  // The escaped forms are visible; --json keeps the exact text.
  ProcessResult audit = te_.Run({"audit:list"});
  EXPECT_THAT(audit.out, HasSubstr("\\x1b]0;PWNED\\x07"));
  EXPECT_THAT(audit.out, HasSubstr("\\u009b31m\\x7f\\x0d done"));
  json records = te_.RunJson({"audit:list"});
  bool found = false;
  for (const auto& r : records["items"]) found = found || r.value("reason", "") == evil;
  EXPECT_TRUE(found) << records.dump();
}

// /metrics needs a global reader unless the configuration file opens it
// (`[http] metrics_open = true`, for a scraper on a private network).
TEST(MetricsAccessTest, OpenOnlyWhenTheConfigurationSaysSo) {
  for (bool open : {false, true}) {
    TaskengineInstall te(open ? "[http]\nmetrics_open = true\n" : "");
    ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
    ChildProcess serve;
    const int port = te.StartServeOnEphemeralPort(&serve);
    ASSERT_NE(port, 0) << ReadFile(te.serve_log());
    TestClient client(port);
    ClientResponse r = client.Get("/metrics");
    EXPECT_EQ(r.status, open ? 200 : 401) << "metrics_open=" << open << ": " << r.body;
    if (open) EXPECT_THAT(r.body, HasSubstr("# TYPE taskengine_"));
    EXPECT_EQ(client.Get("/api/v1/stats").status, 401) << "only /metrics is opened";
    serve.Signal(SIGTERM);
    EXPECT_TRUE(serve.Wait(std::chrono::seconds(20)).has_value());
  }
}

}  // namespace
}  // namespace taskengine::testing
