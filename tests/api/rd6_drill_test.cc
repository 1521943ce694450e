// Drill RD6 (quality.md §2): a requester's access is revoked after it
// dispatched and before it fetches the result -> the result is refused.
// Authorization is decided on every request from the store (token revoked,
// user's tenant grant taken away), never from what was true at dispatch.
#include <gtest/gtest.h>

#include "auth_fixture.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;

class Rd6Drill : public AuthApiFixture {};

TEST_F(Rd6Drill, RevokedTokenCannotFetchTheResult) {
  std::int64_t token_id = 0;
  const std::string secret = MakeToken("billing", {"read", "dispatch"}, {"a"}, 0, &token_id);
  const std::int64_t id = Dispatch(secret, "tenant-echo", "a");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitSucceeded(id));
  const std::string result = "/api/v1/executions/" + std::to_string(id) + "/result";
  Reply before = Call(HttpMethod::kGet, result, Bearer(secret));
  ASSERT_EQ(before.status, 200) << before.body;  // the drill is meaningful: it worked
  EXPECT_EQ(before.json()["result"]["echo"]["n"], 1);

  ASSERT_OK(store().RevokeToken(token_id));
  for (const std::string path : {result, "/api/v1/executions/" + std::to_string(id)}) {
    Reply after = Call(HttpMethod::kGet, path, Bearer(secret));
    EXPECT_EQ(after.status, 401) << path << ": " << after.body;
    EXPECT_EQ(after.body.find("echo"), std::string::npos) << "no result data leaks";
  }
}

TEST_F(Rd6Drill, UserWhoseTenantGrantIsRemovedCannotFetchTheResult) {
  MakeUser("olga", "pw-olga-123", "operator", {"a", "b"});
  Login login = LogIn("olga", "pw-olga-123");
  Headers mutate = SessionHeaders(login);
  Reply dispatched = Call(HttpMethod::kPost, "/api/v1/jobs/tenant-echo/dispatch", mutate,
                          json{{"tenant", "a"}, {"payload", {{"n", 1}}}}.dump());
  ASSERT_EQ(dispatched.status, 202) << dispatched.body;
  const std::int64_t id = dispatched.json().value("id", std::int64_t{0});
  ASSERT_TRUE(WaitSucceeded(id));
  const std::string result = "/api/v1/executions/" + std::to_string(id) + "/result";
  ASSERT_EQ(Call(HttpMethod::kGet, result, SessionHeaders(login, false)).status, 200);

  // Tenant "a" is taken away; the session stays valid for "b".
  ASSERT_OK_AND_ASSIGN(User olga, store().GetUser("olga"));
  olga.tenants = {"b"};
  ASSERT_OK(store().UpsertUser(olga));
  Reply refused = Call(HttpMethod::kGet, result, SessionHeaders(login, false));
  Reply missing =
      Call(HttpMethod::kGet, "/api/v1/executions/987654/result", SessionHeaders(login, false));
  EXPECT_EQ(refused.status, 404) << refused.body;
  EXPECT_EQ(refused.error_code(), missing.error_code()) << "indistinguishable from a missing id";
  EXPECT_EQ(refused.body.find("echo"), std::string::npos);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/auth/session", SessionHeaders(login, false))
                .json()["tenants"],
            json::array({"b"}));
}

}  // namespace
}  // namespace taskengine::api::testing
