// quality.md §3 items 1, 5 and 6 over the real server: every route needs
// credentials (except health and readiness), scopes are enforced on every
// route, and tenant A's credentials against every by-id route of tenant B
// answer 404 exactly like a missing id.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "api_harness.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;

// A concrete path for a route pattern: {id} -> id, {name} -> job.
std::string Concrete(const std::string& pattern, const std::string& id,
                     const std::string& job = "echo") {
  std::string out = std::regex_replace(pattern, std::regex("\\{id\\}"), id);
  return std::regex_replace(out, std::regex("\\{name\\}"), job);
}

std::string BodyFor(HttpMethod method) {
  return method == HttpMethod::kPost || method == HttpMethod::kPatch ? "{}" : "";
}

class ApiSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(harness_.Start());
    client_ = std::make_unique<TestClient>(harness_.port());
  }

  std::int64_t Dispatch(const std::string& job, const json& body, const std::string& token) {
    ClientResponse r = client_->Post("/api/v1/jobs/" + job + "/dispatch", token, body);
    EXPECT_EQ(r.status, 202) << r.body;
    return r.json().value("id", std::int64_t{0});
  }

  ApiHarness harness_;
  std::unique_ptr<TestClient> client_;
};

TEST_F(ApiSecurityTest, EveryRouteWithoutCredentialsIs401) {
  int checked = 0;
  for (const Router::RouteInfo& route : harness_.api().router().routes()) {
    const std::string path = Concrete(route.pattern, "1");
    const std::string method(ToString(route.method));
    for (const std::string token : {std::string(), std::string("not-a-token")}) {
      ClientResponse r = client_->Request(method, path, token, BodyFor(route.method));
      if (route.access.kind == RouteAccess::Kind::kPublic) {
        EXPECT_NE(r.status, 401) << method << " " << path;
        continue;
      }
      EXPECT_EQ(r.status, 401) << method << " " << path << " token '" << token << "': " << r.body;
      EXPECT_EQ(r.error_code(), "unauthenticated");
      EXPECT_EQ(r.header("www-authenticate").rfind("Bearer", 0), 0u);
      ++checked;
    }
  }
  EXPECT_GE(checked, 2 * 16);
  // Only health and readiness are public by default.
  int public_routes = 0;
  for (const Router::RouteInfo& route : harness_.api().router().routes()) {
    if (route.access.kind == RouteAccess::Kind::kPublic) {
      ++public_routes;
      EXPECT_TRUE(route.pattern == "/healthz" || route.pattern == "/readyz") << route.pattern;
    }
  }
  EXPECT_EQ(public_routes, 2);
}

TEST_F(ApiSecurityTest, EveryScopedRouteRefusesPrincipalsWithoutTheScope) {
  const std::pair<const char*, Principal> tokens[] = {
      {kReader, Principal::Make("reader", {Scope::kRead}, true)},
      {kDispatcher, Principal::Make("disp", {Scope::kDispatch}, true)},
      {kOperator, Principal::Make("oper", {Scope::kOperate}, true)},
      {kAdmin, Principal::Make("admin", {Scope::kAdmin}, true)},
      {kWorker, Principal::Make("wrk", {Scope::kWorker}, true)},
  };
  int forbidden = 0;
  for (const Router::RouteInfo& route : harness_.api().router().routes()) {
    if (route.access.kind != RouteAccess::Kind::kScope) continue;
    const std::string path = Concrete(route.pattern, "424242");
    const std::string method(ToString(route.method));
    for (const auto& [token, principal] : tokens) {
      ClientResponse r = client_->Request(method, path, token, BodyFor(route.method));
      if (principal.HasScope(route.access.scope)) {
        EXPECT_NE(r.status, 403) << method << " " << path << " as " << principal.name << ": "
                                 << r.body;
        EXPECT_NE(r.status, 401) << method << " " << path;
      } else {
        EXPECT_EQ(r.status, 403) << method << " " << path << " as " << principal.name;
        EXPECT_EQ(r.error_code(), "forbidden");
        ++forbidden;
      }
    }
  }
  EXPECT_GT(forbidden, 20);
  // Worker tokens never reach operator routes.
  ClientResponse w = client_->Post("/api/v1/executions/1/cancel", kWorker, json::object());
  EXPECT_EQ(w.status, 403);
}

