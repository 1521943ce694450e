// Seed 001's dashboard API (src/api/seed_api.h) through Api::handler(), as the
// server calls it: each route's shape and {"success": ...} envelope, and that
// authentication, CSRF and tenant scope are exactly the /api/v1 routes' (a
// store's path never shows another store's execution).
#include <gmock/gmock.h>

#include "auth_fixture.h"

namespace taskengine::api::testing {
namespace {

using json = nlohmann::json;

class SeedApiTest : public AuthApiFixture {
 protected:
  void SetUp() override {
    AuthApiFixture::SetUp();
    for (const char* id : {"a", "b"}) {
      Tenant t;
      t.id = TenantId(id);
      t.name = id;
      ASSERT_OK(store().UpsertTenant(t));
    }
    admin_ = MakeToken("root", {"admin"});
    store_a_ = MakeToken("store-a", {"operate", "dispatch"}, {"a"});
    // As token:create grants it (replays recheck the requester's grants, R1).
    ASSERT_OK(store().Grant("store-a", "a"));
  }

  Reply Seed(HttpMethod method, const std::string& target, const std::string& secret,
             const std::string& body = "") {
    HttpResponse resp =
        Await([this](HttpRequest r, Responder respond) { api_->handler()(std::move(r), respond); },
              MakeRequest(method, target, secret.empty() ? Headers{} : Bearer(secret), body,
                          "application/json", "10.0.0.7:40000"));
    return Reply{resp.status, resp.headers, resp.body};
  }

  // Dispatches tenant-echo for store `a` through the adapter; returns the id.
  std::int64_t DispatchForA(const json& body) {
    Reply r =
        Seed(HttpMethod::kPost, "/api/a/tasks/jobs/tenant-echo/dispatch", store_a_, body.dump());
    EXPECT_EQ(r.status, 202) << r.body;
    return r.json()["execution"].value("id", std::int64_t{0});
  }

  std::string admin_;
  std::string store_a_;
};

TEST_F(SeedApiTest, StoreRoutesAnswerTheSeedsShapes) {
  Reply jobs = Seed(HttpMethod::kGet, "/api/a/tasks/jobs", store_a_);
  ASSERT_EQ(jobs.status, 200) << jobs.body;
  EXPECT_EQ(jobs.json()["success"], true);
  json tenant_echo;
  const json listed = jobs.json();
  for (const json& j : listed["jobs"]) {
    if (j["id"] == "tenant-echo") tenant_echo = j;
  }
  ASSERT_TRUE(tenant_echo.is_object()) << jobs.body;
  EXPECT_EQ(tenant_echo["scope"], "per_store");
  EXPECT_EQ(tenant_echo["className"], "echo");
  EXPECT_EQ(tenant_echo["isEnabled"], true);
  EXPECT_TRUE(tenant_echo["maxRetries"].is_number_integer());
  EXPECT_TRUE(tenant_echo["timeout"].is_number_integer());

  Reply one = Seed(HttpMethod::kGet, "/api/a/tasks/jobs/tenant-echo", store_a_);
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.json()["job"]["name"], "tenant-echo");

  const json body = {{"payload", {{"n", 7}}}, {"idempotencyKey", "order-7"}};
  Reply first =
      Seed(HttpMethod::kPost, "/api/a/tasks/jobs/tenant-echo/dispatch", store_a_, body.dump());
  ASSERT_EQ(first.status, 202) << first.body;
  EXPECT_EQ(first.json()["success"], true);
  EXPECT_EQ(first.json()["created"], true);
  const json execution = first.json()["execution"];
  EXPECT_EQ(execution["typeNum"], "a");
  EXPECT_EQ(execution["jobDefinitionId"], "tenant-echo");
  EXPECT_EQ(execution["idempotencyKey"], "order-7");
  EXPECT_EQ(execution["triggerType"], "manual");
  const std::int64_t id = execution["id"];
  Reply again =
      Seed(HttpMethod::kPost, "/api/a/tasks/jobs/tenant-echo/dispatch", store_a_, body.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["created"], false);
  EXPECT_EQ(again.json()["execution"]["id"], id) << "the same execution, not a second one";

  ASSERT_TRUE(WaitSucceeded(id));
  Reply detail = Seed(HttpMethod::kGet, "/api/a/tasks/executions/" + std::to_string(id), store_a_);
  ASSERT_EQ(detail.status, 200) << detail.body;
  EXPECT_EQ(detail.json()["execution"]["status"], "completed");
  EXPECT_EQ(detail.json()["execution"]["engineStatus"], "succeeded");
  EXPECT_EQ(detail.json()["execution"]["result"], json::parse(R"({"echo":{"n":7}})"));
  EXPECT_TRUE(detail.json()["execution"]["durationMs"].is_number_integer());
  EXPECT_TRUE(detail.json()["logs"].is_array());

