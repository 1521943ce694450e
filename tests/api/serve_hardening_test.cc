// The real `taskengine serve` under two attacks of an outside probe (issue 13):
//
//   - finding 5: a flood of wrong-password logins from many client addresses
//     must not make /healthz or token-authenticated calls wait (the password
//     checks run on the LoginGuard's two threads) nor make memory grow with
//     the flood;
//   - finding 6: well over a thousand idle and half-sent connections, with
//     the process held to 1024 descriptors, must not lock other clients out.
//
// Each test prints what it measured (latencies, peak RSS, connections).
// Clients act as many addresses by binding to 127.0.0.2, 127.0.0.3, ...
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

using api::testing::RawConnection;

// The peak RSS a login flood may cost serve: two Argon2id hashes of 64 MiB at
// a time over a baseline of tens of MiB. Under AddressSanitizer freed hash
// buffers also sit in its quarantine (256 MiB by default).
#if defined(__SANITIZE_ADDRESS__)
constexpr long kPeakRssLimitMib = 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr long kPeakRssLimitMib = 1024;
#else
constexpr long kPeakRssLimitMib = 400;
#endif
#else
constexpr long kPeakRssLimitMib = 400;
#endif

struct Timed {
  int status = 0;  // 0: no answer within the timeout
  double ms = 0;
  std::string body;
};

// One request on a new connection (Connection: close), timed from connect to
// the end of the answer.
Timed Exchange(int port, const std::string& method, const std::string& path,
               const std::string& token, const std::string& body,
               const std::string& source = "127.0.0.1",
               milliseconds timeout = milliseconds(10'000)) {
  const auto start = SteadyClock::now();
  Timed out;
  RawConnection c(port, source);
  if (c.connected()) {
    std::string request =
        method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    if (!token.empty()) request += "Authorization: Bearer " + token + "\r\n";
    if (!body.empty()) request += "Content-Type: application/json\r\n";
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (c.Send(request)) {
      const std::string raw = c.Read(static_cast<int>(timeout.count()));
      if (raw.rfind("HTTP/1.1 ", 0) == 0) out.status = std::atoi(raw.c_str() + 9);
      const std::size_t split = raw.find("\r\n\r\n");
      if (split != std::string::npos) out.body = raw.substr(split + 4);
    }
  }
  out.ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
  return out;
}

// kB of a /proc/<pid>/status field ("VmHWM", "VmRSS"); -1 when unreadable.
long ProcStatusKb(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  }
  return -1;
}

// The port of the first "listening on http://127.0.0.1:PORT" of the log.
int WaitForPort(const TaskengineInstall& te) {
  int port = 0;
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
  WaitUntil(milliseconds(20'000), [&] {
    std::smatch m;
    const std::string log = ReadFile(te.serve_log());
    if (std::regex_search(log, m, listening)) port = std::stoi(m[1]);
    return port != 0;
  });
  return port;
}

class ServeHardeningTest : public ::testing::Test {
 protected:
  // Migrates, creates an admin user and a read token, and starts serve with
  // `config` (through `/bin/sh -c 'ulimit -n N; exec ...'` when
  // `descriptor_limit` > 0).
  void StartServe(const std::string& config, int descriptor_limit = 0) {
    te_ = std::make_unique<TaskengineInstall>(config);
    ASSERT_EQ(te_->Run({"migrate"}).exit_code, 0);
    nlohmann::json user = te_->RunJson({"user:add", "alice", "--role=admin"});
    password_ = user.value("password", "");
    ASSERT_FALSE(password_.empty());
    nlohmann::json token = te_->RunJson({"token:create", "--name=probe", "--scopes=read"});
    token_ = token.value("secret", "");
    ASSERT_FALSE(token_.empty());
    std::vector<std::string> argv = te_->Argv({"serve"});
    if (descriptor_limit > 0) {
      std::string script = "ulimit -n " + std::to_string(descriptor_limit) + " && exec";
      for (std::size_t i = 0; i < argv.size(); ++i) script += " \"$" + std::to_string(i + 1) + "\"";
      argv.insert(argv.begin(), {"/bin/sh", "-c", script, "sh"});
    }
    SpawnOptions o;
    o.cwd = te_->dir().path().string();
    o.stdout_path = te_->serve_log();
    o.stderr_path = te_->serve_log();
    std::string error;
    ASSERT_TRUE(serve_.Start(argv, o, &error)) << error;
    port_ = WaitForPort(*te_);
    ASSERT_NE(port_, 0) << ReadFile(te_->serve_log());
  }

  void TearDown() override {
    if (!serve_.running()) return;
    serve_.Signal(SIGTERM);
    std::optional<int> status = serve_.Wait(milliseconds(20'000));
    EXPECT_TRUE(status.has_value()) << "serve did not stop";
  }

  std::unique_ptr<TaskengineInstall> te_;
  ChildProcess serve_;
  int port_ = 0;
  std::string password_;
  std::string token_;
};

constexpr char kServeConfig[] = R"(
[http]
port = 0
%s
[engine]
worker_threads = 1
)";

std::string Config(const std::string& http_extra) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf), kServeConfig, http_extra.c_str());
  return buf;
}

