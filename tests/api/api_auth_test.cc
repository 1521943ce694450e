// Authentication over the real router and a real store (X1, X2; quality.md
// §3 items 1, 2, 3, 5, 7): API tokens (lifecycle, hashing at rest, scopes,
// tenant binding), dashboard sessions (cookie attributes, new id per login,
// logout, idle and absolute timeouts on a FakeClock), CSRF and origin checks,
// rate limits, and the unauthenticated matrix with StoreAuthenticator.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "auth_fixture.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

std::string Concrete(const std::string& pattern) {
  std::string out = std::regex_replace(pattern, std::regex("\\{name\\}"), "echo");
  return std::regex_replace(out, std::regex("\\{[a-z_]+\\}"), "1");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class ApiAuthTest : public AuthApiFixture {
 protected:
  // Whether the router takes POST `target` on the network thread
  // (Router::TryInline); what it answers is dropped.
  bool TakenInline(const std::string& target, const std::string& secret, const std::string& body) {
    HttpRequest r = MakeRequest(HttpMethod::kPost, target, Bearer(secret), body, "application/json",
                                "10.0.0.7:40000");
    Responder respond([](HttpResponse) {});
    const bool taken = api_->router().TryInline(r, respond);
    if (!taken) respond.Abandon();
    return taken;
  }

  std::size_t ExecutionCount() {
    ExecutionFilter f;
    f.limit = 1000;
    Result<ExecutionPage> page = store().ListExecutions(f);
    EXPECT_OK(page.status());
    return page.ok() ? page->items.size() : 0;
  }
};

// --- tokens ---

TEST_F(ApiAuthTest, TokenWorksUntilRevoked) {
  std::int64_t id = 0;
  const std::string secret = MakeToken("ci", {"read"}, {"*"}, 0, &id);
  EXPECT_EQ(secret.rfind("te_", 0), 0u);
  EXPECT_GE(secret.size(), 3u + 43u);  // >= 32 random bytes, base64url
  Reply ok = Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret));
  EXPECT_EQ(ok.status, 200) << ok.body;
  Reply who = Call(HttpMethod::kGet, "/api/v1/auth/session", Bearer(secret));
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(who.json()["name"], "ci");
  EXPECT_EQ(who.json()["method"], "token");
  EXPECT_FALSE(who.json().contains("csrf_token"));

  ASSERT_OK(store().RevokeToken(id));
  Reply revoked = Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret));
  EXPECT_EQ(revoked.status, 401) << revoked.body;
  EXPECT_EQ(revoked.error_code(), "unauthenticated");
  EXPECT_EQ(revoked.header("www-authenticate").rfind("Bearer", 0), 0u);
}

