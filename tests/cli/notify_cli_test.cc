// Failure notifications (I6) through the real binary: `serve` tells a failed
// execution to an e-mail address (a local SMTP server), a generic webhook
// and a Slack-style webhook (a local HTTP server, an [[http_target]]);
// `notify:test` reports each target's result; a serve SIGKILLed right after
// the failures loses none of their notifications and doubles none; and 12
// failures in an hour make exactly 10 e-mails, the 2 others told by a
// summary once serve's clock (libfaketime) is an hour later.
//
// Labelled drill, so that it runs in the Release tree: libfaketime cannot be
// preloaded into an AddressSanitizer build.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "drill_support.h"
#include "handlers/testing/test_servers.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;
using Json = nlohmann::json;

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

std::string Config(int smtp_port, int http_port) {
  return EngineSection(2) +
         "\n[notifications]\n"
         "from = \"taskengine@example.com\"\n"
         "smtp_url = \"smtp://127.0.0.1:" +
         std::to_string(smtp_port) +
         "\"\n"
         "smtp_tls = \"off\"\n"
         "dashboard_url = \"https://jobs.example.com\"\n"
         "\n[[http_target]]\n"
         "name = \"hook\"\n"
         "url = \"http://127.0.0.1:" +
         std::to_string(http_port) +
         "/in\"\n"
         "allow_http = true\n"
         "allow_hosts = [\"127.0.0.1\"]\n"
         "allow_private = [\"127.0.0.0/8\"]\n" +
         ShellJob("bad", "echo 'disk full' >&2; exit 3\n",
                  "max_attempts = 1\n"
                  "notify_targets = [\"ops@example.com\", \"webhook:hook\", \"slack:hook\"]");
}

std::string BodyOf(const std::string& request) {
  return request.substr(request.find("\r\n\r\n") + 4);
}

// How many e-mails and webhook documents name each execution.
struct Told {
  std::map<std::int64_t, int> emails;
  std::map<std::int64_t, int> documents;
  std::map<std::int64_t, int> texts;
};

Told Count(const TestSmtpServer& smtp, const TestServer& http) {
  Told t;
  for (const auto& m : smtp.messages()) {
    const auto at = m.data.find("Execution ");
    if (at != std::string::npos) ++t.emails[std::stoll(m.data.substr(at + 10))];
  }
  for (const std::string& r : http.requests()) {
    const Json body = Json::parse(BodyOf(r), nullptr, false);
    if (body.contains("execution")) {
      ++t.documents[body["execution"].value("id", std::int64_t{0})];
    } else if (body.contains("text")) {
      const std::string text = body["text"];
      const auto at = text.find("Execution ");
      if (at != std::string::npos) ++t.texts[std::stoll(text.substr(at + 10))];
    }
  }
  return t;
}

const char* kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

TEST(NotifyCliTest, AFailureIsToldByEmailWebhookAndSlack) {
  TestSmtpServer smtp;
  TestServer http(kOk);
  TaskengineInstall te(Config(smtp.port(), http.port()));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NE(te.StartServeOnEphemeralPort(&serve), 0);
  const std::int64_t id = DispatchJob(te, "bad");
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    return smtp.messages().size() >= 1 && http.requests().size() >= 2;
  })) << ReadFile(te.serve_log());

  const auto mail = smtp.messages().at(0);
  EXPECT_EQ(mail.to, (std::vector<std::string>{"<ops@example.com>"}));
  EXPECT_NE(
      mail.data.find("Subject: [taskengine] job bad failed (execution " + std::to_string(id) + ")"),
      std::string::npos)
      << mail.data;
  EXPECT_NE(mail.data.find("Error: "), std::string::npos) << mail.data;
  EXPECT_NE(mail.data.find("https://jobs.example.com/admin/tasks/executions/" + std::to_string(id)),
            std::string::npos)
      << mail.data;
  Told told = Count(smtp, http);
  EXPECT_EQ(told.emails[id], 1);
  EXPECT_EQ(told.documents[id], 1);
  EXPECT_EQ(told.texts[id], 1);
  for (const std::string& r : http.requests()) {
    const Json body = Json::parse(BodyOf(r), nullptr, false);
    if (!body.contains("execution")) continue;
    EXPECT_EQ(body["kind"], "failure");
    EXPECT_EQ(body["execution"]["status"], "failed");
    EXPECT_EQ(body["execution"]["attempt"], 1);
  }

  // The deliveries are executions of the internal job, visible like any other.
  Json list = te.RunJson({"execution:list", "--job", "taskengine.notify"});
  ASSERT_TRUE(list.contains("items")) << list.dump();
  EXPECT_EQ(list["items"].size(), 3u) << list.dump();
  // Nobody dispatches the internal job through the API or defines one like it.
  ProcessResult reserved = te.Run(
      {"job:create", "taskengine.mine", "--handler", "http", "--config", "{\"target\": \"hook\"}"});
  EXPECT_NE(reserved.exit_code, 0) << reserved.Describe();
  EXPECT_NE(reserved.err.find("reserved"), std::string::npos) << reserved.Describe();

  // notify:test: one delivery per target, each reported.
  ProcessResult test = te.Run({"notify:test", "bad", "--json", "--timeout", "30"});
  ASSERT_EQ(test.exit_code, 0) << test.Describe() << ReadFile(te.serve_log());
  const Json report = Json::parse(test.out);
  ASSERT_EQ(report["deliveries"].size(), 3u) << test.out;
  for (const auto& d : report["deliveries"]) EXPECT_EQ(d["result"], "sent") << test.out;
  EXPECT_EQ(smtp.messages().size(), 2u);
  EXPECT_NE(smtp.messages().back().data.find("test notification for job bad"), std::string::npos);
  StopServe(&serve);
}

