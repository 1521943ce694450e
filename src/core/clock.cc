#include "taskengine/clock.h"

namespace taskengine {

Millis SystemClock::NowMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Clock::SteadyTime SystemClock::Steady() const { return std::chrono::steady_clock::now(); }

SystemClock* SystemClock::Get() {
  static SystemClock clock;
  return &clock;
}

}  // namespace taskengine
