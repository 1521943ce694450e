#include "core/schedule.h"

#include <date/date.h>
#include <date/tz.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

constexpr Millis kMinute = 60'000;
constexpr Millis kHour = 60 * kMinute;
constexpr Millis kDay = 24 * kHour;

// UTC instant of a UTC calendar time.
Millis Utc(int year, int month, int day, int hour = 0, int minute = 0) {
  const date::sys_days d{date::year{year} / date::month{static_cast<unsigned>(month)} /
                         date::day{static_cast<unsigned>(day)}};
  return (d.time_since_epoch().count() * 1440LL + hour * 60 + minute) * kMinute;
}

std::string Iso(Millis t) {
  const date::sys_time<std::chrono::milliseconds> tp{std::chrono::milliseconds{t}};
  return date::format("%FT%TZ", tp);
}
std::string Iso(const std::optional<Millis>& t) { return t ? Iso(*t) : "none"; }
std::vector<std::string> Iso(const std::vector<Millis>& ts) {
  std::vector<std::string> out;
  for (const Millis t : ts) out.push_back(Iso(t));
  return out;
}

Schedule Make(std::string_view cron, std::string_view zone) {
  Result<Schedule> s = Schedule::Create(cron, zone);
  TE_CHECK(s.ok());
  return *s;
}

std::uint64_t TestSeed() {
  const char* env = std::getenv("TASKENGINE_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20261101;
}

// ---------------------------------------------------------------- reference

// Brute force over wall-clock minutes (the same as core_cron_test's): every
// minute after `after` for `days` days; the day test is evaluated once a day.
std::optional<LocalMinute> BruteNextLocal(const CronExpr& cron, LocalMinute after, int days) {
  const LocalMinute end{after.value + std::int64_t{days} * 1440};
  LocalMinute m{after.value + 1};
  while (m <= end) {
    const CivilTime c = ToCivil(m);
    const date::local_days d{date::year{c.year} / date::month{static_cast<unsigned>(c.month)} /
                             date::day{static_cast<unsigned>(c.day)}};
    const auto weekday = static_cast<int>(date::weekday{d}.c_encoding());
    const bool day_ok =
        cron.HasMonth(c.month) &&
        (cron.DayFieldsOred() ? (cron.HasDayOfMonth(c.day) || cron.HasDayOfWeek(weekday))
                              : (cron.HasDayOfMonth(c.day) && cron.HasDayOfWeek(weekday)));
    if (!day_ok) {
      m.value += 1440 - (c.hour * 60 + c.minute);
      continue;
    }
    if (cron.HasHour(c.hour) && cron.HasMinute(c.minute)) return m;
    ++m.value;
  }
  return std::nullopt;
}

// RFC 5545 resolution of one wall-clock minute, through the date library's
// local-time look-up (not the interval walk Schedule uses).
Millis ResolveRfc5545(const date::time_zone* zone, LocalMinute local) {
  const date::local_seconds ls{std::chrono::seconds{local.value * 60}};
  const date::local_info info = zone->get_info(ls);
  const Millis wall = local.value * kMinute;
  switch (info.result) {
    case date::local_info::unique:
      return wall - info.first.offset.count() * 1000;
    case date::local_info::nonexistent: {
      // Shift forward by the gap, then read it with the new offset.
      const Millis gap = (info.second.offset - info.first.offset).count() * 1000;
      return wall + gap - info.second.offset.count() * 1000;
    }
    case date::local_info::ambiguous:
      return wall - info.first.offset.count() * 1000;  // the first occurrence
  }
  TE_CHECK(false);
  return 0;
}

// The first fire strictly after `after`, by resolving every matching
// wall-clock minute near and after it. No UTC offset is outside
// [-12:00, +14:00], so a fire after `after` comes from a wall-clock minute
// after `after` - 12 h (minus a gap of up to 24 h), and once the wall clock
// passes best + 14 h nothing earlier can follow.
std::optional<Millis> ReferenceNextAfter(const CronExpr& cron, const date::time_zone* zone,
                                         Millis after, int days) {
  constexpr Millis kMargin = 40 * kHour;
  LocalMinute local{(after - kMargin) / kMinute};
  std::optional<Millis> best;
  const LocalMinute end{(after + kMargin) / kMinute + std::int64_t{days} * 1440};
  while (true) {
    const std::optional<LocalMinute> next =
        BruteNextLocal(cron, local, static_cast<int>((end.value - local.value) / 1440) + 1);
    if (!next || *next > end) break;
    if (best && next->value * kMinute > *best + 15 * kHour) break;
    const Millis fire = ResolveRfc5545(zone, *next);
    if (fire > after && (!best || fire < *best)) best = fire;
    local = *next;
  }
  return best;
}

// ---------------------------------------------------------------- creation

TEST(ScheduleCreateTest, RejectsUnknownZonesAndBadExpressions) {
  const struct {
    const char* cron;
    const char* zone;
    const char* message;
  } cases[] = {
      {"0 0 * * *", "Mars/Olympus_Mons", "unknown time zone \"Mars/Olympus_Mons\""},
      {"0 0 * * *", "america/new_york", "unknown time zone \"america/new_york\""},
      {"0 0 * * *", "../../../etc/passwd", "unknown time zone \"../../../etc/passwd\""},
      {"0 0 * * *", "Europe/Berlin\n", "unknown time zone \"Europe/Berlin?\""},
      {"0 0 * * *", "", "time zone is empty"},
      {"0 24 * * *", "UTC", "hour field at position 3: value 24 out of range 0-23"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.zone);
    const Result<Schedule> s = Schedule::Create(c.cron, c.zone);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.status().message(), c.message);
  }
}

