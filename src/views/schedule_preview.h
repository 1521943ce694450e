// The next fire times of a cron expression in a time zone, for
// `schedule:preview` and the dashboard's job form (GET
// /api/v1/schedule/preview): what the scheduler would fire (T1, T2), with
// each time in UTC and on the zone's wall clock.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

inline constexpr int kMaxPreviewCount = 1000;

struct PreviewFire {
  Millis utc = 0;
  std::string local;   // "2026-03-08 03:30" in the zone
  std::string offset;  // "-04:00"
  std::string abbrev;  // "EDT"
  // The wall-clock time the cron expression names did not exist (spring
  // forward), so the fire was shifted forward by the gap (T2).
  bool shifted = false;
};

struct SchedulePreview {
  std::string expression;  // as given
  std::string normalized;  // CronExpr::ToString()
  std::string zone;
  Millis from = 0;
  bool can_ever_fire = true;
  std::vector<PreviewFire> fires;
};

// The first `count` fire times of `expression` in `zone` strictly after
// `from`. kInvalidArgument with the parser's message (position and reason)
// for a bad expression, naming the zone for an unknown zone, and for a count
// outside 1..kMaxPreviewCount.
Result<SchedulePreview> PreviewSchedule(std::string_view expression, std::string_view zone,
                                        Millis from, int count);

// {"expression", "normalized", "timezone", "from", "can_ever_fire",
//  "fires": [{"utc", "local", "offset", "abbrev", "shifted"}]}
nlohmann::ordered_json SchedulePreviewToJson(const SchedulePreview& p);

}  // namespace taskengine
