#include "engine/fire_plan.h"

#include <algorithm>
#include <cstddef>
#include <optional>

#include "core/int_math.h"
#include "taskengine/status.h"

namespace taskengine {
namespace {

// FiresBetween bound for the fires inside one catch-up window: the store caps
// the window at 7 days (10,080 minutes); the on-time span adds one interval.
constexpr int kMaxFiresInWindow = 1'000'000;

}  // namespace

std::pair<Millis, Millis> ClaimedWindow(Millis fire, Millis window_ms) {
  TE_DCHECK(window_ms > 0);
  const Millis end = FloorDiv(fire, window_ms) * window_ms;
  return {end - window_ms, end};
}

FirePlan PlanFires(const Schedule& schedule, const FirePolicy& policy, Millis from, Millis now) {
  FirePlan plan;
  if (from >= now) return plan;

  // Stale fires (older than both the catch-up window and the on-time span)
  // are counted one by one, up to a bound.
  const Millis keep_from = now - std::max(policy.catch_up_window_ms, policy.on_time_ms);
  Millis cursor = from;
  std::int64_t stale = 0;
  if (from < keep_from) {
    while (true) {
      std::optional<Millis> next = schedule.NextAfter(cursor);
      if (!next || *next >= keep_from) break;
      ++stale;
      plan.last_skipped_at = *next;
      cursor = *next;
      if (stale >= kMaxCountedFires) {
        plan.skipped_count_capped = true;
        cursor = keep_from - 1;
        break;
      }
    }
  }

  // The fires worth an execution: on time or missed within the window.
  const std::vector<Millis> recent = schedule.FiresBetween(cursor, now, kMaxFiresInWindow);
  plan.skipped = stale;
  std::size_t first_on_time = recent.size();
  for (std::size_t i = 0; i < recent.size(); ++i) {
    if (now - recent[i] <= policy.on_time_ms) {
      first_on_time = i;
      break;
    }
  }
  const std::size_t missed = first_on_time;  // recent[0 .. missed) are missed fires
  std::vector<Millis>& admit = plan.claims;
  const auto on_time_begin = recent.begin() + static_cast<std::ptrdiff_t>(first_on_time);
  switch (policy.catch_up) {
    case CatchUpPolicy::kAll:
      admit.assign(recent.begin(), recent.end());
      break;
    case CatchUpPolicy::kCoalesce:
      if (missed > 0 && first_on_time == recent.size()) {
        admit.push_back(recent[missed - 1]);
        plan.coalesced += static_cast<std::int64_t>(missed) - 1;
      } else {
        plan.coalesced += static_cast<std::int64_t>(missed);
      }
      admit.insert(admit.end(), on_time_begin, recent.end());
      break;
    case CatchUpPolicy::kNone:
      plan.skipped += static_cast<std::int64_t>(missed);
      if (missed > 0) plan.last_skipped_at = recent[missed - 1];
      admit.assign(on_time_begin, recent.end());
      break;
  }

  // The latest fire that claims an execution (for windows: also one that
  // coalesces into the claim of its window).
  plan.latest_fire = admit.empty() ? 0 : admit.back();
  // Window claims: one admission per window; later fires of a window
  // coalesce into its first.
  plan.fires = admit;
  if (policy.window_ms > 0) {
    std::size_t out = 0;
    for (std::size_t i = 0; i < admit.size(); ++i) {
      const Millis start = ClaimedWindow(plan.fires[i], policy.window_ms).first;
      if (out > 0 && admit[out - 1] == start) {
        ++plan.coalesced;
        continue;
      }
      admit[out] = start;
      plan.fires[out] = plan.fires[i];
      ++out;
    }
    admit.resize(out);
    plan.fires.resize(out);
  }
  plan.fires_seen = static_cast<std::int64_t>(recent.size()) + stale;
  return plan;
}

}  // namespace taskengine
