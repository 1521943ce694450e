// LoginGuard: where password checks run, and how many (issue 13, finding 5).
//
// Checking a password costs an Argon2id hash: about 0.1 s of CPU and 64 MiB
// of memory. Run on the request threads, a flood of wrong-password logins
// (each client address under its own rate limit) would occupy all of them, so
// health checks and token-authenticated calls would wait behind it, and memory
// would grow with the number of requests in flight. So logins run only here:
//
//   - on `threads` dedicated threads (the request thread returns at once), so
//     at most `threads` hashes run and memory stays bounded;
//   - at most `max_waiting` more wait their turn; beyond that -> 503 with
//     Retry-After (the server is busy, not the client wrong);
//   - at most `global` logins per second for the whole server, whatever their
//     address -> 429 with Retry-After (the per-address limit is the router's);
//   - per account name: after `lockout_after` consecutive failures the name is
//     locked for lockout_base_ms, doubling with each further failure up to
//     lockout_max_ms -> 429 with Retry-After, without hashing. Names that do
//     not exist are counted the same way, so a lockout says nothing about
//     whether an account exists. A success clears the count.
//
// Thread-safe. The destructor lets queued logins finish, then joins.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "api/http_types.h"
#include "api/rate_limit.h"
#include "core/mutex.h"
#include "taskengine/clock.h"

namespace taskengine::api {

struct LoginGuardOptions {
  // Not owned. Default: the system clock.
  Clock* clock = nullptr;
  // Password checks at once (each holds 64 MiB while it runs). Default: 2.
  int threads = 2;
  // Logins waiting for a thread; more -> 503. Default: 16.
  int max_waiting = 16;
  // Logins per second for the whole server; per_second <= 0 = unlimited.
  // Default: 10 per second, burst 20.
  RateLimit global{10, 20};
  // Consecutive failures of one account name before it is locked; 0 = never.
  // Default: 5.
  int lockout_after = 5;
  // Default: 1 s, doubling per further failure.
  Millis lockout_base_ms = 1000;
  // Default: 5 minutes.
  Millis lockout_max_ms = 5 * 60'000;
  // Account names whose failures are remembered; the oldest are forgotten
  // first. Default: 100000.
  std::size_t max_accounts = 100'000;
};

class LoginGuard {
 public:
  explicit LoginGuard(LoginGuardOptions options);
  ~LoginGuard();
  LoginGuard(const LoginGuard&) = delete;
  LoginGuard& operator=(const LoginGuard&) = delete;

  // Admits a login attempt for `account` and runs `check` on a login thread;
  // `check` returns whether the credentials were right (a check that could
  // not be made, e.g. the store is down, returns nullopt and counts as
  // neither). Returns nullopt when `check` was queued (it will run exactly
  // once), else the refusal to send: 429 (account locked, or the global rate)
  // or 503 (every thread busy and the queue full); `check` is then dropped
  // without running.
  std::optional<HttpResponse> Submit(std::string account,
                                     std::function<std::optional<bool>()> check) EXCLUDES(mu_);

  // Logins running or waiting now.
  int pending() const EXCLUDES(mu_);

 private:
  struct Account {
    int failures = 0;  // consecutive
    Millis locked_until = 0;
    Millis last_seen = 0;
  };
  struct Job {
    std::string account;
    std::function<std::optional<bool>()> check;
  };

  void Run() EXCLUDES(mu_);
  void Record(const std::string& account, std::optional<bool> ok) EXCLUDES(mu_);
  void ForgetOldestLocked() REQUIRES(mu_);

  // Constant after construction.
  const LoginGuardOptions options_;
  Clock* const clock_;
  RateLimiter global_;  // thread-safe itself

  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Job> queue_ GUARDED_BY(mu_);
  int running_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::string, Account, std::less<>> accounts_ GUARDED_BY(mu_);

  std::vector<std::thread> threads_;  // started in the constructor, joined in the destructor
};

}  // namespace taskengine::api
