// The `http` handler: config parsing, the SSRF guard (resolution and
// pinning over the address classes of ssrf_guard.h) and one libcurl transfer
// per run. See http_handler.h for the contract.
//
// A run keeps all of its state on its own stack (a Transfer) and its own
// libcurl easy handle, so concurrent runs share nothing but libcurl's global
// state, initialized once.
#include "handlers/http_handler.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/utf8.h"

namespace taskengine {
namespace {

using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// Most bytes of the response header fields kept (only Retry-After is read).
constexpr std::size_t kMaxRetryAfterBytes = 256;
// Largest configurable response cap and timeout (bounds mistakes, not policy).
constexpr std::int64_t kMaxResponseCap = 64LL << 20;
constexpr std::int64_t kMaxHttpTimeoutMs = 24LL * 3600 * 1000;
// Largest Retry-After honoured.
constexpr Millis kMaxRetryAfterMs = 24LL * 3600 * 1000;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// --- config ------------------------------------------------------------------

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool IsValidHeaderValue(std::string_view v) {
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u == '\r' || u == '\n' || u == 0 || (u < 0x20 && u != '\t') || u == 0x7F) return false;
  }
  return true;
}

bool HostMatches(const std::string& host, const std::string& pattern) {
  if (pattern.size() > 2 && pattern[0] == '*' && pattern[1] == '.') {
    const std::string_view suffix = std::string_view(pattern).substr(1);  // ".example.com"
    return host.size() > suffix.size() && std::string_view(host).ends_with(suffix);
  }
  return host == pattern;
}

struct CurlUrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

