#include "api/router.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "api/errors.h"

namespace taskengine::api {
namespace {

HttpRequest Request(HttpMethod method, std::string target, std::string token = "") {
  HttpRequest r;
  r.method = method;
  r.method_name = std::string(ToString(method));
  r.SetTarget(target);
  if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
  return r;
}

// Runs the router synchronously (every route here answers inline).
HttpResponse Call(const Router& router, HttpRequest request) {
  HttpResponse out;
  out.status = -1;
  router.Handle(std::move(request), Responder([&out](HttpResponse r) { out = std::move(r); }));
  return out;
}

std::string ErrorCodeOf(const HttpResponse& r) {
  return nlohmann::json::parse(r.body)["error"]["code"].get<std::string>();
}

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auth_.Add("reader", Principal::Make("reader", {Scope::kRead}, true));
    auth_.Add("worker", Principal::Make("worker", {Scope::kWorker}, true));
    router_.Add(HttpMethod::kGet, "/things/{id}", RouteAccess::Requires(Scope::kRead),
                [](const RouteRequest& r) {
                  return JsonResponse(
                      200, nlohmann::json{{"id", r.Param("id")}, {"who", r.principal->name}});
                });
    router_.Add(HttpMethod::kGet, "/things/special", RouteAccess::Requires(Scope::kRead),
                [](const RouteRequest&) {
                  return JsonResponse(200, nlohmann::json{{"special", true}});
                });
    router_.Add(HttpMethod::kPost, "/things/{id}", RouteAccess::Requires(Scope::kOperate),
                [](const RouteRequest&) { return JsonResponse(200, nlohmann::json::object()); });
    router_.Add(HttpMethod::kGet, "/open", RouteAccess::Public(), [](const RouteRequest& r) {
      return JsonResponse(200, nlohmann::json{{"principal", r.principal.has_value()}});
    });
    router_.Add(HttpMethod::kGet, "/throws", RouteAccess::Public(),
                [](const RouteRequest&) -> HttpResponse { throw std::runtime_error("boom"); });
    router_.AddAsync(HttpMethod::kGet, "/forgets", RouteAccess::Public(),
                     [](RouteRequest, Responder) {});
    router_.Add(HttpMethod::kGet, "/stale", RouteAccess::Public(),
                [](const RouteRequest&) { return StatusResponse(Stale("old claim")); });
  }

  StaticTokenAuthenticator auth_;
  Router router_{&auth_};
};

TEST_F(RouterTest, MatchesParamsAndDecodesThem) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/things/a%20b", "reader"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["id"], "a b");
  EXPECT_EQ(j["who"], "reader");
}

TEST_F(RouterTest, LiteralSegmentBeatsParameter) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/things/special", "reader"));
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(nlohmann::json::parse(r.body)["special"].get<bool>());
}

TEST_F(RouterTest, UnknownPathIs404) {
  for (const char* path : {"/nothing", "/things", "/things/1/2", "/things/", "/"}) {
    HttpResponse r = Call(router_, Request(HttpMethod::kGet, path, "reader"));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(ErrorCodeOf(r), "not_found");
  }
}

TEST_F(RouterTest, WrongMethodIs405WithAllow) {
  HttpResponse r = Call(router_, Request(HttpMethod::kDelete, "/things/7", "reader"));
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(ErrorCodeOf(r), "method_not_allowed");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(r.headers[0].second, "GET, POST");
}

TEST_F(RouterTest, MissingOrBadTokenIs401) {
  HttpResponse none = Call(router_, Request(HttpMethod::kGet, "/things/1"));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(ErrorCodeOf(none), "unauthenticated");
  HttpResponse bad = Call(router_, Request(HttpMethod::kGet, "/things/1", "nope"));
  EXPECT_EQ(bad.status, 401);
}

TEST_F(RouterTest, MissingScopeIs403) {
  HttpResponse r = Call(router_, Request(HttpMethod::kPost, "/things/1", "reader"));
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(ErrorCodeOf(r), "forbidden");
  HttpResponse w = Call(router_, Request(HttpMethod::kGet, "/things/1", "worker"));
  EXPECT_EQ(w.status, 403);
}

