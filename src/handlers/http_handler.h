// The built-in `http` handler (product.md W3, E1-E3; quality.md §3 item 8).
//
// Sends the execution's payload JSON to a URL named by the job definition's
// config (never by the payload):
//
//   {"url": "https://hooks.example.com/in",   required; https unless allow_http
//    "allow_hosts": ["hooks.example.com"],     required, non-empty: host names (or IP
//                                              literals) the URL's host must equal, or
//                                              "*.example.com" for any subdomain
//    "method": "POST",                         POST (default), PUT or PATCH
//    "headers": {"Authorization": "..."},      static extra header fields (strings)
//    "timeout_ms": 10000,                      whole transfer; default: the job's timeout,
//                                              at most HttpHandlerOptions::default_timeout
//    "connect_timeout_ms": 3000,               default: min(timeout, default_connect_timeout)
//    "max_response_bytes": 1048576,            response body cap; default 1 MiB
//    "allow_http": false,                      allow plain http:// (default false)
//    "allow_private": ["10.1.0.0/16", "::1"],  CIDRs, addresses or host names exempted
//                                              from the SSRF guard (default none)
//    "idempotent": false}                      the sink deduplicates by Idempotency-Key
//                                              (E3); default false
// Unknown keys are refused (so a typo such as "allow_host" is not silently ignored).
//
// One run:
//   1. The config is checked; a bad config, a scheme other than https (or
//      http with allow_http) or a host not on allow_hosts -> Permanent, and
//      nothing is reserved or contacted.
//   2. The effect "http" is reserved through JobContext::Effect (key
//      "<execution id>:http"). already_done -> Success with the recorded
//      result; ambiguous -> Ambiguous (or, with "idempotent": true, the request
//      is sent again with the same key); canceled -> Canceled; stale ->
//      Retryable.
//   3. SSRF guard: the host is resolved here (getaddrinfo, or the IP literal).
//      Every address is classified (ClassifyAddress); the first one that is
//      public, or exempted by allow_private, is used. A host with no such
//      address -> Permanent (policy refusal, before any connection); a
//      resolution failure -> Retryable. The transfer is then pinned to the
//      checked address with CURLOPT_RESOLVE, so a second DNS answer (rebinding)
//      cannot move it. No proxy is ever used (environment proxies are ignored).
//      getaddrinfo has no deadline of its own: the system resolver's timeouts
//      apply on top of timeout_ms.
//   4. The request: `method url` with the payload as body,
//      `Content-Type: application/json`, `Idempotency-Key: <effect key>`, the
//      static headers, no `Expect`. libcurl with redirects off, protocols
//      limited to https (or http+https), the response body capped, timeouts.
//
// Outcomes:
//   2xx                      -> effect committed; Success({"status": N, "body": "<excerpt>",
//                               "body_truncated": bool}) (excerpt: at most
//                               max_result_excerpt_bytes, cut on a UTF-8 boundary)
//   2xx, body over the cap   -> effect committed (the sink did act), then Permanent
//                               "response body exceeds max_response_bytes"
//   408, 429, 5xx            -> Retryable, retry_after_ms from Retry-After
//                               (delta-seconds or an HTTP-date); reservation released
//   3xx                      -> Permanent (redirects are never followed); released
//   other 4xx (and 1xx)      -> Permanent; released
//   failure before the request was sent (resolve, connect, TLS handshake, a
//   timeout while connecting)-> Retryable; released
//   timeout or connection error after the request was sent, before a status
//   line arrived             -> Ambiguous (E3; reservation kept, so a retry meets
//                               `ambiguous`), or Retryable with "idempotent": true
//   cancel / lost lease noticed before anything was sent (JobContext::Checkpoint
//   before the transfer and every checkpoint_interval during it)
//                            -> Canceled / Retryable("lease lost"); released.
//                               Once a byte is sent the transfer is not aborted: its
//                               outcome decides.
// A status line that arrived before a transport error decides by itself (a
// 2xx followed by a reset still counts as done).
//
// When is the request "sent"? From the moment libcurl writes any byte of the
// HTTP request (header or body; TLS handshake records do not count) to the
// connection, as reported by its debug callback (CURLINFO_HEADER_OUT /
// CURLINFO_DATA_OUT) or by a call of the body read callback, or when
// CURLINFO_REQUEST_SIZE / CURLINFO_SIZE_UPLOAD_T are non-zero. This is
// conservative: bytes handed to the kernel may never reach the sink, but a
// request counted as not sent certainly did not.
//
// Durations are real time (libcurl's own clock); the injected Clock is used
// only to turn a Retry-After HTTP-date into a delay.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "handlers/named_config.h"
#include "handlers/ssrf_guard.h"
#include "taskengine/clock.h"
#include "taskengine/job.h"
#include "taskengine/status.h"

