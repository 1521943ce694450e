// The web dashboard (product.md I3; quality.md §3.1-3.4, 3.6), on its own
// router (Api::dashboard_router). The pages are clients of /api/v1: this file
// only serves them and the login form; it holds no business logic.
//
//   GET  /                                302 to what the caller may see, or to /login
//   GET  /login[?next=/admin/...]         the login form: no script, no other asset
//   POST /login                           form login (username, password, next)
//                                         -> 303 to next, or the form again (401)
//   GET  /admin/tasks/{path...}           the app shell, global view (every tenant)
//   GET  /admin/{tenant}/tasks/{path...}  the app shell, one tenant's view
//   GET  /admin/assets/{file}             the embedded scripts and styles
//
// Without a session every page and asset answers 401 with the login form (the
// router's error page, below); a tenant the caller may not see answers the
// same 404 page as a missing one (X2). Every HTML answer carries a strict
// Content-Security-Policy (no inline script or style; the login form's one
// <style> element is allowed by its hash), X-Frame-Options and
// Referrer-Policy; assets carry nosniff and an ETag.
#include <sodium.h>

#include "api/accounts.h"
#include "api/embedded_files.h"
#include "api/routes.h"

namespace taskengine::api {
namespace {

constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
constexpr std::size_t kMaxNext = 2000;

const EmbeddedFile& Page(std::string_view name) {
  const EmbeddedFile* f = FindEmbeddedFile(DashboardFiles(), name);
  TE_CHECK(f != nullptr);
  return *f;
}

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `text` with the first `placeholder` replaced by `value`.
std::string Fill(std::string text, std::string_view placeholder, std::string_view value) {
  const std::size_t at = text.find(placeholder);
  if (at != std::string::npos) text.replace(at, placeholder.size(), value);
  return text;
}

// The CSP of the login form: kCsp with its <style> element's hash added.
const std::string& LoginCsp() {
  static const std::string csp = [] {
    const std::string_view page = Page("login.html").bytes;
    const std::size_t open = page.find("<style>");
    const std::size_t close = page.find("</style>");
    TE_CHECK(open != std::string_view::npos && close != std::string_view::npos && open < close);
    const std::string_view style = page.substr(open + 7, close - open - 7);
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(style.data()), style.size());
    char b64[sodium_base64_ENCODED_LEN(crypto_hash_sha256_BYTES, sodium_base64_VARIANT_ORIGINAL)];
    sodium_bin2base64(b64, sizeof b64, digest, sizeof digest, sodium_base64_VARIANT_ORIGINAL);
    std::string out(kCsp);
    const std::size_t at = out.find("style-src 'self'");
    out.insert(at + std::string_view("style-src 'self'").size(),
               std::string(" 'sha256-") + b64 + "'");
    return out;
  }();
  return csp;
}

HttpResponse Html(int status, std::string body, std::string_view csp = kCsp) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/html; charset=utf-8";
  r.body = std::move(body);
  r.headers.emplace_back("Content-Security-Policy", std::string(csp));
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "same-origin");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

HttpResponse Redirect(int status, std::string location) {
  HttpResponse r;
  r.status = status;
  r.content_type.clear();
  r.headers.emplace_back("Location", std::move(location));
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// True for a local path under /admin/ that a login may send the browser to:
// no scheme, no authority ("//"), no backslash, no control character.
bool IsSafeNext(std::string_view next) {
  if (next.size() > kMaxNext || next.rfind("/admin/", 0) != 0) return false;
  if (next.find("//") != std::string_view::npos) return false;
  for (char c : next) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || u < 0x20 || u == 0x7f) return false;
  }
  return true;
}

// The login form; `error` (plain text) shown above it when not empty.
HttpResponse LoginPage(int status, std::string_view error, std::string_view username,
                       std::string_view next) {
  std::string page(Page("login.html").bytes);
  page = Fill(std::move(page), "{{error}}",
              error.empty() ? std::string()
                            : "<p id=\"error\" role=\"alert\">" + HtmlEscape(error) + "</p>");
  page = Fill(std::move(page), "{{username}}", HtmlEscape(username));
  page = Fill(std::move(page), "{{next}}", HtmlEscape(IsSafeNext(next) ? next : ""));
  return Html(status, std::move(page), LoginCsp());
}

