// Internal to src/api: the state shared by the routes and the helpers every
// route file uses. Each routes_*.cc registers one group of routes.
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/api.h"
#include "api/auth.h"
#include "api/errors.h"
#include "api/json_util.h"
#include "api/lease_broker.h"
#include "api/router.h"
#include "engine/engine_internal.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "views/views.h"

namespace taskengine::api {

// Constant after construction except where noted. Thread-safe.
struct ApiContext {
  Engine* engine = nullptr;                // not owned
  Store* store = nullptr;                  // StoreOf(*engine)
  Authenticator* authenticator = nullptr;  // not owned
  Clock* clock = nullptr;                  // options.clock or the system clock
  ApiOptions options;
  // Runs the password checks of logins off the request threads. Declared
  // after what logins use, so it is destroyed (and drained) before them.
  std::unique_ptr<LoginGuard> login_guard;
  // The worker protocol's long polls; set by RegisterWorkerRoutes. Declared
  // last so it is destroyed first: its destruction answers parked polls
  // (empty lists). Owners of the server call lease_broker->Stop() before
  // HttpServer::Stop so that parked polls do not wait out the grace period.
  std::unique_ptr<LeaseBroker> lease_broker;
};

void RegisterJobRoutes(ApiContext& ctx, Router& router);
void RegisterDispatchRoutes(ApiContext& ctx, Router& router);
void RegisterExecutionRoutes(ApiContext& ctx, Router& router);
void RegisterOverviewRoutes(ApiContext& ctx, Router& router);  // stats, queues, lanes, audit
void RegisterSystemRoutes(ApiContext& ctx, Router& router);    // health, metrics, openapi
void RegisterAuthRoutes(ApiContext& ctx, Router& router);      // login, logout, session
void RegisterWorkerRoutes(ApiContext& ctx, Router& router);    // worker protocol, workers list
void RegisterTenantRoutes(ApiContext& ctx, Router& router);    // tenants
void RegisterAccountRoutes(ApiContext& ctx, Router& router);   // users, tokens
// The dashboard's pages and assets, on its own router (Api::dashboard_router).
void RegisterDashboardRoutes(ApiContext& ctx, Router& router);

// The answer to a login whose password check is done: `ok` gets the session
// just opened and the Set-Cookie value for it (the session the request
// carried, if any, is ended first: no fixation); wrong credentials and errors
// get `refused` with the JSON error the API would send.
using LoginAnswer =
    std::function<HttpResponse(const LoginResult& session, const std::string& set_cookie)>;
using LoginRefusal = std::function<HttpResponse(HttpResponse json_error)>;
// Checks `user` and `password` on the LoginGuard's threads (its rate, lockouts
// and queue, whose refusals also go through `refused`) and sends the answer.
void SubmitLogin(ApiContext& ctx, HttpRequest http, std::string user, std::string password,
                 Responder respond, LoginAnswer ok, LoginRefusal refused);

// The principal of an authenticated route. REQUIRES: a non-public route.
const Principal& PrincipalOf(const RouteRequest& request);

// The InlineIf of a route whose only store call is an asynchronous write
// (AdmitBatchAsync, FinishBatchAsync): when the store writes without waiting
// (Store::WritesWithoutWaiting), it takes a request whose body is at most
// 16 KiB and that `also` (when set) accepts; otherwise nullptr, and the route
// always runs on a handler thread.
InlineIf InlineWhileWritesQueue(const Store& store, InlineIf also = nullptr);

// 403 for a principal without global tenant access, naming `what` needs it.
HttpResponse NeedsAllTenants(std::string_view what);

// The tenants whose data the principal may read (X2): every tenant and the
// global jobs, or exactly its granted tenants.
TenantScope ScopeOf(const Principal& principal);

// The execution `{id}` as the principal may see it: kInvalidArgument for a
// malformed id; kNotFound with the same message for a missing execution and
// for another tenant's (X2).
Result<Execution> VisibleExecution(ApiContext& ctx, const Principal& principal,
                                   std::string_view id_text);

// Longest reason an operator may give for an action (audit log).
inline constexpr std::size_t kMaxReason = 1000;

// The optional body {"reason": "..."} of an action: "" when the body is
// empty or has no reason; kInvalidArgument for anything else.
Result<std::string> ReasonBody(const RouteRequest& req);

// Standard "execution <id> not found" status.
Status ExecutionNotFound(std::string_view id_text);

}  // namespace taskengine::api
