#include "api/api.h"

#include "api/routes.h"
#include "api/seed_api.h"
#include "engine/engine_internal.h"

namespace taskengine::api {

Api::Api(Engine* engine, Authenticator* authenticator, ApiOptions options)
    : context_(std::make_unique<ApiContext>()),
      router_(std::make_unique<Router>(authenticator)),
      dashboard_router_(std::make_unique<Router>(authenticator)) {
  TE_CHECK(engine != nullptr && authenticator != nullptr);
  context_->engine = engine;
  context_->store = &StoreOf(*engine);
  context_->authenticator = authenticator;
  context_->clock = options.clock != nullptr ? options.clock : SystemClock::Get();
  context_->options = options;
  LoginGuardOptions login = options.login;
  if (login.clock == nullptr) login.clock = context_->clock;
  context_->login_guard = std::make_unique<LoginGuard>(login);
  RegisterSystemRoutes(*context_, *router_);
  RegisterJobRoutes(*context_, *router_);
  RegisterDispatchRoutes(*context_, *router_);
  RegisterExecutionRoutes(*context_, *router_);
  RegisterOverviewRoutes(*context_, *router_);
  RegisterAuthRoutes(*context_, *router_);
  RegisterWorkerRoutes(*context_, *router_);
  RegisterTenantRoutes(*context_, *router_);
  RegisterAccountRoutes(*context_, *router_);
  RegisterDashboardRoutes(*context_, *dashboard_router_);
  seed_api_ = std::make_unique<SeedApi>(router_.get());
}

Api::~Api() = default;

void Api::SetRateLimiter(RateLimiter* limiter) {
  router_->SetRateLimiter(limiter);
  dashboard_router_->SetRateLimiter(limiter);
}

bool Api::IsDashboardPath(std::string_view path) {
  return path == "/" || path == "/login" || path == "/admin" || path.rfind("/admin/", 0) == 0;
}

RequestHandler Api::handler() const {
  return [api = router_.get(), dashboard = dashboard_router_.get(), seed = seed_api_.get()](
             HttpRequest request, Responder respond) {
    if (SeedApi::Handles(request.path)) {
      seed->Handle(std::move(request), std::move(respond));
      return;
    }
    Router* router = IsDashboardPath(request.path) ? dashboard : api;
    router->Handle(std::move(request), std::move(respond));
  };
}

InlineHandler Api::inline_handler() const {
  return [api = router_.get()](HttpRequest& request, const Responder& respond) {
    if (SeedApi::Handles(request.path) || IsDashboardPath(request.path)) return false;
    return api->TryInline(request, respond);
  };
}

void Api::StopLongPolls() {
  if (context_->lease_broker) context_->lease_broker->Stop();
}

const Principal& PrincipalOf(const RouteRequest& request) {
  TE_CHECK(request.principal.has_value());
  return *request.principal;
}

InlineIf InlineWhileWritesQueue(const Store& store, InlineIf also) {
  if (!store.WritesWithoutWaiting()) return nullptr;
  return [also = std::move(also)](const HttpRequest& r) {
    constexpr std::size_t kMaxInlineBody = 16 * 1024;
    return r.body.size() <= kMaxInlineBody && (also == nullptr || also(r));
  };
}

HttpResponse NeedsAllTenants(std::string_view what) {
  return ErrorResponse(403, "forbidden",
                       std::string(what) + " needs a principal with access to every tenant");
}

TenantScope ScopeOf(const Principal& principal) {
  TenantScope scope;
  if (principal.all_tenants) return scope;
  scope.tenants.emplace();
  for (const std::string& t : principal.tenants) scope.tenants->push_back(TenantId(t));
  return scope;
}

Result<std::string> ReasonBody(const RouteRequest& req) {
  auto body = ParseJsonBody(req.http, /*allow_empty=*/true);
  if (!body.ok()) return body.status();
  if (body->is_null()) return std::string();
  StrictObject in(*body, "request body");
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  TE_RETURN_IF_ERROR(in.Finish());
  return reason.value_or("");
}

Status ExecutionNotFound(std::string_view id_text) {
  std::string shown(id_text.substr(0, 40));
  return NotFound("execution " + shown + " not found");
}

Result<Execution> VisibleExecution(ApiContext& ctx, const Principal& principal,
                                   std::string_view id_text) {
  auto id = ParseInteger(id_text, 1, std::numeric_limits<std::int64_t>::max(), "execution id");
  if (!id.ok()) return id.status();
  Result<Execution> e = ctx.engine->GetExecution(ExecutionId(*id));
  if (!e.ok()) {
    if (e.status().code() == ErrorCode::kNotFound) return ExecutionNotFound(id_text);
    return e.status();
  }
  if (!principal.MayAccessTenant(e->tenant)) return ExecutionNotFound(id_text);
  return e;
}

}  // namespace taskengine::api