TEST(ScheduleCreateTest, AcceptsZonesAndKeepsTheirNames) {
  for (const char* zone : {"UTC", "Etc/UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata",
                           "Australia/Lord_Howe", "Pacific/Apia"}) {
    SCOPED_TRACE(zone);
    ASSERT_OK_AND_ASSIGN(const Schedule s, Schedule::Create("@daily", zone));
    EXPECT_EQ(s.zone_name(), zone);
    EXPECT_EQ(s.cron().ToString(), "0 0 * * *");
  }
  ASSERT_OK_AND_ASSIGN(const CronExpr cron, ParseCron("0 0 30 2 *"));
  ASSERT_OK_AND_ASSIGN(const Schedule never, Schedule::Create(cron, "UTC"));
  EXPECT_FALSE(never.cron().CanEverFire());
  EXPECT_EQ(never.NextAfter(Utc(2026, 1, 1)), std::nullopt);
  EXPECT_TRUE(never.Preview(Utc(2026, 1, 1), 5).empty());
}

// ---------------------------------------------------------------- UTC

TEST(ScheduleUtcTest, NextAfterIsStrictlyAfterToTheMillisecond) {
  const Schedule s = Make("30 9 * * *", "UTC");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 1, 1, 9, 30) - 1)), "2026-01-01T09:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 1, 1, 9, 30))), "2026-01-02T09:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 1, 1, 9, 29) + 1)), "2026-01-01T09:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(1969, 12, 31, 23, 59) + 59'999)), "1970-01-01T09:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(INT64_MIN)), "0001-01-01T09:30:00.000Z");
  EXPECT_EQ(s.NextAfter(INT64_MAX), std::nullopt);
  EXPECT_EQ(Iso(s.NextAfter(Utc(9999, 12, 30, 12))), "9999-12-31T09:30:00.000Z");
  EXPECT_EQ(s.NextAfter(Utc(9999, 12, 31, 12)), std::nullopt);
}

