// Time as a dependency. Nothing in core, storage or engine reads the system
// clock directly: it asks a Clock, and tests pass a FakeClock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace taskengine {

// Milliseconds since the Unix epoch, UTC. The unit of every stored time.
using Millis = std::int64_t;

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis NowMillis() const = 0;
};

// Wall clock (system_clock). Thread-safe.
class SystemClock final : public Clock {
 public:
  Millis NowMillis() const override;
  // A process-wide instance.
  static SystemClock* Get();
};

// A clock that moves only when told. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Millis start = 1'767'225'600'000) : now_(start) {}  // 2026-01-01T00:00Z
  Millis NowMillis() const override { return now_.load(std::memory_order_acquire); }
  void Advance(std::chrono::milliseconds d) {
    now_.fetch_add(d.count(), std::memory_order_acq_rel);
  }
  void Set(Millis t) { now_.store(t, std::memory_order_release); }

 private:
  std::atomic<Millis> now_;
};

}  // namespace taskengine