  Reply page = Seed(HttpMethod::kGet,
                    "/api/a/tasks/executions?jobId=tenant-echo&status=completed&limit=10&offset=0",
                    store_a_);
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.json()["total"], 1);
  ASSERT_EQ(page.json()["executions"].size(), 1u);
  EXPECT_EQ(page.json()["executions"][0]["id"], id);
  Reply pending = Seed(HttpMethod::kGet, "/api/a/tasks/executions?status=pending", store_a_);
  ASSERT_EQ(pending.status, 200) << pending.body;
  EXPECT_EQ(pending.json()["total"], 0);

  Reply stats = Seed(HttpMethod::kGet, "/api/a/tasks/stats", store_a_);
  ASSERT_EQ(stats.status, 200) << stats.body;
  EXPECT_EQ(stats.json()["stats"]["completedJobs24h"], 1);
  EXPECT_EQ(stats.json()["stats"]["pendingJobs"], 0);
  EXPECT_TRUE(stats.json()["stats"]["queueDepths"].is_object());
  EXPECT_FALSE(stats.json()["stats"].contains("jobsByStore"));

  Reply workers = Seed(HttpMethod::kGet, "/api/a/tasks/workers", store_a_);
  ASSERT_EQ(workers.status, 200) << workers.body;
  EXPECT_TRUE(workers.json()["workers"].is_array());
}

TEST_F(SeedApiTest, AuthAndStoreScopeAreTheApis) {
  const std::int64_t id = DispatchForA({{"payload", json::object()}});
  ASSERT_TRUE(WaitSucceeded(id));
  const std::string path = "/api/a/tasks/executions/" + std::to_string(id);

  Reply anonymous = Seed(HttpMethod::kGet, path, "");
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_EQ(anonymous.json()["success"], false);
  EXPECT_EQ(Seed(HttpMethod::kGet, path, "te_not-a-token").status, 401);

  // Store b's path never shows store a's execution; store a's token sees no b.
  Reply other = Seed(HttpMethod::kGet, "/api/b/tasks/executions/" + std::to_string(id), admin_);
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(other.json()["success"], false);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/b/tasks/jobs", store_a_).status, 404);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/b/tasks/stats", store_a_).status, 404);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/nope/tasks/jobs", admin_).status, 404);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/Bad!/tasks/jobs", admin_).status, 404);
  // GET /api/v1/stats?tenant= (what the store's stats read): granted tenants only.
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats?tenant=b", Bearer(store_a_)).status, 403);
  EXPECT_EQ(Call(HttpMethod::kGet, "/api/v1/stats?tenant=Bad!", Bearer(admin_)).status, 400);
  Reply only_b = Call(HttpMethod::kGet, "/api/v1/stats?tenant=b", Bearer(admin_));
  ASSERT_EQ(only_b.status, 200) << only_b.body;
  EXPECT_EQ(only_b.json()["last_24h"]["succeeded"], 0) << "store a's execution is not b's";
  EXPECT_EQ(only_b.json()["scope"], "tenants");
  // The global routes need every tenant.
  Reply global = Seed(HttpMethod::kGet, "/api/tasks/stats", store_a_);
  EXPECT_EQ(global.status, 403) << global.body;
  EXPECT_EQ(global.json()["success"], false);

  // A reader cannot dispatch; nothing was admitted.
  const std::string viewer = MakeToken("viewer", {"read"});
  Reply refused = Seed(HttpMethod::kPost, "/api/a/tasks/jobs/tenant-echo/dispatch", viewer,
                       R"({"payload": {}})");
  EXPECT_EQ(refused.status, 403) << refused.body;
  Reply all = Seed(HttpMethod::kGet, "/api/a/tasks/executions", admin_);
  EXPECT_EQ(all.json()["total"], 1);

  // A session needs its CSRF token on a mutation, as on /api/v1.
  MakeUser("olga", "a long passphrase", "operator", {"a"});
  Login login = LogIn("olga", "a long passphrase");
  auto with_session = [&](bool csrf) {
    HttpResponse resp =
        Await([this](HttpRequest r, Responder respond) { api_->handler()(std::move(r), respond); },
              MakeRequest(HttpMethod::kPost, "/api/a/tasks/jobs/tenant-echo/dispatch",
                          SessionHeaders(login, csrf), R"({"payload": {}})", "application/json",
                          "10.0.0.7:40000"));
    return resp.status;
  };
  EXPECT_EQ(with_session(false), 403);
  EXPECT_EQ(with_session(true), 202);
}

