// The dashboard's routes (product.md I3; quality.md §3.1-3.4, 3.6) through
// Api::handler(), as the server calls them: every page and asset without a
// session answers 401 with the login form, the form login (wrong credentials,
// redirect target, origin), the shell per scope with its security headers,
// tenant pages that look missing when not granted, and the assets' headers.
// The browser tests (tests/browser) drive the pages themselves.
#include <gtest/gtest.h>

#include <regex>

#include "auth_fixture.h"

namespace taskengine::api::testing {
namespace {

constexpr std::string_view kCspStart = "default-src 'none'; script-src 'self'; style-src 'self'";

class DashboardTest : public AuthApiFixture {
 protected:
  void SetUp() override {
    AuthApiFixture::SetUp();
    for (const char* t : {"a", "b"}) {
      Tenant tenant;
      tenant.id = TenantId(t);
      tenant.name = t;
      ASSERT_OK(store().UpsertTenant(tenant));
    }
    MakeUser("root", "pw-root-1", "admin");
    MakeUser("alice", "pw-alice-1", "operator", {"a"});
  }

  // Calls Api::handler() (both routers) and waits for the answer.
  Reply Page(HttpMethod method, const std::string& target, Headers headers = {},
             const std::string& form = "") {
    HttpResponse resp =
        Await(api_->handler(), MakeRequest(method, target, headers, form,
                                           "application/x-www-form-urlencoded", "10.0.0.7:40000"));
    if (!resp.content_type.empty()) resp.headers.emplace_back("Content-Type", resp.content_type);
    return Reply{resp.status, resp.headers, resp.body};
  }

  Headers Session(const std::string& user, const std::string& password) {
    Login login = LogIn(user, password);
    return {{"Cookie", std::string(kSessionCookie) + "=" + login.cookie}};
  }

  static void ExpectHtmlHeaders(const Reply& r, const std::string& what) {
    EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8") << what;
    EXPECT_EQ(r.header("content-security-policy").rfind(kCspStart, 0), 0u)
        << what << ": " << r.header("content-security-policy");
    EXPECT_NE(r.header("content-security-policy").find("frame-ancestors 'none'"),
              std::string::npos);
    EXPECT_EQ(r.header("x-frame-options"), "DENY") << what;
    EXPECT_EQ(r.header("referrer-policy"), "same-origin") << what;
  }

