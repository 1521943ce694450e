// Dashboard sessions (X1; quality.md §3.2, §3.3):
//   POST /api/v1/auth/login    {username, password} -> a new session cookie and its CSRF token
//                              (the password check runs on the LoginGuard's threads)
//   POST /api/v1/auth/logout   ends the session server-side, clears the cookie
//   GET  /api/v1/auth/session  who the caller is (token or session), with the CSRF token
#include "api/accounts.h"
#include "api/routes.h"
#include "api/store_authenticator.h"
#include "core/time_text.h"

namespace taskengine::api {
namespace {

std::string CookieAttributes(bool secure) {
  return std::string("; Path=/; HttpOnly; SameSite=Strict") + (secure ? "; Secure" : "");
}

Json ScopeNames(const Principal& p) {
  Json out = Json::array();
  for (Scope s : {Scope::kRead, Scope::kDispatch, Scope::kOperate, Scope::kAdmin, Scope::kWorker}) {
    if (p.scopes & static_cast<std::uint8_t>(s)) out.push_back(std::string(ToString(s)));
  }
  return out;
}

Json TenantNames(const Principal& p) {
  Json out = Json::array();
  for (const std::string& t : p.tenants) out.push_back(t);
  return out;
}

std::string_view MethodName(AuthMethod m) {
  switch (m) {
    case AuthMethod::kToken:
      return "token";
    case AuthMethod::kSession:
      return "session";
    case AuthMethod::kNone:
      break;
  }
  return "none";
}

}  // namespace

void SubmitLogin(ApiContext& ctx, HttpRequest http, std::string user, std::string password,
                 Responder respond, LoginAnswer ok, LoginRefusal refused) {
  std::string account = user;
  auto check = [&ctx, http = std::move(http), user = std::move(user),
                password = std::move(password), respond, ok, refused]() -> std::optional<bool> {
    Result<std::optional<LoginResult>> login = ctx.authenticator->Login(user, password);
    if (!login.ok()) {
      respond.Send(refused(StatusResponse(login.status())));
      return std::nullopt;
    }
    if (!login->has_value()) {
      respond.Send(refused(StatusResponse(Unauthenticated("invalid username or password"))));
      return false;
    }
    const LoginResult& s = **login;
    // A session presented with the login is replaced, never reused (fixation).
    Status old = ctx.authenticator->Logout(http);
    (void)old;  // best effort: the old session still times out
    const Millis now = ctx.clock->NowMillis();
    const Millis max_age_s = std::max<Millis>(0, (s.expires_at - now) / 1000);
    const std::string cookie = std::string(kSessionCookie) + "=" + s.session_id +
                               CookieAttributes(s.secure_cookie) +
                               "; Max-Age=" + std::to_string(max_age_s);
    respond.Send(ok(s, cookie));
    return true;
  };
  if (std::optional<HttpResponse> refusal = ctx.login_guard->Submit(std::move(account), check)) {
    respond.Send(refused(std::move(*refusal)));
  }
}

namespace {

// POST /api/v1/auth/login {username, password}. 401 for missing or wrong
// credentials (the same answer for an unknown user), 403 for a cross-origin
// request, 400 for a malformed body; 429 when the account is locked after
// failures or the server's login rate is spent, 503 when every login thread
// is busy (both with Retry-After). The password check runs on the
// LoginGuard's threads, never on a request thread.
void Login(ApiContext& ctx, RouteRequest r, Responder respond) {
  const HttpRequest& http = r.http;
  if ((http.Header("origin") != nullptr || http.Header("referer") != nullptr) &&
      !IsSameOrigin(http)) {
    respond.Send(ErrorResponse(403, "forbidden", "login must come from the same origin",
                               {{"reason", "origin"}}));
    return;
  }
  auto body = ParseJsonBody(http, /*allow_empty=*/true);
  if (!body.ok()) {
    respond.Send(StatusResponse(body.status()));
    return;
  }
  StrictObject in(*body, "request body");
  std::optional<std::string> user = in.String("username", kMaxPrincipalBytes);
  std::optional<std::string> password = in.String("password", kMaxPasswordBytes);
  Status parsed = in.Finish();
  if (!parsed.ok()) {
    respond.Send(StatusResponse(parsed));
    return;
  }
  if (!user || !password || user->empty() || password->empty()) {
    respond.Send(StatusResponse(Unauthenticated("send {\"username\": ..., \"password\": ...}")));
    return;
  }
  auto ok = [](const LoginResult& s, const std::string& set_cookie) {
    HttpResponse out = JsonResponse(200, Json{{"user", s.principal.name},
                                              {"scopes", ScopeNames(s.principal)},
                                              {"all_tenants", s.principal.all_tenants},
                                              {"tenants", TenantNames(s.principal)},
                                              {"csrf_token", s.csrf_token},
                                              {"expires_at", FormatTime(s.expires_at)},
                                              {"idle_timeout_seconds", s.idle_timeout_ms / 1000}});
    out.headers.emplace_back("Set-Cookie", set_cookie);
    out.headers.emplace_back("Cache-Control", "no-store");
    return out;
  };
  SubmitLogin(ctx, std::move(r.http), std::move(*user), std::move(*password), std::move(respond),
              ok, [](HttpResponse error) { return error; });
}

// POST /api/v1/auth/logout -> 204; the session is deleted server-side.
HttpResponse Logout(ApiContext& ctx, const RouteRequest& r) {
  Status s = ctx.authenticator->Logout(r.http);
  if (!s.ok()) return StatusResponse(s);
  HttpResponse out;
  out.status = 204;
  out.content_type.clear();
  out.headers.emplace_back("Set-Cookie", std::string(kSessionCookie) + "=" +
                                             CookieAttributes(ctx.authenticator->SecureCookies()) +
                                             "; Max-Age=0");
  out.headers.emplace_back("Cache-Control", "no-store");
  return out;
}

// GET /api/v1/auth/session -> the caller.
HttpResponse WhoAmI(const RouteRequest& r) {
  const Principal& p = PrincipalOf(r);
  Json body{{"name", p.name},
            {"method", std::string(MethodName(p.method))},
            {"scopes", ScopeNames(p)},
            {"all_tenants", p.all_tenants},
            {"tenants", TenantNames(p)}};
  if (p.method == AuthMethod::kSession) body["csrf_token"] = p.csrf_token;
  HttpResponse out = JsonResponse(200, body);
  out.headers.emplace_back("Cache-Control", "no-store");
  return out;
}

}  // namespace

void RegisterAuthRoutes(ApiContext& ctx, Router& router) {
  router.AddAsync(
      HttpMethod::kPost, "/api/v1/auth/login", RouteAccess::Login(),
      [&ctx](RouteRequest r, Responder respond) { Login(ctx, std::move(r), std::move(respond)); });
  router.Add(HttpMethod::kPost, "/api/v1/auth/logout", RouteAccess::Authenticated(),
             [&ctx](const RouteRequest& r) { return Logout(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/auth/session", RouteAccess::Authenticated(), WhoAmI);
}

}  // namespace taskengine::api