// A page with a heading and a message (plain text), no style.
HttpResponse MessagePage(int status, std::string_view title, std::string_view message) {
  std::string page =
      "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>" +
      HtmlEscape(title) + " — taskengine</title>\n</head>\n<body>\n<main>\n<h1>" +
      HtmlEscape(title) + "</h1>\n<p>" + HtmlEscape(message) +
      "</p>\n<p><a href=\"/\">Back to the dashboard</a></p>\n</main>\n</body>\n</html>\n";
  return Html(status, std::move(page));
}

// The one not-found page: a missing page, tenant or file and a tenant the
// caller may not see all look like this (X2).
HttpResponse NotFoundPage() {
  return MessagePage(404, "Not found", "There is no such page, or you may not see it.");
}

// The router's own refusals as pages: 401 -> the login form (coming back here
// afterwards), 404 -> the not-found page, others -> their message.
HttpResponse ErrorPage(const HttpRequest& request, HttpResponse answer) {
  if (answer.status == 401) {
    const bool page = request.method == HttpMethod::kGet &&
                      request.path.rfind("/admin/assets/", 0) != 0 && IsSafeNext(request.target);
    return LoginPage(401, "", "", page ? std::string_view(request.target) : "");
  }
  if (answer.status == 404) return NotFoundPage();
  std::string message = "the request was refused";
  const Json error = Json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (error.is_object() && error.contains("error") && error["error"].contains("message") &&
      error["error"]["message"].is_string()) {
    message = error["error"]["message"].get<std::string>();
  }
  HttpResponse out = MessagePage(answer.status, "Refused", message);
  for (auto& [name, value] : answer.headers) {
    if (name == "Retry-After" || name == "Allow") out.headers.emplace_back(name, value);
  }
  return out;
}

// GET / -> 302 to /admin/tasks/ (global), /admin/<first tenant>/tasks/, or /login.
HttpResponse Root(ApiContext& ctx, const RouteRequest& r) {
  Result<std::optional<Principal>> auth = ctx.authenticator->Authenticate(r.http);
  if (!auth.ok()) return ErrorPage(r.http, StatusResponse(auth.status()));
  if (!auth->has_value()) return Redirect(302, "/login");
  const Principal& p = **auth;
  if (p.all_tenants) return Redirect(302, "/admin/tasks/");
  if (p.tenants.empty()) {
    return MessagePage(403, "No tenant", "This account is granted no tenant to look at.");
  }
  return Redirect(302, "/admin/" + *p.tenants.begin() + "/tasks/");
}

// GET /login -> the form.
HttpResponse LoginForm(const RouteRequest& r) {
  auto query = QueryParams::Parse(r.http.query);
  const std::string* next = query.ok() ? query->Get("next") : nullptr;
  return LoginPage(200, "", "", next != nullptr ? *next : "");
}

// POST /login (application/x-www-form-urlencoded: username, password, next)
// -> 303 to next (a path under /admin/, else /) with the session cookie; 401
// and the form again for wrong credentials (the same for an unknown user);
// 403 from another origin; 400 for a malformed form; 429/503 as the API's
// login (LoginGuard).
void LoginSubmit(ApiContext& ctx, RouteRequest r, Responder respond) {
  const HttpRequest& http = r.http;
  if ((http.Header("origin") != nullptr || http.Header("referer") != nullptr) &&
      !IsSameOrigin(http)) {
    respond.Send(MessagePage(403, "Refused", "a login must come from the same origin"));
    return;
  }
  const std::string* type = http.Header("content-type");
  if (type == nullptr || type->rfind("application/x-www-form-urlencoded", 0) != 0) {
    respond.Send(MessagePage(400, "Refused", "send the form as application/x-www-form-urlencoded"));
    return;
  }
  auto form = QueryParams::Parse(http.body);
  if (!form.ok()) {
    respond.Send(MessagePage(400, "Refused", form.status().message()));
    return;
  }
  if (Status known = form->RejectUnknown({"username", "password", "next"}); !known.ok()) {
    respond.Send(MessagePage(400, "Refused", known.message()));
    return;
  }
  const std::string* user = form->Get("username");
  const std::string* password = form->Get("password");
  const std::string* next_field = form->Get("next");
  std::string next = next_field != nullptr && IsSafeNext(*next_field) ? *next_field : "";
  std::string shown_user = user != nullptr ? user->substr(0, kMaxPrincipalBytes) : "";
  if (user == nullptr || password == nullptr || user->empty() || password->empty() ||
      user->size() > kMaxPrincipalBytes || password->size() > kMaxPasswordBytes) {
    respond.Send(LoginPage(401, "invalid username or password", shown_user, next));
    return;
  }
  auto ok = [next](const LoginResult&, const std::string& set_cookie) {
    HttpResponse out = Redirect(303, next.empty() ? "/" : next);
    out.headers.emplace_back("Set-Cookie", set_cookie);
    return out;
  };
  auto refused = [shown_user, next](HttpResponse error) {
    if (error.status == 401)
      return LoginPage(401, "invalid username or password", shown_user, next);
    std::string message = "the login could not be checked";
    const Json body = Json::parse(error.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_object() && body.contains("error") && body["error"].contains("message") &&
        body["error"]["message"].is_string()) {
      message = body["error"]["message"].get<std::string>();
    }
    HttpResponse out = LoginPage(error.status, message, shown_user, next);
    for (auto& [name, value] : error.headers) {
      if (name == "Retry-After") out.headers.emplace_back(name, value);
    }
    return out;
  };
  std::string user_name = *user;
  std::string password_text = *password;
  SubmitLogin(ctx, std::move(r.http), std::move(user_name), std::move(password_text),
              std::move(respond), ok, refused);
}