TEST_F(RouterTest, PublicRouteNeedsNoCredentials) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/open"));
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(nlohmann::json::parse(r.body)["principal"].get<bool>());
}

TEST_F(RouterTest, ExceptionBecomes500) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/throws"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(ErrorCodeOf(r), "internal");
  EXPECT_EQ(r.body.find("boom"), std::string::npos) << "internal details must not leak";
}

TEST_F(RouterTest, DroppedResponderBecomes500) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/forgets"));
  EXPECT_EQ(r.status, 500);
}

TEST_F(RouterTest, StaleIs409WithCodeStale) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/stale"));
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(ErrorCodeOf(r), "stale");
}

TEST_F(RouterTest, BadPercentEncodingIs400) {
  HttpResponse r = Call(router_, Request(HttpMethod::kGet, "/things/%zz", "reader"));
  EXPECT_EQ(r.status, 400);
}

// TryInline takes only a request of a route with an InlineIf that accepts
// it and whose principal the authenticator knows without blocking; it then
// answers exactly as Handle (scope, parameters, the principal); otherwise it
// leaves the request as it was.
TEST(RouterInlineTest, TakesOnlyWhatItsRouteAcceptsWithARememberedPrincipal) {
  StaticTokenAuthenticator auth;
  auth.Add("dispatcher", Principal::Make("dispatcher", {Scope::kDispatch}, true));
  auth.Add("reader", Principal::Make("reader", {Scope::kRead}, true));
  Router router(&auth);
  const RouteAccess access = RouteAccess::Requires(Scope::kDispatch).ConfirmedAtCommit();
  const auto echo = [](RouteRequest r, Responder respond) {
    respond.Send(
        JsonResponse(200, nlohmann::json{{"name", r.Param("name")}, {"who", r.principal->name}}));
  };
  router.AddAsync(HttpMethod::kPost, "/jobs/{name}/go", access, echo,
                  [](const HttpRequest& r) { return r.body != "slow"; });
  router.AddAsync(HttpMethod::kPost, "/jobs/{name}/other", access, echo);

  const auto try_inline = [&](std::string target, std::string token, std::string body,
                              HttpResponse* out) {
    HttpRequest r = Request(HttpMethod::kPost, std::move(target), std::move(token));
    r.body = std::move(body);
    const HttpRequest before = r;
    out->status = -1;
    Responder respond([out](HttpResponse answer) { *out = std::move(answer); });
    const bool taken = router.TryInline(r, respond);
    if (!taken) {
      EXPECT_EQ(out->status, -1) << "a request it left was answered";
      respond.Abandon();
      EXPECT_EQ(r.path, before.path);
      EXPECT_EQ(r.body, before.body);
      EXPECT_EQ(r.headers, before.headers);
    }
    return taken;
  };
  HttpResponse out;
  ASSERT_TRUE(try_inline("/jobs/a%20b/go", "dispatcher", "{}", &out));
  ASSERT_EQ(out.status, 200) << out.body;
  EXPECT_EQ(nlohmann::json::parse(out.body)["name"], "a b");
  EXPECT_EQ(nlohmann::json::parse(out.body)["who"], "dispatcher");
  EXPECT_EQ(out.principal, "dispatcher");
  ASSERT_TRUE(try_inline("/jobs/a/go", "reader", "{}", &out));
  EXPECT_EQ(out.status, 403) << "answered inline, as Handle would";

  EXPECT_FALSE(try_inline("/jobs/a/go", "dispatcher", "slow", &out)) << "its InlineIf said no";
  EXPECT_FALSE(try_inline("/jobs/a/other", "dispatcher", "{}", &out)) << "no InlineIf";
  EXPECT_FALSE(try_inline("/jobs/a/go", "nobody", "{}", &out)) << "no remembered principal";
  EXPECT_FALSE(try_inline("/jobs/a/go", "", "{}", &out)) << "no credentials";
  EXPECT_FALSE(try_inline("/nothing", "dispatcher", "{}", &out));
  EXPECT_FALSE(try_inline("/jobs/%zz/go", "dispatcher", "{}", &out));
  HttpRequest get = Request(HttpMethod::kGet, "/jobs/a/go", "dispatcher");
  Responder ignored([](HttpResponse) {});
  EXPECT_FALSE(router.TryInline(get, ignored));
  ignored.Abandon();
}

