#include "api/router.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <set>

#include "api/errors.h"

namespace taskengine::api {
namespace {

bool IsParamSegment(const std::string& segment) {
  return segment.size() >= 3 && segment.front() == '{' && segment.back() == '}';
}

// "{name...}"
bool IsRestSegment(const std::string& segment) {
  return IsParamSegment(segment) && segment.size() >= 6 &&
         segment.compare(segment.size() - 4, 4, "...}") == 0;
}

// The name of a "{name}" or "{name...}" segment.
std::string ParamName(const std::string& segment) {
  const std::size_t dots = IsRestSegment(segment) ? 3 : 0;
  return segment.substr(1, segment.size() - 2 - dots);
}

void AnswerFromException(const Responder& respond, const char* what) {
  spdlog::error("api: route handler threw: {}", what);
  respond.Send(ErrorResponse(500, "internal", "unexpected error while handling the request"));
}

// "host[:port]" of an absolute URL ("https://h:1/x" -> "h:1"), lower-cased;
// empty when `url` has no scheme.
std::string Authority(std::string_view url) {
  std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return "";
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  std::string out(rest);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Constant-time comparison of two secrets (the length may leak, the content not).
bool SecretEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a.empty()) return false;
  return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

// Empty when the request may proceed, else the reason it may not ("csrf" or
// "origin"): session mutations need the session's CSRF token and the same
// origin; mutations without credentials (auth disabled) coming from a browser
// need the same origin; bearer tokens are not ambient, so need neither.
std::string CsrfProblem(const HttpRequest& request, const Principal& principal) {
  if (!IsMutating(request.method) || principal.method == AuthMethod::kToken) return "";
  if (principal.method == AuthMethod::kNone) {
    // Auth disabled: a browser on another site must not drive the local admin.
    // Browsers send Origin (or Referer) cross-site; scripts and CLIs send neither.
    const bool from_browser =
        request.Header("origin") != nullptr || request.Header("referer") != nullptr;
    return from_browser && !IsSameOrigin(request) ? "origin" : "";
  }
  const std::string* token = request.Header("x-csrf-token");
  if (token == nullptr || !SecretEquals(*token, principal.csrf_token)) return "csrf";
  if (!IsSameOrigin(request)) return "origin";
  return "";
}

std::string RateKey(const Principal& p) {
  return p.credential_id.empty() ? "principal:" + p.name : p.credential_id;
}

}  // namespace

bool IsMutating(HttpMethod method) {
  return method != HttpMethod::kGet && method != HttpMethod::kHead &&
         method != HttpMethod::kOptions;
}

bool IsSameOrigin(const HttpRequest& request) {
  const std::string* host = request.Header("host");
  if (host == nullptr || host->empty()) return false;
  const std::string* origin = request.Header("origin");
  std::string authority;
  if (origin != nullptr) {
    if (*origin == "null") return false;
    authority = Authority(*origin);
  } else if (const std::string* referer = request.Header("referer")) {
    authority = Authority(*referer);
  } else {
    return false;
  }
  return !authority.empty() && authority == Lowered(*host);
}

std::string RouteAccess::Describe() const {
  switch (kind) {
    case Kind::kPublic:
      return "public";
    case Kind::kLogin:
      return "login";
    case Kind::kAuthenticated:
      return "authenticated";
    case Kind::kScope:
      break;
  }
  return std::string(ToString(scope));
}

const std::string& RouteRequest::Param(std::string_view name) const {
  static const std::string kEmpty;
  for (const auto& [n, v] : params) {
    if (n == name) return v;
  }
  return kEmpty;
}

std::optional<std::vector<std::string>> SplitPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::vector<std::string> segments;
  segments.reserve(static_cast<std::size_t>(std::count(path.begin(), path.end(), '/')));
  std::size_t start = 1;
  while (true) {
    std::size_t slash = path.find('/', start);
    std::string_view raw = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    auto decoded = PercentDecode(raw, /*plus_is_space=*/false);
    if (!decoded) return std::nullopt;
    segments.push_back(std::move(*decoded));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return segments;
}

void Router::Add(HttpMethod method, std::string pattern, RouteAccess access, RouteHandler handler) {
  TE_CHECK(handler != nullptr);
  AddAsync(method, std::move(pattern), access,
           [handler = std::move(handler)](RouteRequest request, Responder respond) {
             respond.Send(handler(request));
           });
}

void Router::AddAsync(HttpMethod method, std::string pattern, RouteAccess access,
                      AsyncRouteHandler handler, InlineIf inline_if) {
  TE_CHECK(handler != nullptr);
  Route route;
  route.method = method;
  route.pattern = pattern;
  route.access = access;
  route.rate_class = RateLimiter::ClassOf(method, route.pattern);
  route.handler = std::move(handler);
  // An inline route authenticates from memory only, never a login.
  TE_CHECK(inline_if == nullptr || (access.confirmed_at_commit &&
                                    (access.kind == RouteAccess::Kind::kScope ||
                                     access.kind == RouteAccess::Kind::kAuthenticated) &&
                                    route.rate_class != RateClass::kLogin));
  if (inline_if != nullptr) inline_methods_ |= 1u << static_cast<unsigned>(method);
  route.inline_if = std::move(inline_if);
  auto segments = SplitPath(pattern);
  TE_CHECK(segments.has_value());
  for (std::size_t i = 0; i < segments->size(); ++i) {
    const std::string& s = (*segments)[i];
    TE_CHECK(!s.empty() || pattern == "/");
    if (IsRestSegment(s)) {
      TE_CHECK(i + 1 == segments->size());
      route.rest = true;
    } else if (!IsParamSegment(s)) {
      ++route.literal_count;
    }
  }
  route.segments = std::move(*segments);
  for (const Route& r : routes_) TE_CHECK(!(r.method == method && r.pattern == pattern));
  routes_.push_back(std::move(route));
  IndexRoutes();
}

void Router::IndexRoutes() {
  std::size_t longest = 0;
  for (const Route& r : routes_) longest = std::max(longest, r.segments.size());
  by_size_.assign(longest + 2, {});
  for (std::size_t n = 0; n < by_size_.size(); ++n) {
    for (std::size_t i = 0; i < routes_.size(); ++i) {
      const Route& r = routes_[i];
      if (r.rest ? r.segments.size() - 1 <= n : r.segments.size() == n) by_size_[n].push_back(i);
    }
  }
}

std::vector<Router::RouteInfo> Router::routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_) out.push_back({r.method, r.pattern, r.access});
  return out;
}

