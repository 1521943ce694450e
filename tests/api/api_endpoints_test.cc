// Every endpoint of /api/v1 over the real server: shapes, idempotency, result
// access, operator actions, and every error code a client can provoke.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <set>
#include <string>

#include "api/errors.h"
#include "api_harness.h"
#include "engine/engine_internal.h"
#include "storage/store.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;

class ApiEndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }

  void Start(HarnessOptions options) {
    harness_ = std::make_unique<ApiHarness>(std::move(options));
    ASSERT_OK(harness_->Start());
    client_ = std::make_unique<TestClient>(harness_->port());
  }

  // Dispatches and returns the id; fails the test on anything but 202.
  std::int64_t Dispatch(const std::string& job, const json& body,
                        const std::string& token = kDispatcher, const std::string& key = "") {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!key.empty()) headers.emplace_back("Idempotency-Key", key);
    ClientResponse r = client_->Post("/api/v1/jobs/" + job + "/dispatch", token, body, headers);
    EXPECT_EQ(r.status, 202) << r.body;
    return r.json().value("id", std::int64_t{0});
  }

  std::string ExecPath(std::int64_t id, const std::string& suffix = "") {
    return "/api/v1/executions/" + std::to_string(id) + suffix;
  }

  std::unique_ptr<ApiHarness> harness_;
  std::unique_ptr<TestClient> client_;
};

TEST_F(ApiEndpointsTest, HealthAndReadinessNeedNoCredentials) {
  ClientResponse h = client_->Get("/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json()["status"], "ok");
  ClientResponse r = client_->Get("/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["status"], "ready");
  EXPECT_GT(r.json()["schema_version"].get<int>(), 0);
}

TEST_F(ApiEndpointsTest, DispatchIsAcceptedThenSucceedsWithAResult) {
  ClientResponse r =
      client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher, {{"payload", {{"n", 7}}}});
  ASSERT_EQ(r.status, 202) << r.body;
  json j = r.json();
  EXPECT_TRUE(j["created"].get<bool>());
  std::int64_t id = j["id"];
  EXPECT_EQ(j["status_url"], ExecPath(id));
  EXPECT_EQ(r.header("location"), ExecPath(id));
  EXPECT_TRUE(j["status"] == "queued" || j["status"] == "running" || j["status"] == "succeeded");

  json detail = harness_->WaitForStatus(id, "succeeded");
  ASSERT_EQ(detail["status"], "succeeded") << detail.dump();
  EXPECT_EQ(detail["result_url"], ExecPath(id, "/result"));
  EXPECT_EQ(detail["payload"], json({{"n", 7}}));
  EXPECT_EQ(detail["requester"], "disp");
  EXPECT_EQ(detail["trigger"], "api");
  EXPECT_EQ(detail["tenant"], nullptr);
  EXPECT_FALSE(detail.contains("result")) << "results only through result_url";
  for (const char* field : {"logs", "effects", "escaped_effects", "attempts", "audit"}) {
    EXPECT_TRUE(detail[field].is_array()) << field;
  }
  ClientResponse result = client_->Get(ExecPath(id, "/result"), kReader);
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json()["result"], json({{"echo", {{"n", 7}}}}));
}

TEST_F(ApiEndpointsTest, IdempotencyKeyRepeatsAndConflicts) {
  std::vector<std::pair<std::string, std::string>> key = {{"Idempotency-Key", "order-17"}};
  ClientResponse first = client_->Post("/api/v1/jobs/tenant-echo/dispatch", kTenantA,
                                       {{"tenant", "a"}, {"payload", {{"order", 17}}}}, key);
  ASSERT_EQ(first.status, 202) << first.body;
  std::int64_t id = first.json()["id"];
  EXPECT_TRUE(first.json()["created"].get<bool>());

  // Same key, same payload (different key order and whitespace): 200, same execution.
  ClientResponse repeat = client_->Request("POST", "/api/v1/jobs/tenant-echo/dispatch", kTenantA,
                                           R"({ "payload": {"order":17}, "tenant":"a" })",
                                           {{"Idempotency-Key", "\"order-17\""}});
  ASSERT_EQ(repeat.status, 200) << repeat.body;
  EXPECT_EQ(repeat.json()["id"], id);
  EXPECT_FALSE(repeat.json()["created"].get<bool>());
  EXPECT_EQ(repeat.json()["status_url"], ExecPath(id));

  // Same key, another payload: 409 naming the existing execution; nothing created.
  ClientResponse conflict = client_->Post("/api/v1/jobs/tenant-echo/dispatch", kTenantA,
                                          {{"tenant", "a"}, {"payload", {{"order", 18}}}}, key);
  ASSERT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_EQ(conflict.error_code(), "conflict");
  EXPECT_EQ(conflict.json()["error"]["details"]["existing_execution_id"], id);
  EXPECT_NE(conflict.json()["error"]["message"].get<std::string>().find(std::to_string(id)),
            std::string::npos);
  // The same conflict as the only item of a bulk request is an answer for
  // that item, naming the existing execution, like any other item.
  json one = json::array();
  one.push_back({{"job", "tenant-echo"},
                 {"tenant", "a"},
                 {"payload", {{"order", 19}}},
                 {"idempotency_key", "order-17"}});
  ClientResponse bulk = client_->Post("/api/v1/dispatch/bulk", kTenantA, {{"items", one}});
  ASSERT_EQ(bulk.status, 202) << bulk.body;
  ASSERT_EQ(bulk.json()["items"].size(), 1u) << bulk.body;
  EXPECT_TRUE(bulk.json()["items"][0]["conflict"].get<bool>()) << bulk.body;
  EXPECT_EQ(bulk.json()["items"][0]["id"], id) << bulk.body;
  EXPECT_EQ(bulk.json()["items"][0]["error"]["code"], "conflict") << bulk.body;
  ClientResponse list = client_->Get("/api/v1/executions?job=tenant-echo", kAdmin);
  EXPECT_EQ(list.json()["items"].size(), 1u);

  // The repeat reports the current status once it ran.
  harness_->WaitForStatus(id, "succeeded");
  ClientResponse later = client_->Post("/api/v1/jobs/tenant-echo/dispatch", kTenantA,
                                       {{"tenant", "a"}, {"payload", {{"order", 17}}}}, key);
  ASSERT_EQ(later.status, 200);
  EXPECT_EQ(later.json()["status"], "succeeded");

  ClientResponse bad_key = client_->Post("/api/v1/jobs/tenant-echo/dispatch", kTenantA,
                                         {{"tenant", "a"}}, {{"Idempotency-Key", "has space"}});
  EXPECT_EQ(bad_key.status, 400);
}

