#include "handlers/notify_handler.h"

#include <curl/curl.h>
#include <poll.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/notify_target.h"
#include "core/prometheus_text.h"
#include "platform/process.h"
#include "platform/sigpipe.h"

namespace taskengine {
namespace {

constexpr std::size_t kMaxLineBytes = 998;  // RFC 5322 §2.1.1, without CRLF
constexpr int kExTempFail = 75;             // sysexits.h EX_TEMPFAIL

// A JobContext that shows a handler another payload and config and forwards
// everything else (the effect ledger, leases, logs) to the real one.
class RewrittenContext final : public JobContext {
 public:
  RewrittenContext(JobContext& inner, std::string payload, std::string config)
      : inner_(inner), payload_(std::move(payload)), config_(std::move(config)) {}

  ExecutionId execution_id() const override { return inner_.execution_id(); }
  const JobName& job() const override { return inner_.job(); }
  const TenantId& tenant() const override { return inner_.tenant(); }
  int attempt() const override { return inner_.attempt(); }
  ClaimVersion claim_version() const override { return inner_.claim_version(); }
  const std::string& payload_json() const override { return payload_; }
  const std::string& config_json() const override { return config_; }
  Millis timeout_ms() const override { return inner_.timeout_ms(); }
  std::string effect_key_prefix() const override { return inner_.effect_key_prefix(); }
  void SetProgress(int percent) override { inner_.SetProgress(percent); }
  void Log(LogLevel level, std::string_view message) override { inner_.Log(level, message); }
  LeaseState Heartbeat() override { return inner_.Heartbeat(); }
  LeaseState Checkpoint() override { return inner_.Checkpoint(); }
  Result<EffectResult> ReserveEffect(std::string_view name) override {
    return inner_.ReserveEffect(name);
  }
  Status CommitEffect(std::string_view name, std::string_view detail) override {
    return inner_.CommitEffect(name, detail);
  }
  Status ReleaseEffect(std::string_view name) override { return inner_.ReleaseEffect(name); }

