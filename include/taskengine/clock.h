// Time as a dependency. Nothing in core, storage or engine reads the system
// clock directly: it asks a Clock, and tests pass a FakeClock. A Clock gives
// two readings: NowMillis(), the time the engine stores and decides leases,
// backoff and schedules by; and Steady(), a monotonic reading for intervals
// and deadlines inside one process (long polls, reconnect backoff, rates).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace taskengine {

// Milliseconds since the Unix epoch, UTC. The unit of every stored time.
using Millis = std::int64_t;
inline constexpr Millis kMillisPerHour = 3'600'000;
inline constexpr Millis kMillisPerDay = 24 * kMillisPerHour;

// Thread-safe.
class Clock {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual Millis NowMillis() const = 0;
  // Monotonic: never goes backwards, and is unrelated to NowMillis() and to
  // the calendar. Only differences of two readings of the same Clock mean
  // anything. A wait for a deadline taken from it blocks for the difference
  // (e.g. CondVar::WaitFor(mu, deadline - clock.Steady())).
  virtual SteadyTime Steady() const = 0;
};

// Wall clock (system_clock) and std::chrono::steady_clock. Thread-safe.
class SystemClock final : public Clock {
 public:
  Millis NowMillis() const override;
  SteadyTime Steady() const override;
  // A process-wide instance.
  static SystemClock* Get();
};

// A clock that moves only when told: Advance() and Set() move NowMillis(),
// and Steady() forward by as much as NowMillis() moved forward (never
// backwards). Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Millis start = 1'767'225'600'000) : now_(start) {}  // 2026-01-01T00:00Z
  Millis NowMillis() const override { return now_.load(std::memory_order_acquire); }
  // Starts at 1 day past the steady clock's epoch.
  SteadyTime Steady() const override {
    return SteadyTime(std::chrono::milliseconds(steady_ms_.load(std::memory_order_acquire)));
  }
  // A negative `d` moves NowMillis() back and leaves Steady() where it is.
  void Advance(std::chrono::milliseconds d) {
    if (d.count() > 0) steady_ms_.fetch_add(d.count(), std::memory_order_acq_rel);
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  void Set(Millis t) {
    const Millis before = now_.exchange(t, std::memory_order_acq_rel);
    if (t > before) steady_ms_.fetch_add(t - before, std::memory_order_acq_rel);
  }

 private:
  std::atomic<Millis> now_;
  std::atomic<Millis> steady_ms_{86'400'000};
};

}  // namespace taskengine