TEST(NotifyCliTest, AKilledServeLosesNoNotificationAndDoublesNone) {
  TestSmtpServer smtp;
  TestServer http(kOk);
  TaskengineInstall te(Config(smtp.port(), http.port()));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NE(te.StartServeOnEphemeralPort(&serve), 0);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(DispatchJob(te, "bad", "{\"n\":" + std::to_string(i) + "}"));
  std::map<std::int64_t, Json> ended;
  ASSERT_TRUE(WaitAllTerminal(te, ids, milliseconds(30'000), &ended)) << ReadFile(te.serve_log());
  // The failures are committed, their notifications (most likely) not yet out.
  serve.Signal(SIGKILL);
  std::optional<int> killed = serve.Wait(milliseconds(10'000));
  ASSERT_TRUE(killed.has_value());
  ASSERT_TRUE(WIFSIGNALED(*killed) && WTERMSIG(*killed) == SIGKILL);

  ChildProcess restarted;
  ASSERT_NE(te.StartServeOnEphemeralPort(&restarted), 0);
  // Every ending is told to every target, unless a delivery the kill cut
  // short is surfaced (quarantined as ambiguous) instead of repeated. A
  // delivery the kill cut short runs again only after its lease expired (30 s)
  // and its retry's backoff (30 s and jitter): the wait covers both.
  auto surfaced = [&] {
    Json q =
        te.RunJson({"execution:list", "--job", "taskengine.notify", "--status", "quarantined"});
    return q.contains("items") ? q["items"].size() : 0u;
  };
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(120), [&] {
    Told t = Count(smtp, http);
    std::size_t told = 0;
    for (std::int64_t id : ids) told += t.emails[id] + t.documents[id] + t.texts[id];
    return told + surfaced() >= 3 * ids.size();
  })) << ReadFile(te.serve_log());
  Told t = Count(smtp, http);
  const std::size_t ambiguous = surfaced();
  for (std::int64_t id : ids) {
    EXPECT_LE(t.emails[id], 1) << id;
    EXPECT_LE(t.documents[id], 1) << id;
    EXPECT_LE(t.texts[id], 1) << id;
    // Exactly once, unless the kill cut that very delivery short (surfaced).
    if (ambiguous == 0) {
      EXPECT_EQ(t.emails[id] + t.documents[id] + t.texts[id], 3) << id;
    }
  }
  Json all = te.RunJson({"execution:list", "--job", "taskengine.notify", "--limit", "100"});
  EXPECT_EQ(all["items"].size(), 3 * ids.size()) << all.dump();
  StopServe(&restarted);
}

TEST(NotifyCliTest, TwelveFailuresInAnHourMakeTenEmailsAndASummaryOfTwo) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "libfaketime cannot be preloaded into an AddressSanitizer build";
#endif
  std::error_code ec;
  if (!std::filesystem::exists(kFaketime, ec)) {
    GTEST_SKIP() << "faketime is not installed (scripts/deps.sh test installs it)";
  }
  TestSmtpServer smtp;
  TestServer http(kOk);
  TaskengineInstall te(
      Config(smtp.port(), http.port()) +
      ShellJob("flaky", "exit 3\n", "max_attempts = 1\nnotify_targets = [\"ops@example.com\"]"));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NE(te.StartServeOnEphemeralPort(&serve), 0);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 12; ++i) {
    ids.push_back(DispatchJob(te, "flaky", "{\"n\":" + std::to_string(i) + "}"));
  }
  std::map<std::int64_t, Json> ended;
  ASSERT_TRUE(WaitAllTerminal(te, ids, milliseconds(30'000), &ended)) << ReadFile(te.serve_log());
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] { return smtp.messages().size() >= 10; }))
      << ReadFile(te.serve_log());
  // The notifier passes every second: a few more passes send nothing more.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(smtp.messages().size(), 10u);
  StopServe(&serve);

  // An hour later by serve's clock: the two suppressed failures are summarized.
  ChildProcess later;
  ASSERT_NE(te.StartServeOnEphemeralPort(
                &later, {std::string("LD_PRELOAD=") + kFaketime, "FAKETIME=+3700"}),
            0);
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] { return smtp.messages().size() >= 11; }))
      << ReadFile(te.serve_log());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const auto messages = smtp.messages();
  ASSERT_EQ(messages.size(), 11u);
  EXPECT_NE(messages.back().data.find("And 2 more failures of job flaky since"), std::string::npos)
      << messages.back().data;
  EXPECT_NE(messages.back().data.find("Subject: [taskengine] job flaky: 2 failures not notified"),
            std::string::npos)
      << messages.back().data;
  StopServe(&later);
}

}  // namespace
}  // namespace taskengine::testing