TEST(ScheduleUtcTest, PreviewAndFiresBetween) {
  const Schedule s = Make("@hourly", "UTC");
  const Millis t0 = Utc(2026, 5, 1, 10, 0);
  EXPECT_EQ(Iso(s.Preview(t0, 3)),
            (std::vector<std::string>{"2026-05-01T11:00:00.000Z", "2026-05-01T12:00:00.000Z",
                                      "2026-05-01T13:00:00.000Z"}));
  EXPECT_TRUE(s.Preview(t0, 0).empty());
  EXPECT_TRUE(s.Preview(t0, -1).empty());
  // (after, until]: the fire at `after` is not included, the one at `until` is.
  EXPECT_EQ(s.FiresBetween(t0, t0 + 3 * kHour, 10),
            (std::vector<Millis>{t0 + kHour, t0 + 2 * kHour, t0 + 3 * kHour}));
  EXPECT_EQ(s.FiresBetween(t0, t0 + 3 * kHour - 1, 10),
            (std::vector<Millis>{t0 + kHour, t0 + 2 * kHour}));
  // At most `max`, the earliest.
  EXPECT_EQ(s.FiresBetween(t0, t0 + 48 * kHour, 2),
            (std::vector<Millis>{t0 + kHour, t0 + 2 * kHour}));
  EXPECT_TRUE(s.FiresBetween(t0, t0, 10).empty());
  EXPECT_TRUE(s.FiresBetween(t0, t0 - kHour, 10).empty());
  EXPECT_TRUE(s.FiresBetween(t0, t0 + 59 * kMinute, 10).empty());
  EXPECT_EQ(s.Preview(Utc(9999, 12, 31, 21), 10).size(), 2u);  // 22:00, 23:00, then the end
}

TEST(ScheduleUtcTest, AFixedOffsetZoneShiftsEveryFire) {
  // Asia/Kolkata: +05:30 since 1945, no daylight saving.
  const Schedule s = Make("0 9 * * 1-5", "Asia/Kolkata");
  // Friday 2026-05-01 09:00 IST = 03:30Z; then Monday 2026-05-04.
  EXPECT_EQ(Iso(s.Preview(Utc(2026, 5, 1), 2)),
            (std::vector<std::string>{"2026-05-01T03:30:00.000Z", "2026-05-04T03:30:00.000Z"}));
}

// ---------------------------------------------------------------- DST: New York

// 2026-03-08: at 07:00Z, 02:00 EST (-5) jumps to 03:00 EDT (-4).
TEST(ScheduleDstTest, NewYorkSpringForwardShiftsSkippedTimesByTheGap) {
  const Schedule s = Make("30 2 * * *", "America/New_York");
  EXPECT_EQ(Iso(s.Preview(Utc(2026, 3, 7, 8), 3)),
            (std::vector<std::string>{"2026-03-08T07:30:00.000Z",  // 03:30 EDT, once
                                      "2026-03-09T06:30:00.000Z",  // 02:30 EDT
                                      "2026-03-10T06:30:00.000Z"}));
  // Exactly one fire on the local day 2026-03-08 (05:00Z .. 04:00Z next day).
  EXPECT_EQ(s.FiresBetween(Utc(2026, 3, 8, 5), Utc(2026, 3, 9, 4), 10).size(), 1u);
  // From inside the new offset but before the shifted fire.
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 3, 8, 7, 10))), "2026-03-08T07:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 3, 8, 7, 30))), "2026-03-09T06:30:00.000Z");

  EXPECT_EQ(Iso(Make("0 2 * * *", "America/New_York").NextAfter(Utc(2026, 3, 8))),
            "2026-03-08T07:00:00.000Z");  // 03:00 EDT
  EXPECT_EQ(Iso(Make("59 2 * * *", "America/New_York").NextAfter(Utc(2026, 3, 8))),
            "2026-03-08T07:59:00.000Z");  // 03:59 EDT
  // 02:00 shifted is 03:00, which also matches in its own right: one fire.
  EXPECT_EQ(Iso(Make("0 2,3 * * *", "America/New_York")
                    .FiresBetween(Utc(2026, 3, 8, 5), Utc(2026, 3, 9, 8), 10)),
            (std::vector<std::string>{"2026-03-08T07:00:00.000Z", "2026-03-09T06:00:00.000Z",
                                      "2026-03-09T07:00:00.000Z"}));
}

