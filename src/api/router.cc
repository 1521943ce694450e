#include "api/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <set>

#include "api/errors.h"

namespace taskengine::api {
namespace {

bool IsParamSegment(const std::string& segment) {
  return segment.size() >= 3 && segment.front() == '{' && segment.back() == '}';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AnswerFromException(const Responder& respond, const char* what) {
  spdlog::error("api: route handler threw: {}", what);
  respond.Send(ErrorResponse(500, "internal", "unexpected error while handling the request"));
}

}  // namespace

std::string RouteAccess::Describe() const {
  switch (kind) {
    case Kind::kPublic:
      return "public";
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

std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = HexValue(s[i + 1]);
      int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::vector<std::string>> SplitPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::vector<std::string> segments;
  std::size_t start = 1;
  while (true) {
    std::size_t slash = path.find('/', start);
    std::string_view raw =
        path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
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
                      AsyncRouteHandler handler) {
  TE_CHECK(handler != nullptr);
  Route route;
  route.method = method;
  route.pattern = pattern;
  route.access = access;
  route.handler = std::move(handler);
  auto segments = SplitPath(pattern);
  TE_CHECK(segments.has_value());
  for (const std::string& s : *segments) {
    TE_CHECK(!s.empty());
    if (!IsParamSegment(s)) ++route.literal_count;
  }
  route.segments = std::move(*segments);
  for (const Route& r : routes_) TE_CHECK(!(r.method == method && r.pattern == pattern));
  routes_.push_back(std::move(route));
}

std::vector<Router::RouteInfo> Router::routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_) out.push_back({r.method, r.pattern, r.access});
  return out;
}

void Router::Handle(HttpRequest request, Responder respond) const {
  try {
    auto segments = SplitPath(request.path);
    if (!segments) {
      respond.Send(ErrorResponse(400, "bad_request", "malformed request path"));
      return;
    }
    const Route* best = nullptr;
    std::set<std::string_view> allowed;
    for (const Route& r : routes_) {
      if (r.segments.size() != segments->size()) continue;
      bool match = true;
      for (std::size_t i = 0; i < r.segments.size() && match; ++i) {
        if (IsParamSegment(r.segments[i])) {
          match = !(*segments)[i].empty();
        } else {
          match = r.segments[i] == (*segments)[i];
        }
      }
      if (!match) continue;
      allowed.insert(ToString(r.method));
      if (r.method == request.method && (best == nullptr || r.literal_count > best->literal_count)) {
        best = &r;
      }
    }
    if (allowed.empty()) {
      respond.Send(ErrorResponse(404, "not_found", "no such resource: " + request.path));
      return;
    }
    if (best == nullptr) {
      std::string allow;
      for (std::string_view m : allowed) allow += (allow.empty() ? "" : ", ") + std::string(m);
      HttpResponse r = ErrorResponse(405, "method_not_allowed",
                                     "method " + request.method_name + " is not allowed on " +
                                         request.path + "; allowed: " + allow);
      r.headers.emplace_back("Allow", allow);
      respond.Send(std::move(r));
      return;
    }

    RouteRequest route_request;
    if (best->access.kind != RouteAccess::Kind::kPublic) {
      Result<std::optional<Principal>> auth = authenticator_->Authenticate(request);
      if (!auth.ok()) {
        respond.Send(StatusResponse(auth.status()));
        return;
      }
      if (!auth->has_value()) {
        HttpResponse r = ErrorResponse(401, "unauthenticated",
                                       "missing or invalid credentials: send "
                                       "'Authorization: Bearer <token>'");
        r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"taskengine\"");
        respond.Send(std::move(r));
        return;
      }
      if (best->access.kind == RouteAccess::Kind::kScope &&
          !(*auth)->HasScope(best->access.scope)) {
        respond.Send(ErrorResponse(403, "forbidden",
                                   "this operation requires the '" +
                                       std::string(ToString(best->access.scope)) + "' scope",
                                   {{"required_scope", std::string(ToString(best->access.scope))}}));
        return;
      }
      route_request.principal = std::move(**auth);
    }
    for (std::size_t i = 0; i < best->segments.size(); ++i) {
      const std::string& s = best->segments[i];
      if (IsParamSegment(s)) {
        route_request.params.emplace_back(s.substr(1, s.size() - 2), std::move((*segments)[i]));
      }
    }
    route_request.http = std::move(request);
    try {
      best->handler(std::move(route_request), respond);
    } catch (const std::exception& e) {
      AnswerFromException(respond, e.what());
    } catch (...) {
      AnswerFromException(respond, "unknown exception");
    }
  } catch (const std::exception& e) {
    AnswerFromException(respond, e.what());
  } catch (...) {
    AnswerFromException(respond, "unknown exception");
  }
}

}  // namespace taskengine::api
