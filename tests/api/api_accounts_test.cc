// The admin API for users and tokens (/api/v1/users, /api/v1/tokens) over the
// real router and store (auth_fixture.h): who may call it, what a secret looks
// like on the way out (once, never cached), and that what it creates and
// revokes takes effect on the next request.
#include <gmock/gmock.h>

#include "auth_fixture.h"

namespace taskengine::api::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

class AccountsApiTest : public AuthApiFixture {
 protected:
  void SetUp() override {
    AuthApiFixture::SetUp();
    admin_ = MakeToken("root", {"admin"});
  }

  Reply Post(const std::string& path, const json& body, const std::string& secret = "") {
    return Call(HttpMethod::kPost, path, Bearer(secret.empty() ? admin_ : secret), body.dump());
  }
  Reply Get(const std::string& path, const std::string& secret = "") {
    return Call(HttpMethod::kGet, path, Bearer(secret.empty() ? admin_ : secret));
  }

  std::string admin_;
};

TEST_F(AccountsApiTest, OnlyAdminsWithEveryTenantManageAccounts) {
  const std::string tenant_admin = MakeToken("acme-admin", {"admin"}, {"acme"});
  const std::string operator_token = MakeToken("ops", {"operate", "dispatch"});
  for (const auto& [method, path] : std::vector<std::pair<HttpMethod, std::string>>{
           {HttpMethod::kGet, "/api/v1/users"},
           {HttpMethod::kPost, "/api/v1/users"},
           {HttpMethod::kPost, "/api/v1/users/root/disable"},
           {HttpMethod::kGet, "/api/v1/tokens"},
           {HttpMethod::kPost, "/api/v1/tokens"},
           {HttpMethod::kPost, "/api/v1/tokens/1/revoke"}}) {
    const std::string body = method == HttpMethod::kPost ? R"({"name":"x","role":"viewer"})" : "";
    EXPECT_EQ(Call(method, path, {}, body).status, 401) << path;
    EXPECT_EQ(Call(method, path, Bearer(operator_token), body).status, 403) << path;
    Reply bound = Call(method, path, Bearer(tenant_admin), body);
    EXPECT_EQ(bound.status, 403) << path << " " << bound.body;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<User> users, store().ListUsers());
  EXPECT_TRUE(users.empty()) << "refused calls create nothing";
}

TEST_F(AccountsApiTest, CreatedUserLogsInWithThePasswordShownOnce) {
  Reply created = Post(
      "/api/v1/users",
      {{"name", "olga"}, {"role", "operator"}, {"tenants", {"acme"}}, {"reason", "new on-call"}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.header("cache-control"), "no-store");
  EXPECT_EQ(created.header("location"), "/api/v1/users/olga");
  const std::string password = created.json().value("password", "");
  ASSERT_GE(password.size(), 20u);
  EXPECT_EQ(created.json()["role"], "operator");
  EXPECT_EQ(created.json()["tenants"], json::array({"acme"}));

  Reply list = Get("/api/v1/users");
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.json()["items"].size(), 1u);
  EXPECT_THAT(list.body, Not(HasSubstr(password)));
  EXPECT_THAT(list.body, Not(HasSubstr("argon2")));
  EXPECT_FALSE(list.json()["items"][0].contains("password"));

  Login login = LogIn("olga", password);
  ASSERT_FALSE(login.cookie.empty());
  Reply session = Call(HttpMethod::kGet, "/api/v1/auth/session", SessionHeaders(login));
  EXPECT_EQ(session.status, 200) << session.body;

  AuditFilter filter;
  filter.target = "user:olga";
  ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> audit, store().ListAudit(filter));
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].actor, "root");
  EXPECT_EQ(audit[0].reason, "new on-call");

  EXPECT_EQ(Post("/api/v1/users", {{"name", "olga"}, {"role", "viewer"}}).status, 409);
}

