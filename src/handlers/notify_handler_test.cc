// The delivery handler of failure notifications (I6) against local sinks: an
// SMTP server and an HTTP server on 127.0.0.1, and a sendmail stand-in
// script. What each outcome does to the effect ledger: delivered (committed),
// certainly not delivered (reservation given back: a retry sends it), unknown
// (kept: a retry meets `ambiguous`, the execution is quarantined).
#include "handlers/notify_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/notify_target.h"
#include "handlers/testing/fake_job_context.h"
#include "handlers/testing/test_servers.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;
using Kind = HandlerResult::Kind;
using Json = nlohmann::json;

std::string Payload(const std::string& target) {
  return Json{{"target", target},
              {"subject", "[taskengine] job bad failed (execution 42)"},
              {"text", "Execution 42 of job bad failed.\n.leading dot line\nError: boom"},
              {"document", {{"kind", "failure"}, {"execution", {{"id", 42}}}}}}
      .dump();
}

// A sendmail stand-in in `dir`: a shell script with `body`; its path.
std::string SendmailScript(const TempDir& dir, const std::string& body) {
  const std::string script = dir.File("sendmail.sh");
  {
    std::ofstream f(script);
    f << "#!/bin/sh\n" << body;
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  return script;
}

NotifyHandlerOptions SmtpOptions(int port) {
  NotifyHandlerOptions o;
  o.settings.smtp_url = "smtp://127.0.0.1:" + std::to_string(port);
  o.settings.smtp_tls = SmtpTls::kOff;
  o.settings.from = "taskengine@example.com";
  o.email_timeout = std::chrono::milliseconds(3'000);
  return o;
}

TEST(NotifyHandlerTest, AnEmailIsSentOnceAndItsEffectCommitted) {
  TestSmtpServer smtp;
  NotifyDeliveryCounters counters;
  NotifyHandlerOptions o = SmtpOptions(smtp.port());
  o.counters = &counters;
  Handler h = MakeNotifyHandler(o);
  FakeJobContext ctx;
  ctx.payload = Payload("email:ops@example.com");
  HandlerResult r = h(ctx);
  ASSERT_EQ(r.kind, Kind::kSuccess) << r.error;
  auto messages = smtp.messages();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].from, "<taskengine@example.com>");
  EXPECT_EQ(messages[0].to, (std::vector<std::string>{"<ops@example.com>"}));
  EXPECT_THAT(messages[0].data,
              HasSubstr("Subject: [taskengine] job bad failed (execution 42)\r\n"));
  EXPECT_THAT(messages[0].data, HasSubstr("To: ops@example.com\r\n"));
  EXPECT_THAT(messages[0].data, HasSubstr("Message-ID: <42:email@taskengine>\r\n"));
  EXPECT_THAT(messages[0].data, HasSubstr("\r\n\r\nExecution 42 of job bad failed.\r\n"));
  EXPECT_THAT(messages[0].data, HasSubstr("\r\n.leading dot line\r\n"));  // dot-stuffed on the wire
  EXPECT_EQ(ctx.committed_effects().count("email"), 1u);
  EXPECT_EQ(counters.email_sent.load(), 1);

  // The retry of a claim that already sent it: nothing goes out again.
  EXPECT_EQ(h(ctx).kind, Kind::kSuccess);
  EXPECT_EQ(smtp.messages().size(), 1u);
}

TEST(NotifyHandlerTest, ARefusedRecipientIsPermanentAndNothingStaysReserved) {
  TestSmtpServer smtp(TestSmtpServer::Mode::kRefuseRecipient);
  Handler h = MakeNotifyHandler(SmtpOptions(smtp.port()));
  FakeJobContext ctx;
  ctx.payload = Payload("email:nobody@example.com");
  HandlerResult r = h(ctx);
  EXPECT_EQ(r.kind, Kind::kPermanent) << r.error;
  EXPECT_THAT(r.error, HasSubstr("refused"));
  EXPECT_FALSE(ctx.HasOpenReservation("email"));
  EXPECT_TRUE(smtp.messages().empty());
}

TEST(NotifyHandlerTest, NoServerIsRetryableAndTheRetryProceeds) {
  int port = 0;
  {
    TestSmtpServer gone;  // bound, then closed: nothing listens there
    port = gone.port();
  }
  Handler h = MakeNotifyHandler(SmtpOptions(port));
  FakeJobContext ctx;
  ctx.payload = Payload("ops@example.com");
  HandlerResult r = h(ctx);
  EXPECT_EQ(r.kind, Kind::kRetryable) << r.error;
  EXPECT_FALSE(ctx.HasOpenReservation("email"));
}