// Dispatches may be authenticated from the tokens the API remembers (for
// 10 s); their admission confirms the token in its commit. So a revocation
// made straight in the store, as another process or node makes it, holds
// from the next request on, single and bulk, and admits nothing; a token
// that expires meanwhile likewise.
TEST_F(ApiAuthTest, DispatchIsRefusedFromTheRequestAfterItsTokensRevocation) {
  std::int64_t id = 0;
  const std::string secret = MakeToken("ci", {"dispatch"}, {"*"}, 0, &id);
  const std::string single = "/api/v1/jobs/echo/dispatch";
  const std::string bulk = "/api/v1/dispatch/bulk";
  const std::string body = json{{"payload", json::object()}}.dump();
  const std::string items = json{{"items", {{{"job", "echo"}}}}}.dump();
  ASSERT_EQ(Call(HttpMethod::kPost, single, Bearer(secret), body).status, 202);
  ASSERT_EQ(Call(HttpMethod::kPost, bulk, Bearer(secret), items).status, 202);
  EXPECT_EQ(ExecutionCount(), 2u);

  ASSERT_OK(store().RevokeToken(id));
  for (const auto& [path, payload] : {std::pair{single, body}, std::pair{bulk, items}}) {
    Reply r = Call(HttpMethod::kPost, path, Bearer(secret), payload);
    EXPECT_EQ(r.status, 401) << path << ": " << r.body;
    EXPECT_EQ(r.error_code(), "unauthenticated");
    EXPECT_EQ(r.header("www-authenticate").rfind("Bearer", 0), 0u);
  }
  EXPECT_EQ(ExecutionCount(), 2u) << "a revoked token's dispatch was admitted";

  const std::string dated = MakeToken("cd", {"dispatch"}, {"*"}, clock_.NowMillis() + 2'000);
  ASSERT_EQ(Call(HttpMethod::kPost, single, Bearer(dated), body).status, 202);
  clock_.Advance(seconds(2));
  EXPECT_EQ(Call(HttpMethod::kPost, single, Bearer(dated), body).status, 401);
  EXPECT_EQ(Call(HttpMethod::kPost, bulk, Bearer(dated), items).status, 401);
  EXPECT_EQ(ExecutionCount(), 3u) << "an expired token's dispatch was admitted";
}

// A single dispatch whose token is remembered runs on the network thread
// that read it (Router::TryInline takes it); one whose token was not read
// yet, one naming a parent, one over 16 KiB and a bulk dispatch are left to
// the handler threads.
TEST_F(ApiAuthTest, ASingleDispatchWithARememberedTokenIsTakenInline) {
  const std::string secret = MakeToken("ci", {"dispatch"});
  const auto taken_inline = [&](const std::string& target, const std::string& body) {
    return TakenInline(target, secret, body);
  };
  const std::string single = "/api/v1/jobs/echo/dispatch";
  const std::string body = json{{"payload", json::object()}}.dump();
  EXPECT_FALSE(taken_inline(single, body)) << "taken before its token was read";
  ASSERT_EQ(Call(HttpMethod::kPost, single, Bearer(secret), body).status, 202);
  EXPECT_TRUE(taken_inline(single, body));
  EXPECT_FALSE(taken_inline(single, json{{"payload", json::object()}, {"parent", 1}}.dump()));
  EXPECT_FALSE(
      taken_inline(single, json{{"payload", {{"pad", std::string(17 * 1024, 'x')}}}}.dump()));
  EXPECT_FALSE(taken_inline("/api/v1/dispatch/bulk", json{{"items", {{{"job", "echo"}}}}}.dump()));
}

// A remote worker's finishes may be authenticated from the tokens the API
// remembers too; each finish confirms the token in its commit. After a
// revocation straight in the store (or the token's expiry), complete, fail,
// release and the batch finish get 401, and the executions stay running.
TEST_F(ApiAuthTest, AFinishIsRefusedFromTheRequestAfterItsTokensRevocation) {
  JobDefinition job;
  job.name = JobName("remote");
  job.handler = "echo";
  job.queue = "remote";  // no worker of the engine serves it
  ASSERT_OK(engine_->DefineJob(job));
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(engine_->Dispatch({.job = JobName("remote"), .payload_json = "{}"}).status());
  }
  std::int64_t id = 0;
  const std::string secret = MakeToken("w", {"worker"}, {"*"}, 0, &id);
  Reply leased = Call(HttpMethod::kPost, "/api/v1/worker/lease", Bearer(secret),
                      json{{"worker_id", "w-1"}, {"queues", {"remote"}}, {"max", 4}}.dump());
  ASSERT_EQ(leased.status, 200) << leased.body;
  const json leases = leased.json()["leases"];
  ASSERT_EQ(leases.size(), 4u);
  const auto finish = [&](const json& lease, const std::string& kind, const std::string& token) {
    return Call(HttpMethod::kPost,
                "/api/v1/worker/executions/" + lease["id"].get<std::string>() + "/" + kind,
                Bearer(token), json{{"claim_version", lease["claim_version"]}}.dump());
  };
  const auto batch = [&](const json& lease, const std::string& token) {
    json item = {
        {"id", lease["id"]}, {"claim_version", lease["claim_version"]}, {"kind", "complete"}};
    return Call(HttpMethod::kPost, "/api/v1/worker/finish", Bearer(token),
                json{{"items", {item}}}.dump());
  };
  const auto status_of = [&](const json& lease) {
    Result<Execution> e =
        store().GetExecution(ExecutionId(std::stoll(lease["id"].get<std::string>())));
    EXPECT_OK(e.status());
    return e.ok() ? e->status : ExecutionStatus::kQueued;
  };
  ASSERT_EQ(finish(leases[0], "complete", secret).status, 200);

  ASSERT_OK(store().RevokeToken(id));
  for (const std::string kind : {"complete", "fail", "release"}) {
    Reply r = finish(leases[1], kind, secret);
    EXPECT_EQ(r.status, 401) << kind << ": " << r.body;
    EXPECT_EQ(r.error_code(), "unauthenticated");
    EXPECT_EQ(r.header("www-authenticate").rfind("Bearer", 0), 0u);
  }
  Reply refused = batch(leases[1], secret);
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.error_code(), "unauthenticated");
  EXPECT_EQ(status_of(leases[1]), ExecutionStatus::kRunning) << "a revoked token's finish landed";

  const std::string dated = MakeToken("wd", {"worker"}, {"*"}, clock_.NowMillis() + 2'000);
  ASSERT_EQ(finish(leases[1], "complete", dated).status, 200);
  clock_.Advance(seconds(2));
  EXPECT_EQ(finish(leases[2], "complete", dated).status, 401);
  EXPECT_EQ(batch(leases[3], dated).status, 401);
  EXPECT_EQ(status_of(leases[2]), ExecutionStatus::kRunning) << "an expired token's finish landed";
  EXPECT_EQ(status_of(leases[3]), ExecutionStatus::kRunning) << "an expired token's finish landed";
  const std::string fresh = MakeToken("wf", {"worker"});
  EXPECT_EQ(finish(leases[2], "complete", fresh).status, 200);
  EXPECT_EQ(batch(leases[3], fresh).status, 200);
}

