#include "api/rate_limit.h"

#include <algorithm>
#include <cmath>

#include "api/errors.h"

namespace taskengine::api {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string_view ToString(RateClass c) {
  switch (c) {
    case RateClass::kNone:
      return "none";
    case RateClass::kLogin:
      return "login";
    case RateClass::kDispatch:
      return "dispatch";
    case RateClass::kLease:
      return "lease";
  }
  return "none";
}

RateLimiter::RateLimiter(RateLimiterOptions options)
    : options_(options), clock_(options.clock != nullptr ? options.clock : SystemClock::Get()) {}

const RateLimit& RateLimiter::LimitOf(RateClass cls) const {
  switch (cls) {
    case RateClass::kLogin:
      return options_.login;
    case RateClass::kDispatch:
      return options_.dispatch;
    case RateClass::kLease:
    case RateClass::kNone:
      break;
  }
  return options_.lease;
}

Millis RateLimiter::Acquire(RateClass cls, std::string_view key) {
  if (cls == RateClass::kNone) return 0;
  const RateLimit& limit = LimitOf(cls);
  if (limit.per_second <= 0) return 0;
  const double burst = std::max(1.0, limit.burst);
  const Millis now = clock_->NowMillis();
  MutexLock lock(mu_);
  auto it = buckets_.find(std::make_pair(cls, std::string(key)));
  if (it == buckets_.end()) {
    if (buckets_.size() >= options_.max_keys) EvictLocked(now);
    it = buckets_.emplace(std::make_pair(cls, std::string(key)), Bucket{burst, now}).first;
  }
  Bucket& b = it->second;
  if (now > b.updated_at) {
    b.tokens = std::min(burst, b.tokens + (now - b.updated_at) * limit.per_second / 1000.0);
    b.updated_at = now;
  }
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return 0;
  }
  const double wait = std::ceil((1.0 - b.tokens) * 1000.0 / limit.per_second);
  return std::max<Millis>(1, static_cast<Millis>(wait));
}

void RateLimiter::EvictLocked(Millis now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const RateLimit& limit = LimitOf(it->first.first);
    const double burst = std::max(1.0, limit.burst);
    const double refilled =
        it->second.tokens + (now - it->second.updated_at) * limit.per_second / 1000.0;
    it = refilled >= burst ? buckets_.erase(it) : std::next(it);
  }
  // Still full of active keys (a flood of distinct keys): start over rather
  // than grow without bound. Limits are then briefly lenient, never stricter.
  if (buckets_.size() >= options_.max_keys) buckets_.clear();
}

RateClass RateLimiter::ClassOf(HttpMethod method, std::string_view pattern) {
  if (method == HttpMethod::kPost && (pattern == "/api/v1/auth/login" || pattern == "/login")) {
    return RateClass::kLogin;
  }
  if (method == HttpMethod::kPost &&
      (EndsWith(pattern, "/dispatch") || EndsWith(pattern, "/dispatch/bulk"))) {
    return RateClass::kDispatch;
  }
  if (pattern.rfind("/api/v1/worker", 0) == 0 && EndsWith(pattern, "/lease")) {
    return RateClass::kLease;
  }
  return RateClass::kNone;
}

HttpResponse RateLimiter::TooManyRequests(RateClass cls, Millis wait_ms) {
  const Millis seconds = std::max<Millis>(1, (wait_ms + 999) / 1000);
  HttpResponse r =
      ErrorResponse(429, "rate_limited",
                    "too many " + std::string(ToString(cls)) + " requests: retry in " +
                        std::to_string(seconds) + " s",
                    {{"retry_after_seconds", seconds}, {"limit", std::string(ToString(cls))}});
  r.headers.emplace_back("Retry-After", std::to_string(seconds));
  return r;
}

std::string ClientIp(std::string_view remote_address) {
  std::string_view a = remote_address;
  if (!a.empty() && a.front() == '[') {
    std::size_t close = a.find(']');
    if (close != std::string_view::npos) return std::string(a.substr(1, close - 1));
  }
  std::size_t colon = a.rfind(':');
  // The server always appends ":port", also to an IPv6 address.
  if (colon != std::string_view::npos) return std::string(a.substr(0, colon));
  return std::string(a);
}

}  // namespace taskengine::api
