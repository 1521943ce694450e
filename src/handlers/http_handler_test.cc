// Tests of the `http` handler against a tiny scripted HTTP server on
// 127.0.0.1 (plain sockets, one connection at a time). Loopback is reachable
// only through allow_private, which the SSRF tests leave out on purpose.
// Nothing here contacts an outside host.
#include "handlers/http_handler.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "handlers/testing/fake_job_context.h"
#include "handlers/testing/test_servers.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;
using Kind = HandlerResult::Kind;

std::string Response(int status, std::string_view reason, std::string_view body,
                     std::string_view extra_headers = "") {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + std::string(extra_headers) + "\r\n" + std::string(body);
}

// A port on 127.0.0.1 with nothing listening (bound, then closed).
int RefusingPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  TE_CHECK(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  TE_CHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  close(fd);
  return ntohs(addr.sin_port);
}

// Config for http://127.0.0.1:<port>/hook with loopback allowed.
Json LocalConfig(int port, std::string_view path = "/hook") {
  return Json{{"url", "http://127.0.0.1:" + std::to_string(port) + std::string(path)},
              {"allow_http", true},
              {"allow_hosts", {"127.0.0.1"}},
              {"allow_private", {"127.0.0.0/8"}}};
}

std::string BodyOf(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

class HttpHandlerTest : public ::testing::Test {
 protected:
  HandlerResult Run(const Json& config, HttpHandlerOptions options = {}) {
    ctx_.config = config.dump();
    if (!options.clock) options.clock = &clock_;
    options.checkpoint_interval = std::chrono::milliseconds(20);
    Handler h = MakeHttpHandler(std::move(options));
    return h(ctx_);
  }

  FakeClock clock_;
  FakeJobContext ctx_;
};

TEST_F(HttpHandlerTest, SuccessSendsPayloadWithEffectKeyAndCommits) {
  TestServer server(Response(201, "Created", R"({"id":"m-1"})"));
  ctx_.payload = R"({"case":47,"text":"héllo"})";
  HandlerResult r = Run(LocalConfig(server.port()));
  ASSERT_EQ(r.kind, Kind::kSuccess) << r.error;
  Json result = Json::parse(r.result_json);
  EXPECT_EQ(result["status"], 201);
  EXPECT_EQ(result["body"], R"({"id":"m-1"})");
  EXPECT_EQ(result["body_truncated"], false);

  ASSERT_EQ(server.requests().size(), 1u);
  const std::string req = server.requests()[0];
  EXPECT_THAT(req, ::testing::StartsWith("POST /hook HTTP/1.1\r\n"));
  EXPECT_THAT(req, HasSubstr("\r\nIdempotency-Key: 42:http\r\n"));
  EXPECT_THAT(req, HasSubstr("\r\nContent-Type: application/json\r\n"));
  EXPECT_THAT(req, ::testing::Not(HasSubstr("Expect:")));
  EXPECT_EQ(BodyOf(req), ctx_.payload);
  auto committed = ctx_.committed_effects();
  ASSERT_EQ(committed.count("http"), 1u);
  EXPECT_EQ(committed["http"], r.result_json);

  // A second run (redelivery) finds the effect done and sends nothing.
  HandlerResult again = Run(LocalConfig(server.port()));
  EXPECT_EQ(again.kind, Kind::kSuccess);
  EXPECT_EQ(again.result_json, r.result_json);
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpHandlerTest, MethodAndStaticHeaders) {
  TestServer server(Response(200, "OK", ""));
  Json config = LocalConfig(server.port());
  config["method"] = "PUT";
  config["headers"] = {{"X-Api-Key", "secret"}};
  HandlerResult r = Run(config);
  ASSERT_EQ(r.kind, Kind::kSuccess) << r.error;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], ::testing::StartsWith("PUT /hook HTTP/1.1\r\n"));
  EXPECT_THAT(server.requests()[0], HasSubstr("\r\nX-Api-Key: secret\r\n"));
  // Header values (secrets) are never logged.
  for (const auto& line : ctx_.logs())
    EXPECT_THAT(line.message, ::testing::Not(HasSubstr("secret")));
}