std::optional<Router::Match> Router::Find(const HttpRequest& request) const {
  auto segments = SplitPath(request.path);
  if (!segments) return std::nullopt;
  Match m;
  // Every candidate has as many segments as the path, or a rest that starts
  // within it (by_size_).
  for (std::size_t index : by_size_[std::min(segments->size(), by_size_.size() - 1)]) {
    const Route& r = routes_[index];
    const std::size_t fixed = r.rest ? r.segments.size() - 1 : r.segments.size();
    bool match = true;
    for (std::size_t i = 0; i < fixed && match; ++i) {
      if (IsParamSegment(r.segments[i])) {
        match = !(*segments)[i].empty();
      } else {
        match = r.segments[i] == (*segments)[i];
      }
    }
    if (!match) continue;
    m.allowed |= 1u << static_cast<unsigned>(r.method);
    if (r.method == request.method &&
        (m.route == nullptr || r.literal_count > m.route->literal_count)) {
      m.route = &r;
    }
  }
  m.segments = std::move(*segments);
  return m;
}

void Router::Refuse(const HttpRequest& request, const Responder& respond,
                    HttpResponse answer) const {
  respond.Send(error_page_ ? error_page_(request, std::move(answer)) : std::move(answer));
}

void Router::Handle(HttpRequest request, Responder respond) const {
  try {
    std::optional<Match> m = Find(request);
    if (!m) {
      Refuse(request, respond, ErrorResponse(400, "bad_request", "malformed request path"));
      return;
    }
    if (m->allowed == 0) {
      Refuse(request, respond,
             ErrorResponse(404, "not_found", "no such resource: " + request.path));
      return;
    }
    if (m->route == nullptr) {
      std::set<std::string_view> names;  // in alphabetical order
      for (unsigned i = 0; i <= static_cast<unsigned>(HttpMethod::kOther); ++i) {
        if ((m->allowed & (1u << i)) != 0) names.insert(ToString(static_cast<HttpMethod>(i)));
      }
      std::string allow;
      for (std::string_view name : names) allow += (allow.empty() ? "" : ", ") + std::string(name);
      HttpResponse r = ErrorResponse(405, "method_not_allowed",
                                     "method " + request.method_name + " is not allowed on " +
                                         request.path + "; allowed: " + allow);
      r.headers.emplace_back("Allow", allow);
      Refuse(request, respond, std::move(r));
      return;
    }
    const Route& route = *m->route;
    const RateClass rate_class = RateClassOf(route);
    if (rate_class == RateClass::kLogin) {
      Millis wait = rate_limiter_->Acquire(rate_class, "ip:" + ClientIp(request.remote_address));
      if (wait > 0) {
        Refuse(request, respond, RateLimiter::TooManyRequests(rate_class, wait));
        return;
      }
    }
    std::optional<Principal> principal;
    if (route.access.kind != RouteAccess::Kind::kPublic &&
        route.access.kind != RouteAccess::Kind::kLogin) {
      Result<std::optional<Principal>> auth = route.access.confirmed_at_commit
                                                  ? authenticator_->AuthenticateForCommit(request)
                                                  : authenticator_->Authenticate(request);
      if (!auth.ok()) {
        Refuse(request, respond, StatusResponse(auth.status()));
        return;
      }
      if (!auth->has_value()) {
        Refuse(request, respond,
               StatusResponse(Unauthenticated("missing or invalid credentials: send "
                                              "'Authorization: Bearer <token>' or log in")));
        return;
      }
      principal = std::move(*auth);
    }
    Serve(route, std::move(m->segments), std::move(request), std::move(principal),
          std::move(respond));
  } catch (const std::exception& e) {
    AnswerFromException(respond, e.what());
  } catch (...) {
    AnswerFromException(respond, "unknown exception");
  }
}

