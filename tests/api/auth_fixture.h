// The fixture of the authentication tests (api_auth_test, rd6_drill_test):
// a real Engine on a throwaway SQLite file driven by a FakeClock, the REST API
// behind a StoreAuthenticator over the engine's store (same clock), and a
// RateLimiter on the router. Requests go straight to Router::TryInline, then
// Router::Handle, as the server hands them on, so time is fully controlled
// (no sleeping for timeouts).
//
// Jobs: "echo" (global) and "tenant-echo" (per tenant) succeed with
// {"echo": payload}; one worker thread runs them.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/api.h"
#include "api/rate_limit.h"
#include "api/store_authenticator.h"
#include "engine/engine_internal.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine::api::testing {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Reply {
  int status = 0;
  Headers headers;
  std::string body;

  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
  std::string error_code() const {
    nlohmann::json j = json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"].value("code", "");
  }
  // The first header named `name` (case-insensitive), or "".
  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() == name.size() &&
          std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) ==
                   std::tolower(static_cast<unsigned char>(b));
          })) {
        return v;
      }
    }
    return "";
  }
};

// A logged-in dashboard session.
struct Login {
  std::string cookie;  // the te_session value
  std::string csrf;
  std::string set_cookie;  // the whole Set-Cookie header
};

class AuthApiFixture : public ::testing::Test {
 protected:
  static constexpr char kHost[] = "te.example:8080";
  static constexpr char kOrigin[] = "https://te.example:8080";

  void SetUp() override {
    EngineOptions eo;
    eo.database_path = dir_.File("taskengine.db");
    eo.worker_threads = 1;
    eo.poll_interval_ms = 20;
    eo.sweep_interval_ms = 200;
    eo.shutdown_grace_ms = 1000;
    eo.clock = &clock_;
    ASSERT_OK_AND_ASSIGN(engine_, Engine::Open(eo));
    for (auto [name, scope] :
         {std::pair{"echo", JobScope::kGlobal}, std::pair{"tenant-echo", JobScope::kPerTenant}}) {
      JobDefinition job;
      job.name = JobName(name);
      job.handler = "echo";
      job.scope = scope;
      ASSERT_OK(engine_->DefineJob(job));
    }
    ASSERT_OK(engine_->RegisterHandler("echo", [](JobContext& ctx) {
      return HandlerResult::Success(R"({"echo":)" + ctx.payload_json() + "}");
    }));
    ASSERT_OK(engine_->Start());
    StoreAuthenticatorOptions ao;
    ao.clock = &clock_;
    auth_ = std::make_unique<StoreAuthenticator>(&store(), ao);
    ApiOptions api_options;
    api_options.clock = &clock_;
    api_ = std::make_unique<Api>(engine_.get(), auth_.get(), api_options);
    RateLimiterOptions ro;
    ro.clock = &clock_;
    ro.login = {1000, 1000};
    ro.dispatch = {1000, 1000};
    ro.lease = {1000, 1000};
    limiter_ = std::make_unique<RateLimiter>(ro);
    api_->router().SetRateLimiter(limiter_.get());
  }

  void TearDown() override {
    if (engine_) engine_->Stop();
  }

  Store& store() { return StoreOf(*engine_); }

  // Calls the router like the server would and waits for the answer.
  Reply Call(HttpMethod method, const std::string& target, const Headers& headers = {},
             const std::string& body = "", const std::string& peer = "10.0.0.7:40000") {
    HttpResponse resp = Await(
        [this](HttpRequest r, Responder respond) {
          // As the server does: the network thread's part first.
          if (api_->router().TryInline(r, respond)) return;
          api_->router().Handle(std::move(r), std::move(respond));
        },
        MakeRequest(method, target, headers, body, "application/json", peer));
    return Reply{resp.status, resp.headers, resp.body};
  }

  // A request as the server passes it on: lower-case header names, a Host
  // header, `content_type` when there is a body.
  static HttpRequest MakeRequest(HttpMethod method, const std::string& target,
                                 const Headers& headers, const std::string& body,
                                 const std::string& content_type, const std::string& peer) {
    HttpRequest r;
    r.method = method;
    r.method_name = std::string(ToString(method));
    r.SetTarget(target);
    r.headers.emplace_back("host", kHost);
    for (const auto& [n, v] : headers) {
      std::string lower = n;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers.emplace_back(lower, v);
    }
    if (!body.empty()) r.headers.emplace_back("content-type", content_type);
    r.body = body;
    r.remote_address = peer;
    return r;
  }