// Splits `url` with libcurl's own parser, so the handler checks exactly the
// host libcurl will connect to.
Status ParseUrlInto(const std::string& url, HttpHandlerConfig& config) {
  std::unique_ptr<CURLU, CurlUrlDeleter> u(curl_url());
  if (!u) return Internal("out of memory");
  if (curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) {
    return InvalidArgument("url: not a valid absolute URL");
  }
  auto part = [&](CURLUPart what, unsigned int flags) -> std::optional<std::string> {
    char* p = nullptr;
    if (curl_url_get(u.get(), what, &p, flags) != CURLUE_OK || p == nullptr) return std::nullopt;
    std::string s(p);
    curl_free(p);
    return s;
  };
  auto scheme = part(CURLUPART_SCHEME, 0);
  auto host = part(CURLUPART_HOST, 0);
  auto port = part(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  if (!scheme || !host || !port) return InvalidArgument("url: needs a scheme and a host");
  config.scheme = Lower(*scheme);
  config.host = Lower(StripBrackets(*host));
  if (config.host.empty()) return InvalidArgument("url: empty host");
  if (config.host.find('%') != std::string::npos) {
    return InvalidArgument("url: zone ids and percent-encoded hosts are not supported");
  }
  config.port = std::atoi(port->c_str());
  if (config.port <= 0 || config.port > 65535) return InvalidArgument("url: bad port");
  return Status::Ok();
}

Result<std::int64_t> PositiveInt(const Json& v, std::string_view field, std::int64_t max) {
  if (!v.is_number_integer()) {
    return InvalidArgument(std::string(field) + ": must be an integer");
  }
  const std::int64_t n = v.is_number_unsigned() && v.get<std::uint64_t>() > INT64_MAX
                             ? INT64_MAX
                             : v.get<std::int64_t>();
  if (n <= 0 || n > max) {
    return InvalidArgument(std::string(field) + ": must be in 1.." + std::to_string(max));
  }
  return n;
}

Result<std::vector<std::string>> StringList(const Json& v, std::string_view field) {
  if (!v.is_array()) return InvalidArgument(std::string(field) + ": must be an array of strings");
  std::vector<std::string> out;
  for (const Json& item : v) {
    if (!item.is_string() || item.get_ref<const std::string&>().empty()) {
      return InvalidArgument(std::string(field) + ": must hold only non-empty strings");
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

// --- the transfer --------------------------------------------------------------

std::once_flag curl_once;
bool curl_ready = false;

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// Everything one transfer's callbacks touch. Lives on the run's stack.
struct Transfer {
  JobContext* ctx = nullptr;
  const std::string* body = nullptr;
  std::size_t body_offset = 0;
  std::size_t max_response_bytes = 0;
  std::chrono::milliseconds checkpoint_interval{200};
  SteadyClock::time_point next_checkpoint{};

  bool sent = false;                  // any byte of the request was written
  bool over_cap = false;              // the body exceeded max_response_bytes
  std::optional<LeaseState> stopped;  // aborted before sending: why
  std::string response;               // up to max_response_bytes
  std::string retry_after;            // of the final response
};

std::size_t ReadBody(char* buffer, std::size_t size, std::size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  t->sent = true;
  const std::size_t room = size * nitems;
  const std::size_t n = std::min(room, t->body->size() - t->body_offset);
  std::memcpy(buffer, t->body->data() + t->body_offset, n);
  t->body_offset += n;
  return n;
}

std::size_t WriteBody(char* data, std::size_t size, std::size_t nmemb, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t n = size * nmemb;
  if (t->response.size() + n > t->max_response_bytes) {
    t->response.append(data, t->max_response_bytes - t->response.size());
    t->over_cap = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
  }
  t->response.append(data, n);
  return n;
}

std::size_t ReadHeader(char* data, std::size_t size, std::size_t nitems, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * nitems);
  if (line.starts_with("HTTP/")) {
    t->retry_after.clear();  // a new (possibly final, after 1xx) response
  } else if (line.size() > 12 && Lower(line.substr(0, 12)) == "retry-after:") {
    t->retry_after = std::string(Trim(line.substr(12)).substr(0, kMaxRetryAfterBytes));
  }
  return size * nitems;
}

int OnDebug(CURL*, curl_infotype type, char*, std::size_t, void* user) {
  if (type == CURLINFO_HEADER_OUT || type == CURLINFO_DATA_OUT) {
    static_cast<Transfer*>(user)->sent = true;
  }
  return 0;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  if (ulnow > 0) t->sent = true;
  if (t->sent) return 0;  // once sent, the outcome decides; never abort
  const auto now = SteadyClock::now();
  if (now < t->next_checkpoint) return 0;
  t->next_checkpoint = now + t->checkpoint_interval;
  const LeaseState state = t->ctx->Checkpoint();
  if (state == LeaseState::kActive) return 0;
  t->stopped = state;
  return 1;  // CURLE_ABORTED_BY_CALLBACK
}

// What came of the attempt to perform the effect.
struct Outcome {
  HandlerResult::Kind kind = HandlerResult::Kind::kSuccess;
  std::string message;
  Millis retry_after_ms = 0;
  bool ran = false;  // perform was called
};

// Retry-After: delta-seconds or an HTTP-date; 0 when absent or unreadable.
Millis ParseRetryAfter(const std::string& value, const Clock& clock) {
  if (value.empty()) return 0;
  if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    if (value.size() > 7) return kMaxRetryAfterMs;
    return std::min<Millis>(std::stoll(value) * 1000, kMaxRetryAfterMs);
  }
  const time_t when = curl_getdate(value.c_str(), nullptr);
  if (when < 0) return 0;
  const Millis delay = static_cast<Millis>(when) * 1000 - clock.NowMillis();
  return std::clamp<Millis>(delay, 0, kMaxRetryAfterMs);
}

Result<std::vector<IpAddress>> ResolveWithGetaddrinfo(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0) {
    return Unavailable("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  std::vector<IpAddress> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    IpAddress ip;
    if (ai->ai_family == AF_INET) {
      const auto* sa = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      std::memcpy(ip.bytes.data(), &sa->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      const auto* sa = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      ip.v6 = true;
      std::memcpy(ip.bytes.data(), &sa->sin6_addr, 16);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), ip) == out.end()) out.push_back(ip);
  }
  freeaddrinfo(res);
  if (out.empty()) return Unavailable("cannot resolve " + host + ": no addresses");
  return out;
}

class HttpRunner {
 public:
  explicit HttpRunner(HttpHandlerOptions options) : options_(std::move(options)) {
    if (options_.clock == nullptr) options_.clock = SystemClock::Get();
    if (!options_.resolver) options_.resolver = ResolveWithGetaddrinfo;
  }

  HandlerResult Run(JobContext& ctx) const;

 private:
  // The address to connect to, or why there is none.
  Result<IpAddress> CheckedAddress(const HttpHandlerConfig& config, Outcome& outcome) const;
  // Performs the request; returns the detail to commit, kUnavailable when it
  // certainly did not happen, another error when its outcome is unknown.
  Result<std::string> Perform(JobContext& ctx, const HttpHandlerConfig& config,
                              const std::string& key, Outcome& outcome) const;
  // The outcome of a response with status `code`.
  Result<std::string> FromStatus(long code, const Transfer& t, const HttpHandlerConfig& config,
                                 Outcome& outcome) const;
  [[nodiscard]] std::string ResultJson(long code, const Transfer& t) const;

  HttpHandlerOptions options_;
};

Result<IpAddress> HttpRunner::CheckedAddress(const HttpHandlerConfig& config,
                                             Outcome& outcome) const {
  std::vector<IpAddress> candidates;
  if (auto literal = IpAddress::Parse(config.host)) {
    candidates.push_back(*literal);
  } else {
    auto resolved = options_.resolver(config.host);
    if (!resolved.ok()) {
      outcome.kind = HandlerResult::Kind::kRetryable;
      outcome.message = resolved.status().message();
      return Unavailable(outcome.message);
    }
    candidates = std::move(resolved).value();
  }
  const bool host_exempt =
      std::find(config.allow_private_hosts.begin(), config.allow_private_hosts.end(),
                config.host) != config.allow_private_hosts.end();
  std::string refused;
  for (const IpAddress& ip : candidates) {
    const AddressClass cls = ClassifyAddress(ip);
    bool allowed = cls == AddressClass::kPublic || host_exempt;
    for (const CidrRange& r : config.allow_private_ranges) allowed = allowed || r.Contains(ip);
    if (allowed) return ip;
    if (refused.empty()) refused = ip.ToString() + " (" + std::string(ToString(cls)) + ")";
  }
  outcome.kind = HandlerResult::Kind::kPermanent;
  outcome.message = "refused by the SSRF guard: host " + config.host + " resolves to " + refused +
                    "; list the address in allow_private to permit it";
  return Unavailable(outcome.message);
}

std::string HttpRunner::ResultJson(long code, const Transfer& t) const {
  const std::string_view excerpt = CutUtf8(t.response, options_.max_result_excerpt_bytes);
  Json j = {{"status", code},
            {"body", std::string(excerpt)},
            {"body_truncated", t.over_cap || excerpt.size() < t.response.size()}};
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Result<std::string> HttpRunner::FromStatus(long code, const Transfer& t,
                                           const HttpHandlerConfig& config,
                                           Outcome& outcome) const {
  const std::string what =
      config.method + " " + config.scheme + "://" + config.host + ": HTTP " + std::to_string(code);
  if (code >= 200 && code < 300) {
    if (t.over_cap) {
      outcome.kind = HandlerResult::Kind::kPermanent;
      outcome.message = what + ", but the response body exceeds max_response_bytes (" +
                        std::to_string(config.max_response_bytes) + ")";
    }
    return ResultJson(code, t);  // the sink acted: commit
  }
  std::string excerpt(CutUtf8(t.response, 200));
  for (char& c : excerpt) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  outcome.message = what + (excerpt.empty() ? "" : ": " + excerpt);
  if (t.over_cap) outcome.message += " (response body over max_response_bytes)";
  if (code == 408 || code == 429 || (code >= 500 && code < 600)) {
    outcome.kind = HandlerResult::Kind::kRetryable;
    outcome.retry_after_ms = ParseRetryAfter(t.retry_after, *options_.clock);
  } else if (code >= 300 && code < 400) {
    outcome.kind = HandlerResult::Kind::kPermanent;
    outcome.message += " (redirects are not followed)";
  } else {
    outcome.kind = HandlerResult::Kind::kPermanent;
  }
  return Unavailable(outcome.message);  // the sink answered that it did not act
}

Result<std::string> HttpRunner::Perform(JobContext& ctx, const HttpHandlerConfig& config,
                                        const std::string& key, Outcome& outcome) const {
  outcome.ran = true;
  auto address = CheckedAddress(config, outcome);
  if (!address.ok()) return address.status();

  std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
  if (!h) {
    outcome.kind = HandlerResult::Kind::kRetryable;
    outcome.message = "cannot create a libcurl handle";
    return Unavailable(outcome.message);
  }
  CURL* c = h.get();
  Transfer t;
  t.ctx = &ctx;
  t.body = &ctx.payload_json();
  t.max_response_bytes = config.max_response_bytes;
  t.checkpoint_interval = options_.checkpoint_interval;
  t.next_checkpoint = SteadyClock::now() + options_.checkpoint_interval;

  const std::string ip_text = address->v6 ? "[" + address->ToString() + "]" : address->ToString();
  // Pin the connection to the checked address (an IP literal needs no pin).
  std::unique_ptr<curl_slist, SlistDeleter> resolve;
  if (!IpAddress::Parse(config.host).has_value()) {
    resolve.reset(curl_slist_append(
        nullptr, (config.host + ":" + std::to_string(config.port) + ":" + ip_text).c_str()));
    if (!resolve) {
      outcome.kind = HandlerResult::Kind::kRetryable;
      outcome.message = "out of memory";
      return Unavailable(outcome.message);
    }
  }
  curl_slist* raw_headers = nullptr;
  auto add_header = [&](const std::string& line) {
    curl_slist* next = curl_slist_append(raw_headers, line.c_str());
    if (next != nullptr) raw_headers = next;
  };
  add_header("Content-Type: application/json");
  add_header("Idempotency-Key: " + key);
  add_header("Expect:");
  for (const auto& [name, value] : config.headers) add_header(name + ": " + value);
  std::unique_ptr<curl_slist, SlistDeleter> headers(raw_headers);

  const Millis job_timeout = ctx.timeout_ms();
  Millis timeout = config.timeout_ms.value_or(
      job_timeout > 0 ? std::min<Millis>(job_timeout, options_.default_timeout.count())
                      : options_.default_timeout.count());
  Millis connect_timeout = std::min<Millis>(
      timeout, config.connect_timeout_ms.value_or(options_.default_connect_timeout.count()));
  const char* protocols = config.allow_http ? "http,https" : "https";
  char errbuf[CURL_ERROR_SIZE] = {0};

  bool setup_ok = true;
  auto set = [&](CURLcode rc) { setup_ok = setup_ok && rc == CURLE_OK; };
  set(curl_easy_setopt(c, CURLOPT_URL, config.url.c_str()));
  set(curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, protocols));
  set(curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, protocols));
  set(curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L));
  set(curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L));
  set(curl_easy_setopt(c, CURLOPT_PROXY, ""));
  set(curl_easy_setopt(c, CURLOPT_NOPROXY, "*"));
  if (resolve) set(curl_easy_setopt(c, CURLOPT_RESOLVE, resolve.get()));
  set(curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1)));
  set(curl_easy_setopt(c, CURLOPT_POST, 1L));
  if (config.method != "POST") {
    set(curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, config.method.c_str()));
  }
  set(curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
                       static_cast<curl_off_t>(ctx.payload_json().size())));
  set(curl_easy_setopt(c, CURLOPT_READFUNCTION, &ReadBody));
  set(curl_easy_setopt(c, CURLOPT_READDATA, &t));
  set(curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get()));
  set(curl_easy_setopt(c, CURLOPT_USERAGENT, options_.user_agent.c_str()));
  set(curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout)));
  set(curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect_timeout)));
  set(curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                       static_cast<curl_off_t>(config.max_response_bytes)));
  set(curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &WriteBody));
  set(curl_easy_setopt(c, CURLOPT_WRITEDATA, &t));
  set(curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &ReadHeader));
  set(curl_easy_setopt(c, CURLOPT_HEADERDATA, &t));
  set(curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L));
  set(curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &OnProgress));
  set(curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t));
  set(curl_easy_setopt(c, CURLOPT_VERBOSE, 1L));
  set(curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, &OnDebug));
  set(curl_easy_setopt(c, CURLOPT_DEBUGDATA, &t));
  set(curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf));
  if (!setup_ok) {
    outcome.kind = HandlerResult::Kind::kRetryable;
    outcome.message = "cannot configure libcurl (is it built with https?)";
    return Unavailable(outcome.message);
  }

  const auto started = SteadyClock::now();
  const CURLcode rc = curl_easy_perform(c);
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - started).count();
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  long request_size = 0;
  curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &request_size);
  curl_off_t uploaded = 0;
  curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &uploaded);
  if (request_size > 0 || uploaded > 0) t.sent = true;

  const std::string target = config.method + " " + config.scheme + "://" + config.host + ":" +
                             std::to_string(config.port) + " (" + address->ToString() + ")";
  ctx.Log(LogLevel::kInfo,
          target + " -> " +
              (code > 0 ? "HTTP " + std::to_string(code) : std::string(curl_easy_strerror(rc))) +
              " in " + std::to_string(elapsed_ms) + " ms");

  if (rc == CURLE_ABORTED_BY_CALLBACK && t.stopped.has_value() && !t.sent) {
    outcome.kind = *t.stopped == LeaseState::kCancelRequested ? HandlerResult::Kind::kCanceled
                                                              : HandlerResult::Kind::kRetryable;
    outcome.message = *t.stopped == LeaseState::kCancelRequested
                          ? "canceled before the request was sent"
                          : "lease lost before the request was sent";
    return Unavailable(outcome.message);
  }
  if (rc == CURLE_FILESIZE_EXCEEDED) t.over_cap = true;
  // A status line decides by itself, whatever happened after it.
  if (code > 0 && (rc == CURLE_OK || t.sent)) return FromStatus(code, t, config, outcome);

  const std::string reason =
      std::string(curl_easy_strerror(rc)) + (errbuf[0] != '\0' ? std::string(": ") + errbuf : "");
  if (!t.sent) {
    outcome.kind = rc == CURLE_UNSUPPORTED_PROTOCOL || rc == CURLE_URL_MALFORMAT
                       ? HandlerResult::Kind::kPermanent
                       : HandlerResult::Kind::kRetryable;
    outcome.message = target + ": not sent: " + reason;
    return Unavailable(outcome.message);
  }
  outcome.kind =
      config.idempotent ? HandlerResult::Kind::kRetryable : HandlerResult::Kind::kAmbiguous;
  outcome.message = target + ": the request was sent but no response arrived (" + reason +
                    "); whether the sink acted is unknown";
  return Internal(outcome.message);
}

