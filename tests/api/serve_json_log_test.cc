// The real `taskengine serve` with TASKENGINE_LOG_FORMAT=json (I5): every
// line it writes to stdout and stderr is one JSON object with ts, level and
// msg; HTTP requests appear in the access log (method, path without the query
// string, status, duration) and neither the query string nor the bearer token
// is ever logged. /metrics of the real server includes the scheduler's
// families.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli_harness.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;

TEST(ServeJsonLogTest, EveryLineIsAJsonObjectWithAnAccessLog) {
  TaskengineInstall te(
      "[http]\nport = 0\nauth = false\n[engine]\nworker_threads = 1\n"
      "[[queue]]\nname = \"default\"\n"
      "[[job]]\nname = \"noop\"\nhandler = \"command\"\nconfig = { argv = [\"/bin/true\"] }\n");
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  SpawnOptions o;
  o.cwd = te.dir().path().string();
  o.stdout_path = te.serve_log();
  o.stderr_path = te.serve_log();
  o.env = ChildEnvironment({"TASKENGINE_LOG_FORMAT=json"});
  std::string error;
  ASSERT_TRUE(serve.Start(te.Argv({"serve"}), o, &error)) << error;
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());

  std::smatch m;
  const std::string started = ReadFile(te.serve_log());
  ASSERT_TRUE(
      std::regex_search(started, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))")))
      << started;
  const int port = std::stoi(m[1]);
  {
    api::testing::TestClient client(port);
    EXPECT_EQ(client.Get("/healthz").status, 200);
    api::testing::ClientResponse metrics =
        client.Request("GET", "/metrics?secret=query-secret-1234", "te_token-secret-5678");
    ASSERT_EQ(metrics.status, 200) << metrics.body;
    for (const char* family : {"# TYPE taskengine_scheduler_lag_seconds gauge",
                               "# TYPE taskengine_scheduler_skipped_fires_total counter",
                               "# TYPE taskengine_scheduler_cycle_duration_seconds gauge",
                               "taskengine_scheduler_cycles_total{result=\"leader\"}",
                               "# TYPE taskengine_cancel_latency_seconds histogram"}) {
      EXPECT_NE(metrics.body.find(family), std::string::npos) << family << "\n" << metrics.body;
    }
    // A single dispatch is answered from the store's commit with an answer
    // built where it is written (Responder::SendBuilt): logged all the same.
    api::testing::ClientResponse dispatched =
        client.Post("/api/v1/jobs/noop/dispatch", "", nlohmann::json::object());
    EXPECT_EQ(dispatched.status, 202) << dispatched.body;
    EXPECT_EQ(client.Get("/api/v1/nowhere").status, 404);
  }
  // The access log line is written as the response is handed over.
  ASSERT_TRUE(WaitUntil(milliseconds(5'000), [&] {
    return ReadFile(te.serve_log()).find("/api/v1/nowhere") != std::string::npos;
  })) << ReadFile(te.serve_log());

  serve.Signal(SIGTERM);
  std::optional<int> status = serve.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);

  const std::string log = ReadFile(te.serve_log());
  EXPECT_EQ(log.find("query-secret-1234"), std::string::npos) << "query strings are not logged";
  EXPECT_EQ(log.find("token-secret-5678"), std::string::npos) << "tokens are never logged";
  std::istringstream lines(log);
  int count = 0;
  bool saw_metrics = false;
  bool saw_not_found = false;
  bool saw_dispatch = false;
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    EXPECT_TRUE(j["ts"].is_string()) << line;
    EXPECT_TRUE(j["level"].is_string()) << line;
    EXPECT_TRUE(j["msg"].is_string()) << line;
    ++count;
    if (j["msg"] != "http request") continue;
    EXPECT_EQ(j["level"], "info") << line;
    EXPECT_TRUE(j["duration_ms"].is_number()) << line;
    EXPECT_TRUE(j["remote"].is_string()) << line;
    EXPECT_TRUE(j["remote"].get<std::string>().starts_with("127.0.0.1:"))
        << "address:port: " << line;
    if (j["path"] == "/metrics") {
      saw_metrics = true;
      EXPECT_EQ(j["method"], "GET") << line;
      EXPECT_EQ(j["status"], 200) << line;
    }
    if (j["path"] == "/api/v1/jobs/noop/dispatch") {
      saw_dispatch = true;
      EXPECT_EQ(j["method"], "POST") << line;
      EXPECT_EQ(j["status"], 202) << line;
    }
    if (j["path"] == "/api/v1/nowhere") {
      saw_not_found = true;
      EXPECT_EQ(j["status"], 404) << line;
    }
  }
  EXPECT_GE(count, 5);
  EXPECT_TRUE(saw_metrics) << log;
  EXPECT_TRUE(saw_not_found) << log;
  EXPECT_TRUE(saw_dispatch) << log;
}

// Text format (the default): the access log is at debug, which serve does not
// show, and other lines are not JSON.
TEST(ServeJsonLogTest, TextFormatKeepsTheAccessLogAtDebug) {
  TaskengineInstall te("[http]\nport = 0\nauth = false\n[engine]\nworker_threads = 1\n");
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());
  std::smatch m;
  const std::string started = ReadFile(te.serve_log());
  ASSERT_TRUE(
      std::regex_search(started, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))")))
      << started;
  {
    api::testing::TestClient client(std::stoi(m[1]));
    EXPECT_EQ(client.Get("/healthz").status, 200);
  }
  serve.Signal(SIGTERM);
  ASSERT_TRUE(serve.Wait(milliseconds(15'000)).has_value());
  const std::string log = ReadFile(te.serve_log());
  EXPECT_EQ(log.find("http request"), std::string::npos) << log;
  EXPECT_NE(log.find(" info listening on http://"), std::string::npos) << log;
  EXPECT_EQ(log.find("{\"ts\""), std::string::npos) << log;
}

}  // namespace
}  // namespace taskengine::testing