bool Router::TryInline(HttpRequest& request, const Responder& respond) const {
  if ((inline_methods_ & (1u << static_cast<unsigned>(request.method))) == 0) return false;
  try {
    std::optional<Match> m = Find(request);
    if (!m || m->route == nullptr || m->route->inline_if == nullptr ||
        !m->route->inline_if(request)) {
      return false;
    }
    std::optional<Principal> principal = authenticator_->RememberedPrincipal(request);
    if (!principal) return false;
    Serve(*m->route, std::move(m->segments), std::move(request), std::move(principal), respond);
  } catch (const std::exception& e) {
    AnswerFromException(respond, e.what());
  } catch (...) {
    AnswerFromException(respond, "unknown exception");
  }
  return true;
}

void Router::Serve(const Route& route, std::vector<std::string> segments, HttpRequest request,
                   std::optional<Principal> principal, Responder respond) const {
  RouteRequest route_request;
  if (principal) {
    if (route.access.kind == RouteAccess::Kind::kScope &&
        !principal->HasScope(route.access.scope)) {
      Refuse(request, respond,
             ErrorResponse(403, "forbidden",
                           "this operation requires the '" +
                               std::string(ToString(route.access.scope)) + "' scope",
                           {{"required_scope", std::string(ToString(route.access.scope))}}));
      return;
    }
    const std::string csrf = CsrfProblem(request, *principal);
    if (!csrf.empty()) {
      Refuse(request, respond,
             ErrorResponse(
                 403, "forbidden",
                 csrf == "csrf"
                     ? "a mutation in a dashboard session needs the session's X-CSRF-Token header"
                     : "a mutation must come from the same origin",
                 {{"reason", csrf}}));
      return;
    }
    if (const RateClass rate_class = RateClassOf(route);
        rate_class != RateClass::kNone && rate_class != RateClass::kLogin) {
      Millis wait = rate_limiter_->Acquire(rate_class, RateKey(*principal));
      if (wait > 0) {
        Refuse(request, respond, RateLimiter::TooManyRequests(rate_class, wait));
        return;
      }
    }
    // The access log names who asked (never their credentials).
    respond = respond.Wrap([name = principal->name](HttpResponse& r) { r.principal = name; });
    route_request.principal = std::move(principal);
  }
  for (std::size_t i = 0; i < route.segments.size(); ++i) {
    const std::string& s = route.segments[i];
    if (IsRestSegment(s)) {
      std::string rest;
      for (std::size_t j = i; j < segments.size(); ++j) {
        rest += (j == i ? "" : "/") + segments[j];
      }
      route_request.params.emplace_back(ParamName(s), std::move(rest));
    } else if (IsParamSegment(s)) {
      route_request.params.emplace_back(ParamName(s), std::move(segments[i]));
    }
  }
  route_request.http = std::move(request);
  try {
    route.handler(std::move(route_request), respond);
  } catch (const std::exception& e) {
    AnswerFromException(respond, e.what());
  } catch (...) {
    AnswerFromException(respond, "unknown exception");
  }
}

}  // namespace taskengine::api
