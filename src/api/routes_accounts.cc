// Users and API tokens (X1, X4), for admins with every tenant: list, create
// (the generated password or the token secret is in the answer once, never
// again), disable and enable users, revoke tokens. Everything goes through
// api/accounts.h, as the CLI verbs do, and is audited with the caller and
// the reason.
#include <limits>
#include <memory>

#include "api/accounts.h"
#include "api/routes.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kMaxUserName = 100;
constexpr std::size_t kMaxListItems = 50;
constexpr std::size_t kMaxListItem = 100;

// The answer holding a secret: never cached.
HttpResponse SecretResponse(const Json& body, std::string location) {
  HttpResponse response = JsonResponse(201, body);
  response.headers.emplace_back("Cache-Control", "no-store");
  response.headers.emplace_back("Location", std::move(location));
  return response;
}

AccountActor ActorOf(const Principal& principal, std::string reason) {
  return AccountActor{principal.name, std::move(reason)};
}

// GET /api/v1/users -> {"items": [User...]} by name.
HttpResponse ListUsers(ApiContext& ctx, const RouteRequest& req) {
  if (!PrincipalOf(req).all_tenants) return NeedsAllTenants("listing users");
  auto users = ctx.store->ListUsers();
  if (!users.ok()) return StatusResponse(users.status());
  Json items = Json::array();
  for (const User& u : *users) items.push_back(UserDocument(u));
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// POST /api/v1/users {"name", "role", "tenants": [...] (default every
// tenant), "password" (default: generated and answered once), "reason"}
// -> 201 User (+ "password" when generated) | 409 name taken.
HttpResponse CreateUserRoute(ApiContext& ctx, Mutex& mu, const RouteRequest& req) EXCLUDES(mu) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("creating users");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("name");
  in.Require("role");
  NewUser user;
  user.name = in.String("name", kMaxUserName).value_or("");
  user.role = in.String("role", 20).value_or("");
  user.tenants =
      in.Strings("tenants", kMaxListItems, kMaxListItem).value_or(std::vector<std::string>{});
  user.password = in.String("password", 1024);
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  MutexLock lock(mu);
  auto created = CreateUser(*ctx.store, user, ActorOf(principal, reason.value_or("")));
  if (!created.ok()) return StatusResponse(created.status());
  Json out = UserDocument(created->user);
  if (!created->password.empty()) out["password"] = created->password;
  return SecretResponse(out, "/api/v1/users/" + created->user.name);
}

// POST /api/v1/users/{name}/disable|enable {"reason"} -> 200 User. A
// disabled user cannot log in and its sessions end at their next request.
// 409 when it would leave no enabled admin with every tenant.
HttpResponse SetDisabledRoute(ApiContext& ctx, Mutex& mu, const RouteRequest& req, bool disabled)
    EXCLUDES(mu) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants)
    return NeedsAllTenants(disabled ? "disabling users" : "enabling users");
  auto reason = ReasonBody(req);
  if (!reason.ok()) return StatusResponse(reason.status());
  MutexLock lock(mu);
  auto user = SetUserDisabled(*ctx.store, req.Param("name"), disabled, ActorOf(principal, *reason));
  if (!user.ok()) return StatusResponse(user.status());
  return JsonResponse(200, UserDocument(*user));
}

