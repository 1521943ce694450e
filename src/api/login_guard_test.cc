#include "api/login_guard.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace taskengine::api {
namespace {

using std::chrono::milliseconds;

std::string RetryAfter(const HttpResponse& r) {
  for (const auto& [name, value] : r.headers) {
    if (name == "Retry-After") return value;
  }
  return "";
}

// Submits a check answering `ok` and waits until it ran; the refusal if any.
std::optional<HttpResponse> Attempt(LoginGuard& guard, const std::string& account, bool ok) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> ran = done->get_future();
  std::optional<HttpResponse> refused = guard.Submit(account, [ok, done] {
    done->set_value();
    return std::optional<bool>(ok);
  });
  if (!refused) {
    ran.wait();
    while (guard.pending() > 0) std::this_thread::sleep_for(milliseconds(1));
  }
  return refused;
}

TEST(LoginGuard, LocksAnAccountAfterFailuresWithDoublingBackoff) {
  FakeClock clock;
  LoginGuard guard({.clock = &clock,
                    .global = {0, 1},
                    .lockout_after = 3,
                    .lockout_base_ms = 1000,
                    .lockout_max_ms = 3000});
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(Attempt(guard, "alice", false).has_value()) << i;
  std::optional<HttpResponse> locked = Attempt(guard, "alice", true);
  ASSERT_TRUE(locked.has_value());
  EXPECT_EQ(locked->status, 429);
  EXPECT_EQ(RetryAfter(*locked), "1");
  EXPECT_FALSE(Attempt(guard, "bob", false).has_value()) << "other accounts are not locked";
  clock.Advance(milliseconds(1000));
  EXPECT_FALSE(Attempt(guard, "alice", false).has_value());  // 4th failure: 2 s
  EXPECT_EQ(RetryAfter(*Attempt(guard, "alice", true)), "2");
  clock.Advance(milliseconds(2000));
  EXPECT_FALSE(Attempt(guard, "alice", false).has_value());  // 5th: capped at 3 s
  EXPECT_EQ(RetryAfter(*Attempt(guard, "alice", true)), "3");
  clock.Advance(milliseconds(3000));
  EXPECT_FALSE(Attempt(guard, "alice", true).has_value());  // success clears the count
  EXPECT_FALSE(Attempt(guard, "alice", false).has_value());
  EXPECT_FALSE(Attempt(guard, "alice", false).has_value());
  EXPECT_FALSE(Attempt(guard, "alice", true).has_value());
}

TEST(LoginGuard, GlobalRateIs429) {
  FakeClock clock;
  LoginGuard guard({.clock = &clock, .global = {1, 2}, .lockout_after = 0});
  EXPECT_FALSE(Attempt(guard, "a", false).has_value());
  EXPECT_FALSE(Attempt(guard, "b", false).has_value());
  std::optional<HttpResponse> r = Attempt(guard, "c", false);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 429);
  EXPECT_NE(r->body.find("login_global"), std::string::npos);
  clock.Advance(milliseconds(1000));
  EXPECT_FALSE(Attempt(guard, "c", false).has_value());
}

// Only `threads` checks run at once; `max_waiting` more wait; the rest get
// 503 at once, without running.
TEST(LoginGuard, BoundedThreadsAndQueue) {
  LoginGuard guard({.threads = 2, .max_waiting = 3, .global = {0, 1}});
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> ran{0};
  std::atomic<bool> release{false};
  auto check = [&] {
    const int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    while (!release) std::this_thread::sleep_for(milliseconds(1));
    --running;
    ++ran;
    return std::optional<bool>(false);
  };
  int refused = 0;
  for (int i = 0; i < 2; ++i) ASSERT_FALSE(guard.Submit("u" + std::to_string(i), check));
  while (running < 2) std::this_thread::sleep_for(milliseconds(1));
  for (int i = 2; i < 10; ++i) {
    std::optional<HttpResponse> r = guard.Submit("u" + std::to_string(i), check);
    if (r) {
      EXPECT_EQ(r->status, 503);
      EXPECT_FALSE(RetryAfter(*r).empty());
      ++refused;
    }
  }
  EXPECT_EQ(refused, 5);
  EXPECT_EQ(guard.pending(), 5);
  release = true;
  while (guard.pending() > 0) std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(ran, 5);
  EXPECT_EQ(most, 2);
}

}  // namespace
}  // namespace taskengine::api