  // Hands `r` to `handle` and waits (at most 20 s) for its answer.
  static HttpResponse Await(const std::function<void(HttpRequest, Responder)>& handle,
                            HttpRequest r) {
    const std::string target = r.target;
    auto promise = std::make_shared<std::promise<HttpResponse>>();
    std::future<HttpResponse> future = promise->get_future();
    handle(std::move(r),
           Responder([promise](HttpResponse resp) { promise->set_value(std::move(resp)); }));
    if (future.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "no response to " << target;
      return {};
    }
    return future.get();
  }

  static Headers Bearer(const std::string& secret) {
    return {{"Authorization", "Bearer " + secret}};
  }

  // A session cookie plus (when `csrf` is non-empty) the CSRF header and a same-origin Origin.
  static Headers SessionHeaders(const Login& login, bool with_csrf = true) {
    Headers h = {{"Cookie", std::string(kSessionCookie) + "=" + login.cookie}};
    if (with_csrf) {
      h.emplace_back("X-CSRF-Token", login.csrf);
      h.emplace_back("Origin", kOrigin);
    }
    return h;
  }

  // Stores a token and returns its secret.
  std::string MakeToken(const std::string& principal, std::vector<std::string> scopes,
                        std::vector<std::string> tenants = {"*"}, Millis expires_at = 0,
                        std::int64_t* id = nullptr) {
    const std::string secret = NewTokenSecret();
    ApiToken t;
    t.name = principal;
    t.secret_hash = HashSecret(secret);
    t.principal = principal;
    t.scopes = std::move(scopes);
    t.tenants = std::move(tenants);
    t.expires_at = expires_at;
    Result<std::int64_t> created = store().CreateToken(t);
    EXPECT_OK(created.status());
    if (id != nullptr && created.ok()) *id = *created;
    return secret;
  }

  void MakeUser(const std::string& name, const std::string& password, const std::string& role,
                std::vector<std::string> tenants = {"*"}, bool disabled = false) {
    User u;
    u.name = name;
    Result<std::string> hash = HashPassword(password);
    ASSERT_OK(hash.status());
    u.password_hash = *hash;
    Result<std::vector<std::string>> scopes = RoleScopes(role);
    ASSERT_OK(scopes.status());
    u.scopes = *scopes;
    u.tenants = std::move(tenants);
    u.disabled = disabled;
    ASSERT_OK(store().UpsertUser(u));
  }

  Reply PostLogin(const std::string& user, const std::string& password, const Headers& extra = {},
                  const std::string& peer = "10.0.0.7:40000") {
    return Call(HttpMethod::kPost, "/api/v1/auth/login", extra,
                nlohmann::json{{"username", user}, {"password", password}}.dump(), peer);
  }

  // Logs in and returns the session; adds a failure when it does not answer 200.
  Login LogIn(const std::string& user, const std::string& password) {
    Reply r = PostLogin(user, password);
    EXPECT_EQ(r.status, 200) << r.body;
    Login out;
    out.set_cookie = r.header("set-cookie");
    const std::string prefix = std::string(kSessionCookie) + "=";
    if (out.set_cookie.rfind(prefix, 0) == 0) {
      out.cookie = out.set_cookie.substr(prefix.size(), out.set_cookie.find(';') - prefix.size());
    }
    nlohmann::json j = r.json();
    if (j.is_object()) out.csrf = j.value("csrf_token", "");
    return out;
  }

  // Dispatches `job` (tenant may be empty) with a bearer token; returns the id or 0.
  std::int64_t Dispatch(const std::string& secret, const std::string& job,
                        const std::string& tenant = "") {
    nlohmann::json body = {{"payload", {{"n", 1}}}};
    if (!tenant.empty()) body["tenant"] = tenant;
    Reply r =
        Call(HttpMethod::kPost, "/api/v1/jobs/" + job + "/dispatch", Bearer(secret), body.dump());
    EXPECT_EQ(r.status, 202) << r.body;
    nlohmann::json j = r.json();
    return j.is_object() ? j.value("id", std::int64_t{0}) : 0;
  }

  // Waits (real time) until execution `id` succeeded.
  bool WaitSucceeded(std::int64_t id) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    while (std::chrono::steady_clock::now() < deadline) {
      Result<Execution> e = engine_->GetExecution(ExecutionId(id));
      if (e.ok() && e->status == ExecutionStatus::kSucceeded) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  FakeClock clock_;
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<StoreAuthenticator> auth_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<RateLimiter> limiter_;
};

}  // namespace taskengine::api::testing