TEST(ErrorsTest, OneMappingForEveryCode) {
  EXPECT_EQ(HttpErrorFor(ErrorCode::kInvalidArgument).status, 400);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kInvalidArgument).code, "invalid_argument");
  EXPECT_EQ(HttpErrorFor(ErrorCode::kNotFound).status, 404);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kConflict).status, 409);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kConflict).code, "conflict");
  EXPECT_EQ(HttpErrorFor(ErrorCode::kStale).status, 409);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kStale).code, "stale");
  EXPECT_EQ(HttpErrorFor(ErrorCode::kUnavailable).status, 503);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kInternal).status, 500);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kUnauthenticated).status, 401);
  EXPECT_EQ(HttpErrorFor(ErrorCode::kUnauthenticated).code, "unauthenticated");
  EXPECT_EQ(HttpErrorFor(ErrorCode::kOk).status, 500);
}

TEST(ErrorsTest, ShapeAndInvalidUtf8) {
  HttpResponse r = StatusResponse(NotFound("execution \xff not found"), {{"id", 3}});
  EXPECT_EQ(r.status, 404);
  auto j = nlohmann::json::parse(r.body);  // valid JSON despite the bad byte
  EXPECT_EQ(j["error"]["code"], "not_found");
  EXPECT_EQ(j["error"]["details"]["id"], 3);
  HttpResponse u = StatusResponse(Unavailable("disk full"));
  EXPECT_EQ(u.status, 503);
  ASSERT_EQ(u.headers.size(), 1u);
  EXPECT_EQ(u.headers[0].first, "Retry-After");
}

TEST(SplitPathTest, Decodes) {
  auto s = SplitPath("/a/b%2Fc/");
  ASSERT_TRUE(s.has_value());
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[1], "b/c");
  EXPECT_EQ((*s)[2], "");
  EXPECT_FALSE(SplitPath("a/b").has_value());
  EXPECT_FALSE(SplitPath("/a%2").has_value());
  EXPECT_FALSE(PercentDecode("%", false).has_value());
  EXPECT_EQ(*PercentDecode("a+b", true), "a b");
  EXPECT_EQ(*PercentDecode("a+b", false), "a+b");
}

// A last "{name...}" segment takes the rest of the path, zero or more segments.
TEST(RouterRestTest, RestSegmentMatchesTheRestOfThePath) {
  StaticTokenAuthenticator auth;
  Router router(&auth);
  router.Add(HttpMethod::kGet, "/", RouteAccess::Public(), [](const RouteRequest&) {
    return JsonResponse(200, nlohmann::json{{"root", true}});
  });
  router.Add(HttpMethod::kGet, "/app/{path...}", RouteAccess::Public(), [](const RouteRequest& r) {
    return JsonResponse(200, nlohmann::json{{"path", r.Param("path")}});
  });
  router.Add(HttpMethod::kGet, "/app/fixed/x", RouteAccess::Public(), [](const RouteRequest&) {
    return JsonResponse(200, nlohmann::json{{"fixed", true}});
  });
  const std::pair<const char*, const char*> cases[] = {
      {"/app", ""},
      {"/app/", ""},
      {"/app/a", "a"},
      {"/app/a/b%2Fc/", "a/b/c/"},
      {"/app/fixed", "fixed"},
      {"/app/fixed/x/y", "fixed/x/y"},
      {"/app/1/2/3/4/5/6/7/8/9", "1/2/3/4/5/6/7/8/9"}};
  for (const auto& [target, rest] : cases) {
    HttpResponse r = Call(router, Request(HttpMethod::kGet, target));
    ASSERT_EQ(r.status, 200) << target;
    EXPECT_EQ(nlohmann::json::parse(r.body)["path"], rest) << target;
  }
  EXPECT_TRUE(nlohmann::json::parse(Call(router, Request(HttpMethod::kGet, "/app/fixed/x")).body)
                  .contains("fixed"))
      << "more literal segments win over a rest segment";
  EXPECT_TRUE(
      nlohmann::json::parse(Call(router, Request(HttpMethod::kGet, "/")).body).contains("root"));
  EXPECT_EQ(Call(router, Request(HttpMethod::kGet, "/other")).status, 404);
}

