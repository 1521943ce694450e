// Per-principal rate limits (quality.md §3.7): token buckets for logging in,
// dispatching and lease polling. A request over its limit gets 429 with a
// Retry-After header (whole seconds) and the usual JSON error body; the
// router applies the limits (Router::SetRateLimiter).
//
// Keys: the credential of the principal (Principal::credential_id, else its
// name) for dispatch and lease polling; the client IP for login, which runs
// before anyone is authenticated.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "api/http_types.h"
#include "core/mutex.h"
#include "taskengine/clock.h"

namespace taskengine::api {

enum class RateClass { kNone, kLogin, kDispatch, kLease };
std::string_view ToString(RateClass c);

// One bucket shape: `per_second` tokens are added per second up to `burst`;
// a request takes one. per_second <= 0 means unlimited.
struct RateLimit {
  double per_second = 0;
  double burst = 1;
};

struct RateLimiterOptions {
  // Not owned. Default: the system clock.
  Clock* clock = nullptr;
  // Default: 10 per minute, burst 10 (per client IP).
  RateLimit login{10.0 / 60.0, 10};
  // Default: 50 per second, burst 100 (per principal).
  RateLimit dispatch{50, 100};
  // Default: 20 per second, burst 40 (per principal).
  RateLimit lease{20, 40};
  // Buckets kept at most; full (idle) buckets are dropped first. Default: 100000.
  std::size_t max_keys = 100'000;
};

// Thread-safe.
class RateLimiter {
 public:
  explicit RateLimiter(RateLimiterOptions options);

  // Takes one token from the bucket of (`cls`, `key`). Returns 0 when the
  // request may proceed, else how long (ms, > 0) until a token is available
  // (nothing is taken then). Always 0 for kNone or an unlimited class.
  Millis Acquire(RateClass cls, std::string_view key) EXCLUDES(mu_);

  // The class of a route: POST /api/v1/auth/login and the dashboard's POST
  // /login -> kLogin; a POST whose pattern ends in "/dispatch" or
  // "/dispatch/bulk" -> kDispatch; a route under /api/v1/worker... whose
  // pattern ends in "/lease" (lease polling, e.g. POST /api/v1/worker/lease)
  // -> kLease; else kNone.
  static RateClass ClassOf(HttpMethod method, std::string_view pattern);

  // The 429 answer for a wait of `wait_ms`: Retry-After in whole seconds (>= 1).
  static HttpResponse TooManyRequests(RateClass cls, Millis wait_ms);

 private:
  struct Bucket {
    double tokens = 0;
    Millis updated_at = 0;
  };
  const RateLimit& LimitOf(RateClass cls) const;
  void EvictLocked(Millis now) REQUIRES(mu_);

  const RateLimiterOptions options_;
  Clock* const clock_;
  Mutex mu_;
  std::map<std::pair<RateClass, std::string>, Bucket, std::less<>> buckets_ GUARDED_BY(mu_);
};

// The IP part of a peer address as the server records it: "ip:port" (also
// for IPv6, e.g. "::1:5000") or "[ip]:port".
std::string ClientIp(std::string_view remote_address);

}  // namespace taskengine::api