TEST(ScheduleDstTest, NewYorkSpringForwardEveryQuarterHour) {
  // 01:45 EST = 06:45Z; 02:00..02:45 shift onto 03:00..03:45 EDT (07:00Z..):
  // the fires stay 15 minutes apart, none twice.
  const Schedule s = Make("*/15 * * * *", "America/New_York");
  EXPECT_EQ(Iso(s.FiresBetween(Utc(2026, 3, 8, 6, 30), Utc(2026, 3, 8, 8, 0), 20)),
            (std::vector<std::string>{"2026-03-08T06:45:00.000Z", "2026-03-08T07:00:00.000Z",
                                      "2026-03-08T07:15:00.000Z", "2026-03-08T07:30:00.000Z",
                                      "2026-03-08T07:45:00.000Z", "2026-03-08T08:00:00.000Z"}));
}

// 2026-11-01: at 06:00Z, 02:00 EDT (-4) falls back to 01:00 EST (-5).
TEST(ScheduleDstTest, NewYorkFallBackFiresAtTheFirstOccurrenceOnly) {
  const Schedule s = Make("30 1 * * *", "America/New_York");
  EXPECT_EQ(Iso(s.Preview(Utc(2026, 10, 31, 12), 2)),
            (std::vector<std::string>{"2026-11-01T05:30:00.000Z",     // 01:30 EDT
                                      "2026-11-02T06:30:00.000Z"}));  // 01:30 EST next day
  // Not again at the second 01:30 (06:30Z), even when asked from inside the
  // repeated hour.
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 11, 1, 5, 30))), "2026-11-02T06:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 11, 1, 6, 0))), "2026-11-02T06:30:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 11, 1, 6, 29))), "2026-11-02T06:30:00.000Z");
}

TEST(ScheduleDstTest, NewYorkFallBackEveryQuarterHourSkipsTheRepeatedHour) {
  // Every minute of 01:00-01:59 fired during its first occurrence (EDT), so
  // the second occurrence (EST, 06:00Z-06:59Z) fires nothing: at most once per
  // local time. Then 02:00 EST = 07:00Z.
  const Schedule s = Make("*/15 * * * *", "America/New_York");
  EXPECT_EQ(Iso(s.FiresBetween(Utc(2026, 11, 1, 4, 50), Utc(2026, 11, 1, 7, 30), 20)),
            (std::vector<std::string>{"2026-11-01T05:00:00.000Z", "2026-11-01T05:15:00.000Z",
                                      "2026-11-01T05:30:00.000Z", "2026-11-01T05:45:00.000Z",
                                      "2026-11-01T07:00:00.000Z", "2026-11-01T07:15:00.000Z",
                                      "2026-11-01T07:30:00.000Z"}));
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 11, 1, 6, 20))), "2026-11-01T07:00:00.000Z");
  // @hourly: 00:00 EDT, 01:00 EDT, then 02:00 EST -- two hours apart.
  EXPECT_EQ(Iso(Make("@hourly", "America/New_York").Preview(Utc(2026, 11, 1, 3, 30), 3)),
            (std::vector<std::string>{"2026-11-01T04:00:00.000Z", "2026-11-01T05:00:00.000Z",
                                      "2026-11-01T07:00:00.000Z"}));
}

// ---------------------------------------------------------------- DST: Berlin