TEST(NotifyHandlerTest, NoAnswerAfterTheMessageIsAmbiguousAndNeverSentTwice) {
  TestSmtpServer smtp(TestSmtpServer::Mode::kHangAfterData);
  NotifyHandlerOptions o = SmtpOptions(smtp.port());
  o.email_timeout = std::chrono::milliseconds(1'000);
  Handler h = MakeNotifyHandler(o);
  FakeJobContext ctx;
  ctx.payload = Payload("ops@example.com");
  HandlerResult r = h(ctx);
  EXPECT_EQ(r.kind, Kind::kAmbiguous) << r.error;  // the outcome is unknown: surfaced
  EXPECT_TRUE(ctx.HasOpenReservation("email"));
  // The next claim meets `ambiguous` and sends nothing.
  FakeJobContext next;
  next.payload = ctx.payload;
  next.AddAmbiguousEffect("email");
  EXPECT_EQ(h(next).kind, Kind::kAmbiguous);
  EXPECT_EQ(smtp.connections(), 1);
}

TEST(NotifyHandlerTest, SendmailGetsTheMessageOnItsStandardInput) {
  TempDir dir;
  const std::string out = dir.File("mail.txt");
  const std::string script = SendmailScript(dir, "cat > \"$1\"\nexit \"$2\"\n");
  NotifyHandlerOptions o;
  o.settings.from = "taskengine@example.com";
  o.settings.sendmail = {"/bin/sh", script, out, "0"};
  FakeJobContext ctx;
  ctx.payload = Payload("ops@example.com");
  HandlerResult r = MakeNotifyHandler(o)(ctx);
  ASSERT_EQ(r.kind, Kind::kSuccess) << r.error;
  std::ifstream in(out);
  const std::string mail((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(mail, HasSubstr("To: ops@example.com\r\n"));
  EXPECT_THAT(mail, HasSubstr("Error: boom\r\n"));

  o.settings.sendmail = {"/bin/sh", script, out, "75"};  // EX_TEMPFAIL
  FakeJobContext temp;
  temp.payload = ctx.payload;
  EXPECT_EQ(MakeNotifyHandler(o)(temp).kind, Kind::kRetryable);
  EXPECT_FALSE(temp.HasOpenReservation("email"));
  o.settings.sendmail = {"/bin/sh", script, out, "1"};
  FakeJobContext bad;
  bad.payload = ctx.payload;
  EXPECT_EQ(MakeNotifyHandler(o)(bad).kind, Kind::kPermanent);
}

// A sendmail that exits without reading its input: the message (larger
// than a pipe's buffer) meets a closed pipe. That write fails with EPIPE and
// must not raise SIGPIPE, whose default action (in force here, as in an
// application that embeds the engine) would end the process.
TEST(NotifyHandlerTest, ASendmailThatDoesNotReadIsATemporaryFailureNotASignal) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL);
  TempDir dir;
  const std::string script = SendmailScript(dir, "exec 0<&-\nsleep 0.2\nexit 75\n");
  NotifyHandlerOptions o;
  o.settings.from = "taskengine@example.com";
  o.settings.sendmail = {"/bin/sh", script};
  FakeJobContext ctx;
  ctx.payload = Json{{"target", "ops@example.com"},
                     {"subject", "[taskengine] job bad failed (execution 42)"},
                     {"text", std::string(256 * 1024, 'x')},
                     {"document", {{"kind", "failure"}}}}
                    .dump();
  const HandlerResult r = MakeNotifyHandler(o)(ctx);
  EXPECT_EQ(r.kind, Kind::kRetryable) << r.error;
  EXPECT_THAT(r.error, HasSubstr("exit 75"));
}

TEST(NotifyHandlerTest, WebhooksPostTheDocumentAndSlackTheText) {
  TestServer server("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
  NotifyHandlerOptions o;
  o.http.targets["hook"] = Json{
      {"url", "http://127.0.0.1:" + std::to_string(server.port()) + "/in"},
      {"allow_http", true},
      {"allow_hosts", {"127.0.0.1"}},
      {"allow_private",
       {"127.0.0.0/8"}}}.dump();
  NotifyDeliveryCounters counters;
  o.counters = &counters;
  Handler h = MakeNotifyHandler(o);
  FakeJobContext hook;
  hook.payload = Payload("webhook:hook");
  ASSERT_EQ(h(hook).kind, Kind::kSuccess);
  FakeJobContext slack;
  slack.execution_id_value = ExecutionId(43);
  slack.payload = Payload("slack:hook");
  ASSERT_EQ(h(slack).kind, Kind::kSuccess);
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  const Json doc = Json::parse(requests[0].substr(requests[0].find("\r\n\r\n") + 4));
  EXPECT_EQ(doc["kind"], "failure");
  EXPECT_EQ(doc["execution"]["id"], 42);
  EXPECT_THAT(requests[0], HasSubstr("Idempotency-Key: 42:http"));
  const Json text = Json::parse(requests[1].substr(requests[1].find("\r\n\r\n") + 4));
  EXPECT_EQ(text,
            (Json{{"text", "Execution 42 of job bad failed.\n.leading dot line\nError: boom"}}));
  EXPECT_EQ(counters.webhook_sent.load(), 2);

  // A name no [[http_target]] has: refused before anything is sent.
  FakeJobContext unknown;
  unknown.payload = Payload("webhook:other");
  EXPECT_EQ(h(unknown).kind, Kind::kPermanent);
}

TEST(NotifyHandlerTest, MessagesCannotCarryInjectedHeaders) {
  const std::string m = BuildEmailMessage("a@example.com", "b@example.com",
                                          "hi\r\nBcc: victim@example.com", "x", "1:email", 0);
  EXPECT_THAT(m, HasSubstr("Subject: hi  Bcc: victim@example.com\r\n"));
  EXPECT_EQ(m.find("\r\nBcc:"), std::string::npos);
  const std::string utf8 = BuildEmailMessage("a@example.com", "b@example.com", "Läuft nicht",
                                             std::string(2'000, 'x'), "1:email", 0);
  EXPECT_THAT(utf8, HasSubstr("Subject: =?UTF-8?B?TMOkdWZ0IG5pY2h0?=\r\n"));
  for (std::size_t start = 0, end; (end = utf8.find("\r\n", start)) != std::string::npos;
       start = end + 2) {
    EXPECT_LE(end - start, 998u);
  }
  EXPECT_FALSE(ParseNotifyTarget("a@b.c\r\nRCPT TO:<x@y>").ok());
}

}  // namespace
}  // namespace taskengine