TEST_F(HttpHandlerTest, ServerErrorIsRetryableAndReleasesTheEffect) {
  TestServer server(Response(500, "Internal Server Error", "boom"));
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_THAT(r.error, HasSubstr("HTTP 500"));
  EXPECT_THAT(r.error, HasSubstr("boom"));
  EXPECT_EQ(r.retry_after_ms, 0);
  EXPECT_TRUE(ctx_.committed_effects().empty());
  // Released: the retry sends again instead of meeting `ambiguous`.
  HandlerResult again = Run(LocalConfig(server.port()));
  EXPECT_EQ(again.kind, Kind::kRetryable);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST_F(HttpHandlerTest, TooManyRequestsHonoursRetryAfterSeconds) {
  TestServer server(Response(429, "Too Many Requests", "", "Retry-After: 7\r\n"));
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_EQ(r.retry_after_ms, 7000);
}

TEST_F(HttpHandlerTest, ServiceUnavailableHonoursRetryAfterHttpDate) {
  // The fake clock stands at 2026-01-01T00:00:00Z.
  TestServer server(
      Response(503, "Service Unavailable", "", "Retry-After: Thu, 01 Jan 2026 00:01:30 GMT\r\n"));
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_EQ(r.retry_after_ms, 90'000);
}

TEST_F(HttpHandlerTest, RequestTimeoutIsRetryable) {
  TestServer server(Response(408, "Request Timeout", ""));
  EXPECT_EQ(Run(LocalConfig(server.port())).kind, Kind::kRetryable);
}

TEST_F(HttpHandlerTest, NotFoundIsPermanent) {
  TestServer server(Response(404, "Not Found", "no such hook"));
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("HTTP 404"));
  EXPECT_TRUE(ctx_.committed_effects().empty());
}

TEST_F(HttpHandlerTest, RedirectIsNotFollowedAndIsPermanent) {
  TestServer server(Response(302, "Found", "", "Location: /elsewhere\r\n"));
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("redirects are not followed"));
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(HttpHandlerTest, SuccessWithBodyOverTheCapCommitsThenFails) {
  TestServer server(Response(200, "OK", std::string(5000, 'x')));
  Json config = LocalConfig(server.port());
  config["max_response_bytes"] = 1000;
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("max_response_bytes"));
  // The sink answered 2xx: it acted, so the effect is recorded (never repeated).
  EXPECT_EQ(ctx_.committed_effects().count("http"), 1u);
}

TEST_F(HttpHandlerTest, ChunkedBodyOverTheCapIsCutByTheWriteCallback) {
  std::string chunk(800, 'y');
  std::string body;
  for (int i = 0; i < 10; ++i) body += "320\r\n" + chunk + "\r\n";
  body += "0\r\n\r\n";
  TestServer server("HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                    body);
  Json config = LocalConfig(server.port());
  config["max_response_bytes"] = 1000;
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_THAT(r.error, HasSubstr("HTTP 500"));
  EXPECT_THAT(r.error, HasSubstr("over max_response_bytes"));
}

TEST_F(HttpHandlerTest, NoAnswerAfterTheRequestWasSentIsAmbiguous) {
  TestServer server("", TestServer::Mode::kHang);
  Json config = LocalConfig(server.port());
  config["timeout_ms"] = 300;
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kAmbiguous) << r.error;
  EXPECT_THAT(r.error, HasSubstr("sent"));
  EXPECT_EQ(server.requests().size(), 1u);
  EXPECT_TRUE(ctx_.committed_effects().empty());

  // The reservation was kept: a later claim meets `ambiguous` and sends nothing.
  ctx_.AddAmbiguousEffect("http");
  HandlerResult again = Run(config);
  EXPECT_EQ(again.kind, Kind::kAmbiguous);
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpHandlerTest, ResetAfterTheRequestWasSentIsAmbiguous) {
  TestServer server("", TestServer::Mode::kReset);
  HandlerResult r = Run(LocalConfig(server.port()));
  EXPECT_EQ(r.kind, Kind::kAmbiguous) << r.error;
}