// A single finish whose token is remembered runs on the network thread that
// read it, like a single dispatch; one whose token was not read yet, one
// over 16 KiB and a batch finish are left to the handler threads.
TEST_F(ApiAuthTest, ASingleFinishWithARememberedTokenIsTakenInline) {
  const std::string secret = MakeToken("w", {"worker"});
  const auto taken_inline = [&](const std::string& target, const std::string& body) {
    return TakenInline(target, secret, body);
  };
  // No such execution: each answers 404 wherever it runs.
  const std::string body = json{{"claim_version", 1}}.dump();
  const std::string complete = "/api/v1/worker/executions/999/complete";
  EXPECT_FALSE(taken_inline(complete, body)) << "taken before its token was read";
  ASSERT_EQ(Call(HttpMethod::kPost, complete, Bearer(secret), body).status, 404);
  for (const std::string kind : {"complete", "fail", "release"}) {
    EXPECT_TRUE(taken_inline("/api/v1/worker/executions/999/" + kind, body)) << kind;
  }
  EXPECT_FALSE(taken_inline(
      complete, json{{"claim_version", 1}, {"result", std::string(17 * 1024, 'x')}}.dump()));
  EXPECT_FALSE(taken_inline(
      "/api/v1/worker/finish",
      json{{"items", {{{"id", "999"}, {"claim_version", 1}, {"kind", "complete"}}}}}.dump()));
}

TEST_F(ApiAuthTest, TokenLastUsedIsRecorded) {
  std::int64_t id = 0;
  const std::string secret = MakeToken("ci", {"read"}, {"*"}, 0, &id);
  ASSERT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret)).status, 200);
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> tokens, store().ListTokens());
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].last_used_at, clock_.NowMillis());
}

TEST_F(ApiAuthTest, ExpiredTokenIs401) {
  const std::string secret = MakeToken("ci", {"read"}, {"*"}, clock_.NowMillis() + 60'000);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret)).status, 200);
  clock_.Advance(seconds(59));
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret)).status, 200);
  clock_.Advance(seconds(1));
  Reply r = Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret));
  EXPECT_EQ(r.status, 401) << r.body;
}

TEST_F(ApiAuthTest, UnknownAndMalformedTokensAre401) {
  MakeToken("ci", {"admin"});
  for (const std::string bad : {std::string("te_") + std::string(43, 'A'), std::string("ci"),
                                std::string("te_"), std::string(5000, 'x')}) {
    Reply r = Call(HttpMethod::kGet, "/api/v1/stats", Bearer(bad));
    EXPECT_EQ(r.status, 401) << bad.substr(0, 20);
  }
  // An Authorization header that is not Bearer does not fall back to a cookie.
  Reply basic = Call(HttpMethod::kGet, "/api/v1/stats", {{"Authorization", "Basic YTpi"}});
  EXPECT_EQ(basic.status, 401);
}

TEST_F(ApiAuthTest, SecretIsNotStoredOnlyItsHash) {
  const std::string secret = MakeToken("ci", {"read"});
  ASSERT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", Bearer(secret)).status, 200);
  MakeUser("alice", "correct horse battery", "viewer");
  Login login = LogIn("alice", "correct horse battery");
  ASSERT_FALSE(login.cookie.empty());
  const std::string db = dir_.File("taskengine.db");
  const std::string bytes = ReadAll(db) + ReadAll(db + "-wal");
  ASSERT_FALSE(bytes.empty());
  // The scan would find them: the hashes are there.
  EXPECT_NE(bytes.find(HashSecret(secret)), std::string::npos);
  EXPECT_NE(bytes.find(HashSecret(login.cookie)), std::string::npos);
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_EQ(bytes.find(secret.substr(3)), std::string::npos);
  EXPECT_EQ(bytes.find(login.cookie), std::string::npos);
  EXPECT_EQ(bytes.find("correct horse battery"), std::string::npos);
  ASSERT_OK_AND_ASSIGN(User alice, store().GetUser("alice"));
  EXPECT_EQ(alice.password_hash.rfind("$argon2id$", 0), 0u) << alice.password_hash;
}

