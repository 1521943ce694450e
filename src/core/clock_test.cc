#include "taskengine/clock.h"

#include <gtest/gtest.h>

#include <chrono>

namespace taskengine {
namespace {

using std::chrono::milliseconds;

TEST(FakeClockTest, AdvanceMovesBothReadings) {
  FakeClock clock(1'000);
  const Clock::SteadyTime start = clock.Steady();
  clock.Advance(milliseconds(250));
  EXPECT_EQ(clock.NowMillis(), 1'250);
  EXPECT_EQ(clock.Steady() - start, milliseconds(250));
}

TEST(FakeClockTest, SteadyNeverMovesBackwards) {
  FakeClock clock(10'000);
  const Clock::SteadyTime start = clock.Steady();
  clock.Set(4'000);  // the wall clock steps back
  EXPECT_EQ(clock.NowMillis(), 4'000);
  EXPECT_EQ(clock.Steady(), start);
  clock.Advance(milliseconds(-500));
  EXPECT_EQ(clock.NowMillis(), 3'500);
  EXPECT_EQ(clock.Steady(), start);
  clock.Set(4'500);  // forward again: Steady follows by the forward step only
  EXPECT_EQ(clock.Steady() - start, milliseconds(1'000));
}

TEST(FakeClockTest, SteadyDoesNotMoveWithRealTime) {
  FakeClock clock;
  const Clock::SteadyTime start = clock.Steady();
  const auto real_start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() == real_start) {
  }
  EXPECT_EQ(clock.Steady(), start);
}

TEST(SystemClockTest, SteadyIsTheSteadyClock) {
  const auto before = std::chrono::steady_clock::now();
  const Clock::SteadyTime reading = SystemClock::Get()->Steady();
  const auto after = std::chrono::steady_clock::now();
  EXPECT_LE(before, reading);
  EXPECT_LE(reading, after);
}

}  // namespace
}  // namespace taskengine