TEST_F(ApiEndpointsTest, ResultOnlyAfterSuccess) {
  std::int64_t id = Dispatch("blocker", {{"tenant", "a"}}, kTenantA);
  ClientResponse early = client_->Get(ExecPath(id, "/result"), kTenantA);
  EXPECT_EQ(early.status, 409) << early.body;
  EXPECT_EQ(early.error_code(), "conflict");
  EXPECT_TRUE(early.json()["error"]["details"]["status"] == "queued" ||
              early.json()["error"]["details"]["status"] == "running");
  ClientResponse detail = client_->Get(ExecPath(id), kTenantA);
  EXPECT_EQ(detail.json()["result_url"], nullptr);
  harness_->ReleaseBlockers();
  harness_->WaitForStatus(id, "succeeded");
  ClientResponse after = client_->Get(ExecPath(id, "/result"), kTenantA);
  ASSERT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(after.json()["result"], json({{"released", true}}));
}

TEST_F(ApiEndpointsTest, ResultAccessFollowsTheCurrentPrincipal) {
  std::int64_t id = Dispatch("tenant-echo", {{"tenant", "a"}}, kTenantA);
  harness_->WaitForStatus(id, "succeeded");
  ASSERT_EQ(client_->Get(ExecPath(id, "/result"), "carol-token").status, 401);
  // Carol's token exists now, bound to tenant a: allowed.
  harness_->auth().Add("carol-token", Principal::Make("carol", {Scope::kRead}, false, {"a"}));
  EXPECT_EQ(client_->Get(ExecPath(id, "/result"), "carol-token").status, 200);
  // Her access moves to tenant b (RD6): refused at the next access, like a missing id.
  harness_->auth().Add("carol-token", Principal::Make("carol", {Scope::kRead}, false, {"b"}));
  ClientResponse revoked = client_->Get(ExecPath(id, "/result"), "carol-token");
  EXPECT_EQ(revoked.status, 404);
  EXPECT_EQ(revoked.error_code(), "not_found");
}

TEST_F(ApiEndpointsTest, CancelQueuedRunningAndEscapedEffects) {
  // Running, no effect: running with cancel_requested, then canceled.
  std::int64_t running = Dispatch("blocker", {{"tenant", "a"}}, kTenantA);
  harness_->WaitForStatus(running, "running");
  ClientResponse c =
      client_->Post(ExecPath(running, "/cancel"), kOperator, {{"reason", "customer asked"}});
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.json()["status"], "running");
  EXPECT_TRUE(c.json()["cancel_requested"].get<bool>());
  json canceled = harness_->WaitForStatus(running, "canceled");
  ASSERT_EQ(canceled["status"], "canceled") << canceled.dump();
  EXPECT_TRUE(canceled["escaped_effects"].empty());
  bool audited = false;
  for (const json& a : canceled["audit"]) {
    audited = audited || (a["action"].get<std::string>().rfind("execution.cancel", 0) == 0 &&
                          a["actor"] == "oper" && a["reason"] == "customer asked");
  }
  EXPECT_TRUE(audited) << canceled["audit"].dump();

  // After the effect: partially_canceled with the escaped effect listed (C2).
  std::int64_t effectful = Dispatch("effectful", {{"tenant", "b"}}, kTenantB);
  ASSERT_TRUE(WaitUntil([&] {
    json d = client_->Get(ExecPath(effectful), kTenantB).json();
    return !d["effects"].empty() && d["effects"][0]["state"] == "committed";
  }));
  ASSERT_EQ(client_->Post(ExecPath(effectful, "/cancel"), kTenantB, json::object()).status, 200);
  json partial = harness_->WaitForStatus(effectful, "partially_canceled");
  ASSERT_EQ(partial["status"], "partially_canceled") << partial.dump();
  ASSERT_EQ(partial["escaped_effects"].size(), 1u);
  EXPECT_EQ(partial["escaped_effects"][0]["name"], "notice");
  EXPECT_EQ(partial["escaped_effects"][0]["key"], std::to_string(effectful) + ":notice");
  EXPECT_NE(partial["escaped_effects"][0]["committed_at"], nullptr);

  // Canceling a finished execution: 409 naming its status; no body at all is fine.
  ClientResponse again = client_->Request("POST", ExecPath(running, "/cancel"), kOperator);
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_EQ(again.error_code(), "conflict");
}