TEST_F(ApiAuthTest, TokenOfAnotherTenantGets404LikeAMissingId) {
  const std::string a = MakeToken("alice-ci", {"read", "dispatch"}, {"a"});
  const std::string b = MakeToken("bob-ci", {"read", "dispatch", "operate"}, {"b"});
  const std::int64_t id = Dispatch(a, "tenant-echo", "a");
  ASSERT_GT(id, 0);
  const std::string path = "/api/v1/executions/" + std::to_string(id);
  EXPECT_EQ(Call(HttpMethod::kGet, path, Bearer(a)).status, 200);
  Reply other = Call(HttpMethod::kGet, path, Bearer(b));
  Reply missing = Call(HttpMethod::kGet, "/api/v1/executions/999999", Bearer(b));
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(other.error_code(), missing.error_code());
  EXPECT_EQ(std::regex_replace(other.body, std::regex("[0-9]+"), "N"),
            std::regex_replace(missing.body, std::regex("[0-9]+"), "N"));
  Reply cancel = Call(HttpMethod::kPost, path + "/cancel", Bearer(b), "{}");
  EXPECT_EQ(cancel.status, 404) << cancel.body;
  // A tenant-bound token cannot dispatch for another tenant.
  Reply cross = Call(HttpMethod::kPost, "/api/v1/jobs/tenant-echo/dispatch", Bearer(a),
                     json{{"tenant", "b"}, {"payload", json::object()}}.dump());
  EXPECT_EQ(cross.status, 403) << cross.body;
}

TEST_F(ApiAuthTest, MissingScopeIs403) {
  const std::string reader = MakeToken("reader", {"read"});
  Reply r = Call(HttpMethod::kPost, "/api/v1/jobs/echo/dispatch", Bearer(reader),
                 json{{"payload", json::object()}}.dump());
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.error_code(), "forbidden");
  Reply audit = Call(HttpMethod::kGet, "/api/v1/audit", Bearer(reader));
  EXPECT_EQ(audit.status, 403);
}