HandlerResult HttpRunner::Run(JobContext& ctx) const {
  if (!curl_ready) return HandlerResult::Retryable("libcurl could not be initialized");
  auto parsed = ParseHttpHandlerConfig(ctx.config_json(), options_.targets);
  if (!parsed.ok()) {
    return HandlerResult::Permanent("http handler config: " + parsed.status().message());
  }
  const HttpHandlerConfig& config = *parsed;
  switch (ctx.Checkpoint()) {
    case LeaseState::kActive:
      break;
    case LeaseState::kCancelRequested:
      return HandlerResult::Canceled();
    case LeaseState::kLost:
      return HandlerResult::Retryable("lease lost");
  }
  Outcome outcome;
  const EffectSink sink = config.idempotent ? EffectSink::kIdempotent : EffectSink::kNotIdempotent;
  EffectResult r = ctx.Effect(kHttpEffectName, sink, [&](const std::string& key) {
    return Perform(ctx, config, key, outcome);
  });
  if (r.done()) {
    if (outcome.ran && outcome.kind == HandlerResult::Kind::kPermanent) {
      return HandlerResult::Permanent(outcome.message);  // committed, but over the cap
    }
    return HandlerResult::Success(r.detail);
  }
  if (outcome.ran && !r.error.ok() && outcome.kind != HandlerResult::Kind::kSuccess) {
    switch (outcome.kind) {
      case HandlerResult::Kind::kRetryable:
        return HandlerResult::Retryable(outcome.message, outcome.retry_after_ms);
      case HandlerResult::Kind::kPermanent:
        return HandlerResult::Permanent(outcome.message);
      case HandlerResult::Kind::kAmbiguous:
        return HandlerResult::Ambiguous(outcome.message);
      case HandlerResult::Kind::kCanceled:
        return HandlerResult::Canceled();
      case HandlerResult::Kind::kSuccess:
        break;
    }
  }
  return r.ToHandlerResult();
}

}  // namespace