TEST_F(ApiSecurityTest, TenantIsolationMatrix) {
  // Tenant B's executions in several states, and a global one.
  std::int64_t succeeded = Dispatch("tenant-echo", {{"tenant", "b"}}, kTenantB);
  std::int64_t quarantined = Dispatch("poison", {{"tenant", "b"}}, kTenantB);
  std::int64_t queued =
      Dispatch("tenant-echo", {{"tenant", "b"}, {"delay_ms", 3'600'000}}, kTenantB);
  std::int64_t global = Dispatch("echo", json::object(), kDispatcher);
  harness_.WaitForStatus(succeeded, "succeeded");
  harness_.WaitForStatus(quarantined, "quarantined");
  harness_.WaitForStatus(global, "succeeded");
  const std::int64_t missing = 987654321;

  std::vector<Router::RouteInfo> by_id;
  for (const Router::RouteInfo& route : harness_.api().router().routes()) {
    if (route.pattern.rfind("/api/v1/executions/{id}", 0) == 0) by_id.push_back(route);
  }
  ASSERT_GE(by_id.size(), 5u);

  for (const Router::RouteInfo& route : by_id) {
    const std::string method(ToString(route.method));
    // What a missing id looks like, with the id masked.
    std::string body;
    if (route.method == HttpMethod::kPost) {
      const bool approve = route.pattern.size() >= 8 &&
                           route.pattern.compare(route.pattern.size() - 8, 8, "/approve") == 0;
      body = approve ? "{}" : R"({"reason":"probe"})";
    }
    ClientResponse miss =
        client_->Request(method, Concrete(route.pattern, std::to_string(missing)), kTenantA, body);
    ASSERT_EQ(miss.status, 404) << method << " " << route.pattern << ": " << miss.body;
    std::string expected = std::regex_replace(miss.body, std::regex(std::to_string(missing)), "ID");
    for (std::int64_t id : {succeeded, quarantined, queued, global}) {
      ClientResponse r =
          client_->Request(method, Concrete(route.pattern, std::to_string(id)), kTenantA, body);
      EXPECT_EQ(r.status, 404) << method << " " << route.pattern << " id " << id << ": " << r.body;
      EXPECT_EQ(std::regex_replace(r.body, std::regex(std::to_string(id)), "ID"), expected)
          << "another tenant's id must look exactly like a missing one";
      // And its owner does see it.
      if (route.method == HttpMethod::kGet && route.pattern == "/api/v1/executions/{id}" &&
          id != global) {
        EXPECT_EQ(
            client_->Request(method, Concrete(route.pattern, std::to_string(id)), kTenantB).status,
            200);
      }
    }
  }
  // Nothing changed: the probes canceled and replayed nothing.
  ClientResponse q = client_->Get("/api/v1/executions/" + std::to_string(queued), kTenantB);
  EXPECT_EQ(q.json()["status"], "queued");
  EXPECT_TRUE(q.json()["audit"].empty()) << q.body;
  ClientResponse p = client_->Get("/api/v1/executions/" + std::to_string(quarantined), kTenantB);
  EXPECT_EQ(p.json()["status"], "quarantined");
  EXPECT_TRUE(p.json()["audit"].empty()) << p.body;
}

TEST_F(ApiSecurityTest, TenantBoundPrincipalsSeeOnlyTheirTenants) {
  std::int64_t a = Dispatch("tenant-echo", {{"tenant", "a"}}, kTenantA);
  std::int64_t b = Dispatch("tenant-echo", {{"tenant", "b"}}, kTenantB);
  Dispatch("echo", json::object(), kDispatcher);

  ClientResponse list = client_->Get("/api/v1/executions", kTenantA);
  ASSERT_EQ(list.status, 200);
  ASSERT_EQ(list.json()["items"].size(), 1u);
  EXPECT_EQ(list.json()["items"][0]["id"], a);
  EXPECT_EQ(client_->Get("/api/v1/executions?tenant=b", kTenantA).status, 403);
  ClientResponse all = client_->Get("/api/v1/executions", kReader);
  EXPECT_EQ(all.json()["items"].size(), 3u);

  // A principal of two tenants gets both, merged newest first, paged.
  harness_.auth().Add("ab-token", Principal::Make("ab", {Scope::kRead}, false, {"a", "b"}));
  ClientResponse page1 = client_->Get("/api/v1/executions?limit=1", "ab-token");
  ASSERT_EQ(page1.status, 200);
  ASSERT_EQ(page1.json()["items"].size(), 1u);
  EXPECT_EQ(page1.json()["items"][0]["id"], b);
  ASSERT_TRUE(page1.json()["next_cursor"].is_string());
  ClientResponse page2 = client_->Get(
      "/api/v1/executions?limit=1&cursor=" + page1.json()["next_cursor"].get<std::string>(),
      "ab-token");
  ASSERT_EQ(page2.json()["items"].size(), 1u);
  EXPECT_EQ(page2.json()["items"][0]["id"], a);

  // Dispatch only for granted tenants; global jobs need global access.
  EXPECT_EQ(client_->Post("/api/v1/jobs/tenant-echo/dispatch", kTenantA, {{"tenant", "b"}}).status,
            403);
  EXPECT_EQ(client_->Post("/api/v1/jobs/echo/dispatch", kTenantA, json::object()).status, 403);
  json bulk = {{"items", json::array({{{"job", "tenant-echo"}, {"tenant", "a"}},
                                      {{"job", "tenant-echo"}, {"tenant", "b"}}})}};
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kTenantA, bulk).status, 403);
  EXPECT_EQ(client_->Get("/api/v1/executions", kTenantA).json()["items"].size(), 1u)
      << "the refused bulk created nothing";

  // Job definitions: per-tenant ones only.
  ClientResponse jobs = client_->Get("/api/v1/jobs", kTenantA);
  const json visible = jobs.json();
  EXPECT_FALSE(visible["items"].empty());
  for (const json& j : visible["items"]) EXPECT_EQ(j["scope"], "per_tenant") << j.dump();
  EXPECT_EQ(client_->Get("/api/v1/jobs/echo", kTenantA).status, 404);
  EXPECT_EQ(client_->Get("/api/v1/jobs/tenant-echo", kTenantA).status, 200);

  // Stats and queues count its tenant only (X2): one execution of a, none of
  // b or of the global job, and no engine-wide figures. /metrics stays global.
  ClientResponse stats = client_->Get("/api/v1/stats", kTenantA);
  ASSERT_EQ(stats.status, 200) << stats.body;
  const json seen = stats.json();
  std::int64_t counted = 0;
  for (const auto& [status, n] : seen["by_status"].items()) counted += n.get<std::int64_t>();
  EXPECT_EQ(counted, 1) << stats.body;
  EXPECT_EQ(seen["scope"], "tenants");
  EXPECT_FALSE(seen.contains("engine")) << stats.body;
  EXPECT_TRUE(seen["busy_worker_threads"].is_null()) << stats.body;
  for (const json& t : seen["tenants"]) EXPECT_EQ(t["tenant"], "a") << t.dump();
  ClientResponse queues = client_->Get("/api/v1/queues", kTenantA);
  ASSERT_EQ(queues.status, 200) << queues.body;
  EXPECT_EQ(client_->Get("/metrics", kTenantA).status, 403);
  // Lanes belong to tenants (O1): a tenant-bound principal sees its own only.
  ClientResponse lanes = client_->Get("/api/v1/lanes", kTenantA);
  ASSERT_EQ(lanes.status, 200) << lanes.body;
  const json lane_items = lanes.json()["items"];
  for (const json& l : lane_items) EXPECT_EQ(l["tenant"], "a") << l.dump();
  EXPECT_EQ(client_->Get("/api/v1/lanes?tenant=b", kTenantA).status, 403);
  EXPECT_EQ(client_->Get("/api/v1/lanes?tenant=a", kTenantA).status, 200);
  harness_.auth().Add("a-admin", Principal::Make("a-admin", {Scope::kAdmin}, false, {"a"}));
  EXPECT_EQ(client_->Get("/api/v1/audit", "a-admin").status, 403);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/tenant-echo", "a-admin", {{"enabled", false}}).status,
            403);
}