// Finding 5. The per-address and global login rates are off here, so every
// login reaches the password check: only the LoginGuard's two threads and
// its queue stand between the flood and the rest of the API.
TEST_F(ServeHardeningTest, LoginFloodDoesNotStallHealthOrTokenCalls) {
  ASSERT_NO_FATAL_FAILURE(StartServe(
      Config("login_per_minute = 0\nlogin_per_second = 0\nlogin_threads = 2\nlogin_queue = 8\n")));
  const long rss_before_kb = ProcStatusKb(serve_.pid(), "VmRSS");

  constexpr int kAttackers = 30;
  constexpr int kThreadsPerAttacker = 2;
  constexpr auto kFlood = std::chrono::seconds(6);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::map<int, int> statuses;  // login status -> count
  std::vector<std::thread> attackers;
  const auto flood_start = SteadyClock::now();
  for (int a = 0; a < kAttackers; ++a) {
    for (int t = 0; t < kThreadsPerAttacker; ++t) {
      attackers.emplace_back([&, a, t] {
        const std::string source = "127.0.0." + std::to_string(a + 2);
        for (int i = 0; !stop.load(); ++i) {
          const std::string user = i % 2 == 0 ? "alice" : "nobody-" + std::to_string(a * 100 + t);
          Timed r = Exchange(
              port_, "POST", "/api/v1/auth/login", "",
              R"({"username":")" + user + R"(","password":"wrong-)" + std::to_string(i) + R"("})",
              source, milliseconds(30'000));
          std::lock_guard<std::mutex> lock(mu);
          ++statuses[r.status];
        }
      });
    }
  }
  // Measure while the flood runs: health, readiness and a token call, each on
  // a new connection.
  double worst_health = 0;
  double worst_token = 0;
  double sum_health = 0;
  int samples = 0;
  int health_failures = 0;
  int token_failures = 0;
  std::this_thread::sleep_for(milliseconds(500));  // let the flood fill the queue
  // At least kMinSamples, however slow a sample is on a loaded machine or
  // under a sanitizer: the flood goes on until they are taken (within 3x).
  constexpr int kMinSamples = 20;
  while (SteadyClock::now() - flood_start < kFlood ||
         (samples < kMinSamples && SteadyClock::now() - flood_start < 3 * kFlood)) {
    Timed h = Exchange(port_, "GET", "/healthz", "", "");
    Timed ready = Exchange(port_, "GET", "/readyz", "", "");
    Timed j = Exchange(port_, "GET", "/api/v1/jobs", token_, "");
    if (h.status != 200 || ready.status != 200) ++health_failures;
    if (j.status != 200) ++token_failures;
    worst_health = std::max({worst_health, h.ms, ready.ms});
    worst_token = std::max(worst_token, j.ms);
    sum_health += h.ms;
    ++samples;
    std::this_thread::sleep_for(milliseconds(100));
  }
  stop = true;
  for (std::thread& t : attackers) t.join();
  const long peak_kb = ProcStatusKb(serve_.pid(), "VmHWM");

  int logins = 0;
  for (const auto& [status, count] : statuses) logins += count;
  std::printf(
      "login flood: %d logins from %d addresses in %.1f s (401: %d, 429: %d, 503: %d, other: %d); "
      "/healthz mean %.1f ms, worst health/ready %.1f ms, worst token call %.1f ms over %d "
      "samples; RSS %ld MiB before, peak %ld MiB\n",
      logins, kAttackers, std::chrono::duration<double>(SteadyClock::now() - flood_start).count(),
      statuses[401], statuses[429], statuses[503],
      logins - statuses[401] - statuses[429] - statuses[503], sum_health / std::max(1, samples),
      worst_health, worst_token, samples, rss_before_kb / 1024, peak_kb / 1024);

  EXPECT_GE(samples, kMinSamples);
  EXPECT_EQ(health_failures, 0);
  EXPECT_EQ(token_failures, 0);
  EXPECT_LT(worst_health, 1000) << "health checks waited behind the logins";
  EXPECT_LT(worst_token, 1000) << "a token call waited behind the logins";
  EXPECT_GT(statuses[401], 0) << "password checks ran";
  EXPECT_GT(statuses[503] + statuses[429], 0) << "the login capacity was reached";
  EXPECT_EQ(statuses[0], 0) << "every login was answered";
  // Two Argon2id hashes of 64 MiB at a time, whatever the flood: far below
  // the 1.9 GiB the probe saw.
  EXPECT_LT(peak_kb, kPeakRssLimitMib * 1024) << "peak RSS " << peak_kb / 1024 << " MiB";

  // The attacked account is locked for a while (429 with Retry-After, even
  // with the right password); another client logs in once it expires.
  Timed locked = Exchange(port_, "POST", "/api/v1/auth/login", "",
                          R"({"username":"alice","password":")" + password_ + R"("})");
  EXPECT_EQ(locked.status, 429) << locked.body;
  EXPECT_NE(locked.body.find("login_account"), std::string::npos) << locked.body;
}

// Finding 1. With auth off every request is the global admin, so a web page
// whose name was rebound to 127.0.0.1 must not be answered: its Host (and
// Origin) name the attacker's site.
TEST_F(ServeHardeningTest, DnsRebindingIsRefusedWithAuthOff) {
  ASSERT_NO_FATAL_FAILURE(StartServe(Config("auth = false\n")));
  const std::string port = std::to_string(port_);
  const auto status = [&](const std::string& request) {
    RawConnection c(port_, "127.0.0.1");
    c.Send(request);
    const std::string raw = c.Read(5000);
    return raw.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(raw.c_str() + 9) : 0;
  };
  const std::string attacker = "attacker.example:" + port;
  EXPECT_EQ(status("GET /api/v1/executions HTTP/1.1\r\nHost: " + attacker + "\r\nOrigin: http://" +
                   attacker + "\r\nConnection: close\r\n\r\n"),
            421);
  EXPECT_EQ(status("POST /api/v1/jobs/x/dispatch HTTP/1.1\r\nHost: " + attacker +
                   "\r\nOrigin: http://" + attacker +
                   "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                   "Connection: close\r\n\r\n{}"),
            421);
  EXPECT_EQ(status("POST /api/v1/jobs/x/dispatch HTTP/1.1\r\nHost: localhost:" + port +
                   "\r\nOrigin: http://" + attacker +
                   "\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                   "Connection: close\r\n\r\n{}"),
            403);
  // The developer's own tools still work.
  EXPECT_EQ(status("GET /api/v1/executions HTTP/1.1\r\nHost: localhost:" + port +
                   "\r\nConnection: close\r\n\r\n"),
            200);
  EXPECT_EQ(status("GET /api/v1/executions HTTP/1.1\r\nHost: [::1]:" + port +
                   "\r\nConnection: close\r\n\r\n"),
            200);
}

// Finding 6. Held to 1024 descriptors, serve faces 1200 connections from 30
// addresses: half never send a byte, half send half a header. Other clients
// are still answered at once, and the silent ones are gone after the header
// timeout.
TEST_F(ServeHardeningTest, IdleAndHalfSentConnectionsDoNotLockClientsOut) {
  ASSERT_NO_FATAL_FAILURE(
      StartServe(Config("header_timeout_ms = 3000\n"), /*descriptor_limit=*/1024));
  constexpr int kAddresses = 30;
  constexpr int kPerAddress = 40;
  std::vector<std::unique_ptr<RawConnection>> held;
  held.reserve(kAddresses * kPerAddress);
  const auto open_start = SteadyClock::now();
  int connected = 0;
  for (int i = 0; i < kAddresses * kPerAddress; ++i) {
    const std::string source = "127.0.0." + std::to_string(i % kAddresses + 2);
    auto c = std::make_unique<RawConnection>(port_, source);
    if (c->connected()) {
      ++connected;
      if (i % 2 == 1) c->Send("GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
    }
    held.push_back(std::move(c));
  }
  const double open_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - open_start).count();

  double worst_health = 0;
  double worst_token = 0;
  int failures = 0;
  for (int i = 0; i < 10; ++i) {
    Timed h = Exchange(port_, "GET", "/healthz", "", "", "127.0.0.1", milliseconds(5000));
    Timed j = Exchange(port_, "GET", "/api/v1/jobs", token_, "", "127.0.0.1", milliseconds(5000));
    if (h.status != 200 || j.status != 200) ++failures;
    worst_health = std::max(worst_health, h.ms);
    worst_token = std::max(worst_token, j.ms);
  }
  std::printf(
      "idle connections: %d of %d connected in %.0f ms under a 1024-descriptor limit; "
      "/healthz worst %.1f ms, token call worst %.1f ms over 10 samples\n",
      connected, kAddresses * kPerAddress, open_ms, worst_health, worst_token);
  EXPECT_EQ(failures, 0);
  EXPECT_LT(worst_health, 1000);
  EXPECT_LT(worst_token, 1000);

  // After the header timeout every silent or half-sent connection is closed.
  const auto wait_start = SteadyClock::now();
  int closed = 0;
  for (auto& c : held) {
    if (!c->connected()) {
      ++closed;
      continue;
    }
    const auto left = milliseconds(10'000) -
                      std::chrono::duration_cast<milliseconds>(SteadyClock::now() - wait_start);
    c->Read(static_cast<int>(std::max(milliseconds(1), left).count()));
    ++closed;
  }
  const double drained_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - wait_start).count();
  std::printf("idle connections: all %d closed by the server within %.0f ms\n", closed, drained_ms);
  EXPECT_LT(drained_ms, 9000) << "silent connections outlived the header timeout";
  Timed after = Exchange(port_, "GET", "/healthz", "", "");
  EXPECT_EQ(after.status, 200);
}

}  // namespace
}  // namespace taskengine::testing