TEST_F(AccountsApiTest, BadUserRequestsAreRefusedWithoutAChange) {
  for (const json& body :
       {json{{"role", "viewer"}}, json{{"name", "x"}}, json{{"name", "x"}, {"role", "root"}},
        json{{"name", "Bad Name"}, {"role", "viewer"}},
        json{{"name", "x"}, {"role", "viewer"}, {"tenants", "acme"}},
        json{{"name", "x"}, {"role", "viewer"}, {"tenants", {"NOT OK"}}},
        json{{"name", "x"}, {"role", "viewer"}, {"password", "short"}},
        json{{"name", "x"}, {"role", "viewer"}, {"admin", true}}}) {
    Reply r = Post("/api/v1/users", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " " << r.body;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<User> users, store().ListUsers());
  EXPECT_TRUE(users.empty());
}

TEST_F(AccountsApiTest, DisablingAUserEndsItsSessions) {
  ASSERT_EQ(Post("/api/v1/users", {{"name", "boss"}, {"role", "admin"}}).status, 201);
  Reply created = Post("/api/v1/users",
                       {{"name", "victor"}, {"role", "viewer"}, {"password", "a long passphrase"}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_FALSE(created.json().contains("password")) << "a given password is never echoed";
  Login login = LogIn("victor", "a long passphrase");
  Reply off = Post("/api/v1/users/victor/disable", {{"reason", "left the team"}});
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(off.json()["disabled"], true);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/auth/session", SessionHeaders(login)).status, 401);
  EXPECT_EQ(PostLogin("victor", "a long passphrase").status, 401);

  Reply last = Post("/api/v1/users/boss/disable", json::object());
  EXPECT_EQ(last.status, 409) << "the only admin with every tenant stays enabled";
  EXPECT_EQ(Post("/api/v1/users/nobody/disable", json::object()).status, 404);
  ASSERT_EQ(Post("/api/v1/users/victor/enable", json::object()).status, 200);
  EXPECT_EQ(PostLogin("victor", "a long passphrase").status, 200);
}

TEST_F(AccountsApiTest, TokenSecretWorksAtOnceAndRevocationStopsIt) {
  Reply created = Post("/api/v1/tokens", {{"name", "billing-worker"},
                                          {"scopes", {"read", "dispatch"}},
                                          {"tenants", {"acme"}},
                                          {"expires_in", "30d"},
                                          {"reason", "billing rollout"}});
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(created.header("cache-control"), "no-store");
  const std::string secret = created.json().value("secret", "");
  ASSERT_EQ(secret.rfind("te_", 0), 0u);
  EXPECT_EQ(created.json()["principal"], "token:billing-worker");
  EXPECT_EQ(created.json()["state"], "live");
  EXPECT_FALSE(created.json()["expires_at"].is_null());
  const std::int64_t id = created.json().value("id", std::int64_t{0});

  EXPECT_EQ(Get("/api/v1/tenants", secret).status, 200) << "usable on the next request";
  Reply list = Get("/api/v1/tokens");
  ASSERT_EQ(list.status, 200);
  EXPECT_THAT(list.body, Not(HasSubstr(secret)));
  EXPECT_THAT(list.body, HasSubstr("billing-worker"));

  Reply revoked = Post("/api/v1/tokens/" + std::to_string(id) + "/revoke", json::object());
  ASSERT_EQ(revoked.status, 200) << revoked.body;
  EXPECT_EQ(revoked.json()["state"], "revoked");
  EXPECT_EQ(Get("/api/v1/tenants", secret).status, 401);
  EXPECT_EQ(Post("/api/v1/tokens/" + std::to_string(id) + "/revoke", json::object()).status, 200)
      << "idempotent";
  EXPECT_EQ(Post("/api/v1/tokens/999/revoke", json::object()).status, 404);
  EXPECT_EQ(Post("/api/v1/tokens/abc/revoke", json::object()).status, 400);
  EXPECT_EQ(Post("/api/v1/tokens/99999999999999999999/revoke", json::object()).status, 400);
}

TEST_F(AccountsApiTest, BadTokenRequestsAreRefusedWithoutAChange) {
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> before, store().ListTokens());
  for (const json& body :
       {json{{"scopes", {"read"}}}, json{{"name", "x"}}, json{{"name", "x"}, {"scopes", {"root"}}},
        json{{"name", "x"}, {"scopes", json::array()}}, json{{"name", "x"}, {"scopes", "read"}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"expires_in", "3w"}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"expires_in", "0d"}},
        json{{"name", "bad name"}, {"scopes", {"read"}}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"tenants", {"NOT OK"}}},
        json{{"name", "x"}, {"scopes", {"read"}}, {"secret", "te_mine"}}}) {
    Reply r = Post("/api/v1/tokens", body);
    EXPECT_EQ(r.status, 400) << body.dump() << " " << r.body;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> after, store().ListTokens());
  EXPECT_EQ(after.size(), before.size());
}

}  // namespace
}  // namespace taskengine::api::testing
