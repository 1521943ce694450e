// The handler of the internal job `taskengine.notify` (product.md I6): one
// execution delivers one notification to one target. Its payload, written
// by the notifier (engine/notifier.h), never by a client:
//
//   {"target": "email:ops@example.com" | "webhook:NAME" | "slack:NAME",
//    "subject": "...", "text": "...", "document": {...}}
//
// Webhooks go through the `http` handler itself (http_handler.h): the
// [[http_target]] NAME says where, with its SSRF guard, pinning, timeouts,
// effect "http" and its ambiguity rules; the body is the document (webhook)
// or {"text": text} (slack).
//
// E-mail is the effect "email" of the execution (JobContext::Effect, not
// idempotent): reserved before anything is sent, committed when the server
// accepted the message. Over SMTP (libcurl: smtp:// with STARTTLS required
// unless configured off, or smtps://; auth when a user name is set):
//   - a failure before the message data was sent (connect, TLS, auth, a
//     refused sender or recipient) certainly sent nothing: the reservation is
//     given back and the attempt is retried (a 5xx refusal is permanent);
//   - a 4xx/5xx answer to the message data: refused, nothing delivered
//     (retried / permanent);
//   - a timeout or a broken connection after the data was sent: ambiguous —
//     the server may have accepted it — so the execution is quarantined and
//     the message is never sent twice.
// Through `sendmail` (argv from the configuration only; the message on its
// standard input): exit 0 = accepted; a failure to start = nothing sent
// (retried); EX_TEMPFAIL (75) = retried; another exit code = permanent; a
// timeout or a signal after the message was written = ambiguous.
//
// The message: From, To, Subject (CR/LF never pass: addresses are checked
// dot-atoms and the subject is stripped of control characters), Date,
// Message-ID <effect key@taskengine>, text/plain UTF-8, CRLF lines of at most
// 998 bytes.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/notify_settings.h"
#include "handlers/http_handler.h"
#include "taskengine/job.h"

namespace taskengine {

// Deliveries by channel and outcome, for /metrics. Thread-safe.
struct NotifyDeliveryCounters {
  std::atomic<std::int64_t> email_sent{0};
  std::atomic<std::int64_t> email_failed{0};
  std::atomic<std::int64_t> webhook_sent{0};
  std::atomic<std::int64_t> webhook_failed{0};
};

struct NotifyHandlerOptions {
  NotifySettings settings;  // from, smtp_*, sendmail
  // The webhook targets' [[http_target]]s and the http handler's options
  // (resolver, clock, timeouts); http.targets is what NAME resolves against.
  HttpHandlerOptions http;
  // The SMTP password (read from settings.smtp_password_env by the server).
  std::string smtp_password;
  // Whole SMTP transaction / sendmail run. Default: 30 s.
  std::chrono::milliseconds email_timeout{30'000};
  // Not owned; may be null.
  NotifyDeliveryCounters* counters = nullptr;
};

// The RFC 5322 message of one e-mail (CRLF line ends): headers, a blank
// line, the text. `message_id` without angle brackets. `now` for Date.
std::string BuildEmailMessage(std::string_view from, std::string_view to, std::string_view subject,
                              std::string_view text, std::string_view message_id, Millis now);

Handler MakeNotifyHandler(NotifyHandlerOptions options);

// Appends taskengine_notification_deliveries_total{channel, result}.
void AppendDeliveryMetrics(const NotifyDeliveryCounters& counters, std::string* out);

}  // namespace taskengine