TEST_F(HttpHandlerTest, IdempotentSinkRetriesAnAmbiguousEffectWithTheSameKey) {
  {
    TestServer hang("", TestServer::Mode::kHang);
    Json config = LocalConfig(hang.port());
    config["timeout_ms"] = 300;
    config["idempotent"] = true;
    HandlerResult r = Run(config);
    EXPECT_EQ(r.kind, Kind::kRetryable) << r.error;
    EXPECT_THAT(r.error, HasSubstr("unknown"));
  }
  ctx_.AddAmbiguousEffect("http");  // as the next claim sees it
  TestServer ok(Response(200, "OK", "dup-ok"));
  Json config = LocalConfig(ok.port());
  config["idempotent"] = true;
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kSuccess) << r.error;
  ASSERT_EQ(ok.requests().size(), 1u);
  EXPECT_THAT(ok.requests()[0], HasSubstr("\r\nIdempotency-Key: 42:http\r\n"));
}

TEST_F(HttpHandlerTest, RefusedConnectionIsRetryableAndReleased) {
  const int port = RefusingPort();
  HandlerResult r = Run(LocalConfig(port));
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_THAT(r.error, HasSubstr("not sent"));
  // Released: the next attempt proceeds (fails the same way, not ambiguous).
  EXPECT_EQ(Run(LocalConfig(port)).kind, Kind::kRetryable);
}

TEST_F(HttpHandlerTest, TimeoutDuringTlsHandshakeIsNotSentSoRetryable) {
  // https to a server that accepts and never speaks: the TLS handshake stalls,
  // no byte of the HTTP request is ever written.
  TestServer server("", TestServer::Mode::kSilent);
  Json config = LocalConfig(server.port());
  config["url"] = "https://127.0.0.1:" + std::to_string(server.port()) + "/hook";
  config["timeout_ms"] = 300;
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kRetryable) << r.error;
  EXPECT_THAT(r.error, HasSubstr("not sent"));
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(HttpHandlerTest, CancelWhileConnectingAbortsBeforeSending) {
  TestServer server("", TestServer::Mode::kSilent);
  Json config = LocalConfig(server.port());
  config["url"] = "https://127.0.0.1:" + std::to_string(server.port()) + "/hook";
  config["timeout_ms"] = 10'000;
  // Active at the start, cancel requested by the time the transfer checks.
  ctx_.lease_state_fn = [](int call) {
    return call <= 1 ? LeaseState::kActive : LeaseState::kCancelRequested;
  };
  const auto start = std::chrono::steady_clock::now();
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kCanceled) << r.error;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(ctx_.committed_effects().empty());
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(HttpHandlerTest, CancelAfterSendingDoesNotAbort) {
  TestServer server("", TestServer::Mode::kHang);
  Json config = LocalConfig(server.port());
  config["timeout_ms"] = 400;
  ctx_.lease_state_fn = [](int call) {
    return call <= 1 ? LeaseState::kActive : LeaseState::kCancelRequested;
  };
  HandlerResult r = Run(config);
  // The request is out: only its outcome can decide.
  EXPECT_EQ(r.kind, Kind::kAmbiguous) << r.error;
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(HttpHandlerTest, CanceledBeforeStartContactsNothing) {
  TestServer server(Response(200, "OK", ""));
  ctx_.set_lease_state(LeaseState::kCancelRequested);
  EXPECT_EQ(Run(LocalConfig(server.port())).kind, Kind::kCanceled);
  EXPECT_EQ(server.connections(), 0);
}

// --- SSRF guard and policy ---------------------------------------------------

TEST_F(HttpHandlerTest, HostResolvingToLoopbackIsRefusedBeforeConnecting) {
  TestServer server(Response(200, "OK", ""));
  Json config = {{"url", "http://localhost:" + std::to_string(server.port()) + "/hook"},
                 {"allow_http", true},
                 {"allow_hosts", {"localhost"}}};
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("SSRF"));
  EXPECT_THAT(r.error, HasSubstr("loopback"));
  EXPECT_EQ(server.connections(), 0);
  EXPECT_TRUE(ctx_.committed_effects().empty());
}

TEST_F(HttpHandlerTest, LoopbackLiteralIsRefusedWithoutAllowPrivate) {
  TestServer server(Response(200, "OK", ""));
  Json config = LocalConfig(server.port());
  config.erase("allow_private");
  EXPECT_EQ(Run(config).kind, Kind::kPermanent);
  config["url"] = "http://[::ffff:127.0.0.1]:" + std::to_string(server.port()) + "/hook";
  config["allow_hosts"] = {"::ffff:127.0.0.1"};
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("SSRF"));
  EXPECT_EQ(server.connections(), 0);
}