TEST_F(ApiEndpointsTest, ReplayQuarantinedNeedsAReason) {
  std::int64_t id = Dispatch("poison", {{"tenant", "a"}}, kTenantA);
  json q = harness_->WaitForStatus(id, "quarantined");
  ASSERT_EQ(q["status"], "quarantined") << q.dump();
  EXPECT_EQ(q["failure_class"], "permanent");
  EXPECT_EQ(q["trigger"], "api") << "quarantined on its first attempt: never retried";

  EXPECT_EQ(client_->Post(ExecPath(id, "/replay"), kOperator, json::object()).status, 400);
  EXPECT_EQ(client_->Post(ExecPath(id, "/replay"), kOperator, {{"reason", "  "}}).status, 400);
  EXPECT_EQ(
      client_->Post(ExecPath(id, "/replay"), kOperator, {{"reason", "x"}, {"assume", "maybe"}})
          .status,
      400);
  ClientResponse r = client_->Post(ExecPath(id, "/replay"), kOperator,
                                   {{"reason", "fixed the input"}, {"assume", "keep"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["outcome"], "replayed");
  EXPECT_EQ(r.json()["status"], "queued");
  json again = harness_->WaitForStatus(id, "quarantined");
  ASSERT_EQ(again["status"], "quarantined");
  EXPECT_EQ(again["trigger"], "replay") << again.dump();
  ClientResponse replayed = client_->Get("/api/v1/executions?trigger=replay", kOperator);
  ASSERT_EQ(replayed.status, 200) << replayed.body;
  const json replayed_items = replayed.json()["items"];
  ASSERT_EQ(replayed_items.size(), 1u) << replayed.body;
  EXPECT_EQ(replayed_items[0]["id"], id);
  bool audited = false;
  for (const json& a : again["audit"]) {
    audited = audited || (a["action"] == "execution.replay" && a["reason"] == "fixed the input");
  }
  EXPECT_TRUE(audited) << again["audit"].dump();

  // A succeeded execution cannot be replayed: 409.
  std::int64_t ok = Dispatch("echo", json::object());
  harness_->WaitForStatus(ok, "succeeded");
  ClientResponse conflict = client_->Post(ExecPath(ok, "/replay"), kOperator, {{"reason", "x"}});
  EXPECT_EQ(conflict.status, 409) << conflict.body;
}

TEST_F(ApiEndpointsTest, ReplayRefusedWhenTheRequesterLostAccess) {
  std::int64_t id = Dispatch("poison", {{"tenant", "a"}}, kTenantA);
  harness_->WaitForStatus(id, "quarantined");
  ASSERT_OK(StoreOf(harness_->engine()).Revoke("alice", "a"));
  ClientResponse r = client_->Post(ExecPath(id, "/replay"), kOperator, {{"reason", "retry"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("alice"), std::string::npos)
      << r.body;
}

TEST_F(ApiEndpointsTest, FourEyesApproval) {
  Start({.replay_requires_approval = true});
  std::int64_t id = Dispatch("poison", {{"tenant", "b"}}, kTenantB);
  harness_->WaitForStatus(id, "quarantined");
  ClientResponse none = client_->Request("POST", ExecPath(id, "/approve"), kOperator2);
  EXPECT_EQ(none.status, 404) << "nothing pending: " << none.body;
  ClientResponse r = client_->Post(ExecPath(id, "/replay"), kOperator, {{"reason", "retry"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["outcome"], "pending_approval");
  ClientResponse self = client_->Post(ExecPath(id, "/approve"), kOperator, json::object());
  EXPECT_EQ(self.status, 409) << self.body;
  ClientResponse approved = client_->Post(ExecPath(id, "/approve"), kOperator2, json::object());
  ASSERT_EQ(approved.status, 200) << approved.body;
  EXPECT_EQ(approved.json()["outcome"], "replayed");
  ClientResponse extra = client_->Post(ExecPath(id, "/approve"), kOperator2, {{"why", "x"}});
  EXPECT_EQ(extra.status, 400);
}

TEST_F(ApiEndpointsTest, ListExecutionsFiltersAndPages) {
  std::set<std::int64_t> ids;
  for (int i = 0; i < 7; ++i) ids.insert(Dispatch("echo", {{"payload", {{"i", i}}}}));
  ids.insert(Dispatch("tenant-echo", {{"tenant", "a"}}, kTenantA));
  for (std::int64_t id : ids) harness_->WaitForStatus(id, "succeeded");

  std::set<std::int64_t> seen;
  std::string cursor;
  int pages = 0;
  std::int64_t previous = std::numeric_limits<std::int64_t>::max();
  while (true) {
    std::string target = "/api/v1/executions?job=echo&limit=3";
    if (!cursor.empty()) target += "&cursor=" + cursor;
    ClientResponse r = client_->Get(target, kReader);
    ASSERT_EQ(r.status, 200) << r.body;
    ++pages;
    const json page = r.json();
    for (const json& e : page["items"]) {
      EXPECT_EQ(e["job"], "echo");
      EXPECT_FALSE(e.contains("payload"));
      std::int64_t id = e["id"];
      EXPECT_LT(id, previous) << "newest first";
      previous = id;
      EXPECT_TRUE(seen.insert(id).second) << "duplicate " << id;
    }
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"];
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(pages, 3);

  ClientResponse tenant = client_->Get("/api/v1/executions?tenant=a&status=succeeded", kReader);
  ASSERT_EQ(tenant.status, 200);
  ASSERT_EQ(tenant.json()["items"].size(), 1u);
  EXPECT_EQ(tenant.json()["items"][0]["tenant"], "a");
  ClientResponse none = client_->Get("/api/v1/executions?status=failed", kReader);
  EXPECT_TRUE(none.json()["items"].empty());
  ClientResponse window = client_->Get(
      "/api/v1/executions?queued_from=2000-01-01T00:00:00Z&queued_to=2000-01-02T00:00:00Z",
      kReader);
  ASSERT_EQ(window.status, 200);
  EXPECT_TRUE(window.json()["items"].empty());

  for (const char* bad : {"?status=done", "?limit=0", "?limit=1001", "?limit=x", "?cursor=abc",
                          "?queued_from=yesterday", "?color=red", "?job=Bad%20Name",
                          "?limit=1&limit=2", "?tenant=A"}) {
    ClientResponse r = client_->Get(std::string("/api/v1/executions") + bad, kReader);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_EQ(r.error_code(), "invalid_argument") << bad;
  }
}

TEST_F(ApiEndpointsTest, JobsListGetAndPatchWithAudit) {
  ClientResponse list = client_->Get("/api/v1/jobs", kReader);
  ASSERT_EQ(list.status, 200);
  std::set<std::string> names;
  const json jobs = list.json();
  for (const json& j : jobs["items"]) names.insert(j["name"]);
  EXPECT_TRUE(names.count("echo") && names.count("tenant-echo") && names.count("off"));
  ClientResponse one = client_->Get("/api/v1/jobs/echo", kReader);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["handler"], "echo");
  EXPECT_EQ(one.json()["scope"], "global");
  EXPECT_EQ(client_->Get("/api/v1/jobs/nope", kReader).status, 404);
  EXPECT_EQ(client_->Get("/api/v1/jobs/NOT%20VALID", kReader).status, 404);

  ClientResponse patched = client_->Patch("/api/v1/jobs/echo", kAdmin,
                                          {{"enabled", false},
                                           {"schedule", "*/5 * * * *"},
                                           {"config", {{"k", 1}}},
                                           {"display_name", "Echo!"},
                                           {"reason", "maintenance"}});
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_FALSE(patched.json()["enabled"].get<bool>());
  EXPECT_EQ(patched.json()["schedule"], "*/5 * * * *");
  EXPECT_EQ(patched.json()["config"], json({{"k", 1}}));
  EXPECT_EQ(patched.json()["display_name"], "Echo!");

  ClientResponse disabled =
      client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher, json::object());
  EXPECT_EQ(disabled.status, 400) << disabled.body;

  ClientResponse audit = client_->Get("/api/v1/audit?target=job:echo", kAdmin);
  ASSERT_EQ(audit.status, 200) << audit.body;
  ASSERT_EQ(audit.json()["items"].size(), 1u);
  json record = audit.json()["items"][0];
  EXPECT_EQ(record["action"], "job.update");
  EXPECT_EQ(record["actor"], "admin");
  EXPECT_EQ(record["reason"], "maintenance");
  EXPECT_EQ(record["before"]["enabled"], true);
  EXPECT_EQ(record["after"]["enabled"], false);
  EXPECT_EQ(record["before"]["schedule"], nullptr);
  EXPECT_EQ(record["after"]["schedule"], "*/5 * * * *");

  // Clearing the schedule; a no-op patch writes no audit record.
  ClientResponse cleared = client_->Patch("/api/v1/jobs/echo", kAdmin, {{"schedule", nullptr}});
  ASSERT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(cleared.json()["schedule"], nullptr);
  ASSERT_EQ(client_->Patch("/api/v1/jobs/echo", kAdmin, {{"enabled", false}}).status, 200);
  EXPECT_EQ(client_->Get("/api/v1/audit?target=job:echo", kAdmin).json()["items"].size(), 2u);

  ClientResponse cron = client_->Patch("/api/v1/jobs/echo", kAdmin, {{"schedule", "61 * * * *"}});
  EXPECT_EQ(cron.status, 400) << cron.body;
  EXPECT_NE(cron.json()["error"]["message"].get<std::string>().find("invalid schedule"),
            std::string::npos);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/echo", kAdmin, {{"config", "x"}}).status, 400);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/echo", kAdmin, {{"enabled", "yes"}}).status, 400);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/echo", kAdmin, {{"handler", "command"}}).status, 400);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/echo", kAdmin, json::object()).status, 400);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/nope", kAdmin, {{"enabled", true}}).status, 404);
  EXPECT_EQ(client_->Patch("/api/v1/jobs/echo", kOperator, {{"enabled", true}}).status, 403);
}

TEST_F(ApiEndpointsTest, BulkDispatchOneTransactionWithPerItemResults) {
  ClientResponse seed = client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher,
                                      {{"payload", {{"v", 1}}}}, {{"Idempotency-Key", "k-used"}});
  ASSERT_EQ(seed.status, 202);
  std::int64_t existing = seed.json()["id"];
  json items = json::array();
  items.push_back({{"job", "echo"}, {"payload", {{"v", 1}}}, {"idempotency_key", "k-used"}});
  items.push_back({{"job", "echo"}, {"payload", {{"v", 2}}}, {"idempotency_key", "k-used"}});
  items.push_back({{"job", "tenant-echo"}, {"tenant", "b"}, {"delay_ms", 0}});
  items.push_back({{"job", "echo"}, {"payload", {{"v", 3}}}});
  ClientResponse r = client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", items}});
  ASSERT_EQ(r.status, 202) << r.body;
  json out = r.json()["items"];
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0]["id"], existing);
  EXPECT_FALSE(out[0]["created"].get<bool>());
  EXPECT_FALSE(out[0]["conflict"].get<bool>());
  EXPECT_EQ(out[1]["id"], existing);
  EXPECT_TRUE(out[1]["conflict"].get<bool>());
  EXPECT_EQ(out[1]["error"]["code"], "conflict");
  EXPECT_TRUE(out[2]["created"].get<bool>());
  EXPECT_TRUE(out[3]["created"].get<bool>());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i]["index"], i);

  // One bad item admits nothing.
  ClientResponse before = client_->Get("/api/v1/executions?limit=1000", kAdmin);
  json bad = json::array({{{"job", "echo"}}, {{"job", "echo"}, {"colour", "red"}}});
  ClientResponse refused = client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", bad}});
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(refused.json()["error"]["details"]["index"], 1);
  json undefined = json::array({{{"job", "echo"}}, {{"job", "no-such-job"}}});
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", undefined}}).status,
            404);
  ClientResponse after = client_->Get("/api/v1/executions?limit=1000", kAdmin);
  EXPECT_EQ(before.json()["items"].size(), after.json()["items"].size());

  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", json::array()}}).status,
            400);
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, json::object()).status, 400);
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, json::array()).status, 400);
  json too_many = json::array();
  for (int i = 0; i < 1001; ++i) too_many.push_back({{"job", "echo"}});
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", too_many}}).status, 400);
  json thousand = json::array();
  for (int i = 0; i < 1000; ++i) thousand.push_back({{"job", "echo"}, {"payload", {{"i", i}}}});
  ClientResponse big = client_->Post("/api/v1/dispatch/bulk", kDispatcher, {{"items", thousand}});
  ASSERT_EQ(big.status, 202) << big.body.substr(0, 300);
  EXPECT_EQ(big.json()["items"].size(), 1000u);
}