// 2026-03-29: at 01:00Z, 02:00 CET (+1) jumps to 03:00 CEST (+2).
// 2026-10-25: at 01:00Z, 03:00 CEST falls back to 02:00 CET.
TEST(ScheduleDstTest, Berlin) {
  const Schedule s = Make("30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Iso(s.FiresBetween(Utc(2026, 3, 28), Utc(2026, 3, 30, 12), 10)),
            (std::vector<std::string>{"2026-03-28T01:30:00.000Z",     // 02:30 CET
                                      "2026-03-29T01:30:00.000Z",     // 03:30 CEST (shifted)
                                      "2026-03-30T00:30:00.000Z"}));  // 02:30 CEST
  EXPECT_EQ(Iso(s.FiresBetween(Utc(2026, 10, 24, 12), Utc(2026, 10, 26, 12), 10)),
            (std::vector<std::string>{"2026-10-25T00:30:00.000Z",     // first 02:30 (CEST)
                                      "2026-10-26T01:30:00.000Z"}));  // 02:30 CET
  EXPECT_EQ(Iso(s.NextAfter(Utc(2026, 10, 25, 1, 15))), "2026-10-26T01:30:00.000Z");
  const Schedule half_hours = Make("*/30 2 * * *", "Europe/Berlin");
  EXPECT_EQ(Iso(half_hours.FiresBetween(Utc(2026, 10, 24, 12), Utc(2026, 10, 26, 12), 10)),
            (std::vector<std::string>{"2026-10-25T00:00:00.000Z", "2026-10-25T00:30:00.000Z",
                                      "2026-10-26T01:00:00.000Z", "2026-10-26T01:30:00.000Z"}));
  EXPECT_EQ(Iso(half_hours.FiresBetween(Utc(2026, 3, 28, 12), Utc(2026, 3, 29, 12), 10)),
            (std::vector<std::string>{"2026-03-29T01:00:00.000Z",     // 02:00 -> 03:00 CEST
                                      "2026-03-29T01:30:00.000Z"}));  // 02:30 -> 03:30 CEST
}

// ---------------------------------------------------------------- odd zones

TEST(ScheduleDstTest, LordHoweHalfHourShift) {
  // Australia/Lord_Howe: +10:30 standard, +11 in summer. 2026-04-05 02:00
  // (+11) = 2026-04-04T15:00Z falls back to 01:30; 2026-10-04 02:00 (+10:30)
  // = 2026-10-03T15:30Z jumps to 02:30.
  EXPECT_EQ(Iso(Make("45 1 * * *", "Australia/Lord_Howe").Preview(Utc(2026, 4, 4), 2)),
            (std::vector<std::string>{"2026-04-04T14:45:00.000Z",     // first 01:45 (+11)
                                      "2026-04-05T15:15:00.000Z"}));  // 01:45 (+10:30)
  EXPECT_EQ(Iso(Make("15 2 * * *", "Australia/Lord_Howe").Preview(Utc(2026, 10, 3), 2)),
            (std::vector<std::string>{"2026-10-03T15:45:00.000Z",  // 02:15 -> 02:45 (+11)
                                      "2026-10-04T15:15:00.000Z"}));
}

TEST(ScheduleDstTest, SamoaSkippedADay) {
  // Pacific/Apia skipped 2011-12-30: 2011-12-29T24:00 (-10) became
  // 2011-12-31T00:00 (+14). 09:00 on the missing day shifts by 24 h onto
  // 09:00 of the 31st, which fires once.
  EXPECT_EQ(Iso(Make("0 9 * * *", "Pacific/Apia").Preview(Utc(2011, 12, 29), 3)),
            (std::vector<std::string>{"2011-12-29T19:00:00.000Z", "2011-12-30T19:00:00.000Z",
                                      "2011-12-31T19:00:00.000Z"}));
  EXPECT_EQ(Iso(Make("0 9 30 12 *", "Pacific/Apia").NextAfter(Utc(2011, 12, 1))),
            "2011-12-30T19:00:00.000Z");
}

TEST(ScheduleDstTest, SaoPauloMidnightThatDidNotExist) {
  // America/Sao_Paulo 2018-11-04: 00:00 (-03) jumped to 01:00 (-02).
  EXPECT_EQ(Iso(Make("@daily", "America/Sao_Paulo").Preview(Utc(2018, 11, 2, 12), 3)),
            (std::vector<std::string>{"2018-11-03T03:00:00.000Z",     // 00:00 -03
                                      "2018-11-04T03:00:00.000Z",     // 00:00 -> 01:00 -02
                                      "2018-11-05T02:00:00.000Z"}));  // 00:00 -02
}

