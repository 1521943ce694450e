// The scheduler's decision for one job in one cycle (T2-T5), as a pure
// function: which fires since the last evaluation become executions, which
// are skipped or coalesced, by the job's catch-up policy and window. No store,
// no clock: the table tests in fire_plan_test.cc pin every rule, as Decide()
// does for the state machine. The scheduler (scheduler.cc) turns the plan
// into admissions and schedule-state updates.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/schedule.h"
#include "taskengine/clock.h"
#include "taskengine/types.h"

namespace taskengine {

// At most this many stale fires of one job are counted one by one in a cycle
// (about two years of a per-minute job).
inline constexpr std::int64_t kMaxCountedFires = 1'000'000;

// T5: the latest complete window [start, end) of `window_ms` at `fire`,
// aligned to the epoch. REQUIRES: window_ms > 0.
std::pair<Millis, Millis> ClaimedWindow(Millis fire, Millis window_ms);

// What of a job decides its fires.
struct FirePolicy {
  CatchUpPolicy catch_up = CatchUpPolicy::kCoalesce;
  Millis catch_up_window_ms = 0;  // missed fires older than this are stale (skipped)
  Millis window_ms = 0;           // T5: > 0 claims windows instead of fires
  Millis on_time_ms = 0;          // a fire at most this old is on time (the cycle interval)
};

struct FirePlan {
  // One per execution to admit, oldest first: the fire, or with a window the
  // start of the window it claims; `fires` holds the fire behind each.
  std::vector<Millis> claims;
  std::vector<Millis> fires;
  std::int64_t fires_seen = 0;        // fires in (from, now], stale ones up to the bound
  std::int64_t skipped = 0;           // stale fires plus, with catch_up none, missed ones
  std::int64_t coalesced = 0;         // fires folded into another fire's execution
  Millis last_skipped_at = 0;         // the latest skipped fire (0 = none this cycle)
  Millis latest_fire = 0;             // the latest fire that claims an execution (0 = none)
  bool skipped_count_capped = false;  // more than kMaxCountedFires stale: `skipped` is a bound
};

// The plan for the fires of `schedule` in (from, now]. A fire at most
// on_time_ms old is on time; older ones within catch_up_window_ms are missed
// and handled by the policy (all: each admitted; coalesce: the latest missed
// one admitted when no fire is on time, the rest coalesced; none: skipped);
// older ones are stale and skipped. With a window, fires claiming the same
// window coalesce into one claim.
FirePlan PlanFires(const Schedule& schedule, const FirePolicy& policy, Millis from, Millis now);

}  // namespace taskengine