 private:
  JobContext& inner_;
  const std::string payload_;
  const std::string config_;
};

// Control characters (CR, LF, ...) become spaces: a header value stays one line.
std::string OneLine(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  return out;
}

// RFC 2047 encoded-word for a header with non-ASCII bytes; as is otherwise.
std::string HeaderText(std::string_view s) {
  const std::string line = OneLine(s);
  bool ascii = true;
  for (char c : line) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return line;
  std::string b64(sodium_base64_ENCODED_LEN(line.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(b64.data(), b64.size(), reinterpret_cast<const unsigned char*>(line.data()),
                    line.size(), sodium_base64_VARIANT_ORIGINAL);
  b64.resize(b64.size() - 1);  // the terminating NUL
  return "=?UTF-8?B?" + b64 + "?=";
}

std::string MailDate(Millis now) {
  const std::time_t t = static_cast<std::time_t>(now / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S +0000", &tm);
  return std::string(buf, n);
}

// The body as CRLF lines of at most kMaxLineBytes (longer ones are broken,
// never inside a UTF-8 sequence); lone CRs dropped.
std::string BodyLines(std::string_view text) {
  std::string out;
  std::size_t line = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\r') continue;
    if (c == '\n') {
      out += "\r\n";
      line = 0;
      continue;
    }
    const bool continuation = (static_cast<unsigned char>(c) & 0xC0) == 0x80;
    if (line >= kMaxLineBytes - 4 && !continuation) {
      out += "\r\n";
      line = 0;
    }
    out += c;
    ++line;
  }
  if (out.empty() || !out.ends_with("\r\n")) out += "\r\n";
  return out;
}

struct Payload {
  NotifyTarget target;
  std::string subject;
  std::string text;
  std::string document;  // JSON text
};

Result<Payload> ParsePayload(const std::string& json) {
  const nlohmann::json p = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!p.is_object() || !p.contains("target") || !p["target"].is_string() ||
      !p.contains("subject") || !p["subject"].is_string() || !p.contains("text") ||
      !p["text"].is_string()) {
    return InvalidArgument("a notification payload needs target, subject and text strings");
  }
  Payload out;
  TE_ASSIGN_OR_RETURN(out.target, ParseNotifyTarget(p["target"].get<std::string>()));
  out.subject = p["subject"].get<std::string>();
  out.text = p["text"].get<std::string>();
  out.document = p.contains("document") ? p["document"].dump() : "{}";
  return out;
}

// --- SMTP ---

struct Upload {
  const std::string* data = nullptr;
  std::size_t offset = 0;
  bool started = false;  // the message data began to go out
};

std::size_t ReadUpload(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto* u = static_cast<Upload*>(user);
  u->started = true;
  const std::size_t n = std::min(size * count, u->data->size() - u->offset);
  std::memcpy(buffer, u->data->data() + u->offset, n);
  u->offset += n;
  return n;
}

// kUnavailable: certainly not delivered, try again later. kInvalidArgument:
// refused for good. kInternal: the outcome is unknown (ambiguous).
Result<std::string> SendSmtp(const NotifyHandlerOptions& o, const std::string& to,
                             const std::string& message) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return Unavailable("smtp: cannot create a libcurl handle");
  CURL* c = curl.get();
  Upload upload{&message, 0, false};
  const std::string from = "<" + o.settings.from + ">";
  curl_slist* rcpt = curl_slist_append(nullptr, ("<" + to + ">").c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> rcpt_guard(rcpt,
                                                                         &curl_slist_free_all);
  curl_easy_setopt(c, CURLOPT_URL, o.settings.smtp_url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt);
  curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, &ReadUpload);
  curl_easy_setopt(c, CURLOPT_READDATA, &upload);
  curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(message.size()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(o.email_timeout.count()));
  // Also bounds the wait for the answer to QUIT when the handle is cleaned
  // up after a failure (libcurl has no overall deadline for that).
  curl_easy_setopt(c, CURLOPT_SERVER_RESPONSE_TIMEOUT,
                   static_cast<long>(std::max<std::int64_t>(1, o.email_timeout.count() / 1000)));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<std::int64_t>(o.email_timeout.count(), 10'000)));
  if (o.settings.smtp_url.starts_with("smtp://")) {
    const long use_ssl =
        o.settings.smtp_tls == SmtpTls::kRequired ? CURLUSESSL_ALL : CURLUSESSL_NONE;
    curl_easy_setopt(c, CURLOPT_USE_SSL, use_ssl);
  }
  if (!o.settings.smtp_username.empty()) {
    curl_easy_setopt(c, CURLOPT_USERNAME, o.settings.smtp_username.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, o.smtp_password.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  if (rc == CURLE_OK) return "smtp " + std::to_string(code);
  const std::string why = std::string(curl_easy_strerror(rc)) +
                          (code > 0 ? " (last reply " + std::to_string(code) + ")" : "");
  const bool data_done = upload.started && upload.offset == message.size();
  if (!upload.started || (data_done && code >= 400)) {
    // Nothing went out, or the server refused the message it was sent.
    if (code >= 500) return InvalidArgument("smtp: refused: " + why);
    return Unavailable("smtp: not sent: " + why);
  }
  return Internal("smtp: the outcome is unknown after the message was sent: " + why);
}

// --- sendmail ---

Result<std::string> SendWithProgram(const NotifyHandlerOptions& o, const std::string& message) {
  SpawnOptions spawn;
  spawn.argv = o.settings.sendmail;
  spawn.env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  spawn.stdin_spec = StdioSpec::Pipe();
  auto started = Process::Spawn(spawn);
  if (!started.ok()) return Unavailable("sendmail: " + started.status().message());
  Process p = std::move(started).value();
  const auto deadline = std::chrono::steady_clock::now() + o.email_timeout;
  std::size_t written = 0;
  bool wrote_any = false;
  // A program that stops reading makes the write fail with EPIPE.
  ScopedSigpipeBlock no_sigpipe;
  while (written < message.size()) {
    const ssize_t n =
        ::write(p.stdin_pipe().get(), message.data() + written, message.size() - written);
    if (n > 0) {
      written += static_cast<std::size_t>(n);
      wrote_any = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd pfd{p.stdin_pipe().get(), POLLOUT, 0};
      ::poll(&pfd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
      continue;
    }
    break;  // EPIPE: the program stopped reading
  }
  p.stdin_pipe().Reset();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  std::optional<ExitStatus> exit = p.Wait(std::max(left, std::chrono::milliseconds(1)));
  if (!exit) {
    p.Kill();
    if (!wrote_any) return Unavailable("sendmail: timed out before reading the message");
    return Internal("sendmail: timed out after the message was written; the outcome is unknown");
  }
  if (exit->exited() && exit->code == 0 && written == message.size())
    return std::string("sendmail exit 0");
  if (exit->exited() && exit->code == kExTempFail) {
    return Unavailable("sendmail: temporary failure (exit 75)");
  }
  if (exit->exited() && exit->code != 0) {
    return InvalidArgument("sendmail: " + exit->ToString());
  }
  if (!wrote_any) return Unavailable("sendmail: " + exit->ToString() + " before the message");
  return Internal("sendmail: " + exit->ToString() + " after the message was written");
}

class NotifyHandler {
 public:
  explicit NotifyHandler(NotifyHandlerOptions options)
      : options_(std::move(options)), http_(MakeHttpHandler(options_.http)) {}

  HandlerResult operator()(JobContext& ctx) const {
    auto payload = ParsePayload(ctx.payload_json());
    if (!payload.ok()) return HandlerResult::Permanent(payload.status().message());
    const NotifyTarget& target = payload->target;
    if (target.channel == NotifyChannel::kEmail) return Email(ctx, *payload);
    std::string body;
    if (target.channel == NotifyChannel::kSlack) {
      body = nlohmann::json{{"text", payload->text}}.dump();
    } else {
      body = payload->document;
    }
    const std::string config = nlohmann::json{{std::string(kHttpTargetKey), target.address}}.dump();
    RewrittenContext rewritten(ctx, std::move(body), config);
    HandlerResult r = http_(rewritten);
    Count(r.kind == HandlerResult::Kind::kSuccess, false);
    return r;
  }

 private:
  HandlerResult Email(JobContext& ctx, const Payload& payload) const {
    if (options_.settings.sendmail.empty() && options_.settings.smtp_url.empty()) {
      Count(false, true);
      return HandlerResult::Permanent(
          "e-mail is not configured: set [notifications] smtp_url or sendmail");
    }
    const std::string& to = payload.target.address;
    EffectResult r = ctx.Effect(
        "email", EffectSink::kNotIdempotent, [&](const std::string& key) -> Result<std::string> {
          const std::string message =
              BuildEmailMessage(options_.settings.from, to, payload.subject, payload.text,
                                key + "@taskengine", NowMillis());
          if (!options_.settings.sendmail.empty()) {
            return SendWithProgram(options_, message);
          }
          return SendSmtp(options_, to, message);
        });
    if (r.done()) {
      Count(true, true);
      return HandlerResult::Success(nlohmann::json{{"email", r.detail}}.dump());
    }
    Count(false, true);
    if (r.error.code() == ErrorCode::kInvalidArgument) {
      // Refused for good: certainly not delivered, so the reservation goes
      // back (a replay sends it, instead of meeting `ambiguous`).
      (void)ctx.ReleaseEffect("email");
      return HandlerResult::Permanent(r.error.message());
    }
    if (r.error.code() == ErrorCode::kInternal) {
      // Sent, and no answer: the server may have accepted it. The reservation
      // stays, so no later attempt sends it again; an operator decides.
      return HandlerResult::Ambiguous(r.error.message());
    }
    return r.ToHandlerResult();
  }

  Millis NowMillis() const {
    return options_.http.clock != nullptr ? options_.http.clock->NowMillis()
                                          : SystemClock::Get()->NowMillis();
  }

  void Count(bool sent, bool email) const {
    NotifyDeliveryCounters* c = options_.counters;
    if (c == nullptr) return;
    auto& counter = email ? (sent ? c->email_sent : c->email_failed)
                          : (sent ? c->webhook_sent : c->webhook_failed);
    counter.fetch_add(1, std::memory_order_relaxed);
  }

  const NotifyHandlerOptions options_;
  const Handler http_;
};

}  // namespace

std::string BuildEmailMessage(std::string_view from, std::string_view to, std::string_view subject,
                              std::string_view text, std::string_view message_id, Millis now) {
  std::string m;
  m += "Date: " + MailDate(now) + "\r\n";
  m += "From: " + OneLine(from) + "\r\n";
  m += "To: " + OneLine(to) + "\r\n";
  m += "Subject: " + HeaderText(subject) + "\r\n";
  m += "Message-ID: <" + OneLine(message_id) + ">\r\n";
  m += "MIME-Version: 1.0\r\n";
  m += "Content-Type: text/plain; charset=utf-8\r\n";
  m += "Content-Transfer-Encoding: 8bit\r\n";
  m += "Auto-Submitted: auto-generated\r\n";
  m += "\r\n";
  m += BodyLines(text);
  return m;
}

Handler MakeNotifyHandler(NotifyHandlerOptions options) {
  auto handler = std::make_shared<NotifyHandler>(std::move(options));
  return [handler](JobContext& ctx) { return (*handler)(ctx); };
}

void AppendDeliveryMetrics(const NotifyDeliveryCounters& c, std::string* out) {
  MetricsWriter w(out);
  w.Family("taskengine_notification_deliveries_total", "counter",
           "Delivery attempts of failure notifications on this node, by channel and result "
           "(sent: the server or sink accepted it; failed: the attempt failed, see the "
           "taskengine.notify execution).");
  const struct {
    const char* channel;
    const char* result;
    std::int64_t value;
  } rows[] = {{"email", "sent", c.email_sent.load()},
              {"email", "failed", c.email_failed.load()},
              {"webhook", "sent", c.webhook_sent.load()},
              {"webhook", "failed", c.webhook_failed.load()}};
  for (const auto& r : rows) {
    w.Sample("taskengine_notification_deliveries_total",
             "{channel=\"" + std::string(r.channel) + "\",result=\"" + r.result + "\"}",
             static_cast<double>(r.value));
  }
}

}  // namespace taskengine
