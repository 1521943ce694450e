#include "views/schedule_preview.h"

#include <date/tz.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "core/cron.h"
#include "core/int_math.h"
#include "core/schedule.h"
#include "core/time_text.h"

namespace taskengine {
namespace {

std::string FormatOffset(std::int64_t offset_seconds) {
  const char sign = offset_seconds < 0 ? '-' : '+';
  const std::int64_t a = offset_seconds < 0 ? -offset_seconds : offset_seconds;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%c%02d:%02d", sign, static_cast<int>(a / 3600),
                static_cast<int>(a / 60 % 60));
  return buf;
}

}  // namespace

Result<SchedulePreview> PreviewSchedule(std::string_view expression, std::string_view zone,
                                        Millis from, int count) {
  if (count < 1 || count > kMaxPreviewCount) {
    return InvalidArgument("the count must be between 1 and " + std::to_string(kMaxPreviewCount) +
                           " (got " + std::to_string(count) + ")");
  }
  Result<CronExpr> parsed = ParseCron(expression);
  if (!parsed.ok()) {
    return InvalidArgument("invalid cron expression \"" + std::string(expression) +
                           "\": " + parsed.status().message());
  }
  const CronExpr& cron = *parsed;
  TE_ASSIGN_OR_RETURN(Schedule schedule, Schedule::Create(cron, zone));
  SchedulePreview p;
  p.expression = std::string(expression);
  p.normalized = cron.ToString();
  p.zone = std::string(zone);
  p.from = from;
  p.can_ever_fire = cron.CanEverFire();
  const date::time_zone* tz = nullptr;
  try {
    tz = date::locate_zone(std::string(zone));
  } catch (const std::exception& e) {
    return Unavailable("time zone " + std::string(zone) + ": " + e.what());
  }
  for (Millis utc : schedule.Preview(from, count)) {
    PreviewFire f;
    f.utc = utc;
    const date::sys_seconds at{std::chrono::seconds{FloorDiv(utc, 1000)}};
    const date::sys_info info = tz->get_info(at);
    const std::int64_t offset = info.offset.count();
    const Millis local_ms = utc + offset * 1000;
    const LocalMinute local{FloorDiv(local_ms, 60'000)};
    const CivilTime c = ToCivil(local);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d", c.year, c.month, c.day, c.hour,
                  c.minute);
    f.local = buf;
    f.offset = FormatOffset(offset);
    f.abbrev = info.abbrev;
    f.shifted = !cron.Matches(local);
    p.fires.push_back(std::move(f));
  }
  return p;
}

nlohmann::ordered_json SchedulePreviewToJson(const SchedulePreview& p) {
  nlohmann::ordered_json fires = nlohmann::ordered_json::array();
  for (const PreviewFire& f : p.fires) {
    fires.push_back({{"utc", FormatTime(f.utc)},
                     {"local", f.local},
                     {"offset", f.offset},
                     {"abbrev", f.abbrev},
                     {"shifted", f.shifted}});
  }
  return {{"expression", p.expression},
          {"normalized", p.normalized},
          {"timezone", p.zone},
          {"from", FormatTime(p.from)},
          {"can_ever_fire", p.can_ever_fire},
          {"fires", std::move(fires)}};
}

}  // namespace taskengine