// NextAfter only looks for skipped times in the interval that holds its
// argument and later ones; that is complete if no offset interval is shorter
// than the gap that opens it. Check the assumption on every zone we have.
TEST(ScheduleDstTest, NoZoneHasAnIntervalShorterThanItsOpeningGap) {
  const date::tzdb& db = date::get_tzdb();
  int gaps = 0;
  for (const date::time_zone& zone : db.zones) {
    date::sys_seconds t = date::sys_days{date::year{1850} / 1 / 1};
    const date::sys_seconds stop = date::sys_days{date::year{2040} / 1 / 1};
    date::sys_info prev = zone.get_info(t);
    while (prev.end < stop) {
      const date::sys_info next = zone.get_info(prev.end);
      if (next.offset > prev.offset) {
        ++gaps;
        EXPECT_GE(next.end - next.begin, next.offset - prev.offset)
            << zone.name() << " at " << date::format("%F %T", next.begin);
      }
      prev = next;
    }
  }
  EXPECT_GT(gaps, 1000);
}

// The date library (3.0.1, USE_OS_TZDB) does not read the rule at the end of
// TZif files, only the transitions listed in them. Debian builds tzdata
// "fat", listing transitions through 2037; "slim" files (zic's default since
// 2020) stop at the last rule change (2007 for New York), after which every
// daylight-saving zone would silently stay on standard time. Fail loudly if
// this machine's zone data is slim.
TEST(ScheduleZoneDataTest, ListsDaylightSavingTransitionsThrough2037) {
  const Schedule s = Make("0 12 * * *", "America/New_York");
  // 12:00 EDT (-4) = 16:00Z in July.
  EXPECT_EQ(Iso(s.NextAfter(Utc(2030, 7, 1))), "2030-07-01T16:00:00.000Z");
  EXPECT_EQ(Iso(s.NextAfter(Utc(2037, 7, 1))), "2037-07-01T16:00:00.000Z");
  EXPECT_EQ(Iso(Make("0 12 * * *", "Europe/Berlin").NextAfter(Utc(2037, 7, 1))),
            "2037-07-01T10:00:00.000Z");
}

// ---------------------------------------------------------------- property

// A random expression from field forms chosen to hit DST hours often.
std::string RandomDstCron(std::mt19937_64& rng) {
  static const char* const kMinutes[] = {"*", "*/15", "0", "30", "*/7", "0,30", "59", "45", "1-5"};
  static const char* const kHours[] = {"*", "0", "1", "2", "3", "1-3", "*/2", "0,2", "23", "2-4/2"};
  static const char* const kDays[] = {"*", "*", "*", "1-15", "*/2", "13", "29-31"};
  static const char* const kMonths[] = {"*", "*", "*", "3,10,11", "MAR-APR", "*/6", "2"};
  static const char* const kWeekdays[] = {"*", "*", "*", "SUN", "1-5", "*/3", "FRI-SUN"};
  const auto pick = [&rng](const auto& options) {
    return std::string(
        options[std::uniform_int_distribution<std::size_t>(0, std::size(options) - 1)(rng)]);
  };
  return pick(kMinutes) + " " + pick(kHours) + " " + pick(kDays) + " " + pick(kMonths) + " " +
         pick(kWeekdays);
}

TEST(SchedulePropertyTest, UtcAgreesWithBruteForce) {
  const std::uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with TASKENGINE_TEST_SEED=<seed>)");
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 300; ++i) {
    const std::string text = RandomDstCron(rng);
    SCOPED_TRACE(text);
    const Schedule s = Make(text, "UTC");
    // Any millisecond in 1970..2100.
    const Millis after = std::uniform_int_distribution<Millis>(0, Utc(2100, 1, 1))(rng);
    SCOPED_TRACE("after " + Iso(after));
    const std::optional<LocalMinute> brute =
        BruteNextLocal(s.cron(), LocalMinute{after / kMinute}, 366);
    const std::optional<Millis> fast = s.NextAfter(after);
    if (brute) {
      ASSERT_EQ(Iso(fast), Iso(brute->value * kMinute));
    } else if (fast) {
      ASSERT_GT(*fast, after + 366 * kDay);
    }
  }
}