// GET /api/v1/tokens -> {"items": [Token...]} by id; never secrets.
HttpResponse ListTokens(ApiContext& ctx, const RouteRequest& req) {
  if (!PrincipalOf(req).all_tenants) return NeedsAllTenants("listing tokens");
  auto tokens = ctx.store->ListTokens();
  if (!tokens.ok()) return StatusResponse(tokens.status());
  const Millis now = ctx.clock->NowMillis();
  Json items = Json::array();
  for (const ApiToken& t : *tokens) items.push_back(TokenToJson(t, now));
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// POST /api/v1/tokens {"name", "scopes": [...], "tenants": [...] (default
// every tenant), "expires_in": "30d" (default never), "principal" (default
// "token:<name>"), "reason"} -> 201 Token + "secret" (shown once).
HttpResponse CreateTokenRoute(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("creating tokens");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("name");
  in.Require("scopes");
  NewToken token;
  token.name = in.String("name", kMaxListItem).value_or("");
  token.scopes = in.Strings("scopes", 5, 20).value_or(std::vector<std::string>{});
  token.tenants =
      in.Strings("tenants", kMaxListItems, kMaxListItem).value_or(std::vector<std::string>{});
  std::optional<std::string> expires_in = in.String("expires_in", 20);
  token.principal = in.String("principal", kMaxPrincipalBytes).value_or("");
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  if (expires_in) {
    auto lifetime = ParseLifetime(*expires_in, "expires_in");
    if (!lifetime.ok()) {
      in.Fail("expires_in", "must be a number with a unit s, m, h or d (e.g. 30d), at most " +
                                std::to_string(kMaxTokenLifetimeDays) + " days");
    } else {
      token.lifetime_ms = *lifetime;
    }
  }
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  auto created = CreateToken(*ctx.store, token, ctx.clock->NowMillis(),
                             ActorOf(principal, reason.value_or("")));
  if (!created.ok()) return StatusResponse(created.status());
  Json out = TokenToJson(created->token, ctx.clock->NowMillis());
  out["secret"] = created->secret;
  return SecretResponse(out, "/api/v1/tokens/" + std::to_string(created->token.id));
}

// POST /api/v1/tokens/{id}/revoke {"reason"} -> 200 Token (revoked). The
// token answers 401 from the next request on. Idempotent.
HttpResponse RevokeTokenRoute(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("revoking tokens");
  const std::string& id_text = req.Param("id");
  auto parsed = ParseInteger(id_text, 1, std::numeric_limits<std::int64_t>::max(), "token id");
  if (!parsed.ok()) return StatusResponse(parsed.status());
  const std::int64_t id = *parsed;
  auto reason = ReasonBody(req);
  if (!reason.ok()) return StatusResponse(reason.status());
  auto revoked = RevokeToken(*ctx.store, id, ActorOf(principal, *reason));
  if (!revoked.ok()) return StatusResponse(revoked.status());
  auto tokens = ctx.store->ListTokens();
  if (!tokens.ok()) return StatusResponse(tokens.status());
  for (const ApiToken& t : *tokens) {
    if (t.id == id) return JsonResponse(200, TokenToJson(t, ctx.clock->NowMillis()));
  }
  return StatusResponse(NotFound("token " + id_text + " not found"));
}

}  // namespace

void RegisterAccountRoutes(ApiContext& ctx, Router& router) {
  auto user_mu = std::make_shared<Mutex>();
  const RouteAccess admin = RouteAccess::Requires(Scope::kAdmin);
  router.Add(HttpMethod::kGet, "/api/v1/users", admin,
             [&ctx](const RouteRequest& r) { return ListUsers(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/users", admin,
             [&ctx, user_mu](const RouteRequest& r) { return CreateUserRoute(ctx, *user_mu, r); });
  router.Add(
      HttpMethod::kPost, "/api/v1/users/{name}/disable", admin,
      [&ctx, user_mu](const RouteRequest& r) { return SetDisabledRoute(ctx, *user_mu, r, true); });
  router.Add(
      HttpMethod::kPost, "/api/v1/users/{name}/enable", admin,
      [&ctx, user_mu](const RouteRequest& r) { return SetDisabledRoute(ctx, *user_mu, r, false); });
  router.Add(HttpMethod::kGet, "/api/v1/tokens", admin,
             [&ctx](const RouteRequest& r) { return ListTokens(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/tokens", admin,
             [&ctx](const RouteRequest& r) { return CreateTokenRoute(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/tokens/{id}/revoke", admin,
             [&ctx](const RouteRequest& r) { return RevokeTokenRoute(ctx, r); });
}

}  // namespace taskengine::api