// Issue 13, finding 8: integers are never rounded on their way from a client
// to a handler. Two different integers up to 2^64-1 have different
// fingerprints (the same key answers 409), the handler receives the digits the
// client sent, and an integer that cannot be kept exactly is refused with 400
// instead of silently becoming another number.
TEST_F(ApiSecurityTest, PayloadIntegersAreKeptExactlyOrRefused) {
  const std::vector<std::pair<std::string, std::string>> key = {{"Idempotency-Key", "amount-1"}};
  const auto dispatch = [&](const std::string& amount) {
    return client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher,
                            R"({"payload": {"amount": )" + amount + "}}", key);
  };
  ClientResponse first = dispatch("18446744073709551615");
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(dispatch("18446744073709551615").status, 200) << "the same payload repeats";
  ClientResponse other = dispatch("18446744073709551614");
  EXPECT_EQ(other.status, 409) << "a different amount is a different payload: " << other.body;

  const std::int64_t id = first.json()["id"];
  harness_.WaitForStatus(id, "succeeded");
  // The raw text, not a parsed value: no double may have passed in between.
  ClientResponse detail = client_->Get("/api/v1/executions/" + std::to_string(id), kReader);
  EXPECT_NE(detail.body.find(R"("payload":{"amount":18446744073709551615})"), std::string::npos)
      << detail.body;
  ClientResponse result =
      client_->Get("/api/v1/executions/" + std::to_string(id) + "/result", kReader);
  EXPECT_NE(result.body.find(R"({"echo":{"amount":18446744073709551615}})"), std::string::npos)
      << "the handler received the exact digits: " << result.body;

  // Beyond 64 bits: refused, each of them, with a message that says why;
  // nothing is created.
  const std::size_t before = client_->Get("/api/v1/executions", kReader).json()["items"].size();
  for (const char* big : {"18446744073709551616", "18446744073709551617", "-9223372036854775809",
                          "123456789012345678901234567890"}) {
    ClientResponse r = client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher,
                                        std::string(R"({"payload": {"amount": )") + big + "}}");
    EXPECT_EQ(r.status, 400) << big << ": " << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("integer out of range"),
              std::string::npos)
        << r.body;
  }
  // A tiny number that would become 0, and a duplicate key (nlohmann keeps
  // the last one), are refused the same way.
  EXPECT_EQ(client_
                ->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher,
                          R"({"payload": {"x": 1e-400}})")
                .status,
            400);
  EXPECT_EQ(client_
                ->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher,
                          R"({"payload": {"x": 1, "x": 2}})")
                .status,
            400);
  EXPECT_EQ(client_->Get("/api/v1/executions", kReader).json()["items"].size(), before);
}

}  // namespace
}  // namespace taskengine::api::testing