TEST_F(SeedApiTest, AbortRetryAndUpdate) {
  const std::int64_t id = DispatchForA({{"payload", json::object()}, {"delaySeconds", 3600}});
  const std::string path = "/api/a/tasks/executions/" + std::to_string(id);
  Reply abort = Seed(HttpMethod::kPost, path + "/abort", store_a_, R"({"reason": "wrong day"})");
  ASSERT_EQ(abort.status, 200) << abort.body;
  EXPECT_EQ(abort.json()["status"], "cancelled");
  EXPECT_EQ(Seed(HttpMethod::kGet, path, store_a_).json()["execution"]["status"], "cancelled");

  EXPECT_EQ(Seed(HttpMethod::kPost, path + "/retry", store_a_).status, 409)
      << "a canceled execution is not replayed (the API's rule)";

  // A failed execution is retried: replayed, audited with a reason.
  JobDefinition broken;
  broken.name = JobName("broken");
  broken.handler = "not-registered";
  broken.scope = JobScope::kPerTenant;
  broken.retry.max_attempts = 1;
  ASSERT_OK(engine_->DefineJob(broken));
  Reply failing = Seed(HttpMethod::kPost, "/api/a/tasks/jobs/broken/dispatch", store_a_, "{}");
  ASSERT_EQ(failing.status, 202) << failing.body;
  const std::int64_t failed_id = failing.json()["execution"]["id"];
  const std::string failed_path = "/api/a/tasks/executions/" + std::to_string(failed_id);
  std::string ended;
  for (int i = 0; i < 1500 && ended.empty(); ++i) {
    const std::string st =
        Seed(HttpMethod::kGet, failed_path, store_a_).json()["execution"]["status"];
    if (st == "failed" || st == "quarantined") ended = st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_FALSE(ended.empty());
  Reply retry = Seed(HttpMethod::kPost, failed_path + "/retry", store_a_);
  ASSERT_EQ(retry.status, 200) << retry.body;
  EXPECT_EQ(retry.json()["outcome"], "replayed");
  EXPECT_EQ(retry.json()["execution"]["id"], failed_id);
  EXPECT_NE(retry.json()["execution"]["status"], ended);
  AuditFilter filter;
  filter.target = "execution:" + std::to_string(failed_id);
  ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> audit, store().ListAudit(filter));
  ASSERT_GE(audit.size(), 1u);
  EXPECT_EQ(audit.back().actor, "store-a");
  EXPECT_EQ(audit.back().reason, "retried through the seed dashboard API");
  EXPECT_EQ(Seed(HttpMethod::kPost,
                 "/api/b/tasks/executions/" + std::to_string(failed_id) + "/retry", admin_)
                .status,
            404);

  EXPECT_EQ(Seed(HttpMethod::kPost, path + "/abort", store_a_, R"({"force": true})").status, 400);
  EXPECT_EQ(Seed(HttpMethod::kPost, "/api/a/tasks/executions/abc/abort", store_a_).status, 400);
  EXPECT_EQ(Seed(HttpMethod::kDelete, path, store_a_).status, 405);

  // PUT edits the definition (admins with every tenant, as PATCH /api/v1/jobs).
  const std::string job = "/api/a/tasks/jobs/echo";
  Reply put = Seed(HttpMethod::kPut, job, admin_,
                   R"({"notifyEmails": "ops@example.com, oncall@example.com",
                       "schedule": "*/5 * * * *", "reason": "page the on-call"})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.json()["job"]["notifyEmails"], "ops@example.com,oncall@example.com");
  EXPECT_EQ(put.json()["job"]["schedule"], "*/5 * * * *");
  ASSERT_OK_AND_ASSIGN(JobDefinition stored, store().GetJob(JobName("echo")));
  EXPECT_EQ(stored.schedule, "*/5 * * * *");
  EXPECT_EQ(Seed(HttpMethod::kPut, job, store_a_, R"({"schedule": "0 * * * *"})").status, 404)
      << "a global job is not the store's to see";
  EXPECT_EQ(Seed(HttpMethod::kPut, "/api/a/tasks/jobs/tenant-echo", store_a_,
                 R"({"schedule": "0 * * * *"})")
                .status,
            403)
      << "editing definitions needs an admin with every tenant";
  EXPECT_EQ(Seed(HttpMethod::kPut, job, admin_, R"({"shedule": "0 * * * *"})").status, 400);
  EXPECT_EQ(Seed(HttpMethod::kPut, job, admin_, R"({"schedule": "61 * * * *"})").status, 400);
  ASSERT_OK_AND_ASSIGN(JobDefinition unchanged, store().GetJob(JobName("echo")));
  EXPECT_EQ(unchanged.schedule, "*/5 * * * *") << "refused edits change nothing";
}

TEST_F(SeedApiTest, GlobalRoutes) {
  const std::int64_t id = DispatchForA({{"payload", json::object()}});
  ASSERT_TRUE(WaitSucceeded(id));
  Reply stats = Seed(HttpMethod::kGet, "/api/tasks/stats", admin_);
  ASSERT_EQ(stats.status, 200) << stats.body;
  ASSERT_TRUE(stats.json()["stats"]["jobsByStore"].is_array());
  bool found_a = false;
  const json figures = stats.json();
  for (const json& s : figures["stats"]["jobsByStore"]) found_a |= s["typeNum"] == "a";
  EXPECT_TRUE(found_a) << stats.body;
  Reply mine = Seed(HttpMethod::kGet, "/api/tasks/executions?typeNum=a", admin_);
  ASSERT_EQ(mine.status, 200) << mine.body;
  EXPECT_EQ(mine.json()["total"], 1);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/tasks/executions?typeNum=b", admin_).json()["total"], 0);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/tasks/executions?store=a", admin_).status, 400);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/tasks/workers", admin_).status, 200);
  EXPECT_EQ(Seed(HttpMethod::kGet, "/api/tasks/jobs", admin_).status, 404)
      << "seed 001 has no global jobs route";
}

}  // namespace
}  // namespace taskengine::api::testing