TEST(RouterRestTest, ErrorPageReplacesTheRoutersOwnAnswers) {
  StaticTokenAuthenticator auth;
  auth.Add("reader", Principal::Make("reader", {Scope::kRead}, true));
  Router router(&auth);
  router.Add(HttpMethod::kGet, "/page", RouteAccess::Requires(Scope::kRead),
             [](const RouteRequest&) { return JsonResponse(200, nlohmann::json::object()); });
  router.SetErrorPage([](const HttpRequest& request, HttpResponse answer) {
    HttpResponse page;
    page.status = answer.status;
    page.content_type = "text/html";
    page.body = "page for " + request.path + ": " + ErrorCodeOf(answer);
    return page;
  });
  HttpResponse unauthenticated = Call(router, Request(HttpMethod::kGet, "/page"));
  EXPECT_EQ(unauthenticated.status, 401);
  EXPECT_EQ(unauthenticated.body, "page for /page: unauthenticated");
  HttpResponse missing = Call(router, Request(HttpMethod::kGet, "/nope", "reader"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, "page for /nope: not_found");
  HttpResponse method = Call(router, Request(HttpMethod::kPost, "/page", "reader"));
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.body, "page for /page: method_not_allowed");
  EXPECT_EQ(Call(router, Request(HttpMethod::kGet, "/page", "reader")).status, 200);
}

// Responder::SendBuilt and Wrap: a built answer goes to the server still to
// be built, through every layer of Wrap, each layer's change applied where it
// is built; a responder without a server's delivery builds at once.
TEST(ResponderTest, BuiltAnswersPassThroughWrapLayersUnbuilt) {
  std::vector<ResponseBuilder> handed;
  std::vector<HttpResponse> sent;
  Responder root([&](HttpResponse r) { sent.push_back(std::move(r)); },
                 [&](ResponseBuilder b) { handed.push_back(std::move(b)); });
  int built = 0;
  const Responder outer = root.Wrap([](HttpResponse& r) { r.headers.emplace_back("x-inner", "1"); })
                              .Wrap([](HttpResponse& r) { r.principal = "alice"; });
  EXPECT_TRUE(outer.SendBuilt([&] {
    ++built;
    return JsonResponse(201, nlohmann::json::object());
  }));
  EXPECT_FALSE(outer.Send(ErrorResponse(500, "internal", "late")));
  EXPECT_FALSE(outer.SendBuilt([&] { return JsonResponse(202, nlohmann::json::object()); }));
  EXPECT_EQ(built, 0) << "built before the server took it";
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_TRUE(sent.empty());
  HttpResponse r = handed.front()();
  EXPECT_EQ(built, 1);
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.principal, "alice");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers.front().first, "x-inner");
}

TEST(ResponderTest, WithoutAServersDeliveryAnAnswerIsBuiltAtOnce) {
  std::vector<HttpResponse> sent;
  const Responder plain([&](HttpResponse r) { sent.push_back(std::move(r)); });
  const Responder wrapped = plain.Wrap([](HttpResponse& r) { r.principal = "bob"; });
  EXPECT_TRUE(wrapped.SendBuilt([] { return JsonResponse(200, nlohmann::json::object()); }));
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent.front().status, 200);
  EXPECT_EQ(sent.front().principal, "bob");
}

TEST(ResponderTest, AWrapDroppedUnansweredSendsThe500ThroughItsChange) {
  std::vector<HttpResponse> sent;
  Responder root([&](HttpResponse r) { sent.push_back(std::move(r)); },
                 [&](ResponseBuilder) { ADD_FAILURE() << "nothing was built"; });
  {
    (void)root.Wrap([](HttpResponse& r) { r.principal = "carol"; });
  }
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent.front().status, 500);
  EXPECT_EQ(sent.front().principal, "carol");
}

}  // namespace
}  // namespace taskengine::api
