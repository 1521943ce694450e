#include "api/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <set>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

TEST(HandlerPoolTest, RunsEveryTaskOnceOnItsThreads) {
  constexpr int kPosters = 4;
  constexpr int kTasks = 10'000;
  std::atomic<int> ran{0};
  Mutex mu;
  std::set<std::thread::id> runners;
  std::vector<std::thread::id> posters;
  {
    HandlerPool pool(3);
    std::vector<std::thread> threads;
    for (int p = 0; p < kPosters; ++p) {
      threads.emplace_back([&] {
        for (int i = 0; i < kTasks; ++i) {
          pool.Post([&] {
            ran.fetch_add(1);
            MutexLock lock(mu);
            runners.insert(std::this_thread::get_id());
          });
        }
      });
    }
    for (std::thread& t : threads) {
      posters.push_back(t.get_id());
      t.join();
    }
    ASSERT_TRUE(WaitFor([&] { return ran.load() == kPosters * kTasks; }));
  }
  EXPECT_EQ(ran.load(), kPosters * kTasks);
  MutexLock lock(mu);
  EXPECT_LE(runners.size(), 3u);
  for (std::thread::id p : posters) EXPECT_EQ(runners.count(p), 0u);
  EXPECT_EQ(runners.count(std::this_thread::get_id()), 0u);
}

TEST(HandlerPoolTest, ATaskWaitsForAThreadToFinish) {
  HandlerPool pool(2);
  std::latch release(1);
  std::atomic<int> started{0};
  std::atomic<bool> third{false};
  for (int i = 0; i < 2; ++i) {
    pool.Post([&] {
      started.fetch_add(1);
      release.wait();
    });
  }
  ASSERT_TRUE(WaitFor([&] { return started.load() == 2; }));
  pool.Post([&] { third = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(third.load()) << "both threads are busy";
  release.count_down();
  EXPECT_TRUE(WaitFor([&] { return third.load(); }));
}

TEST(HandlerPoolTest, StopLetsRunningTasksFinishAndStartsNoOther) {
  HandlerPool pool(1);
  std::latch release(1);
  std::atomic<bool> running{false};
  std::atomic<bool> finished{false};
  std::atomic<int> others{0};
  pool.Post([&] {
    running = true;
    release.wait();
    finished = true;
  });
  ASSERT_TRUE(WaitFor([&] { return running.load(); }));
  for (int i = 0; i < 5; ++i) pool.Post([&] { others.fetch_add(1); });  // queued
  pool.Stop();
  pool.Post([&] { others.fetch_add(1); });  // after Stop
  release.count_down();
  pool.Join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(others.load(), 0);
}

TEST(HandlerPoolTest, StopWakesIdleThreadsAndJoinReturns) {
  HandlerPool pool(8);
  std::atomic<int> ran{0};
  pool.Post([&] { ran.fetch_add(1); });
  ASSERT_TRUE(WaitFor([&] { return ran.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // all idle
  pool.Stop();
  pool.Join();  // would hang with a thread left waiting
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace taskengine::api