TEST_F(HttpHandlerTest, ConnectionIsPinnedToTheCheckedAddress) {
  // "sink.invalid" exists only in the injected resolver: the transfer can only
  // reach the server through the pinned (checked) address.
  TestServer server(Response(200, "OK", "pinned"));
  std::atomic<int> lookups{0};
  HttpHandlerOptions options;
  options.resolver = [&](const std::string& host) -> Result<std::vector<IpAddress>> {
    lookups.fetch_add(1);
    EXPECT_EQ(host, "sink.invalid");
    // A blocked address first: skipped; the exempted one is used.
    return std::vector<IpAddress>{*IpAddress::Parse("10.1.2.3"), *IpAddress::Parse("127.0.0.1")};
  };
  Json config = {{"url", "http://sink.invalid:" + std::to_string(server.port()) + "/in"},
                 {"allow_http", true},
                 {"allow_hosts", {"*.invalid"}},
                 {"allow_private", {"127.0.0.1"}}};
  HandlerResult r = Run(config, options);
  ASSERT_EQ(r.kind, Kind::kSuccess) << r.error;
  EXPECT_EQ(lookups.load(), 1);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0],
              HasSubstr("\r\nHost: sink.invalid:" + std::to_string(server.port()) + "\r\n"));
}

TEST_F(HttpHandlerTest, AllowPrivateHostNameExemptsItsAddresses) {
  TestServer server(Response(200, "OK", ""));
  HttpHandlerOptions options;
  options.resolver = [](const std::string&) -> Result<std::vector<IpAddress>> {
    return std::vector<IpAddress>{*IpAddress::Parse("127.0.0.1")};
  };
  Json config = {{"url", "http://internal.test:" + std::to_string(server.port()) + "/in"},
                 {"allow_http", true},
                 {"allow_hosts", {"internal.test"}},
                 {"allow_private", {"internal.test"}}};
  EXPECT_EQ(Run(config, options).kind, Kind::kSuccess);
}

TEST_F(HttpHandlerTest, ResolutionFailureIsRetryable) {
  HttpHandlerOptions options;
  options.resolver = [](const std::string& host) -> Result<std::vector<IpAddress>> {
    return Unavailable("cannot resolve " + host + ": temporary failure");
  };
  Json config = {{"url", "https://hooks.example.test/in"}, {"allow_hosts", {"hooks.example.test"}}};
  HandlerResult r = Run(config, options);
  EXPECT_EQ(r.kind, Kind::kRetryable);
  EXPECT_THAT(r.error, HasSubstr("temporary failure"));
  EXPECT_TRUE(ctx_.committed_effects().empty());
}

TEST_F(HttpHandlerTest, HostNotOnAllowlistIsRefused) {
  TestServer server(Response(200, "OK", ""));
  Json config = LocalConfig(server.port());
  config["allow_hosts"] = {"hooks.example.com"};
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("not on allow_hosts"));
  EXPECT_EQ(server.connections(), 0);
}

TEST_F(HttpHandlerTest, PlainHttpIsRefusedByDefault) {
  TestServer server(Response(200, "OK", ""));
  Json config = LocalConfig(server.port());
  config.erase("allow_http");
  HandlerResult r = Run(config);
  EXPECT_EQ(r.kind, Kind::kPermanent);
  EXPECT_THAT(r.error, HasSubstr("allow_http"));
  EXPECT_EQ(server.connections(), 0);
}

TEST_F(HttpHandlerTest, BadConfigIsPermanent) {
  EXPECT_EQ(Run(Json{{"allow_hosts", {"a.test"}}}).kind, Kind::kPermanent);
  EXPECT_EQ(Run(Json::array()).kind, Kind::kPermanent);
}

