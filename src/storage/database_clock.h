// A Clock that follows a database server's clock, so that every node of a
// fleet judges leases, backoff and schedules by one time (the server backends
// open one each: OpenPostgresClock, OpenMariaClock).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

// Now() is the local steady clock plus an offset to the database's clock,
// sampled at open and re-sampled every `resample` by a thread of its own
// (half the round trip is taken as the one-way delay). A node whose wall
// clock is wrong still decides by the database's time. When a re-sample
// fails, the last offset is kept. Thread-safe.
class DatabaseClock final : public Clock {
 public:
  // Reads the database's clock (ms since the epoch), over a connection of
  // its own that it reconnects as needed; called by one thread at a time.
  using Reader = std::function<Result<Millis>()>;

  // Takes the first sample; its error (kUnavailable when the server cannot
  // be reached) when that fails.
  static Result<std::unique_ptr<DatabaseClock>> Open(
      Reader read_now, std::chrono::milliseconds resample = std::chrono::seconds(5));
  ~DatabaseClock() override;

  Millis NowMillis() const override;
  // The local std::chrono::steady_clock.
  SteadyTime Steady() const override;
  // Takes a sample now.
  Status Resample();
  // The current offset: database time minus local steady time, in ms.
  Millis offset_ms() const;

 private:
  struct Impl;
  explicit DatabaseClock(std::unique_ptr<Impl> impl);

  const std::unique_ptr<Impl> impl_;
};

}  // namespace taskengine
