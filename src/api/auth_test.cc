#include "api/auth.h"

#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

HttpRequest WithAuthorization(std::string value) {
  HttpRequest r;
  r.headers.emplace_back("authorization", std::move(value));
  return r;
}

TEST(PrincipalTest, ScopeImplication) {
  Principal admin = Principal::Make("a", {Scope::kAdmin}, true);
  EXPECT_TRUE(admin.HasScope(Scope::kRead));
  EXPECT_TRUE(admin.HasScope(Scope::kDispatch));
  EXPECT_TRUE(admin.HasScope(Scope::kOperate));
  EXPECT_FALSE(admin.HasScope(Scope::kWorker));
  Principal op = Principal::Make("o", {Scope::kOperate}, true);
  EXPECT_TRUE(op.HasScope(Scope::kRead));
  EXPECT_FALSE(op.HasScope(Scope::kDispatch));
  EXPECT_FALSE(op.HasScope(Scope::kAdmin));
  Principal worker = Principal::Make("w", {Scope::kWorker}, true);
  EXPECT_TRUE(worker.HasScope(Scope::kWorker));
  for (Scope s : {Scope::kRead, Scope::kDispatch, Scope::kOperate, Scope::kAdmin}) {
    EXPECT_FALSE(worker.HasScope(s));
  }
  Principal read = Principal::Make("r", {Scope::kRead}, true);
  EXPECT_FALSE(read.HasScope(Scope::kDispatch));
}

TEST(PrincipalTest, Tenants) {
  Principal bound = Principal::Make("b", {Scope::kRead}, false, {"acme"});
  EXPECT_TRUE(bound.MayAccessTenant(TenantId("acme")));
  EXPECT_FALSE(bound.MayAccessTenant(TenantId("other")));
  EXPECT_FALSE(bound.MayAccessTenant(TenantId("")));  // global executions need global access
  Principal global = Principal::Make("g", {Scope::kRead}, true);
  EXPECT_TRUE(global.MayAccessTenant(TenantId("")));
  EXPECT_TRUE(global.MayAccessTenant(TenantId("anything")));
}

TEST(ScopeTest, Names) {
  for (Scope s : {Scope::kRead, Scope::kDispatch, Scope::kOperate, Scope::kAdmin, Scope::kWorker}) {
    EXPECT_EQ(ParseScope(ToString(s)), s);
  }
  EXPECT_EQ(ParseScope("root"), std::nullopt);
}

TEST(BearerTokenTest, Parses) {
  EXPECT_EQ(BearerToken(WithAuthorization("Bearer abc")), "abc");
  EXPECT_EQ(BearerToken(WithAuthorization("bearer   abc  ")), "abc");
  EXPECT_EQ(BearerToken(WithAuthorization("Basic abc")), std::nullopt);
  EXPECT_EQ(BearerToken(WithAuthorization("Bearer")), std::nullopt);
  EXPECT_EQ(BearerToken(WithAuthorization("Bearer ")), std::nullopt);
  EXPECT_EQ(BearerToken(HttpRequest{}), std::nullopt);
}

TEST(StaticTokenAuthenticatorTest, KnownUnknownAndReplaced) {
  StaticTokenAuthenticator auth;
  auth.Add("t-one", Principal::Make("one", {Scope::kRead}, true));
  auth.Add("t-two", Principal::Make("two", {Scope::kAdmin}, false, {"x"}));
  ASSERT_OK_AND_ASSIGN(auto p, auth.Authenticate(WithAuthorization("Bearer t-two")));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "two");
  ASSERT_OK_AND_ASSIGN(auto none, auth.Authenticate(WithAuthorization("Bearer t-three")));
  EXPECT_FALSE(none.has_value());
  ASSERT_OK_AND_ASSIGN(auto prefix, auth.Authenticate(WithAuthorization("Bearer t-on")));
  EXPECT_FALSE(prefix.has_value());
  ASSERT_OK_AND_ASSIGN(auto missing, auth.Authenticate(HttpRequest{}));
  EXPECT_FALSE(missing.has_value());
  auth.Add("t-one", Principal::Make("uno", {Scope::kRead}, true));
  ASSERT_OK_AND_ASSIGN(auto replaced, auth.Authenticate(WithAuthorization("Bearer t-one")));
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->name, "uno");
}

}  // namespace
}  // namespace taskengine::api