TEST_F(ApiAuthTest, WorkerTokenCannotReachOperatorRoutes) {
  const std::string worker = MakeToken("wrk", {"worker"});
  int checked = 0;
  for (const Router::RouteInfo& route : api_->router().routes()) {
    if (route.access.kind != RouteAccess::Kind::kScope || route.access.scope == Scope::kWorker) {
      continue;
    }
    const std::string body =
        route.method == HttpMethod::kPost || route.method == HttpMethod::kPatch ? "{}" : "";
    Reply r = Call(route.method, Concrete(route.pattern), Bearer(worker), body);
    EXPECT_EQ(r.status, 403) << ToString(route.method) << " " << route.pattern << ": " << r.body;
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// --- sessions ---

TEST_F(ApiAuthTest, LoginSetsAHardenedSessionCookie) {
  MakeUser("alice", "pw-alice-1", "operator", {"a"});
  Reply r = PostLogin("alice", "pw-alice-1");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string cookie = r.header("set-cookie");
  EXPECT_EQ(cookie.rfind("te_session=", 0), 0u) << cookie;
  EXPECT_NE(cookie.find("; HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; SameSite=Strict"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; Path=/"), std::string::npos) << cookie;
  EXPECT_EQ(cookie.find("Secure"), std::string::npos) << "no TLS configured: " << cookie;
  EXPECT_EQ(r.header("cache-control"), "no-store");
  json body = r.json();
  EXPECT_EQ(body["user"], "alice");
  EXPECT_EQ(body["tenants"], json::array({"a"}));
  EXPECT_EQ(body["all_tenants"], false);
  EXPECT_GE(body["csrf_token"].get<std::string>().size(), 43u);
  EXPECT_EQ(body["idle_timeout_seconds"], 30 * 60);

  Login login = LogIn("alice", "pw-alice-1");
  Reply who = Call(HttpMethod::kGet, "/api/v1/auth/session", SessionHeaders(login, false));
  ASSERT_EQ(who.status, 200) << who.body;
  EXPECT_EQ(who.json()["name"], "alice");
  EXPECT_EQ(who.json()["method"], "session");
  EXPECT_EQ(who.json()["csrf_token"], login.csrf);
}

TEST_F(ApiAuthTest, SecureCookiesWhenConfigured) {
  StoreAuthenticatorOptions o;
  o.clock = &clock_;
  o.secure_cookies = true;
  StoreAuthenticator secure_auth(&store(), o);
  Api secure_api(engine_.get(), &secure_auth, ApiOptions{.clock = &clock_});
  MakeUser("alice", "pw-alice-1", "viewer");
  HttpRequest req;
  req.method = HttpMethod::kPost;
  req.method_name = "POST";
  req.path = req.target = "/api/v1/auth/login";
  req.body = json{{"username", "alice"}, {"password", "pw-alice-1"}}.dump();
  std::promise<HttpResponse> p;
  secure_api.router().Handle(req, Responder([&p](HttpResponse r) { p.set_value(std::move(r)); }));
  HttpResponse resp = p.get_future().get();
  ASSERT_EQ(resp.status, 200) << resp.body;
  std::string cookie;
  for (const auto& [n, v] : resp.headers) {
    if (n == "Set-Cookie") cookie = v;
  }
  EXPECT_NE(cookie.find("; Secure"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("; HttpOnly"), std::string::npos) << cookie;
}

TEST_F(ApiAuthTest, EachLoginGetsANewSessionIdAndReplacesThePresentedOne) {
  MakeUser("alice", "pw-alice-1", "viewer");
  Login first = LogIn("alice", "pw-alice-1");
  Login second = LogIn("alice", "pw-alice-1");
  ASSERT_FALSE(first.cookie.empty());
  EXPECT_NE(first.cookie, second.cookie);
  EXPECT_NE(first.csrf, second.csrf);
  // Logging in while presenting a session ends that session (no fixation).
  Reply third = PostLogin("alice", "pw-alice-1",
                          {{"Cookie", std::string(kSessionCookie) + "=" + first.cookie}});
  ASSERT_EQ(third.status, 200);
  EXPECT_EQ(third.header("set-cookie").find(first.cookie), std::string::npos);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(first, false)).status, 401);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(second, false)).status, 200);
}

TEST_F(ApiAuthTest, FailedLoginsLookAlikeAndNameNobody) {
  MakeUser("alice", "pw-alice-1", "viewer");
  MakeUser("mallory", "pw-mallory", "viewer", {"*"}, /*disabled=*/true);
  Reply wrong = PostLogin("alice", "not-it");
  Reply unknown = PostLogin("nobody", "not-it");
  Reply disabled = PostLogin("mallory", "pw-mallory");
  for (const Reply* r : {&wrong, &unknown, &disabled}) {
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_EQ(r->body, wrong.body);
    EXPECT_TRUE(r->header("set-cookie").empty());
  }
  EXPECT_EQ(wrong.body.find("alice"), std::string::npos);
  // Missing fields are missing credentials; a malformed body is a 400.
  EXPECT_EQ(Call(HttpMethod::kPost, "/api/v1/auth/login", {}, "{}").status, 401);
  EXPECT_EQ(Call(HttpMethod::kPost, "/api/v1/auth/login", {}, "{\"username\":").status, 400);
  EXPECT_EQ(Call(HttpMethod::kPost, "/api/v1/auth/login", {},
                 json{{"username", "alice"}, {"password", "pw-alice-1"}, {"extra", 1}}.dump())
                .status,
            400);
  // A cross-origin login form is refused.
  Reply cross = PostLogin("alice", "pw-alice-1", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(cross.status, 403) << cross.body;
}

TEST_F(ApiAuthTest, LogoutEndsTheSessionServerSide) {
  MakeUser("alice", "pw-alice-1", "viewer");
  Login login = LogIn("alice", "pw-alice-1");
  ASSERT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 200);
  // Logout is a mutation: it needs the CSRF token too.
  EXPECT_EQ(Call(HttpMethod::kPost, "/api/v1/auth/logout", SessionHeaders(login, false)).status,
            403);
  Reply out = Call(HttpMethod::kPost, "/api/v1/auth/logout", SessionHeaders(login));
  EXPECT_EQ(out.status, 204) << out.body;
  EXPECT_NE(out.header("set-cookie").find("Max-Age=0"), std::string::npos);
  EXPECT_EQ(store().GetSession(HashSecret(login.cookie)).status().code(), ErrorCode::kNotFound);
  // Replaying the old cookie does not work.
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 401);
}

TEST_F(ApiAuthTest, SessionIdleTimeout) {
  MakeUser("alice", "pw-alice-1", "viewer");
  Login login = LogIn("alice", "pw-alice-1");
  for (int i = 0; i < 3; ++i) {  // activity keeps it alive past 30 minutes in total
    clock_.Advance(minutes(29));
    EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 200)
        << "after " << (i + 1) * 29 << " minutes";
  }
  clock_.Advance(minutes(30));
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 401);
  // An expired session is deleted, not just refused.
  EXPECT_EQ(store().GetSession(HashSecret(login.cookie)).status().code(), ErrorCode::kNotFound);
}

TEST_F(ApiAuthTest, SessionAbsoluteTimeout) {
  MakeUser("alice", "pw-alice-1", "viewer");
  Login login = LogIn("alice", "pw-alice-1");
  for (int i = 0; i < 35; ++i) {  // 35 * 20 min = 11 h 40 min of steady activity
    clock_.Advance(minutes(20));
    ASSERT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 200)
        << i;
  }
  clock_.Advance(minutes(20));  // 12 h after login
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 401);
}