TEST_F(ApiEndpointsTest, SchedulePreviewIsTheSchedulersFireTimes) {
  // 2026-03-08 in New York: 02:30 does not exist (spring forward), so that
  // day's fire is shifted to 03:30 EDT.
  ClientResponse r = client_->Get(
      "/api/v1/schedule/preview?schedule=30%202%20*%20*%20*&timezone=America/New_York&count=3"
      "&from=2026-03-07T00:00:00Z",
      kReader);
  ASSERT_EQ(r.status, 200) << r.body;
  json p = r.json();
  EXPECT_EQ(p["normalized"], "30 2 * * *");
  EXPECT_EQ(p["timezone"], "America/New_York");
  ASSERT_EQ(p["fires"].size(), 3u) << r.body;
  EXPECT_EQ(p["fires"][0]["local"], "2026-03-07 02:30");
  EXPECT_EQ(p["fires"][0]["abbrev"], "EST");
  EXPECT_EQ(p["fires"][0]["utc"], "2026-03-07T07:30:00.000Z");
  EXPECT_EQ(p["fires"][1]["local"], "2026-03-08 03:30");
  EXPECT_EQ(p["fires"][1]["shifted"], true);
  EXPECT_EQ(p["fires"][2]["abbrev"], "EDT");
  EXPECT_EQ(
      client_->Get("/api/v1/schedule/preview?schedule=%40daily", kReader).json()["fires"].size(),
      5u);
  struct Case {
    const char* query;
    const char* says;
  } bad[] = {
      {"", "schedule"},
      {"?schedule=61%20*%20*%20*%20*", "cron"},
      {"?schedule=%40daily&timezone=Mars/Olympus", "time zone"},
      {"?schedule=%40daily&count=0", "count"},
      {"?schedule=%40daily&count=51", "count"},
      {"?schedule=%40daily&from=yesterday", "from"},
      {"?schedule=%40daily&zone=UTC", "zone"},
  };
  for (const Case& c : bad) {
    ClientResponse b = client_->Get(std::string("/api/v1/schedule/preview") + c.query, kReader);
    EXPECT_EQ(b.status, 400) << c.query << ": " << b.body;
    EXPECT_NE(b.body.find(c.says), std::string::npos) << c.query << ": " << b.body;
  }
  EXPECT_EQ(client_->Get("/api/v1/schedule/preview?schedule=%40daily", "").status, 401);
}