HttpResponse Shell() { return Html(200, std::string(Page("index.html").bytes)); }

// GET /admin/tasks/... -> the shell for a principal with every tenant.
HttpResponse GlobalShell(const RouteRequest& r) {
  if (!PrincipalOf(r).all_tenants) return NotFoundPage();
  return Shell();
}

// GET /admin/{tenant}/tasks/... -> the shell for a principal granted an existing tenant.
HttpResponse TenantShell(ApiContext& ctx, const RouteRequest& r) {
  const std::string& tenant = r.Param("tenant");
  if (!IsValidTenantId(tenant) || !PrincipalOf(r).MayAccessTenant(TenantId(tenant))) {
    return NotFoundPage();
  }
  auto found = ctx.store->GetTenant(TenantId(tenant));
  if (!found.ok()) {
    if (found.status().code() == ErrorCode::kNotFound) return NotFoundPage();
    return ErrorPage(r.http, StatusResponse(found.status()));
  }
  return Shell();
}

// GET /admin/assets/{file} -> a script or a style sheet; 304 for a matching
// If-None-Match. Pages (the .html files) are not assets.
HttpResponse Asset(const RouteRequest& r) {
  const std::string& name = r.Param("file");
  const EmbeddedFile* f = FindEmbeddedFile(DashboardFiles(), name);
  if (f == nullptr || name.ends_with(".html")) return NotFoundPage();
  HttpResponse out;
  out.content_type = std::string(f->content_type);
  out.headers.emplace_back("ETag", std::string(f->etag));
  out.headers.emplace_back("Cache-Control", "no-cache");
  out.headers.emplace_back("X-Content-Type-Options", "nosniff");
  const std::string* match = r.http.Header("if-none-match");
  if (match != nullptr && *match == f->etag) {
    out.status = 304;
    out.content_type.clear();
    return out;
  }
  out.body = std::string(f->bytes);
  return out;
}

}  // namespace

void RegisterDashboardRoutes(ApiContext& ctx, Router& router) {
  router.SetErrorPage(ErrorPage);
  router.Add(HttpMethod::kGet, "/", RouteAccess::Public(),
             [&ctx](const RouteRequest& r) { return Root(ctx, r); });
  router.Add(HttpMethod::kGet, "/login", RouteAccess::Public(), LoginForm);
  router.AddAsync(HttpMethod::kPost, "/login", RouteAccess::Login(),
                  [&ctx](RouteRequest r, Responder respond) {
                    LoginSubmit(ctx, std::move(r), std::move(respond));
                  });
  router.Add(HttpMethod::kGet, "/admin/tasks/{path...}", RouteAccess::Requires(Scope::kRead),
             GlobalShell);
  router.Add(HttpMethod::kGet, "/admin/{tenant}/tasks/{path...}",
             RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return TenantShell(ctx, r); });
  router.Add(HttpMethod::kGet, "/admin/assets/{file}", RouteAccess::Authenticated(), Asset);
}

}  // namespace taskengine::api
