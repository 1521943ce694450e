// Process-level tests of the security verbs of the `taskengine` binary
// (user:add, user:list, token:create, token:list, token:revoke) and of `serve`
// exposing the HTTP API: bound address logged for port 0, first-admin hint,
// auth off refused on a non-loopback host, anonymous admin on loopback, and
// an end-to-end dispatch over HTTP with a token made by token:create.
// Also the [http] configuration (parsed in-process).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cli_harness.h"
#include "server/config.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::TestClient;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kConfig = R"(
[engine]
worker_threads = 2
poll_interval_ms = 50
sweep_interval_ms = 200
shutdown_grace_ms = 5000

[[job]]
name = "hello"
handler = "command"
config = { argv = ["/bin/sh", "-c", "cat > /dev/null; echo '{\"result\": {\"greeting\": \"hi\"}}'"] }

[[job]]
name = "per-store"
handler = "command"
scope = "per_tenant"
config = { argv = ["/bin/sh", "-c", "cat > /dev/null"] }
)";

std::string ReadBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class SecurityCliTest : public ::testing::Test {
 protected:
  SecurityCliTest() : te_(kConfig) {}

  void SetUp() override {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  // Starts serve on an ephemeral port with `extra_env`; returns the port (0 on failure).
  int StartServe(ChildProcess* child, std::vector<std::string> extra_env = {}) {
    return te_.StartServeOnEphemeralPort(child, std::move(extra_env));
  }

  // Sends SIGTERM and expects a clean exit.
  void StopServe(ChildProcess* child) {
    child->Signal(SIGTERM);
    std::optional<int> status = child->Wait(std::chrono::seconds(20));
    ASSERT_TRUE(status.has_value()) << "serve did not stop";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << ReadFile(te_.serve_log());
  }

  nlohmann::json LastAudit(const std::string& action) {
    nlohmann::json audit = te_.RunJson({"audit:list"});
    for (const auto& r : audit.value("items", nlohmann::json::array())) {
      if (r.value("action", "") == action) return r;
    }
    return nullptr;
  }

  TaskengineInstall te_;
};

TEST_F(SecurityCliTest, UserAddPrintsAGeneratedPasswordOnceAndStoresAHash) {
  nlohmann::json created =
      te_.RunJson({"user:add", "alice", "--role=operator", "--tenant=a", "--tenant=b"});
  ASSERT_TRUE(created.is_object());
  const std::string password = created.value("password", "");
  EXPECT_GE(password.size(), 20u);
  EXPECT_EQ(created["role"], "operator");
  EXPECT_EQ(created["scopes"], nlohmann::json::array({"operate", "dispatch"}));
  EXPECT_EQ(created["tenants"], nlohmann::json::array({"a", "b"}));

  ProcessResult list = te_.Run({"user:list"});
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  EXPECT_THAT(list.out, HasSubstr("alice"));
  EXPECT_THAT(list.out, HasSubstr("operator"));
  EXPECT_THAT(list.out, Not(HasSubstr(password)));
  EXPECT_THAT(list.out, Not(HasSubstr("argon2")));
  nlohmann::json users = te_.RunJson({"user:list"});
  ASSERT_EQ(users["users"].size(), 1u);
  EXPECT_FALSE(users["users"][0].contains("password_hash"));

  const std::string db = ReadBinary(te_.db_path()) + ReadBinary(te_.db_path() + "-wal");
  EXPECT_THAT(db, HasSubstr("$argon2id$"));
  EXPECT_THAT(db, Not(HasSubstr(password)));

  nlohmann::json audit = LastAudit("user.add");
  ASSERT_TRUE(audit.is_object()) << "user.add is audited";
  EXPECT_EQ(audit.value("actor", "").rfind("cli:", 0), 0u);
  EXPECT_EQ(audit["target"], "user:alice");
  EXPECT_THAT(audit.dump(), Not(HasSubstr(password)));

  // Text output names the password once, with the warning.
  ProcessResult text = te_.Run({"user:add", "bob", "--role=viewer"});
  ASSERT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_THAT(text.out, HasSubstr("password: "));
  EXPECT_THAT(text.out, HasSubstr("shown once"));
}

TEST_F(SecurityCliTest, UserAddValidatesAndRefusesDuplicates) {
  ProcessResult in =
      te_.Run({"user:add", "carol", "--role=admin", "--password-stdin"}, "a long passphrase\n");
  ASSERT_EQ(in.exit_code, 0) << in.Describe();
  EXPECT_THAT(in.out, Not(HasSubstr("password:")));
  EXPECT_EQ(te_.Run({"user:add", "carol", "--role=admin"}).exit_code, 4);
  EXPECT_EQ(te_.Run({"user:add", "dave", "--role=root"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"user:add", "Bad Name", "--role=viewer"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"user:add", "erin", "--role=viewer", "--tenant=NOT OK"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"user:add", "frank", "--role=viewer", "--password-stdin"}, "").exit_code, 1);
  ProcessResult help = te_.Run({"user:add", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--password-stdin"));
}

TEST_F(SecurityCliTest, UserDisableAndEnable) {
  ASSERT_EQ(te_.Run({"user:add", "root", "--role=admin"}).exit_code, 0);
  ASSERT_EQ(te_.Run({"user:add", "olga", "--role=viewer"}).exit_code, 0);
  ProcessResult off = te_.Run({"user:disable", "olga"});
  ASSERT_EQ(off.exit_code, 0) << off.Describe();
  nlohmann::json users = te_.RunJson({"user:list"});
  ASSERT_EQ(users["users"].size(), 2u);
  EXPECT_EQ(users["users"][0]["name"], "olga");
  EXPECT_EQ(users["users"][0]["disabled"], true);
  EXPECT_EQ(te_.RunJson({"user:enable", "olga"})["disabled"], false);
  EXPECT_EQ(te_.Run({"user:disable", "root"}).exit_code, 4) << "the last admin with every tenant";
  EXPECT_EQ(te_.RunJson({"user:list"})["users"][1]["disabled"], false);
  EXPECT_EQ(te_.Run({"user:disable", "nobody"}).exit_code, 2);
  ASSERT_TRUE(LastAudit("user.enable").is_object());
}

TEST_F(SecurityCliTest, TokenCreateListRevoke) {
  nlohmann::json t = te_.RunJson(
      {"token:create", "--name=ci", "--scopes=read,dispatch", "--tenant=a", "--expires-in=30d"});
  ASSERT_TRUE(t.is_object());
  const std::string secret = t.value("secret", "");
  EXPECT_TRUE(std::regex_match(secret, std::regex("te_[A-Za-z0-9_-]{43}"))) << secret;
  EXPECT_EQ(t["principal"], "token:ci");
  EXPECT_FALSE(t.value("expires_at", "").empty());
  const std::int64_t id = t.value("id", std::int64_t{0});

  nlohmann::json list = te_.RunJson({"token:list"});
  ASSERT_EQ(list["tokens"].size(), 1u);
  EXPECT_EQ(list["tokens"][0]["state"], "live");
  EXPECT_THAT(list.dump(), Not(HasSubstr(secret)));
  ProcessResult text = te_.Run({"token:list"});
  EXPECT_THAT(text.out, Not(HasSubstr(secret)));
  EXPECT_THAT(ReadBinary(te_.db_path()) + ReadBinary(te_.db_path() + "-wal"),
              Not(HasSubstr(secret)));

  ProcessResult revoke = te_.Run({"token:revoke", std::to_string(id)});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.Describe();
  EXPECT_EQ(te_.RunJson({"token:list"})["tokens"][0]["state"], "revoked");
  EXPECT_EQ(te_.Run({"token:revoke", std::to_string(id)}).exit_code, 0) << "idempotent";
  EXPECT_EQ(te_.Run({"token:revoke", "999"}).exit_code, 2);

  nlohmann::json created = LastAudit("token.create");
  ASSERT_TRUE(created.is_object());
  EXPECT_THAT(created.dump(), Not(HasSubstr(secret)));
  nlohmann::json revoked = LastAudit("token.revoke");
  ASSERT_TRUE(revoked.is_object());
  EXPECT_EQ(revoked["target"], "token:" + std::to_string(id));

  // Bad input.
  EXPECT_EQ(te_.Run({"token:create", "--name=x", "--scopes=root"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"token:create", "--name=x", "--scopes=read", "--expires-in=0d"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"token:create", "--name=x", "--scopes=read", "--expires-in=3w"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"token:create", "--name=bad name", "--scopes=read"}).exit_code, 1);
  EXPECT_EQ(te_.Run({"token:create", "--scopes=read"}).exit_code, 1);
}

TEST_F(SecurityCliTest, ServeRefusesAuthOffOnANonLoopbackHost) {
  ProcessResult r = te_.Run(
      {"serve"}, "",
      {"TASKENGINE_HTTP_AUTH=false", "TASKENGINE_HTTP_HOST=0.0.0.0", "TASKENGINE_HTTP_PORT=0"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, HasSubstr("loopback"));
  EXPECT_THAT(r.err, HasSubstr("0.0.0.0"));
}

TEST_F(SecurityCliTest, ServeWithAuthOffOnLoopbackActsAsAnonymousAdmin) {
  ChildProcess serve;
  const int port = StartServe(&serve, {"TASKENGINE_HTTP_AUTH=false"});
  ASSERT_NE(port, 0);
  TestClient client(port);
  ClientResponse who = client.Get("/api/v1/auth/session");
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(who.json()["name"], "anonymous");
  EXPECT_EQ(who.json()["all_tenants"], true);
  StopServe(&serve);
}

TEST_F(SecurityCliTest, ServeEndToEndWithATokenFromTokenCreate) {
  ChildProcess serve;
  const int port = StartServe(&serve);
  ASSERT_NE(port, 0);
  const std::string log = ReadFile(te_.serve_log());
  EXPECT_THAT(log, HasSubstr("taskengine user:add admin --role=admin")) << "first-admin hint";

  TestClient client(port);
  EXPECT_EQ(client.Get("/healthz").status, 200);
  EXPECT_EQ(client.Get("/api/v1/stats").status, 401);

  nlohmann::json token = te_.RunJson({"token:create", "--name=e2e", "--scopes=dispatch,read"});
  const std::string secret = token.value("secret", "");
  ASSERT_FALSE(secret.empty());
  ClientResponse d = client.Post("/api/v1/jobs/hello/dispatch", secret, {{"payload", {{"n", 7}}}});
  ASSERT_EQ(d.status, 202) << d.body;
  const std::int64_t id = d.json().value("id", std::int64_t{0});
  const std::string path = "/api/v1/executions/" + std::to_string(id);
  std::string status;
  WaitUntil(std::chrono::seconds(30), [&] {
    ClientResponse r = client.Get(path, secret);
    status = r.status == 200 ? r.json().value("status", "") : "";
    return status == "succeeded";
  });
  ASSERT_EQ(status, "succeeded");
  ClientResponse result = client.Get(path + "/result", secret);
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json()["result"]["greeting"], "hi");
  // Operator routes stay closed to this token.
  EXPECT_EQ(client.Post(path + "/replay", secret, nlohmann::json::object()).status, 403);

  // A dashboard login over real HTTP: the cookie attributes on the wire.
  ProcessResult add =
      te_.Run({"user:add", "olga", "--role=operator", "--password-stdin"}, "pw-olga-12345\n");
  ASSERT_EQ(add.exit_code, 0) << add.Describe();
  ClientResponse login =
      client.Post("/api/v1/auth/login", "", {{"username", "olga"}, {"password", "pw-olga-12345"}});
  ASSERT_EQ(login.status, 200) << login.body;
  const std::string cookie = login.header("set-cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));

  // Revoked from the CLI: the running server refuses it at once.
  ASSERT_EQ(te_.Run({"token:revoke", std::to_string(token.value("id", 0))}).exit_code, 0);
  EXPECT_EQ(client.Get(path + "/result", secret).status, 401);

  StopServe(&serve);
  EXPECT_THAT(ReadFile(te_.serve_log()), Not(HasSubstr(secret))) << "secrets are never logged";
  EXPECT_THAT(ReadFile(te_.serve_log()), Not(HasSubstr("pw-olga-12345")));
}

// X2 (issue 14 bug 4), through the real binary: a token bound to tenant a
// gets 200 from /api/v1/stats counting its tenant only; a global token gets
// the per-tenant breakdown.
TEST_F(SecurityCliTest, TenantBoundTokenGetsTheStatsOfItsTenant) {
  ASSERT_EQ(te_.Run({"tenant:add", "a"}).exit_code, 0);
  ASSERT_EQ(te_.Run({"tenant:add", "b"}).exit_code, 0);
  ChildProcess serve;
  const int port = StartServe(&serve);
  ASSERT_NE(port, 0);
  TestClient client(port);
  const std::string global =
      te_.RunJson({"token:create", "--name=all", "--scopes=dispatch,read"}).value("secret", "");
  const std::string store_a =
      te_.RunJson({"token:create", "--name=a", "--scopes=dispatch,read", "--tenant=a"})
          .value("secret", "");
  ASSERT_FALSE(global.empty());
  ASSERT_FALSE(store_a.empty());
  ASSERT_EQ(client.Post("/api/v1/jobs/per-store/dispatch", store_a, {{"tenant", "a"}}).status, 202);
  ASSERT_EQ(client.Post("/api/v1/jobs/per-store/dispatch", global, {{"tenant", "b"}}).status, 202);
  ASSERT_EQ(client.Post("/api/v1/jobs/per-store/dispatch", global, {{"tenant", "b"}}).status, 202);
  ASSERT_EQ(client.Post("/api/v1/jobs/hello/dispatch", global, nlohmann::json::object()).status,
            202);
  const auto ended = [](const nlohmann::json& stats) {
    std::int64_t n = 0;
    for (const auto& [status, count] : stats["last_24h"].items()) n += count.get<std::int64_t>();
    return n;
  };
  nlohmann::json all;
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    ClientResponse r = client.Get("/api/v1/stats", global);
    all = r.status == 200 ? r.json() : nlohmann::json();
    return all.is_object() && ended(all) == 4;
  })) << all.dump();
  std::map<std::string, std::int64_t> per_tenant;
  for (const nlohmann::json& t : all["tenants"]) {
    per_tenant[t["tenant"].is_null() ? "(global)" : t["tenant"].get<std::string>()] =
        t["succeeded_24h"].get<std::int64_t>();
  }
  EXPECT_EQ(per_tenant, (std::map<std::string, std::int64_t>{{"(global)", 1}, {"a", 1}, {"b", 2}}))
      << all.dump();

  ClientResponse mine = client.Get("/api/v1/stats", store_a);
  ASSERT_EQ(mine.status, 200) << mine.body;
  const nlohmann::json a = mine.json();
  EXPECT_EQ(a["scope"], "tenants");
  EXPECT_EQ(ended(a), 1) << mine.body;
  ASSERT_EQ(a["tenants"].size(), 1u) << mine.body;
  EXPECT_EQ(a["tenants"][0]["tenant"], "a");
  EXPECT_FALSE(a.contains("engine")) << mine.body;
  StopServe(&serve);
}

// --- [http] configuration ---

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(HttpConfigTest, DefaultsFileAndEnvironment) {
  Result<ServerConfig> d = ParseConfig("", "t.toml", Env({}));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->http.host, "127.0.0.1");
  EXPECT_EQ(d->http.port, 8080);
  EXPECT_TRUE(d->http.auth);
  EXPECT_EQ(d->http.session_idle_ms, 30 * 60'000);
  EXPECT_EQ(d->http.session_absolute_ms, 12 * 3'600'000);

  Result<ServerConfig> f = ParseConfig(
      "[http]\nhost = \"0.0.0.0\"\nport = 9000\nauth = true\nsession_idle_minutes = 5\n"
      "session_absolute_hours = 1\nsecure_cookies = true\nlogin_per_minute = 3\n",
      "t.toml", Env({}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->http.host, "0.0.0.0");
  EXPECT_EQ(f->http.port, 9000);
  EXPECT_EQ(f->http.session_idle_ms, 5 * 60'000);
  EXPECT_EQ(f->http.session_absolute_ms, 3'600'000);
  EXPECT_TRUE(f->http.secure_cookies);
  EXPECT_EQ(f->http.login_per_minute, 3);

  Result<ServerConfig> e = ParseConfig("[http]\nport = 9000\n", "t.toml",
                                       Env({{"TASKENGINE_HTTP_PORT", "0"},
                                            {"TASKENGINE_HTTP_HOST", "::1"},
                                            {"TASKENGINE_HTTP_AUTH", "false"}}));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->http.port, 0);
  EXPECT_EQ(e->http.host, "::1");
  EXPECT_FALSE(e->http.auth);

  for (const char* bad : {"[http]\nport = 70000\n", "[http]\nauth = \"no\"\n",
                          "[http]\nlisten = 1\n", "[http]\nhost = \"\"\n"}) {
    EXPECT_EQ(ParseConfig(bad, "t.toml", Env({})).status().code(), ErrorCode::kInvalidArgument)
        << bad;
  }
  EXPECT_FALSE(ParseConfig("", "t", Env({{"TASKENGINE_HTTP_PORT", "x"}})).ok());
  EXPECT_FALSE(ParseConfig("", "t", Env({{"TASKENGINE_HTTP_AUTH", "maybe"}})).ok());
}

TEST(HttpConfigTest, LoopbackHosts) {
  for (const char* h : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"0.0.0.0", "10.0.0.1", "127.0.0.1.evil.com", "127.0.0", "::", "example.com",
                        "1270.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

}  // namespace
}  // namespace taskengine::testing
