// Lifecycle log lines (issue 14, item 9), through the real `taskengine serve`
// with --log-format=json: every terminal outcome of the node's work is exactly
// one line (execution.completed, execution.failed, execution.aborted) with
// execution id, job, tenant, status, attempt, duration and failure class;
// admissions, retries and the pool's start and stop have their own stable
// event names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <map>
#include <sstream>
#include <vector>

#include "cli_harness.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::TestClient;
using nlohmann::json;

constexpr const char* kConfig = R"(
[log]
format = "json"

[engine]
worker_threads = 2
poll_interval_ms = 50
sweep_interval_ms = 200
shutdown_grace_ms = 5000

[[job]]
name = "ok"
handler = "command"
config = { argv = ["/bin/sh", "-c", "echo '{\"result\": 1}'"] }

[[job]]
name = "flaky"
handler = "command"
max_attempts = 2
backoff_base_ms = 100
backoff_cap_ms = 100
config = { argv = ["/bin/sh", "-c", "exit 75"] }

[[job]]
name = "slow"
handler = "command"
config = { argv = ["/bin/sh", "-c", "sleep 30"] }
)";

std::string IdText(const json& id) {
  return id.is_string() ? id.get<std::string>() : std::to_string(id.get<std::int64_t>());
}

TEST(LifecycleLogTest, EveryTerminalOutcomeIsOneLineWithItsFields) {
  TaskengineInstall te(kConfig);
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  json token = te.RunJson({"token:create", "--name", "ops", "--scopes", "admin"});
  ASSERT_TRUE(token.is_object());
  const std::string secret = token.value("secret", "");
  ChildProcess serve;
  const int port = te.StartServeOnEphemeralPort(&serve);
  ASSERT_NE(port, 0);
  TestClient client(port);

  std::map<std::string, std::string> ids;  // job -> execution id
  for (const char* job : {"ok", "flaky", "slow"}) {
    ClientResponse r =
        client.Post(std::string("/api/v1/jobs/") + job + "/dispatch", secret, json::object());
    ASSERT_EQ(r.status, 202) << r.body;
    ids[job] = IdText(r.json()["id"]);
  }
  const auto status_of = [&](const std::string& id) {
    ClientResponse r = client.Get("/api/v1/executions/" + id, secret);
    return r.status == 200 ? r.json().value("status", "") : "";
  };
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    return status_of(ids["ok"]) == "succeeded" && status_of(ids["flaky"]) == "failed" &&
           status_of(ids["slow"]) == "running";
  })) << ReadFile(te.serve_log());
  ClientResponse cancel =
      client.Post("/api/v1/executions/" + ids["slow"] + "/cancel", secret, {{"reason", "test"}});
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    return status_of(ids["slow"]) == "canceled";
  })) << ReadFile(te.serve_log());
  serve.Signal(SIGTERM);
  ASSERT_TRUE(serve.Wait(std::chrono::seconds(20)).has_value());

  std::map<std::string, std::vector<json>> by_event;
  std::istringstream lines(ReadFile(te.serve_log()));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON object: " << line;
    if (j.contains("event")) {
      EXPECT_EQ(j["msg"], j["event"]) << line;
      EXPECT_EQ(j["level"], "info") << line;
      by_event[j["event"].get<std::string>()].push_back(j);
    }
  }
  const auto lines_of = [&](const std::string& event, const std::string& id) {
    std::vector<json> out;
    for (const json& j : by_event[event]) {
      if (j.value("execution_id", "") == id) out.push_back(j);
    }
    return out;
  };
  const auto terminal_lines = [&](const std::string& id) {
    std::size_t n = 0;
    for (const char* e : {"execution.completed", "execution.failed", "execution.aborted"}) {
      n += lines_of(e, id).size();
    }
    return n;
  };
  for (const auto& [job, id] : ids) {
    SCOPED_TRACE(job);
    EXPECT_EQ(terminal_lines(id), 1u) << "exactly one terminal line";
    std::vector<json> dispatched = lines_of("execution.dispatched", id);
    ASSERT_EQ(dispatched.size(), 1u);
    EXPECT_EQ(dispatched[0]["job"], job);
    EXPECT_EQ(dispatched[0]["trigger"], "api");
    EXPECT_TRUE(dispatched[0]["tenant"].is_null());
  }

  std::vector<json> completed = lines_of("execution.completed", ids["ok"]);
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0]["job"], "ok");
  EXPECT_EQ(completed[0]["status"], "succeeded");
  EXPECT_EQ(completed[0]["attempt"], 1);
  EXPECT_TRUE(completed[0]["duration_ms"].is_number_integer()) << completed[0].dump();
  EXPECT_TRUE(completed[0]["failure_class"].is_null());
  EXPECT_TRUE(completed[0]["worker"].is_string());

  std::vector<json> retried = lines_of("execution.retried", ids["flaky"]);
  ASSERT_EQ(retried.size(), 1u) << "two attempts: one retry";
  EXPECT_EQ(retried[0]["attempt"], 1);
  EXPECT_EQ(retried[0]["failure_class"], "retryable");
  EXPECT_TRUE(retried[0]["run_at"].is_string());
  std::vector<json> failed = lines_of("execution.failed", ids["flaky"]);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0]["status"], "failed");
  EXPECT_EQ(failed[0]["attempt"], 2);
  EXPECT_EQ(failed[0]["failure_class"], "retryable");

  std::vector<json> aborted = lines_of("execution.aborted", ids["slow"]);
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0]["status"], "canceled");

  ASSERT_EQ(by_event["worker.started"].size(), 1u);
  ASSERT_EQ(by_event["worker.stopped"].size(), 1u);
  EXPECT_EQ(by_event["worker.started"][0]["threads"], 2);
  EXPECT_THAT(by_event["worker.started"][0].value("worker", ""), ::testing::EndsWith(":pool"));
}

// [log] lifecycle = false turns the lines off (high-rate deployments).
TEST(LifecycleLogTest, CanBeTurnedOff) {
  std::string config = kConfig;
  config.replace(config.find("format = \"json\"\n"), 16, "format = \"json\"\nlifecycle = false\n");
  TaskengineInstall quiet(config);
  ASSERT_EQ(quiet.Run({"migrate"}).exit_code, 0);
  ASSERT_EQ(quiet.Run({"job:dispatch", "ok"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NE(quiet.StartServeOnEphemeralPort(&serve), 0);
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    json list = quiet.RunJson({"execution:list", "--status", "succeeded"});
    return list.is_object() && list["items"].size() == 1;
  }));
  serve.Signal(SIGTERM);
  ASSERT_TRUE(serve.Wait(std::chrono::seconds(20)).has_value());
  EXPECT_EQ(ReadFile(quiet.serve_log()).find("\"event\""), std::string::npos)
      << ReadFile(quiet.serve_log());
}

}  // namespace
}  // namespace taskengine::testing