TEST_F(ApiEndpointsTest, TheServersOwnJobsCannotBeDispatched) {
  ClientResponse one = client_->Request(
      "POST", "/api/v1/jobs/taskengine.notify/dispatch", kDispatcher,
      R"({"payload": {"target": "email:x@example.com", "subject": "s", "text": "t"}})");
  EXPECT_EQ(one.status, 400) << one.body;
  EXPECT_NE(one.body.find("reserved"), std::string::npos) << one.body;
  ClientResponse bulk = client_->Request(
      "POST", "/api/v1/dispatch/bulk", kDispatcher,
      R"({"items": [{"job": "echo"}, {"job": "taskengine.notify", "payload": {}}]})");
  EXPECT_EQ(bulk.status, 400) << bulk.body;
  EXPECT_NE(bulk.body.find("reserved"), std::string::npos) << bulk.body;
}

TEST_F(ApiEndpointsTest, DispatchInputErrors) {
  auto post = [&](const std::string& body) {
    return client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher, body);
  };
  struct Case {
    const char* body;
    const char* what;
  } cases[] = {
      {"{", "malformed JSON"},
      {"{\"payload\": {\"a\": 1},}", "trailing comma"},
      {"[]", "not an object"},
      {"{\"payload\": [1]}", "payload not an object"},
      {"{\"payload\": {}, \"extra\": 1}", "unknown field"},
      {"{\"delay_ms\": \"soon\"}", "wrong type"},
      {"{\"delay_ms\": -1}", "negative delay"},
      {"{\"delay_ms\": 1e300}", "absurd delay"},
      {"{\"delay_ms\": 99999999999999999999999}", "absurd integer"},
      {"{\"delay_ms\": 1.5}", "fractional delay"},
      {"{\"run_at\": \"next tuesday\"}", "bad time"},
      {"{\"run_at\": \"2026-01-01T00:00:00Z\", \"delay_ms\": 5}", "both run_at and delay"},
      {"{\"run_at\": \"2999-01-01T00:00:00Z\"}", "run_at too far"},
      {"{\"tenant\": \"a\"}", "tenant on a global job"},
      {"{\"lane\": 5}", "lane not a string"},
      {"{\"parent\": 0}", "parent out of range"},
      {"{\"parent\": 999999}", "parent not found"},
      {"\"\xff\"", "invalid UTF-8"},
  };
  for (const Case& c : cases) {
    ClientResponse r = post(c.body);
    EXPECT_EQ(r.status, 400) << c.what << ": " << r.body;
    EXPECT_EQ(r.error_code(), "invalid_argument") << c.what;
    json e = r.json()["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << c.what;
    EXPECT_TRUE(e["details"].is_object()) << c.what;
  }
  std::string deep(65, '[');
  deep = "{\"payload\": {\"x\": " + deep + std::string(65, ']') + "}}";
  EXPECT_EQ(post(deep).status, 400);
  ClientResponse wrong_type = client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher,
                                               "{}", {{"Content-Type", "text/plain"}});
  EXPECT_EQ(wrong_type.status, 400);
  // The media type is compared without regard to case, its parameters aside.
  for (const char* type : {"Application/JSON; charset=utf-8", "APPLICATION/JSON"}) {
    ClientResponse r = client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher, "{}",
                                        {{"Content-Type", type}});
    EXPECT_EQ(r.status, 202) << type << ": " << r.body;
  }
  for (const char* type : {"application/jsoN5", "application/jsom", "application/json-seq"}) {
    ClientResponse r = client_->Request("POST", "/api/v1/jobs/echo/dispatch", kDispatcher, "{}",
                                        {{"Content-Type", type}});
    EXPECT_EQ(r.status, 400) << type << ": " << r.body;
  }
  ClientResponse unknown_job =
      client_->Post("/api/v1/jobs/nope/dispatch", kDispatcher, json::object());
  EXPECT_EQ(unknown_job.status, 404) << unknown_job.body;
  ClientResponse big_payload = client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher,
                                             {{"payload", {{"s", std::string(300 * 1024, 'x')}}}});
  EXPECT_EQ(big_payload.status, 400) << "payload over 256 KiB";
  ClientResponse too_big = client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher,
                                         {{"payload", {{"s", std::string(1100 * 1024, 'x')}}}});
  EXPECT_EQ(too_big.status, 413);
  EXPECT_EQ(too_big.error_code(), "payload_too_large");
  // The server is still fine.
  EXPECT_EQ(client_->Get("/healthz").status, 200);
  ClientResponse ok = client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher,
                                    {{"run_at", "2026-01-01T00:00:00Z"}, {"lane", "l1"}});
  EXPECT_EQ(ok.status, 202) << ok.body;
}