// --- public functions ----------------------------------------------------------

Result<HttpHandlerConfig> ParseHttpHandlerConfig(std::string_view config_json) {
  Json j = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("config must be a JSON object");
  static const char* const kKnown[] = {"url",
                                       "allow_hosts",
                                       "method",
                                       "headers",
                                       "timeout_ms",
                                       "connect_timeout_ms",
                                       "max_response_bytes",
                                       "allow_http",
                                       "allow_private",
                                       "idempotent"};
  for (const auto& item : j.items()) {
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return item.key() == k; }) == std::end(kKnown)) {
      return InvalidArgument("unknown field '" + item.key().substr(0, 64) + "'");
    }
  }
  HttpHandlerConfig c;
  auto url = j.find("url");
  if (url == j.end() || !url->is_string() || url->get_ref<const std::string&>().empty()) {
    return InvalidArgument("url: required string");
  }
  c.url = url->get<std::string>();
  for (char ch : c.url) {
    if (static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7F) {
      return InvalidArgument("url: must not contain spaces or control characters");
    }
  }
  TE_RETURN_IF_ERROR(ParseUrlInto(c.url, c));

  if (auto it = j.find("allow_http"); it != j.end()) {
    if (!it->is_boolean()) return InvalidArgument("allow_http: must be true or false");
    c.allow_http = it->get<bool>();
  }
  if (auto it = j.find("idempotent"); it != j.end()) {
    if (!it->is_boolean()) return InvalidArgument("idempotent: must be true or false");
    c.idempotent = it->get<bool>();
  }
  if (c.scheme != "https" && !(c.scheme == "http" && c.allow_http)) {
    return InvalidArgument("url: scheme '" + c.scheme + "' is not allowed (https only" +
                           (c.scheme == "http" ? "; set allow_http to permit http" : "") + ")");
  }

  auto hosts = j.find("allow_hosts");
  if (hosts == j.end()) return InvalidArgument("allow_hosts: required (the hosts url may name)");
  TE_ASSIGN_OR_RETURN(std::vector<std::string> allow_hosts, StringList(*hosts, "allow_hosts"));
  if (allow_hosts.empty()) return InvalidArgument("allow_hosts: must not be empty");
  for (const std::string& h : allow_hosts) c.allow_hosts.push_back(Lower(StripBrackets(h)));
  if (std::none_of(c.allow_hosts.begin(), c.allow_hosts.end(),
                   [&](const std::string& p) { return HostMatches(c.host, p); })) {
    return InvalidArgument("url: host '" + c.host + "' is not on allow_hosts");
  }

  if (auto it = j.find("allow_private"); it != j.end()) {
    TE_ASSIGN_OR_RETURN(std::vector<std::string> entries, StringList(*it, "allow_private"));
    for (const std::string& e : entries) {
      if (auto range = CidrRange::Parse(e)) {
        c.allow_private_ranges.push_back(*range);
      } else if (e.find('/') != std::string::npos || e.find(':') != std::string::npos) {
        return InvalidArgument("allow_private: '" + e.substr(0, 64) +
                               "' is neither a CIDR range nor an address nor a host name");
      } else {
        c.allow_private_hosts.push_back(Lower(e));
      }
    }
  }

  if (auto it = j.find("method"); it != j.end()) {
    if (!it->is_string()) return InvalidArgument("method: must be a string");
    c.method = it->get<std::string>();
    if (c.method != "POST" && c.method != "PUT" && c.method != "PATCH") {
      return InvalidArgument("method: must be POST, PUT or PATCH");
    }
  }
  if (auto it = j.find("headers"); it != j.end()) {
    if (!it->is_object()) return InvalidArgument("headers: must be an object of strings");
    static const char* const kReserved[] = {"content-type",   "idempotency-key",   "host",
                                            "content-length", "transfer-encoding", "expect",
                                            "connection"};
    for (const auto& item : it->items()) {
      const std::string& name = item.key();
      if (name.empty() || !std::all_of(name.begin(), name.end(), IsTokenChar)) {
        return InvalidArgument("headers: invalid field name '" + name.substr(0, 64) + "'");
      }
      const std::string lower = Lower(name);
      for (const char* r : kReserved) {
        if (lower == r) return InvalidArgument("headers: '" + name + "' is set by the handler");
      }
      if (!item.value().is_string() ||
          !IsValidHeaderValue(item.value().get_ref<const std::string&>())) {
        return InvalidArgument("headers: '" + name + "' must be a string without line breaks");
      }
      c.headers.emplace_back(name, item.value().get<std::string>());
    }
  }
  if (auto it = j.find("timeout_ms"); it != j.end()) {
    TE_ASSIGN_OR_RETURN(c.timeout_ms, PositiveInt(*it, "timeout_ms", kMaxHttpTimeoutMs));
  }
  if (auto it = j.find("connect_timeout_ms"); it != j.end()) {
    TE_ASSIGN_OR_RETURN(c.connect_timeout_ms,
                        PositiveInt(*it, "connect_timeout_ms", kMaxHttpTimeoutMs));
  }
  if (auto it = j.find("max_response_bytes"); it != j.end()) {
    TE_ASSIGN_OR_RETURN(std::int64_t cap, PositiveInt(*it, "max_response_bytes", kMaxResponseCap));
    c.max_response_bytes = static_cast<std::size_t>(cap);
  }
  return c;
}

Result<HttpHandlerConfig> ParseHttpHandlerConfig(std::string_view config_json,
                                                 const NamedConfigs& targets) {
  TE_ASSIGN_OR_RETURN(std::string config,
                      ExpandNamedConfig(config_json, kHttpTargetKey, targets, kHttpServerOwnedKeys,
                                        "[[http_target]]"));
  return ParseHttpHandlerConfig(config);
}

Handler MakeHttpHandler(HttpHandlerOptions options) {
  std::call_once(curl_once, [] { curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; });
  auto runner = std::make_shared<const HttpRunner>(std::move(options));
  return [runner](JobContext& ctx) -> HandlerResult {
    try {
      return runner->Run(ctx);
    } catch (const std::exception& e) {
      return HandlerResult::Retryable(std::string("http handler: ") + e.what());
    }
  };
}

}  // namespace taskengine
