#include "api/login_guard.h"

#include <algorithm>

#include "api/errors.h"
#include "platform/thread_name.h"

namespace taskengine::api {
namespace {

HttpResponse Refusal(int status, std::string_view reason, std::string_view message, Millis wait) {
  const Millis seconds = std::max<Millis>(1, (wait + 999) / 1000);
  HttpResponse r =
      ErrorResponse(status, status == 503 ? "unavailable" : "rate_limited",
                    std::string(message) + ": retry in " + std::to_string(seconds) + " s",
                    {{"retry_after_seconds", seconds}, {"limit", std::string(reason)}});
  r.headers.emplace_back("Retry-After", std::to_string(seconds));
  return r;
}

RateLimiterOptions GlobalRate(const LoginGuardOptions& o) {
  RateLimiterOptions r;
  r.clock = o.clock;
  r.login = o.global;
  return r;
}

}  // namespace

LoginGuard::LoginGuard(LoginGuardOptions options)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : SystemClock::Get()),
      global_(GlobalRate(options)) {
  const int n = std::max(1, options_.threads);
  threads_.reserve(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) threads_.push_back(NamedThread("te-login-guard", [this] { Run(); }));
}

LoginGuard::~LoginGuard() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.NotifyAll();
  for (std::thread& t : threads_) t.join();
}

std::optional<HttpResponse> LoginGuard::Submit(std::string account,
                                               std::function<std::optional<bool>()> check) {
  const Millis now = clock_->NowMillis();
  {
    MutexLock lock(mu_);
    auto it = accounts_.find(account);
    if (it != accounts_.end() && it->second.locked_until > now) {
      return Refusal(429, "login_account", "too many failed logins for this account",
                     it->second.locked_until - now);
    }
    if (stopping_ || static_cast<int>(queue_.size()) >= std::max(0, options_.max_waiting)) {
      return Refusal(503, "login_capacity", "too many logins in progress", 1000);
    }
  }
  if (Millis wait = global_.Acquire(RateClass::kLogin, "global"); wait > 0) {
    return Refusal(429, "login_global", "too many logins on this server", wait);
  }
  {
    MutexLock lock(mu_);
    queue_.push_back(Job{std::move(account), std::move(check)});
  }
  cv_.NotifyOne();
  return std::nullopt;
}

int LoginGuard::pending() const {
  MutexLock lock(mu_);
  return static_cast<int>(queue_.size()) + running_;
}

void LoginGuard::Run() {
  for (;;) {
    Job job;
    {
      MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) cv_.Wait(mu_);
      if (queue_.empty()) return;  // stopping, and every queued login ran
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    std::optional<bool> ok;
    try {
      ok = job.check();
    } catch (...) {
      // The check answers its own request; nothing to count.
    }
    Record(job.account, ok);
    MutexLock lock(mu_);
    --running_;
  }
}

void LoginGuard::Record(const std::string& account, std::optional<bool> ok) {
  if (!ok.has_value() || options_.lockout_after <= 0) return;
  const Millis now = clock_->NowMillis();
  MutexLock lock(mu_);
  if (*ok) {
    accounts_.erase(account);
    return;
  }
  auto it = accounts_.find(account);
  if (it == accounts_.end()) {
    if (accounts_.size() >= options_.max_accounts) ForgetOldestLocked();
    it = accounts_.emplace(account, Account{}).first;
  }
  Account& a = it->second;
  ++a.failures;
  a.last_seen = now;
  const int over = a.failures - options_.lockout_after;
  if (over >= 0) {
    Millis lock_ms = options_.lockout_base_ms;
    for (int i = 0; i < over && lock_ms < options_.lockout_max_ms; ++i) lock_ms *= 2;
    a.locked_until = now + std::min(lock_ms, options_.lockout_max_ms);
  }
}

void LoginGuard::ForgetOldestLocked() {
  // A flood of distinct names: forget the tenth seen longest ago. Linear, but
  // only when the table is full.
  std::vector<std::pair<Millis, std::string>> ages;
  ages.reserve(accounts_.size());
  for (const auto& [name, a] : accounts_) ages.emplace_back(a.last_seen, name);
  const std::size_t drop = std::max<std::size_t>(1, ages.size() / 10);
  std::nth_element(ages.begin(), ages.begin() + static_cast<std::ptrdiff_t>(drop - 1), ages.end());
  for (std::size_t i = 0; i < drop; ++i) accounts_.erase(ages[i].second);
}

}  // namespace taskengine::api