TEST_F(ApiEndpointsTest, UnknownPathsMethodsAndIds) {
  ClientResponse unknown = client_->Get("/api/v1/nothing", kAdmin);
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(unknown.error_code(), "not_found");
  ClientResponse method = client_->Request("DELETE", "/api/v1/executions/1", kAdmin);
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.header("allow"), "GET");
  EXPECT_EQ(method.error_code(), "method_not_allowed");
  ClientResponse put = client_->Request("PUT", "/api/v1/jobs/echo", kAdmin, "{}");
  EXPECT_EQ(put.status, 405);
  EXPECT_EQ(put.header("allow"), "DELETE, GET, PATCH");  // DELETE: job:delete
  EXPECT_EQ(client_->Get("/api/v1/executions/abc", kAdmin).status, 400);
  EXPECT_EQ(client_->Get("/api/v1/executions/0", kAdmin).status, 400);
  ClientResponse missing = client_->Get("/api/v1/executions/424242", kAdmin);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["message"], "execution 424242 not found");
}

// A single dispatch is answered from its commit, which concurrent dispatches
// share: every 202 names an execution that is there at once; repeats of one
// Idempotency-Key in flight together create one execution (one 202, the
// others 200 naming it, or 409 for another payload); an admission the store
// refuses answers its error and admits nothing.
TEST_F(ApiEndpointsTest, ConcurrentDispatchesAreAnsweredFromTheirCommit) {
  constexpr int kClients = 24;
  std::vector<std::future<ClientResponse>> calls;
  for (int i = 0; i < kClients; ++i) {
    calls.push_back(std::async(std::launch::async, [this, i] {
      TestClient own(harness_->port());
      return own.Post("/api/v1/jobs/parked/dispatch", kDispatcher, {{"payload", {{"i", i}}}});
    }));
  }
  std::set<std::int64_t> ids;
  for (auto& c : calls) {
    ClientResponse r = c.get();
    ASSERT_EQ(r.status, 202) << r.body;
    const std::int64_t id = r.json()["id"].get<std::int64_t>();
    ids.insert(id);
    ClientResponse e = client_->Get(ExecPath(id), kReader);
    EXPECT_EQ(e.status, 200) << "acknowledged, so committed: " << e.body;
    EXPECT_EQ(e.json()["status"], "queued");
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kClients));

  // One key, the same payload from several clients at once; then another payload.
  std::vector<std::future<ClientResponse>> repeats;
  for (int i = 0; i < 8; ++i) {
    repeats.push_back(std::async(std::launch::async, [this, i] {
      TestClient own(harness_->port());
      json payload = {{"order", i < 6 ? 1 : 2}};
      return own.Post("/api/v1/jobs/parked/dispatch", kDispatcher, {{"payload", payload}},
                      {{"Idempotency-Key", "same-key"}});
    }));
  }
  std::set<std::int64_t> keyed;
  int created = 0;
  for (auto& c : repeats) {
    ClientResponse r = c.get();
    if (r.status == 202 || r.status == 200) {
      created += r.status == 202 ? 1 : 0;
      keyed.insert(r.json()["id"].get<std::int64_t>());
    } else {
      EXPECT_EQ(r.status, 409) << r.body;
      EXPECT_EQ(r.error_code(), "conflict") << r.body;
      keyed.insert(r.json()["error"]["details"]["existing_execution_id"].get<std::int64_t>());
    }
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(keyed.size(), 1u) << "every answer names the one execution of the key";

  // The store refuses: the error, and nothing admitted.
  ClientResponse before = client_->Get("/api/v1/executions?job=parked&limit=100", kAdmin);
  ASSERT_EQ(before.status, 200);
  ASSERT_OK(harness_->faults().Fail("AdmitBatch", Unavailable("disk stalled (simulated)")));
  ClientResponse refused =
      client_->Post("/api/v1/jobs/parked/dispatch", kDispatcher, {{"payload", {{"i", -1}}}});
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.error_code(), "unavailable");
  ClientResponse after = client_->Get("/api/v1/executions?job=parked&limit=100", kAdmin);
  EXPECT_EQ(after.json()["items"].size(), before.json()["items"].size());
  EXPECT_EQ(client_->Post("/api/v1/jobs/parked/dispatch", kDispatcher, json::object()).status, 202);
}

TEST_F(ApiEndpointsTest, StoreUnavailableIs503) {
  std::int64_t id = Dispatch("echo", json::object());
  ASSERT_OK(
      harness_->faults().Fail("*", Unavailable("database is full (simulated)"), {.times = -1}));
  ClientResponse d = client_->Post("/api/v1/jobs/echo/dispatch", kDispatcher, json::object());
  EXPECT_EQ(d.status, 503) << d.body;
  EXPECT_EQ(d.error_code(), "unavailable");
  EXPECT_EQ(d.header("retry-after"), "1");
  EXPECT_EQ(client_->Get(ExecPath(id), kReader).status, 503);
  EXPECT_EQ(client_->Post(ExecPath(id, "/cancel"), kOperator, json::object()).status, 503);
  json bulk = {{"items", json::array({{{"job", "echo"}}})}};
  EXPECT_EQ(client_->Post("/api/v1/dispatch/bulk", kDispatcher, bulk).status, 503);
  harness_->faults().Clear();
  EXPECT_EQ(client_->Get(ExecPath(id), kReader).status, 200);
}

TEST_F(ApiEndpointsTest, StaleMapsTo409Stale) {
  // No part-1 route can meet a stale claim (the worker protocol can); a
  // test-only route checks the full path from a kStale status to the wire.
  HarnessOptions options;
  options.extra_routes = [](Router& router) {
    router.Add(HttpMethod::kPost, "/test/stale", RouteAccess::Requires(Scope::kRead),
               [](const RouteRequest&) {
                 return StatusResponse(Stale("claim version 3 is not current (now 4)"));
               });
  };
  Start(std::move(options));
  ClientResponse r = client_->Post("/test/stale", kReader, json::object());
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.error_code(), "stale");
}

