// The REST API of taskengine (product.md I1, I2, I5): every route of
// /api/v1 plus /healthz, /readyz and /metrics, registered on a Router over an
// Engine; and the web dashboard (I3) on a second Router: `/`, `/login` and
// `/admin/...`, pages that are clients of the API (routes_dashboard.cc). The
// routes translate HTTP <-> engine calls; they hold no business logic
// (validation of dispatches, transitions and so on is the engine's).
//
//   api::StaticTokenAuthenticator auth;  // or part 3's token store
//   api::Api api(engine.get(), &auth, {});
//   api::HttpServer http({.port = 8080}, api.handler(), api.inline_handler());
//   TE_RETURN_IF_ERROR(http.Start());
//
// The API's route list and every request/response shape are documented in
// docs/openapi.json (served at /api/v1/openapi.json); a test checks that the
// document and router() agree. The dashboard's pages are in docs/dashboard.md.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/auth.h"
#include "api/http_types.h"
#include "api/login_guard.h"
#include "api/metrics.h"
#include "api/router.h"
#include "storage/execution_detail.h"
#include "taskengine/clock.h"
#include "taskengine/engine.h"

namespace taskengine::api {

struct ApiOptions {
  // Not owned. Default: the system clock (only for ages and the 24 h window).
  Clock* clock = nullptr;
  // /metrics answers without credentials. Default: false (needs `read` and
  // global tenant access).
  bool metrics_open = false;
  // Log lines in an execution's detail (oldest first). Default: 1000.
  int detail_log_limit = kDetailLogLimit;
  // Audit records in an execution's detail (newest first). Default: 100.
  int detail_audit_limit = kDetailAuditLimit;
  // The queues this process works (their priority and concurrency), shown by
  // /queues beside the depths in the database. Default: none.
  std::vector<QueueConfig> queues;
  // Items in one bulk dispatch. Default: 1000.
  std::size_t max_bulk_items = 1000;
  // The counters of the worker-protocol routes (remote workers), shown by
  // /metrics; shared so the owner may read them too. Default (null): the Api
  // makes its own.
  std::shared_ptr<ApiMetrics> worker_metrics;
  // Appends more families to /metrics (Prometheus text, e.g. with
  // MetricsWriter): the composition root adds the scheduler's, which the API
  // does not know. Called on request threads, possibly concurrently: must be
  // thread-safe and cheap. Default: none.
  std::function<void(std::string* out)> extra_metrics;
  // Where and how many password checks of POST /api/v1/auth/login run
  // (login_guard.h). Its clock defaults to `clock`.
  LoginGuardOptions login;

  // --- job definitions: what the composition root, which knows the
  // handlers, decides for the job routes (job_edits.h) ---
  // The config keys of jobs of `handler` that come from the server's
  // configuration only (W2, W3: what runs, where requests go): an edit may
  // repeat them unchanged (they are kept when left out), never set, change
  // or remove them. Default (empty): no key is protected.
  std::function<std::vector<std::string>(std::string_view handler)> server_owned_config_keys;
  // Checks a created or edited definition exactly as configured definitions
  // are checked when the configuration is loaded (the field it refuses in
  // *field); a request it refuses answers 400 and changes nothing. Default
  // (empty): the store's own checks only.
  std::function<Status(const JobDefinition&, std::string* field)> check_job;
  // The config a remote worker runs for `job`: its profile or target
  // reference replaced by the named settings (handlers/named_config.h), as
  // the in-process handlers see it. Default (empty): the stored config.
  std::function<Result<std::string>(const JobDefinition& job)> expand_handler_config;
  // Config keys whose values are masked (RedactJobConfig) for every caller
  // but the global admin, on top of the built-in ones. Default: none.
  std::vector<std::string> redact_keys;
};

struct ApiContext;

// Owns the router and the routes' shared state. Thread-safe once constructed.
class SeedApi;

class Api {
 public:
  // `engine` and `authenticator` are not owned and must outlive the Api.
  Api(Engine* engine, Authenticator* authenticator, ApiOptions options);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // Extension point: more routes (e.g. the worker protocol) may be added
  // before the server starts.
  Router& router() { return *router_; }
  // The dashboard's pages and assets: `/`, `/login`, `/admin` and below.
  Router& dashboard_router() { return *dashboard_router_; }
  // Applies `limiter` (not owned; must outlive the Api) to both routers.
  // REQUIRES: before the server starts.
  void SetRateLimiter(RateLimiter* limiter);
  // The handler to give HttpServer: dashboard paths to dashboard_router(),
  // seed 001's task API (/api/tasks/..., /api/<tenant>/tasks/...;
  // docs/seed-api.md) to its adapter over router(), everything else to
  // router(). Valid while the Api lives.
  RequestHandler handler() const;
  // The server's InlineHandler: the API routes that may run on a network
  // thread (Router::TryInline).
  InlineHandler inline_handler() const;
  // True for the paths the dashboard router answers.
  static bool IsDashboardPath(std::string_view path);
  // Answers every parked long poll of the worker protocol with an empty list
  // and makes later polls answer at once: call before stopping the server so
  // shutdown does not wait for polls. Idempotent.
  void StopLongPolls();

 private:
  std::unique_ptr<ApiContext> context_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<Router> dashboard_router_;
  std::unique_ptr<SeedApi> seed_api_;  // /api/<tenant>/tasks/..., over router_
};

// docs/openapi.json as embedded at build time.
std::string_view OpenApiDocument();

}  // namespace taskengine::api