TEST_F(ApiAuthTest, SessionFollowsTheUserRecord) {
  MakeUser("alice", "pw-alice-1", "viewer");
  Login login = LogIn("alice", "pw-alice-1");
  ASSERT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 200);
  ASSERT_OK_AND_ASSIGN(User alice, store().GetUser("alice"));
  alice.disabled = true;
  ASSERT_OK(store().UpsertUser(alice));
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 401);
}

// --- CSRF and origin ---

TEST_F(ApiAuthTest, SessionMutationsNeedCsrfTokenAndSameOrigin) {
  MakeUser("olga", "pw-olga-123", "operator");
  Login login = LogIn("olga", "pw-olga-123");
  const std::string body = json{{"payload", json::object()}}.dump();
  const std::string path = "/api/v1/jobs/echo/dispatch";
  const Headers cookie = {{"Cookie", std::string(kSessionCookie) + "=" + login.cookie}};
  auto with = [&](Headers extra) {
    Headers h = cookie;
    h.insert(h.end(), extra.begin(), extra.end());
    return h;
  };
  Reply none = Call(HttpMethod::kPost, path, with({{"Origin", kOrigin}}), body);
  EXPECT_EQ(none.status, 403) << none.body;
  EXPECT_EQ(none.json()["error"]["details"]["reason"], "csrf");
  Reply wrong =
      Call(HttpMethod::kPost, path,
           with({{"Origin", kOrigin}, {"X-CSRF-Token", login.csrf.substr(1) + "x"}}), body);
  EXPECT_EQ(wrong.status, 403) << wrong.body;
  Reply cross =
      Call(HttpMethod::kPost, path,
           with({{"Origin", "https://evil.example"}, {"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(cross.status, 403) << cross.body;
  EXPECT_EQ(cross.json()["error"]["details"]["reason"], "origin");
  Reply null_origin =
      Call(HttpMethod::kPost, path, with({{"Origin", "null"}, {"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(null_origin.status, 403);
  Reply no_origin = Call(HttpMethod::kPost, path, with({{"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(no_origin.status, 403) << "neither Origin nor Referer";
  Reply bad_referer =
      Call(HttpMethod::kPost, path,
           with({{"Referer", "https://evil.example/x"}, {"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(bad_referer.status, 403);
  EXPECT_EQ(ExecutionCount(), 0u) << "a refused mutation changed nothing";

  Reply ok = Call(HttpMethod::kPost, path,
                  with({{"Origin", kOrigin}, {"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(ok.status, 202) << ok.body;
  Reply referer = Call(
      HttpMethod::kPost, path,
      with({{"Referer", std::string(kOrigin) + "/ui/jobs"}, {"X-CSRF-Token", login.csrf}}), body);
  EXPECT_EQ(referer.status, 202) << referer.body;
  // Another session's CSRF token does not fit this session.
  Login other = LogIn("olga", "pw-olga-123");
  Reply swapped = Call(HttpMethod::kPost, path,
                       with({{"Origin", kOrigin}, {"X-CSRF-Token", other.csrf}}), body);
  EXPECT_EQ(swapped.status, 403);
  // Bearer tokens need no CSRF token (no ambient credentials).
  const std::string token = MakeToken("ci", {"dispatch"});
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(token), body).status, 202);
}

TEST_F(ApiAuthTest, GetNeverMutates) {
  MakeUser("olga", "pw-olga-123", "operator");
  Login login = LogIn("olga", "pw-olga-123");
  // GET on mutation routes is 405, and changes nothing.
  Reply logout = Call(HttpMethod::kGet, "/api/v1/auth/logout", SessionHeaders(login, false));
  EXPECT_EQ(logout.status, 405);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", SessionHeaders(login, false)).status, 200);
  Reply dispatch =
      Call(HttpMethod::kGet, "/api/v1/jobs/echo/dispatch", SessionHeaders(login, false));
  EXPECT_EQ(dispatch.status, 405);
  EXPECT_EQ(ExecutionCount(), 0u);
  // Every GET route is free of the CSRF requirement only because none mutates:
  // the router registers no state-changing GET.
  for (const Router::RouteInfo& route : api_->router().routes()) {
    if (route.method != HttpMethod::kGet) continue;
    EXPECT_EQ(route.pattern.find("/cancel"), std::string::npos) << route.pattern;
    EXPECT_EQ(route.pattern.find("/replay"), std::string::npos) << route.pattern;
    EXPECT_EQ(route.pattern.find("/approve"), std::string::npos) << route.pattern;
    EXPECT_EQ(route.pattern.find("/logout"), std::string::npos) << route.pattern;
    EXPECT_EQ(route.pattern.find("/login"), std::string::npos) << route.pattern;
  }
}

// --- rate limits ---

TEST_F(ApiAuthTest, DispatchRateLimitPerPrincipal) {
  RateLimiterOptions ro;
  ro.clock = &clock_;
  ro.dispatch = {2, 2};
  RateLimiter limiter(ro);
  api_->router().SetRateLimiter(&limiter);
  const std::string a = MakeToken("a", {"dispatch"});
  const std::string b = MakeToken("b", {"dispatch"});
  const std::string body = json{{"payload", json::object()}}.dump();
  const std::string path = "/api/v1/jobs/echo/dispatch";
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(a), body).status, 202);
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(a), body).status, 202);
  Reply limited = Call(HttpMethod::kPost, path, Bearer(a), body);
  EXPECT_EQ(limited.status, 429) << limited.body;
  EXPECT_EQ(limited.error_code(), "rate_limited");
  EXPECT_EQ(limited.header("retry-after"), "1");
  EXPECT_EQ(limited.json()["error"]["details"]["retry_after_seconds"], 1);
  // Another principal has its own bucket.
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(b), body).status, 202);
  // Reads are not limited.
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats", Bearer(a)).status, 200);
  clock_.Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(a), body).status, 202);
  EXPECT_EQ(Call(HttpMethod::kPost, path, Bearer(a), body).status, 429);
  EXPECT_EQ(ExecutionCount(), 4u) << "429 answers admitted nothing";
}

TEST_F(ApiAuthTest, LoginRateLimitPerClientIp) {
  RateLimiterOptions ro;
  ro.clock = &clock_;
  ro.login = {10.0 / 60.0, 3};
  RateLimiter limiter(ro);
  api_->router().SetRateLimiter(&limiter);
  MakeUser("alice", "pw-alice-1", "viewer");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(PostLogin("alice", "wrong", {}, "10.1.1.1:1000").status, 401);
  Reply limited = PostLogin("alice", "pw-alice-1", {}, "10.1.1.1:1001");
  EXPECT_EQ(limited.status, 429) << "even the right password waits";
  EXPECT_EQ(limited.header("retry-after"), "6");
  EXPECT_TRUE(limited.header("set-cookie").empty());
  EXPECT_EQ(PostLogin("alice", "pw-alice-1", {}, "10.1.1.2:1000").status, 200);
  clock_.Advance(seconds(6));
  EXPECT_EQ(PostLogin("alice", "pw-alice-1", {}, "10.1.1.1:1002").status, 200);
}

TEST(RateLimiterTest, ClassesAndBuckets) {
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kPost, "/api/v1/auth/login"), RateClass::kLogin);
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kPost, "/api/v1/jobs/{name}/dispatch"),
            RateClass::kDispatch);
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kPost, "/api/v1/dispatch/bulk"), RateClass::kDispatch);
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kPost, "/api/v1/worker/lease"), RateClass::kLease);
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kPost, "/api/v1/worker/executions/{id}/release"),
            RateClass::kNone);
  EXPECT_EQ(RateLimiter::ClassOf(HttpMethod::kGet, "/api/v1/executions"), RateClass::kNone);
  EXPECT_EQ(ClientIp("10.0.0.1:5000"), "10.0.0.1");
  EXPECT_EQ(ClientIp("::1:5000"), "::1");
  EXPECT_EQ(ClientIp("[::1]:5000"), "::1");

  FakeClock clock;
  RateLimiterOptions o;
  o.clock = &clock;
  o.lease = {4, 2};
  o.max_keys = 2;
  RateLimiter limiter(o);
  EXPECT_EQ(limiter.Acquire(RateClass::kLease, "k"), 0);
  EXPECT_EQ(limiter.Acquire(RateClass::kLease, "k"), 0);
  EXPECT_EQ(limiter.Acquire(RateClass::kLease, "k"), 250);
  clock.Advance(std::chrono::milliseconds(250));
  EXPECT_EQ(limiter.Acquire(RateClass::kLease, "k"), 0);
  // Many distinct keys never grow the table without bound.
  for (int i = 0; i < 100; ++i) limiter.Acquire(RateClass::kLease, "key" + std::to_string(i));
  EXPECT_EQ(limiter.Acquire(RateClass::kNone, "k"), 0);
  o.dispatch = {0, 0};  // unlimited
  RateLimiter unlimited(o);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(unlimited.Acquire(RateClass::kDispatch, "k"), 0);
}