  static bool IsLoginForm(const Reply& r) {
    return r.body.find("<form method=\"post\" action=\"/login\">") != std::string::npos;
  }
};

TEST_F(DashboardTest, EveryPageAndAssetWithoutASessionIs401WithTheLoginForm) {
  int checked = 0;
  for (const Router::RouteInfo& route : api_->dashboard_router().routes()) {
    if (route.access.kind == RouteAccess::Kind::kPublic ||
        route.access.kind == RouteAccess::Kind::kLogin) {
      continue;
    }
    std::string path = route.pattern;
    path = std::regex_replace(path, std::regex("\\{tenant\\}"), "a");
    path = std::regex_replace(path, std::regex("\\{file\\}"), "app.js");
    path = std::regex_replace(path, std::regex("\\{path\\.\\.\\.\\}"), "executions/1");
    for (const Headers& credentials :
         {Headers{}, Headers{{"Cookie", std::string(kSessionCookie) + "=forged"}},
          Headers{{"Authorization", "Bearer not-a-token"}}}) {
      Reply r = Page(route.method, path, credentials);
      EXPECT_EQ(r.status, 401) << path;
      EXPECT_TRUE(IsLoginForm(r)) << path << ": " << r.body;
      ExpectHtmlHeaders(r, path);
      ++checked;
    }
  }
  EXPECT_GE(checked, 9);
  // The pages a browser lands on without a session.
  Reply root = Page(HttpMethod::kGet, "/");
  EXPECT_EQ(root.status, 302);
  EXPECT_EQ(root.header("location"), "/login");
  Reply login = Page(HttpMethod::kGet, "/login");
  EXPECT_EQ(login.status, 200);
  EXPECT_TRUE(IsLoginForm(login));
  // The form's one <style> element is allowed by its hash; nothing else inline.
  EXPECT_NE(login.header("content-security-policy").find("style-src 'self' 'sha256-"),
            std::string::npos);
  EXPECT_EQ(login.body.find("<script"), std::string::npos);
  // The 401 page brings the browser back where it was going.
  Reply deep = Page(HttpMethod::kGet, "/admin/tasks/executions?status=failed");
  EXPECT_NE(deep.body.find("name=\"next\" value=\"/admin/tasks/executions?status=failed\""),
            std::string::npos)
      << deep.body;
}

TEST_F(DashboardTest, FormLoginRefusesWrongCredentialsAlikeAndRedirectsOnlyLocally) {
  const std::string next = "&next=%2Fadmin%2Ftasks%2Fjobs";
  Reply wrong = Page(HttpMethod::kPost, "/login", {}, "username=root&password=nope" + next);
  EXPECT_EQ(wrong.status, 401);
  EXPECT_NE(wrong.body.find("invalid username or password"), std::string::npos);
  EXPECT_TRUE(wrong.header("set-cookie").empty());
  Reply unknown = Page(HttpMethod::kPost, "/login", {}, "username=ghost&password=nope" + next);
  EXPECT_EQ(unknown.status, 401);
  EXPECT_EQ(std::regex_replace(unknown.body, std::regex("ghost"), "root"), wrong.body)
      << "an unknown user looks exactly like a wrong password";
  Reply empty = Page(HttpMethod::kPost, "/login", {}, "username=root&password=" + next);
  EXPECT_EQ(empty.status, 401);

  Reply ok = Page(HttpMethod::kPost, "/login", {{"Origin", kOrigin}},
                  "username=root&password=pw-root-1" + next);
  EXPECT_EQ(ok.status, 303) << ok.body;
  EXPECT_EQ(ok.header("location"), "/admin/tasks/jobs");
  const std::string cookie = ok.header("set-cookie");
  EXPECT_EQ(cookie.rfind(std::string(kSessionCookie) + "=", 0), 0u);
  EXPECT_NE(cookie.find("; HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("; SameSite=Strict"), std::string::npos);
  for (const char* target :
       {"https%3A%2F%2Fevil.example%2F", "%2F%2Fevil.example%2Fadmin%2F",
        "%2Fadmin%2F%2F%2Fevil.example", "%2Fapi%2Fv1%2Fjobs", "%2Fadmin%2F%5C%5Cevil.example"}) {
    Reply r = Page(HttpMethod::kPost, "/login", {},
                   std::string("username=root&password=pw-root-1&next=") + target);
    EXPECT_EQ(r.status, 303);
    EXPECT_EQ(r.header("location"), "/") << target;
  }
  Reply foreign = Page(HttpMethod::kPost, "/login", {{"Origin", "https://evil.example"}},
                       "username=root&password=pw-root-1");
  EXPECT_EQ(foreign.status, 403);
  EXPECT_TRUE(foreign.header("set-cookie").empty());
  Reply extra = Page(HttpMethod::kPost, "/login", {}, "username=root&password=pw-root-1&role=x");
  EXPECT_EQ(extra.status, 400);
  EXPECT_NE(extra.body.find("role"), std::string::npos) << extra.body;
  EXPECT_TRUE(extra.header("set-cookie").empty());
}

TEST_F(DashboardTest, ShellPerScopeAndTenantsNotGrantedLookMissing) {
  const Headers root = Session("root", "pw-root-1");
  const Headers alice = Session("alice", "pw-alice-1");
  EXPECT_EQ(Page(HttpMethod::kGet, "/", root).header("location"), "/admin/tasks/");
  EXPECT_EQ(Page(HttpMethod::kGet, "/", alice).header("location"), "/admin/a/tasks/");

  for (const auto& [who, target] :
       {std::pair{root, "/admin/tasks/"}, std::pair{root, "/admin/tasks/executions/12"},
        std::pair{root, "/admin/b/tasks/"}, std::pair{alice, "/admin/a/tasks/jobs"}}) {
    Reply r = Page(HttpMethod::kGet, target, who);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_NE(r.body.find("/admin/assets/app.js"), std::string::npos) << target;
    ExpectHtmlHeaders(r, target);
    EXPECT_EQ(r.header("content-security-policy").find("sha256"), std::string::npos);
  }
  Reply missing = Page(HttpMethod::kGet, "/admin/zz/tasks/", alice);
  EXPECT_EQ(missing.status, 404);
  ExpectHtmlHeaders(missing, "missing tenant");
  for (const char* target : {"/admin/b/tasks/", "/admin/tasks/", "/admin/b/tasks/executions/1"}) {
    Reply r = Page(HttpMethod::kGet, target, alice);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body, missing.body) << target << ": not granted must look like missing";
  }
  EXPECT_EQ(Page(HttpMethod::kGet, "/admin/zz/tasks/", root).body, missing.body);
}

TEST_F(DashboardTest, AssetsHaveTheirTypeNosniffAndAnETag) {
  const Headers root = Session("root", "pw-root-1");
  Reply js = Page(HttpMethod::kGet, "/admin/assets/app.js", root);
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(js.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(js.header("cache-control"), "no-cache");
  const std::string etag = js.header("etag");
  EXPECT_EQ(etag.size(), 66u) << etag;
  Headers again = root;
  again.emplace_back("If-None-Match", etag);
  Reply cached = Page(HttpMethod::kGet, "/admin/assets/app.js", again);
  EXPECT_EQ(cached.status, 304);
  EXPECT_TRUE(cached.body.empty());
  EXPECT_EQ(Page(HttpMethod::kGet, "/admin/assets/app.css", root).header("content-type"),
            "text/css; charset=utf-8");
  for (const char* missing : {"/admin/assets/nope.js", "/admin/assets/index.html"}) {
    EXPECT_EQ(Page(HttpMethod::kGet, missing, root).status, 404) << missing;
  }
}

TEST_F(DashboardTest, ApiPathsStayWithTheApiRouter) {
  Reply r = Page(HttpMethod::kGet, "/api/v1/stats");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.error_code(), "unauthenticated") << "the API keeps its JSON errors";
  EXPECT_EQ(Page(HttpMethod::kGet, "/healthz").status, 200);
}

}  // namespace
}  // namespace taskengine::api::testing