TEST_F(ApiEndpointsTest, StatsQueuesLanesAuditMetrics) {
  std::int64_t blocker = Dispatch("blocker", {{"tenant", "a"}, {"lane", "room:1"}}, kTenantA);
  Dispatch("blocker", {{"tenant", "a"}, {"lane", "room:1"}, {"delay_ms", 3'600'000}}, kTenantA);
  harness_->WaitForStatus(blocker, "running");
  std::int64_t done = Dispatch("echo", json::object());
  harness_->WaitForStatus(done, "succeeded");
  Dispatch("parked", json::object());  // due, never claimed

  ClientResponse stats = client_->Get("/api/v1/stats", kReader);
  ASSERT_EQ(stats.status, 200) << stats.body;
  json s = stats.json();
  EXPECT_EQ(s["running"], 1) << s.dump();
  EXPECT_EQ(s["queued"], 2) << s.dump();
  EXPECT_EQ(s["by_status"]["succeeded"], 1);
  EXPECT_EQ(s["by_status"]["running"], 1);
  EXPECT_TRUE(s["oldest_due_age_ms"].is_number()) << s.dump();
  EXPECT_EQ(s["last_24h"]["succeeded"], 1);
  EXPECT_EQ(s["last_24h"]["failed"], 0);
  EXPECT_FALSE(s["last_24h"].contains("queued"));
  EXPECT_GE(s["engine"]["claimed"].get<int>(), 2);
  EXPECT_TRUE(s["active_workers"].is_number());
  bool slow = false, parked = false;
  for (const json& q : s["queues"]) {
    if (q["queue"] == "slow") {
      slow = true;
      EXPECT_EQ(q["running"], 1);
      EXPECT_EQ(q["queued"], 1);
      EXPECT_EQ(q["oldest_due_at"], nullptr) << "the queued one waits for its delay";
    }
    if (q["queue"] == "parked") {
      parked = true;
      EXPECT_TRUE(q["oldest_due_age_ms"].is_number());
    }
  }
  EXPECT_TRUE(slow && parked) << s.dump();

  ClientResponse queues = client_->Get("/api/v1/queues", kReader);
  ASSERT_EQ(queues.status, 200);
  EXPECT_FALSE(queues.json()["items"].empty());
  ClientResponse lanes = client_->Get("/api/v1/lanes?limit=10", kReader);
  ASSERT_EQ(lanes.status, 200) << lanes.body;
  ASSERT_EQ(lanes.json()["items"].size(), 1u);
  EXPECT_EQ(lanes.json()["items"][0]["lane"], "room:1");
  EXPECT_EQ(lanes.json()["items"][0]["head"], blocker);
  EXPECT_EQ(client_->Get("/api/v1/lanes?limit=0", kReader).status, 400);

  ASSERT_EQ(client_->Post(ExecPath(blocker, "/cancel"), kOperator, {{"reason", "r"}}).status, 200);
  ClientResponse audit = client_->Get("/api/v1/audit?limit=1", kAdmin);
  ASSERT_EQ(audit.status, 200) << audit.body;
  ASSERT_EQ(audit.json()["items"].size(), 1u);
  EXPECT_EQ(audit.json()["items"][0]["action"].get<std::string>().rfind("execution.cancel", 0), 0u);
  EXPECT_TRUE(audit.json()["next_cursor"].is_string());
  EXPECT_EQ(client_->Get("/api/v1/audit", kOperator).status, 403);

  ClientResponse metrics = client_->Get("/metrics", kReader);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.header("content-type").rfind("text/plain", 0), 0u);
  for (const char* series :
       {"taskengine_queue_depth{queue=\"slow\"} 1", "taskengine_queue_depth{queue=\"parked\"} 1",
        "taskengine_queue_oldest_age_seconds{queue=\"parked\"}",
        "taskengine_executions{status=\"succeeded\"} 1",
        "taskengine_executions_ended_24h{status=\"succeeded\"} 1", "taskengine_claims_total ",
        "taskengine_handler_successes_total ", "taskengine_handler_failures_total ",
        "taskengine_stale_rejections_total ", "taskengine_outcomes_published_total ",
        "# TYPE taskengine_claims_total counter"}) {
    EXPECT_NE(metrics.body.find(series), std::string::npos) << series << "\n" << metrics.body;
  }
  EXPECT_EQ(client_->Get("/metrics").status, 401) << "closed unless configured open";

  ClientResponse doc = client_->Get("/api/v1/openapi.json", kWorker);
  ASSERT_EQ(doc.status, 200);
  EXPECT_EQ(doc.json()["openapi"], "3.0.3");
  EXPECT_EQ(doc.body, std::string(OpenApiDocument()));
}