TEST(SchedulePropertyTest, ZonesAgreeWithRfc5545ResolutionNearTransitions) {
  const std::uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with TASKENGINE_TEST_SEED=<seed>)");
  std::mt19937_64 rng(seed);
  const char* const kZones[] = {"America/New_York", "Europe/Berlin",     "Australia/Lord_Howe",
                                "Australia/Sydney", "America/Sao_Paulo", "Pacific/Apia",
                                "Europe/Dublin",    "America/St_Johns",  "Asia/Tehran"};
  int fires = 0;
  for (int i = 0; i < 300; ++i) {
    const char* zone_name = kZones[i % std::size(kZones)];
    const std::string text = RandomDstCron(rng);
    SCOPED_TRACE(std::string(zone_name) + " " + text);
    const Schedule s = Make(text, zone_name);
    const date::time_zone* zone = date::locate_zone(zone_name);
    // Near a transition of a random year in 1990..2036, to the millisecond.
    const int year = std::uniform_int_distribution<int>(1990, 2036)(rng);
    const int month = std::uniform_int_distribution<int>(1, 12)(rng);
    const date::sys_info info = zone->get_info(date::sys_days{date::year{year} / month / 1});
    const Millis transition =
        std::chrono::duration_cast<std::chrono::milliseconds>(info.begin.time_since_epoch())
            .count();
    const Millis after =
        transition + std::uniform_int_distribution<Millis>(-3 * kHour, 3 * kHour)(rng);
    SCOPED_TRACE("after " + Iso(after));
    const std::optional<Millis> want = ReferenceNextAfter(s.cron(), zone, after, 400);
    const std::optional<Millis> got = s.NextAfter(after);
    if (want) {
      ++fires;
      ASSERT_EQ(Iso(got), Iso(want));
    } else if (got) {
      ASSERT_GT(*got, after + 400 * kDay);
    }
    // A run of fires across the transition: strictly increasing, and no two
    // at the same wall-clock time.
    std::set<std::int64_t> walls;
    Millis prev = after - 6 * kHour;
    for (const Millis t : s.Preview(prev, 40)) {
      ASSERT_GT(t, prev);
      const date::sys_seconds sys{std::chrono::seconds{t / 1000}};
      const std::int64_t wall = (sys + zone->get_info(sys).offset).time_since_epoch().count();
      ASSERT_TRUE(walls.insert(wall).second) << "second fire at the wall-clock time of " << Iso(t);
      prev = t;
    }
  }
  EXPECT_GT(fires, 250);
}

// ---------------------------------------------------------------- speed

// Not asserted (machines differ): the scheduler evaluates 10,000 definitions
// per cycle in < 50 ms, so a call should cost well under 5 us.
TEST(ScheduleSpeedTest, ReportsTimePerNextAfter) {
  const char* const kCrons[] = {"*/5 * * * *", "0 9 * * 1-5",  "30 2 * * *",         "@daily",
                                "0 0 1 * *",   "15 */6 * * *", "0 12 * JAN,JUL MON", "0 0 29 2 *"};
  std::vector<Schedule> schedules;
  for (const char* cron : kCrons) {
    schedules.push_back(Make(cron, "America/New_York"));
    schedules.push_back(Make(cron, "UTC"));
  }
  constexpr int kCalls = 100'000;
  Millis t = Utc(2026, 1, 1);
  Millis sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i) {
    const std::optional<Millis> next = schedules[i % schedules.size()].NextAfter(t);
    sink += next.value_or(0);
    t += 7 * kMinute + 13'001;  // walks through 2026-2027, DST days included
  }
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
      kCalls;
#ifdef NDEBUG
  const char* build = "optimized build";
#else
  const char* build = "debug build";
#endif
  std::cout << "[ speed    ] Schedule::NextAfter: " << ns << " ns/call (" << build
            << "); 10,000 definitions: " << ns * 10'000 / 1e6 << " ms\n";
  RecordProperty("next_after_ns", static_cast<int>(ns));
  EXPECT_NE(sink, 0);
}

}  // namespace
}  // namespace taskengine