// --- the unauthenticated matrix (quality.md §3.1) with the real authenticator ---

TEST_F(ApiAuthTest, EveryRouteWithoutValidCredentialsIs401) {
  // Something real to point at, so a leak would show as a 200.
  const std::string admin = MakeToken("admin", {"admin"});
  const std::int64_t id = Dispatch(admin, "echo");
  ASSERT_EQ(id, 1);
  MakeUser("alice", "pw-alice-1", "admin");
  Login gone = LogIn("alice", "pw-alice-1");
  ASSERT_EQ(Call(HttpMethod::kPost, "/api/v1/auth/logout", SessionHeaders(gone)).status, 204);

  const std::vector<std::pair<std::string, Headers>> attempts = {
      {"no credentials", {}},
      {"unknown bearer", Bearer("te_" + std::string(43, 'Q'))},
      {"non-te bearer", Bearer("admin")},
      {"empty bearer", {{"Authorization", "Bearer "}}},
      {"unknown cookie", {{"Cookie", "te_session=forged"}}},
      {"logged-out cookie",
       {{"Cookie", "te_session=" + gone.cookie}, {"X-CSRF-Token", gone.csrf}, {"Origin", kOrigin}}},
  };
  int checked = 0;
  int public_routes = 0;
  for (const Router::RouteInfo& route : api_->router().routes()) {
    if (route.access.kind == RouteAccess::Kind::kPublic) {
      ++public_routes;
      EXPECT_TRUE(route.pattern == "/healthz" || route.pattern == "/readyz") << route.pattern;
      continue;
    }
    for (const auto& [what, headers] : attempts) {
      const std::string body =
          route.method == HttpMethod::kPost || route.method == HttpMethod::kPatch ? "{}" : "";
      Reply r = Call(route.method, Concrete(route.pattern), headers, body);
      EXPECT_EQ(r.status, 401) << ToString(route.method) << " " << route.pattern << " with " << what
                               << ": " << r.body;
      EXPECT_EQ(r.error_code(), "unauthenticated");
      ++checked;
    }
  }
  EXPECT_EQ(public_routes, 2);
  EXPECT_GE(checked, 6 * 18);
  EXPECT_EQ(Call(HttpMethod::kGet, "/healthz").status, 200);
  EXPECT_EQ(Call(HttpMethod::kGet, "/readyz").status, 200);
}