// X2 (issue 14, bug 4): a tenant-bound principal gets 200 from the overview
// routes, counting only its tenants: no figure (totals included) holds the
// global jobs or another tenant's executions. A global caller gets the
// per-tenant breakdown.
TEST_F(ApiEndpointsTest, X2_TenantBoundOverviewsCountOnlyTheirTenants) {
  for (int i = 0; i < 2; ++i) {
    harness_->WaitForStatus(Dispatch("tenant-echo", {{"tenant", "a"}}, kTenantA), "succeeded");
  }
  std::int64_t running = Dispatch("blocker", {{"tenant", "a"}}, kTenantA);
  harness_->WaitForStatus(running, "running");
  harness_->WaitForStatus(Dispatch("tenant-echo", {{"tenant", "b"}}, kTenantB), "succeeded");
  harness_->WaitForStatus(Dispatch("poison", {{"tenant", "b"}}, kTenantB), "quarantined");
  harness_->WaitForStatus(Dispatch("echo", json::object()), "succeeded");
  Dispatch("parked", json::object());  // global, queued

  ClientResponse a = client_->Get("/api/v1/stats", kTenantA);
  ASSERT_EQ(a.status, 200) << a.body;
  json s = a.json();
  EXPECT_EQ(s["scope"], "tenants");
  EXPECT_EQ(s["queued"], 0) << s.dump();
  EXPECT_EQ(s["running"], 1) << s.dump();
  EXPECT_EQ(s["by_status"]["succeeded"], 2) << s.dump();
  EXPECT_EQ(s["by_status"]["quarantined"], 0) << s.dump();
  EXPECT_EQ(s["last_24h"]["succeeded"], 2) << s.dump();
  EXPECT_FALSE(s.contains("engine")) << "the engine's counters cover every tenant";
  ASSERT_EQ(s["tenants"].size(), 1u) << s.dump();
  EXPECT_EQ(s["tenants"][0]["tenant"], "a");
  EXPECT_EQ(s["tenants"][0]["succeeded_24h"], 2);
  EXPECT_EQ(s["tenants"][0]["running"], 1);
  for (const json& q : s["queues"]) {
    EXPECT_NE(q["queue"], "parked") << "a global job's queue: " << s.dump();
  }

  ClientResponse global = client_->Get("/api/v1/stats", kReader);
  ASSERT_EQ(global.status, 200) << global.body;
  json g = global.json();
  EXPECT_EQ(g["scope"], "global");
  EXPECT_EQ(g["by_status"]["succeeded"], 4) << g.dump();
  std::map<std::string, json> by_tenant;
  for (const json& t : g["tenants"]) {
    by_tenant[t["tenant"].is_null() ? "(global)" : t["tenant"].get<std::string>()] = t;
  }
  ASSERT_EQ(by_tenant.size(), 3u) << g.dump();
  EXPECT_EQ(by_tenant["(global)"]["queued"], 1);
  EXPECT_EQ(by_tenant["(global)"]["succeeded_24h"], 1);
  EXPECT_EQ(by_tenant["a"]["running"], 1);
  EXPECT_EQ(by_tenant["a"]["succeeded_24h"], 2);
  EXPECT_EQ(by_tenant["b"]["succeeded_24h"], 1);
  EXPECT_EQ(by_tenant["b"]["failed_24h"], 0);
  EXPECT_EQ(by_tenant["b"]["last_24h"]["quarantined"], 1);

  // Queue depths of its tenants only.
  ClientResponse qa = client_->Get("/api/v1/queues", kTenantA);
  ASSERT_EQ(qa.status, 200) << qa.body;
  const json tenant_queues = qa.json()["items"];
  for (const json& q : tenant_queues) {
    if (q["queue"] == "parked") EXPECT_EQ(q["queued"], 0) << qa.body;
    if (q["queue"] == "slow") EXPECT_EQ(q["running"], 1) << qa.body;
  }
  ClientResponse qb = client_->Get("/api/v1/queues", kTenantB);
  ASSERT_EQ(qb.status, 200) << qb.body;
  const json queue_items = qb.json()["items"];
  for (const json& q : queue_items) {
    EXPECT_EQ(q["running"], 0) << qb.body;
    EXPECT_EQ(q["queued"], 0) << qb.body;
  }
  EXPECT_EQ(client_->Get("/api/v1/lanes", kTenantA).status, 200);

  // Workers: listed, without figures over every tenant or other tenants' work.
  ClientResponse wb = client_->Get("/api/v1/workers", kTenantB);
  ASSERT_EQ(wb.status, 200) << wb.body;
  const json workers = wb.json()["items"];
  ASSERT_FALSE(workers.empty()) << wb.body;
  for (const json& w : workers) {
    EXPECT_TRUE(w["processed"].is_null()) << wb.body;
    EXPECT_TRUE(w["busy"].is_null()) << wb.body;
    EXPECT_TRUE(w["idle"].is_null()) << wb.body;
    EXPECT_TRUE(w["current"].empty()) << "tenant a's execution: " << wb.body;
  }
  harness_->ReleaseBlockers();
}

// I1 (issue 14, item 7): the search by job, tenant, statuses, trigger and
// time, with cursor or offset pages and a total; bad values name the parameter.
TEST_F(ApiEndpointsTest, I1_ExecutionSearchWithOffsetAndTotal) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(Dispatch("tenant-echo", {{"tenant", "a"}}, kTenantA));
  ids.push_back(Dispatch("tenant-echo", {{"tenant", "b"}}, kTenantB));
  std::int64_t poisoned = Dispatch("poison", {{"tenant", "a"}}, kTenantA);
  for (std::int64_t id : ids) harness_->WaitForStatus(id, "succeeded");
  harness_->WaitForStatus(poisoned, "quarantined");

  ClientResponse page =
      client_->Get("/api/v1/executions?status=succeeded,quarantined&offset=1&limit=2", kTenantA);
  ASSERT_EQ(page.status, 200) << page.body;
  json p = page.json();
  EXPECT_EQ(p["total"], 6) << p.dump();
  EXPECT_EQ(p["total_is_lower_bound"], false);
  EXPECT_EQ(p["offset"], 1);
  ASSERT_EQ(p["items"].size(), 2u);
  EXPECT_EQ(p["items"][0]["id"], ids[4]) << "newest first, one skipped";
  EXPECT_EQ(p["items"][1]["id"], ids[3]);

  ClientResponse by_job =
      client_->Get("/api/v1/executions?job=tenant-echo&trigger=api&offset=0", kReader);
  ASSERT_EQ(by_job.status, 200) << by_job.body;
  EXPECT_EQ(by_job.json()["total"], 6);
  EXPECT_EQ(by_job.json()["total_is_lower_bound"], false);
  ClientResponse ended = client_->Get(
      "/api/v1/executions?ended_from=2000-01-01T00:00:00Z&ended_to=2000-01-02T00:00:00Z", kReader);
  ASSERT_EQ(ended.status, 200) << ended.body;
  EXPECT_TRUE(ended.json()["items"].empty());
  EXPECT_FALSE(ended.json().contains("total")) << "cursor pages carry no total";

  for (const auto& [bad, param] : std::vector<std::pair<std::string, std::string>>{
           {"?status=succeeded,done", "status"},
           {"?trigger=cron", "trigger"},
           {"?offset=10001", "offset"},
           {"?offset=-1", "offset"},
           {"?offset=1&cursor=5", "offset"},
           {"?ended_from=yesterday", "ended_from"},
           {"?queued_from=2000-01-02T00:00:00Z&queued_to=2000-01-01T00:00:00Z", "queued_to"}}) {
    ClientResponse r = client_->Get("/api/v1/executions" + bad, kReader);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(param), std::string::npos)
        << bad << " " << r.body;
  }
}

TEST_F(ApiEndpointsTest, MetricsOpenWhenConfigured) {
  Start({.metrics_open = true});
  ClientResponse m = client_->Get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("taskengine_claims_total"), std::string::npos);
}

}  // namespace
}  // namespace taskengine::api::testing
