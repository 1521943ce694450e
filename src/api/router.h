// Router: method + path patterns -> route handlers, with authentication and
// scope checks in front of every route and an exception barrier behind it.
//
// Patterns are absolute paths whose segments are literals or `{param}`, e.g.
// "/api/v1/executions/{id}/cancel". A `{param}` matches one non-empty
// segment; a last segment `{param...}` matches the rest of the path (zero or
// more segments, empty ones too), delivered joined with '/' ("/admin/tasks/
// {rest...}" matches "/admin/tasks", "/admin/tasks/" and "/admin/tasks/a/b").
// "/" alone is the pattern of the root. Request segments are percent-decoded
// before matching, so literals and parameter values are compared and
// delivered decoded. When several patterns match, the one with more literal
// segments wins.
//
// Answers produced by the router itself:
//   400 bad_request         malformed percent-encoding in the path
//   404 not_found           no pattern matches the path
//   405 method_not_allowed  a pattern matches but not for this method (Allow lists those that do)
//   401 unauthenticated     a non-public route without valid credentials
//   403 forbidden           the principal lacks the route's scope, or a
//                           session-authenticated mutation (not GET, HEAD or
//                           OPTIONS) without the session's X-CSRF-Token or
//                           from another origin (details.reason "csrf" / "origin");
//                           with auth disabled (AuthMethod::kNone), a mutation
//                           whose Origin/Referer names another origin
//   429 rate_limited        over a rate limit (SetRateLimiter), with Retry-After
//   500 internal            the handler threw (nothing a client sends may crash the server)
// All but the 500 pass through SetErrorPage's function when one is set.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/auth.h"
#include "api/http_types.h"
#include "api/rate_limit.h"
#include "core/percent.h"

namespace taskengine::api {

// Who may call a route.
struct RouteAccess {
  enum class Kind { kPublic, kAuthenticated, kScope, kLogin };
  Kind kind = Kind::kScope;
  Scope scope = Scope::kRead;  // kScope only
  // The route's writes confirm the principal's API token in their commit
  // (Principal::token_id), so the router may authenticate it from memory
  // (Authenticator::AuthenticateForCommit). Default: false.
  bool confirmed_at_commit = false;

  // No credentials needed (healthz, readyz, open metrics).
  static RouteAccess Public() { return {Kind::kPublic, Scope::kRead, false}; }
  // Any valid credentials, whatever their scopes.
  static RouteAccess Authenticated() { return {Kind::kAuthenticated, Scope::kRead, false}; }
  static RouteAccess Requires(Scope scope) { return {Kind::kScope, scope, false}; }
  // The login route: no prior credentials, the body carries them; the handler
  // answers 401 unless they are valid. The router authenticates nobody.
  static RouteAccess Login() { return {Kind::kLogin, Scope::kRead, false}; }
  // The same access, with the token confirmed in the route's commit.
  RouteAccess ConfirmedAtCommit() const {
    RouteAccess a = *this;
    a.confirmed_at_commit = true;
    return a;
  }
  // "public", "authenticated", "login", or the scope name.
  std::string Describe() const;
};

// What a route handler gets. Owns its data, so an asynchronous handler may keep it.
struct RouteRequest {
  HttpRequest http;
  // Set for every non-public route; nullopt for public ones.
  std::optional<Principal> principal;
  // Decoded `{param}` values by name, in pattern order.
  std::vector<std::pair<std::string, std::string>> params;

  // The value of `{name}`; empty when the pattern has no such parameter.
  const std::string& Param(std::string_view name) const;
};

// An asynchronous route: must call respond.Send exactly once, possibly later
// and from another thread (see http_types.h). May throw; the router answers 500.
using AsyncRouteHandler = std::function<void(RouteRequest request, Responder respond)>;
// A synchronous route: returns its response. May throw; the router answers 500.
using RouteHandler = std::function<HttpResponse(const RouteRequest& request)>;
// Whether an asynchronous route may run this request on the network thread
// that read it (Router::TryInline): true only when its handler will not block
// on it (no read or write of the store that waits). Must be quick and must
// not throw.
using InlineIf = std::function<bool(const HttpRequest& request)>;

// Add routes during setup, then Handle concurrently: Thread-safe for Handle
// once no more routes are added. `authenticator` is not owned and must outlive
// the router.
class Router {
 public:
  explicit Router(Authenticator* authenticator) : authenticator_(authenticator) {}