TEST(AnonymousAuthenticatorTest, IsAGlobalAdminNamedAnonymous) {
  AnonymousAuthenticator auth;
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> p, auth.Authenticate(HttpRequest{}));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->name, "anonymous");
  EXPECT_TRUE(p->all_tenants);
  EXPECT_TRUE(p->HasScope(Scope::kAdmin));
  EXPECT_EQ(p->method, AuthMethod::kNone);
}

TEST_F(ApiAuthTest, AuthDisabledStillRefusesCrossSiteMutations) {
  AnonymousAuthenticator anonymous;
  Api open_api(engine_.get(), &anonymous, ApiOptions{.clock = &clock_});
  auto post = [&](Headers headers) {
    HttpRequest req;
    req.method = HttpMethod::kPost;
    req.method_name = "POST";
    req.path = req.target = "/api/v1/jobs/echo/dispatch";
    req.headers = {{"host", kHost}, {"content-type", "application/json"}};
    for (auto& [n, v] : headers) req.headers.emplace_back(n, v);
    req.body = json{{"payload", json::object()}}.dump();
    std::promise<HttpResponse> p;
    open_api.router().Handle(req, Responder([&p](HttpResponse r) { p.set_value(std::move(r)); }));
    return p.get_future().get().status;
  };
  EXPECT_EQ(post({{"origin", "https://evil.example"}}), 403);
  EXPECT_EQ(post({{"referer", "https://evil.example/page"}}), 403);
  EXPECT_EQ(post({}), 202) << "a script or CLI sends no Origin";
  EXPECT_EQ(post({{"origin", kOrigin}}), 202);
  EXPECT_EQ(ExecutionCount(), 2u);
}

TEST(PasswordTest, Argon2idRoundTrip) {
  ASSERT_OK_AND_ASSIGN(std::string h, HashPassword("s3cret"));
  EXPECT_EQ(h.rfind("$argon2id$", 0), 0u);
  EXPECT_TRUE(VerifyPassword(h, "s3cret"));
  EXPECT_FALSE(VerifyPassword(h, "s3cret "));
  EXPECT_FALSE(VerifyPassword("garbage", "s3cret"));
  ASSERT_OK_AND_ASSIGN(std::string h2, HashPassword("s3cret"));
  EXPECT_NE(h, h2) << "salted";
  EXPECT_EQ(HashPassword("").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RoleScopes("root").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(RoleOf(*RoleScopes("operator")), "operator");
}

TEST(CookieTest, ParsesCookieHeaders) {
  HttpRequest r;
  r.headers = {{"cookie", "a=1; te_session=abc ; b=2"}, {"cookie", "c=3"}};
  EXPECT_EQ(CookieValue(r, "te_session"), "abc");
  EXPECT_EQ(CookieValue(r, "c"), "3");
  EXPECT_EQ(CookieValue(r, "session"), std::nullopt);
}

}  // namespace
}  // namespace taskengine::api::testing