TEST(HttpHandlerConfigTest, ParsesAndChecksFields) {
  auto ok = ParseHttpHandlerConfig(
      R"({"url":"https://Hooks.Example.com/in?x=1","allow_hosts":["hooks.example.com"],
          "allow_private":["10.0.0.0/8","::1","corp.test"],"timeout_ms":500,
          "headers":{"X-A":"b"},"max_response_bytes":10})");
  ASSERT_OK(ok);
  EXPECT_EQ(ok->host, "hooks.example.com");
  EXPECT_EQ(ok->port, 443);
  EXPECT_EQ(ok->scheme, "https");
  EXPECT_EQ(ok->timeout_ms, 500);
  EXPECT_EQ(ok->max_response_bytes, 10u);
  EXPECT_EQ(ok->allow_private_ranges.size(), 2u);
  EXPECT_EQ(ok->allow_private_hosts, std::vector<std::string>{"corp.test"});

  auto code = [](std::string_view json) {
    auto r = ParseHttpHandlerConfig(json);
    return r.ok() ? ErrorCode::kOk : r.status().code();
  };
  const char* bad[] = {
      R"({"url":"https://a.test/","allow_hosts":[]})",
      R"({"url":"https://a.test/"})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"allow_host":["x"]})",
      R"({"url":"ftp://a.test/","allow_hosts":["a.test"]})",
      R"({"url":"http://a.test/","allow_hosts":["a.test"]})",
      R"({"url":"https://b.test/","allow_hosts":["a.test"]})",
      R"({"url":"https://a.test/","allow_hosts":["*.a.test"]})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"method":"GET"})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"headers":{"X":"a\r\nB: c"}})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"headers":{"Idempotency-Key":"k"}})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"headers":{"Bad Name":"v"}})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"timeout_ms":0})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"timeout_ms":1.5})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"max_response_bytes":-1})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"allow_private":["10.0.0.1/8"]})",
      R"({"url":"https://a.test/","allow_hosts":["a.test"],"allow_private":["::1/129"]})",
      R"({"url":"https://a.test/ x","allow_hosts":["a.test"]})",
      R"({"url":"not a url","allow_hosts":["a.test"]})",
      R"([1,2])",
  };
  for (const char* json : bad) EXPECT_EQ(code(json), ErrorCode::kInvalidArgument) << json;
  EXPECT_EQ(code(R"({"url":"https://x.a.test:8443/","allow_hosts":["*.a.test"]})"), ErrorCode::kOk);
  EXPECT_EQ(code(R"({"url":"https://[2001:db8::1]/","allow_hosts":["[2001:db8::1]"]})"),
            ErrorCode::kOk);
}

// --- through a real engine (SQLite effect ledger, worker pool) -----------------

class HttpHandlerEngineTest : public ::testing::Test {
 protected:
  void Open(const Json& config) {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.sync = SyncMode::kNormal;
    o.worker_threads = 1;
    o.poll_interval_ms = 20;
    o.sweep_interval_ms = 100;
    o.shutdown_grace_ms = 2000;
    ASSERT_OK_AND_ASSIGN(engine_, Engine::Open(o));
    ASSERT_OK(engine_->RegisterHandler("http", MakeHttpHandler()));
    JobDefinition job;
    job.name = JobName("hook");
    job.handler = "http";
    job.config_json = config.dump();
    job.retry.backoff_base_ms = 10;
    job.retry.backoff_cap_ms = 10;
    ASSERT_OK(engine_->DefineJob(job));
    ASSERT_OK(engine_->Start());
  }
  void TearDown() override {
    if (engine_) engine_->Stop();
  }

  ExecutionId Dispatch(std::string payload) {
    DispatchRequest d;
    d.job = JobName("hook");
    d.payload_json = std::move(payload);
    auto r = engine_->Dispatch(d);
    TE_CHECK(r.ok());
    return r->id;
  }

  // Waits (up to 20 s) until `id` leaves queued/running.
  Execution WaitDone(ExecutionId id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      auto e = engine_->GetExecution(id);
      TE_CHECK(e.ok());
      if ((e->status != ExecutionStatus::kQueued && e->status != ExecutionStatus::kRunning) ||
          std::chrono::steady_clock::now() > deadline) {
        return *e;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(HttpHandlerEngineTest, SuccessIsPublishedWithTheResult) {
  TestServer server(Response(200, "OK", R"({"ok":true})"));
  Open(LocalConfig(server.port()));
  const ExecutionId id = Dispatch(R"({"n":1})");
  Execution e = WaitDone(id);
  EXPECT_EQ(e.status, ExecutionStatus::kSucceeded) << e.error;
  EXPECT_EQ(Json::parse(e.result_json)["status"], 200);
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0],
              HasSubstr("\r\nIdempotency-Key: " + std::to_string(id.value) + ":http\r\n"));
}

TEST_F(HttpHandlerEngineTest, AmbiguousIsQuarantinedAndAReplaySendsNothing) {
  TestServer server("", TestServer::Mode::kHang);
  Json config = LocalConfig(server.port());
  config["timeout_ms"] = 300;
  Open(config);
  const ExecutionId id = Dispatch("{}");
  Execution e = WaitDone(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined) << e.error;
  EXPECT_EQ(e.failure_class, FailureClass::kAmbiguous);
  EXPECT_EQ(server.requests().size(), 1u);

  // E3: the sink is not declared idempotent, so a replay meets `ambiguous` in
  // the ledger and never sends the request blindly again.
  ReplayOptions replay;
  replay.actor = "cli:ops";
  replay.reason = "check";
  ASSERT_OK(engine_->Replay(id, replay));
  e = WaitDone(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined) << e.error;
  EXPECT_EQ(e.failure_class, FailureClass::kAmbiguous);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(HttpHandlerEngineTest, ServerErrorsAreRetriedUntilAttemptsRunOut) {
  TestServer server(Response(503, "Service Unavailable", ""));
  Open(LocalConfig(server.port()));
  const ExecutionId id = Dispatch("{}");
  Execution e = WaitDone(id);
  EXPECT_EQ(e.status, ExecutionStatus::kFailed) << e.error;
  EXPECT_EQ(e.attempt, 5);
  // Each attempt proceeded (the reservation was released), none met `ambiguous`.
  EXPECT_EQ(server.requests().size(), 5u);
}

// --- the address classifier --------------------------------------------------

TEST(AddressClassTest, Table) {
  struct Case {
    const char* ip;
    AddressClass cls;
  };
  const Case cases[] = {
      {"0.0.0.0", AddressClass::kUnspecified},
      {"0.255.255.255", AddressClass::kUnspecified},
      {"1.1.1.1", AddressClass::kPublic},
      {"9.255.255.255", AddressClass::kPublic},
      {"10.0.0.0", AddressClass::kPrivate},
      {"10.255.255.255", AddressClass::kPrivate},
      {"11.0.0.0", AddressClass::kPublic},
      {"100.63.255.255", AddressClass::kPublic},
      {"100.64.0.0", AddressClass::kSharedCgnat},
      {"100.127.255.255", AddressClass::kSharedCgnat},
      {"100.128.0.0", AddressClass::kPublic},
      {"126.255.255.255", AddressClass::kPublic},
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.255.255.254", AddressClass::kLoopback},
      {"128.0.0.0", AddressClass::kPublic},
      {"169.253.255.255", AddressClass::kPublic},
      {"169.254.169.254", AddressClass::kLinkLocal},
      {"169.255.0.0", AddressClass::kPublic},
      {"172.15.255.255", AddressClass::kPublic},
      {"172.16.0.0", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"172.32.0.0", AddressClass::kPublic},
      {"192.0.0.8", AddressClass::kReserved},
      {"192.0.2.1", AddressClass::kDocumentation},
      {"192.0.3.1", AddressClass::kPublic},
      {"192.167.255.255", AddressClass::kPublic},
      {"192.168.0.1", AddressClass::kPrivate},
      {"192.169.0.0", AddressClass::kPublic},
      {"198.17.255.255", AddressClass::kPublic},
      {"198.18.0.0", AddressClass::kReserved},
      {"198.19.255.255", AddressClass::kReserved},
      {"198.20.0.0", AddressClass::kPublic},
      {"198.51.100.7", AddressClass::kDocumentation},
      {"203.0.113.9", AddressClass::kDocumentation},
      {"223.255.255.255", AddressClass::kPublic},
      {"224.0.0.1", AddressClass::kMulticast},
      {"239.255.255.255", AddressClass::kMulticast},
      {"240.0.0.1", AddressClass::kReserved},
      {"255.255.255.255", AddressClass::kReserved},
      // IPv6.
      {"::", AddressClass::kUnspecified},
      {"::1", AddressClass::kLoopback},
      {"::2", AddressClass::kUnspecified},  // IPv4-compatible 0.0.0.2
      {"2606:4700::1111", AddressClass::kPublic},
      {"fc00::1", AddressClass::kUniqueLocal},
      {"fdff:ffff::1", AddressClass::kUniqueLocal},
      {"fbff::1", AddressClass::kPublic},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf:ffff::1", AddressClass::kLinkLocal},
      {"fec0::1", AddressClass::kUniqueLocal},
      {"ff02::1", AddressClass::kMulticast},
      {"2001:db8::1", AddressClass::kDocumentation},
      {"2001::1", AddressClass::kReserved},
      {"100::1", AddressClass::kReserved},
      {"64:ff9b:1::1", AddressClass::kReserved},
      // IPv4 inside IPv6.
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"::ffff:10.1.2.3", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kLinkLocal},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"::ffff:0.0.0.0", AddressClass::kUnspecified},
      {"::127.0.0.1", AddressClass::kLoopback},
      {"::192.168.1.1", AddressClass::kPrivate},
      {"64:ff9b::7f00:1", AddressClass::kLoopback},
      {"64:ff9b::808:808", AddressClass::kPublic},
      {"2002:7f00:1::", AddressClass::kLoopback},
      {"2002:a9fe:a9fe::1", AddressClass::kLinkLocal},
      {"2002:808:808::1", AddressClass::kPublic},
  };
  for (const Case& c : cases) {
    auto ip = IpAddress::Parse(c.ip);
    ASSERT_TRUE(ip.has_value()) << c.ip;
    EXPECT_EQ(ToString(ClassifyAddress(*ip)), ToString(c.cls)) << c.ip;
  }
}

TEST(AddressClassTest, ParseRefusesNonAddresses) {
  for (const char* text : {"", "localhost", "127.1", "1.2.3.4.5", "256.0.0.1", "[1.2.3.4]",
                           "fe80::1%eth0", "::g", "1.2.3.4/8", " 1.2.3.4"}) {
    EXPECT_FALSE(IpAddress::Parse(text).has_value()) << text;
  }
  EXPECT_EQ(IpAddress::Parse("[::1]")->ToString(), "::1");
  EXPECT_EQ(IpAddress::Parse("::FFFF:7f00:1")->ToString(), "::ffff:127.0.0.1");
}

TEST(CidrRangeTest, ContainsWithEdgesAndMappedAddresses) {
  auto contains = [](const char* range, const char* ip) {
    auto r = CidrRange::Parse(range);
    TE_CHECK(r.has_value());
    return r->Contains(*IpAddress::Parse(ip));
  };
  EXPECT_TRUE(contains("10.0.0.0/8", "10.255.255.255"));
  EXPECT_FALSE(contains("10.0.0.0/8", "11.0.0.0"));
  EXPECT_FALSE(contains("10.0.0.0/8", "9.255.255.255"));
  EXPECT_TRUE(contains("100.64.0.0/10", "100.127.0.1"));
  EXPECT_FALSE(contains("100.64.0.0/10", "100.128.0.1"));
  EXPECT_TRUE(contains("127.0.0.1", "127.0.0.1"));
  EXPECT_FALSE(contains("127.0.0.1", "127.0.0.2"));
  EXPECT_TRUE(contains("0.0.0.0/0", "203.0.113.1"));
  EXPECT_FALSE(contains("0.0.0.0/0", "::1"));
  EXPECT_TRUE(contains("127.0.0.0/8", "::ffff:127.0.0.1"));  // mapped matches IPv4
  EXPECT_TRUE(contains("::ffff:127.0.0.0/104", "127.9.9.9"));
  EXPECT_TRUE(contains("fc00::/7", "fdff::1"));
  EXPECT_FALSE(contains("fc00::/7", "fe00::1"));
  EXPECT_TRUE(contains("::1", "::1"));
  EXPECT_FALSE(contains("::1", "127.0.0.1"));
  EXPECT_FALSE(contains("::/0", "127.0.0.1"));
  EXPECT_FALSE(CidrRange::Parse("10.0.0.1/8").has_value());  // host bits set
  EXPECT_FALSE(CidrRange::Parse("10.0.0.0/33").has_value());
  EXPECT_FALSE(CidrRange::Parse("10.0.0.0/").has_value());
  EXPECT_FALSE(CidrRange::Parse("10.0.0.0/-1").has_value());
  EXPECT_FALSE(CidrRange::Parse("host.test/8").has_value());
}

}  // namespace
}  // namespace taskengine