namespace taskengine {

// The config of one `http` job, as parsed from its config JSON. Immutable.
struct HttpHandlerConfig {
  std::string url;
  std::string scheme;  // "https" or "http"
  std::string host;    // lower case; IPv6 literals without brackets
  int port = 0;        // explicit, or the scheme's default
  std::string method = "POST";
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<Millis> timeout_ms;
  std::optional<Millis> connect_timeout_ms;
  std::size_t max_response_bytes = 1 << 20;
  std::vector<std::string> allow_hosts;  // lower case
  bool allow_http = false;
  std::vector<CidrRange> allow_private_ranges;
  std::vector<std::string> allow_private_hosts;  // lower case
  bool idempotent = false;
};

// Parses and checks a job's config (see the top of this file): the URL's
// scheme and its host against allow_hosts included. kInvalidArgument naming
// the field otherwise. The server may call it to check seeded jobs early.
Result<HttpHandlerConfig> ParseHttpHandlerConfig(std::string_view config_json);
// ParseHttpHandlerConfig after replacing a {"target": NAME} reference by the
// named target's keys (ExpandNamedConfig over `targets`).
Result<HttpHandlerConfig> ParseHttpHandlerConfig(std::string_view config_json,
                                                 const NamedConfigs& targets);

// The config keys that say where requests go and with which credentials
// (W3): the target, the SSRF guard's allowances and the static headers (which
// carry the target's credentials and could name another virtual host). They
// come from the server's configuration only, never from the API or the
// dashboard.
inline constexpr std::string_view kHttpServerOwnedKeys[] = {"url", "allow_hosts", "allow_http",
                                                            "allow_private", "headers"};

// Resolves `host` (a name; IP literals never reach it) to its addresses, in
// preference order. kUnavailable when the name cannot be resolved now.
using HostResolver = std::function<Result<std::vector<IpAddress>>(const std::string& host)>;

struct HttpHandlerOptions {
  // Not owned; turns a Retry-After HTTP-date into a delay. Default: the system clock.
  Clock* clock = nullptr;
  // Upper bound of the transfer time when the config has no "timeout_ms"
  // (the job's timeout is used when smaller). Default: 30 s.
  std::chrono::milliseconds default_timeout{30'000};
  // Connect timeout when the config has no "connect_timeout_ms" (bounded by
  // the transfer timeout). Default: 10 s.
  std::chrono::milliseconds default_connect_timeout{10'000};
  // How often JobContext::Checkpoint() is consulted while nothing has been
  // sent yet. Default: 200 ms.
  std::chrono::milliseconds checkpoint_interval{200};
  // Bytes of the response body kept in the result. Default: 4 KiB.
  std::size_t max_result_excerpt_bytes = 4 << 10;
  // Name resolution. Default: getaddrinfo. Tests inject names here.
  HostResolver resolver;
  // Value of the User-Agent header. Default: "taskengine".
  std::string user_agent = "taskengine";
  // The [[http_target]]s of the server's configuration (named_config.h): a
  // config {"target": NAME, ...} sends where the target says. Default: none.
  NamedConfigs targets;
};

// The effect name the handler reserves ("<execution id>:http").
inline constexpr std::string_view kHttpEffectName = "http";

// Returns the `http` handler. Initializes libcurl once per process (on the
// first call). The returned Handler is thread-safe (each call uses its own
// libcurl handle) and never throws.
Handler MakeHttpHandler(HttpHandlerOptions options = {});

}  // namespace taskengine
