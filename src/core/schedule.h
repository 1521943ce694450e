// A cron expression in an IANA time zone: the fire times of a scheduled job
// as UTC instants (product.md T1, T2).
//
// The cron expression says which wall-clock minutes match (core/cron.h); the
// zone says when those wall-clock minutes happen. Daylight-saving changes are
// resolved as RFC 5545 resolves local date-times:
//
//  - A wall-clock time that does not exist (spring forward) fires shifted
//    forward by the length of the gap: when 02:00 jumps to 03:00, 02:30 fires
//    at 03:30 (new offset). Several skipped times may shift onto the same
//    instant, or onto an instant that also matches in its own right (02:15 and
//    03:15 under `*/15`); that instant fires once.
//  - A wall-clock time that occurs twice (fall back) fires once, at its FIRST
//    occurrence (the earlier offset). So during the repeated hour nothing
//    fires: every minute of it already fired an hour earlier. Example,
//    America/New_York 2026-11-01 with `*/15 * * * *`: 01:00, 01:15, 01:30,
//    01:45 EDT, then nothing until 02:00 EST (= 07:00Z), one hour and fifteen
//    minutes of real time after 01:45 EDT.
//
// Hence every schedule fires at most once per wall-clock time, and the fire
// times are strictly increasing.
//
// Zone data comes from the system tz database (/usr/share/zoneinfo) through
// Howard Hinnant's date library built with USE_OS_TZDB (Debian's
// libhowardhinnant-date-dev), without any download. Known limitation of that
// library (date 3.0.1, upstream issues #563 and #760): it ignores the POSIX
// rule at the end of each TZif file, so after the last transition listed in
// the file -- 2037 for Debian's "fat" tzdata -- a zone keeps its last
// offset; fire times after 2037 in zones with daylight saving use standard
// time.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/cron.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace date {
class time_zone;
}  // namespace date

namespace taskengine {

// The instants Schedule works with: 0001-01-01T00:00Z to 9999-12-31T23:59:59.999Z.
inline constexpr Millis kMinScheduleInstant = -62'135'596'800'000;
inline constexpr Millis kMaxScheduleInstant = 253'402'300'799'999;

// Immutable after Create; thread-safe. Cheap to copy (the zone is shared,
// owned by the process-wide tz database).
class Schedule {
 public:
  // Parses `cron` (syntax in core/cron.h) and looks up `iana_zone` (e.g.
  // "Europe/Berlin", "UTC"; case-sensitive). Errors: kInvalidArgument with
  // ParseCron's message for a bad expression, kInvalidArgument naming the
  // zone for an unknown zone, kUnavailable when the tz database cannot be
  // read. An expression that can never fire is accepted (callers may reject
  // it with cron().CanEverFire()).
  [[nodiscard]] static Result<Schedule> Create(std::string_view cron, std::string_view iana_zone);
  [[nodiscard]] static Result<Schedule> Create(const CronExpr& cron, std::string_view iana_zone);

  // The first fire time strictly after `utc_ms`, in UTC milliseconds; nullopt
  // when the expression never fires or the next fire would be after
  // 9999-12-31 (wall clock). Instants before year 1 are treated as
  // kMinScheduleInstant. Costs one or two zone look-ups (binary searches)
  // and one NextLocal call for ordinary inputs.
  std::optional<Millis> NextAfter(Millis utc_ms) const;

  // The first `count` fire times strictly after `from`, ascending (fewer when
  // the schedule runs out). For `schedule:preview`. Empty when count <= 0.
  std::vector<Millis> Preview(Millis from, int count) const;

  // The fire times t with after < t <= until, ascending, at most `max` of
  // them (the earliest ones). For catch-up after downtime. Empty when
  // max <= 0 or until <= after.
  std::vector<Millis> FiresBetween(Millis after, Millis until, int max) const;

  const CronExpr& cron() const { return cron_; }
  // The zone name as given to Create.
  const std::string& zone_name() const { return zone_name_; }

 private:
  Schedule(CronExpr cron, const date::time_zone* zone, std::string zone_name)
      : cron_(std::move(cron)), zone_(zone), zone_name_(std::move(zone_name)) {}

  CronExpr cron_;
  const date::time_zone* zone_;  // not owned; lives as long as the process
  std::string zone_name_;
};

}  // namespace taskengine