  // REQUIRES: `pattern` is a valid pattern and (method, pattern) is new.
  void Add(HttpMethod method, std::string pattern, RouteAccess access, RouteHandler handler);
  // With `inline_if`, requests it accepts may run on a network thread (see
  // TryInline). REQUIRES then: `access` is Requires(scope) or Authenticated(),
  // ConfirmedAtCommit, and the route is not a login.
  void AddAsync(HttpMethod method, std::string pattern, RouteAccess access,
                AsyncRouteHandler handler, InlineIf inline_if = nullptr);

  // Applies `limiter` (not owned; must outlive the router) to the routes
  // RateLimiter::ClassOf names. REQUIRES: before the first Handle.
  void SetRateLimiter(RateLimiter* limiter) { rate_limiter_ = limiter; }

  // Turns the router's own error answers (400, 401, 403, 404, 405, 429, 503)
  // into others, e.g. HTML pages for a browser: `page` gets the request and
  // the JSON answer and returns what to send. Must be thread-safe. Default:
  // the JSON answers as they are. REQUIRES: before the first Handle.
  using ErrorPage = std::function<HttpResponse(const HttpRequest& request, HttpResponse answer)>;
  void SetErrorPage(ErrorPage page) { error_page_ = std::move(page); }

  // The RequestHandler of the server.
  void Handle(HttpRequest request, Responder respond) const;
  // The InlineHandler of the server: handles the request here, exactly as
  // Handle would, when its route has an InlineIf that accepts it and the
  // authenticator knows its principal without blocking
  // (Authenticator::RememberedPrincipal); else returns false and leaves the
  // request unchanged.
  bool TryInline(HttpRequest& request, const Responder& respond) const;
  RequestHandler AsRequestHandler() const {
    return [this](HttpRequest request, Responder respond) {
      Handle(std::move(request), std::move(respond));
    };
  }

  struct RouteInfo {
    HttpMethod method;
    std::string pattern;
    RouteAccess access;
  };
  // Every registered route, in registration order.
  std::vector<RouteInfo> routes() const;

 private:
  struct Route {
    HttpMethod method;
    std::string pattern;
    std::vector<std::string> segments;  // literal, "{name}", or last "{name...}"
    int literal_count = 0;
    bool rest = false;  // the last segment is "{name...}"
    RouteAccess access;
    RateClass rate_class = RateClass::kNone;  // RateLimiter::ClassOf
    AsyncRouteHandler handler;
    InlineIf inline_if;
  };

  // What a request's path matched.
  struct Match {
    std::vector<std::string> segments;  // decoded
    const Route* route = nullptr;       // the best for the request's method; nullptr: none
    std::uint32_t allowed = 0;          // bit i: HttpMethod i has a route for this path
  };
  // nullopt for a malformed path.
  std::optional<Match> Find(const HttpRequest& request) const;
  // Handle's steps after authentication: scope, CSRF and rate checks, then
  // the route's handler. `principal` is set for every non-public route.
  void Serve(const Route& route, std::vector<std::string> segments, HttpRequest request,
             std::optional<Principal> principal, Responder respond) const;
  // The route's rate class when a limiter is set, else kNone.
  RateClass RateClassOf(const Route& route) const {
    return rate_limiter_ != nullptr ? route.rate_class : RateClass::kNone;
  }
  // Rebuilds by_size_ after a route was added.
  void IndexRoutes();
  // The router's own answers, through the error page when there is one.
  void Refuse(const HttpRequest& request, const Responder& respond, HttpResponse answer) const;

  Authenticator* const authenticator_;
  RateLimiter* rate_limiter_ = nullptr;
  ErrorPage error_page_;
  std::vector<Route> routes_;
  // by_size_[n]: the routes (indexes into routes_, in the order they were
  // added) that can match a path of n segments: those of n segments and
  // those whose rest starts at or before n. The last one serves longer paths
  // (the only one while there is no route).
  std::vector<std::vector<std::size_t>> by_size_ = std::vector<std::vector<std::size_t>>(1);
  std::uint32_t inline_methods_ = 0;  // bit i: HttpMethod i has a route with an InlineIf
};

// True when the request's Origin header (or, without one, its Referer) names
// the same host[:port] as its Host header. False when both are absent, when
// Origin is "null", or when there is no Host.
bool IsSameOrigin(const HttpRequest& request);

// True for methods that may change state (everything but GET, HEAD, OPTIONS).
bool IsMutating(HttpMethod method);

// Splits a percent-encoded path into decoded segments ("/a/b%2Fc" -> {"a", "b/c"}).
// nullopt for a path that does not start with '/' or holds bad percent-encoding.
std::optional<std::vector<std::string>> SplitPath(std::string_view path);

}  // namespace taskengine::api
