#include "api/http_wire.h"

#include <gtest/gtest.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <vector>

namespace taskengine::api {
namespace {

namespace http = boost::beast::http;

constexpr char kServer[] = "taskengine";
constexpr char kDate[] = "Sun, 06 Dec 2026 10:00:00 GMT";

// What HttpServer wrote before AppendResponseBytes: the same response as a
// Beast message, serialized by Beast.
std::string BeastBytes(const HttpResponse& response, unsigned version, bool keep) {
  http::response<http::string_body> res;
  res.version(version);
  res.result(static_cast<unsigned>(response.status));
  res.set(http::field::server, kServer);
  res.set(http::field::date, kDate);
  if (!response.content_type.empty() && (!response.body.empty() || response.status != 204)) {
    res.set(http::field::content_type, response.content_type);
  }
  for (const auto& [name, value] : response.headers) res.set(name, value);
  res.body() = response.body;
  res.keep_alive(keep);
  res.prepare_payload();
  http::response_serializer<http::string_body> serializer(res);
  std::string out;
  boost::beast::error_code ec;
  do {
    serializer.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      std::size_t n = 0;
      for (const auto& b : boost::beast::buffers_range_ref(buffers)) {
        out.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      serializer.consume(n);
    });
  } while (!ec && !serializer.is_done());
  EXPECT_FALSE(ec) << ec.message();
  return out;
}

std::string OurBytes(const HttpResponse& response, unsigned version, bool keep) {
  std::string out;
  AppendResponseBytes(out, response, version, keep, kServer, kDate);
  return out;
}

HttpResponse Response(int status, std::string body, std::string content_type = "application/json",
                      std::vector<std::pair<std::string, std::string>> headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.content_type = std::move(content_type);
  r.headers = std::move(headers);
  return r;
}

TEST(HttpWireTest, WritesWhatBeastWroteForEveryAnswerTheServerGives) {
  const std::vector<HttpResponse> answers = {
      Response(200, R"({"status":"succeeded"})"),
      Response(202, R"({"id":"17","status":"queued","created":true})", "application/json",
               {{"Location", "/api/v1/executions/17"}}),
      Response(204, ""),
      Response(204, "", ""),
      Response(304, "", "text/html", {{"ETag", "\"abc\""}}),
      Response(400, R"({"error":{"code":"bad_request"}})"),
      Response(401, "{}", "application/json",
               {{"WWW-Authenticate", "Bearer realm=\"taskengine\""}}),
      Response(404, "not here", "text/plain"),
      Response(405, "{}", "application/json", {{"Allow", "GET, POST"}}),
      Response(413, "{}"),
      Response(421, "{}"),
      Response(429, "{}", "application/json", {{"Retry-After", "3"}}),
      Response(431, "{}"),
      Response(500, "{}"),
      Response(501, "{}"),
      Response(503, "{}", "application/json", {{"Retry-After", "1"}}),
      Response(299, "unknown status"),
      Response(200, std::string(100000, 'x'), "text/css",
               {{"Cache-Control", "no-cache"}, {"ETag", "\"e1\""}}),
      Response(200, "<html></html>", "text/html; charset=utf-8",
               {{"Content-Security-Policy", "default-src 'self'"},
                {"X-Frame-Options", "DENY"},
                {"X-Content-Type-Options", "nosniff"},
                {"Referrer-Policy", "same-origin"},
                {"Cache-Control", "no-store"}}),
      // Two of a name: the later one replaces the earlier, at the end.
      Response(303, "", "", {{"Set-Cookie", "a=1"}, {"Location", "/admin"}, {"set-cookie", "b=2"}}),
      // A response's own Server, Date or Content-Type replaces the server's.
      Response(200, "x", "text/plain", {{"content-type", "text/csv"}, {"Date", "then"}}),
      Response(200, "", ""),
      Response(201, "", "application/json"),
  };
  for (const HttpResponse& r : answers) {
    for (unsigned version : {10u, 11u}) {
      for (bool keep : {true, false}) {
        SCOPED_TRACE("status " + std::to_string(r.status) + ", HTTP/" +
                     std::to_string(version / 10) + "." + std::to_string(version % 10) +
                     (keep ? ", kept" : ", closed"));
        EXPECT_EQ(OurBytes(r, version, keep), BeastBytes(r, version, keep));
      }
    }
  }
}

TEST(HttpWireTest, AppendsToWhatIsThere) {
  std::string out = "before";
  AppendResponseBytes(out, Response(200, "{}"), 11, true, kServer, kDate);
  EXPECT_EQ(out, "before" + BeastBytes(Response(200, "{}"), 11, true));
}

TEST(HttpWireTest, FramingFieldsAreTheServers) {
  const HttpResponse r = Response(200, "hello", "text/plain",
                                  {{"Content-Length", "99"},
                                   {"Transfer-Encoding", "chunked"},
                                   {"connection", "upgrade"},
                                   {"X-Kept", "1"}});
  EXPECT_EQ(OurBytes(r, 11, true),
            "HTTP/1.1 200 OK\r\nServer: taskengine\r\nDate: " + std::string(kDate) +
                "\r\nContent-Type: text/plain\r\nX-Kept: 1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(OurBytes(r, 11, false),
            "HTTP/1.1 200 OK\r\nServer: taskengine\r\nDate: " + std::string(kDate) +
                "\r\nContent-Type: text/plain\r\nX-Kept: 1\r\nConnection: close\r\n"
                "Content-Length: 5\r\n\r\nhello");
}

TEST(HttpWireTest, NoFieldValueSplitsTheResponse) {
  const std::string out =
      OurBytes(Response(303, "", "", {{"Location", std::string("/a\r\nSet-Cookie: x=1\n\0b", 22)}}),
               11, true);
  EXPECT_NE(out.find("Location: /a  Set-Cookie: x=1  b\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("\r\nSet-Cookie"), std::string::npos) << out;
}

TEST(HttpWireTest, NoBodyForStatusesThatHaveNone) {
  for (int status : {101, 204, 304}) {
    const std::string out = OurBytes(Response(status, "a body", "text/plain"), 11, true);
    EXPECT_TRUE(out.ends_with("Content-Length: 0\r\n\r\n")) << out;
  }
}

}  // namespace
}  // namespace taskengine::api
