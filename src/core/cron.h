// Cron expressions (product.md T1) evaluated on civil (wall-clock) time.
//
// This file knows nothing about time zones: it answers "which wall-clock
// minutes match" and "what is the next matching wall-clock minute". Turning a
// wall-clock minute into a UTC instant (and the daylight-saving rules that go
// with it) is the job of core/schedule.h.
//
// Syntax (five fields separated by spaces or tabs):
//
//   minute        0-59
//   hour          0-23
//   day-of-month  1-31
//   month         1-12 or JAN-DEC
//   day-of-week   0-7 or SUN-SAT (0 and 7 are both Sunday)
//
// Each field is a comma-separated list of elements; an element is `*`, a value
// `a`, or a range `a-b` (a <= b), optionally followed by a step `/n`:
// `*/n` (every n-th value from the field's first), `a-b/n`, and `a/n`
// (meaning `a-<field's last value>/n`; the last value of day-of-week is 7).
// A step is between 1 and the number of values of the field. Names are three
// letters, case-insensitive. In day-of-week, a range that ends with the name
// SUN ends on Sunday = 7, so `FRI-SUN` means Friday, Saturday and Sunday.
// Macros: @yearly = @annually = `0 0 1 1 *`, @monthly = `0 0 1 * *`,
// @weekly = `0 0 * * 0`, @daily = @midnight = `0 0 * * *`,
// @hourly = `0 * * * *` (also case-insensitive).
//
// Day rule (classic Vixie cron): a day field is *unrestricted* when its text
// starts with `*` (so `*` and `*/2` both count as unrestricted). When both
// day-of-month and day-of-week are restricted, a day matches if EITHER
// matches (`0 0 1,15 * MON` = the 1st, the 15th and every Monday); otherwise
// a day must match both (which, with one of them `*`, means just the other).
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "taskengine/status.h"

namespace taskengine {

// A wall-clock minute with no time zone: the number of minutes since
// 1970-01-01T00:00 counted with civil (proleptic Gregorian) calendar
// arithmetic, every day having exactly 1440 minutes. Negative before 1970.
struct LocalMinute {
  std::int64_t value = 0;
  friend constexpr auto operator<=>(LocalMinute, LocalMinute) = default;
};

// The calendar fields of a LocalMinute.
struct CivilTime {
  int year = 1970;
  int month = 1;   // 1-12
  int day = 1;     // 1-31
  int hour = 0;    // 0-23
  int minute = 0;  // 0-59
  friend bool operator==(const CivilTime&, const CivilTime&) = default;
};

// REQUIRES: the fields form a valid date and time (TE_DCHECKed).
LocalMinute ToLocalMinute(const CivilTime& civil);
CivilTime ToCivil(LocalMinute minute);
// "2026-03-08T03:30": for messages and tests.
std::string FormatLocalMinute(LocalMinute minute);

// The latest wall-clock minute any function here returns: 9999-12-31T23:59.
inline constexpr int kMaxCronYear = 9999;

// A parsed cron expression: which minutes, hours, days, months and weekdays
// match, as bitsets. Immutable value; cheap to copy. A default-constructed
// CronExpr matches nothing.
class CronExpr {
 public:
  CronExpr() = default;

  // Whether the wall-clock minute matches every field (with the day rule in
  // the file comment). False outside years 1-9999.
  bool Matches(LocalMinute minute) const;

  // False when no date ever matches, e.g. `0 0 30 2 *` or
  // `0 0 31 4,6,9,11 *`. Exact: when true, the expression fires at least once
  // in every 400 years (the Gregorian calendar, weekdays included, repeats
  // every 400 years).
  bool CanEverFire() const { return can_fire_; }

  // The normalized text: five fields, numbers only (no names or macros), DOW
  // Sunday as 0, each field written as `*`, `*/n`, or a list of values and
  // ranges in ascending order (a day field the day rule treats as
  // unrestricted may also read `*/n,<list>`). ParseCron(ToString()) gives an
  // equal CronExpr. Example: `0 9 * jan-mar mon,wed` -> `0 9 * 1-3 1,3`.
  std::string ToString() const;

  // The fields, for tests and for callers that display them. Values outside
  // a field's range are never members.
  bool HasMinute(int minute) const;
  bool HasHour(int hour) const;
  bool HasDayOfMonth(int day) const;
  bool HasMonth(int month) const;
  bool HasDayOfWeek(int weekday) const;  // 0 = Sunday .. 6 = Saturday
  // True when both day fields are restricted, so a day matching either one
  // matches (the classic-cron OR rule); false when a day must match both.
  bool DayFieldsOred() const { return !dom_star_ && !dow_star_; }

  friend bool operator==(const CronExpr& a, const CronExpr& b) {
    return a.minutes_ == b.minutes_ && a.hours_ == b.hours_ && a.days_ == b.days_ &&
           a.months_ == b.months_ && a.weekdays_ == b.weekdays_ && a.dom_star_ == b.dom_star_ &&
           a.dow_star_ == b.dow_star_;
  }

 private:
  friend Result<CronExpr> ParseCron(std::string_view text);
  friend std::optional<LocalMinute> NextLocal(const CronExpr& cron, LocalMinute after);

  // Computes the derived members below from the fields; called by ParseCron.
  void Finish();
  // The days of the month (bit d = day d) of `year`/`month` that match both
  // day fields under the day rule.
  std::uint32_t MatchingDays(int year, int month) const;

  std::uint64_t minutes_ = 0;   // bit m = minute m (0-59)
  std::uint32_t hours_ = 0;     // bit h = hour h (0-23)
  std::uint32_t days_ = 0;      // bit d = day of month d (1-31)
  std::uint32_t months_ = 0;    // bit m = month m (1-12)
  std::uint32_t weekdays_ = 0;  // bit w = weekday w (0 = Sunday .. 6)
  bool dom_star_ = true;        // day-of-month text started with '*'
  bool dow_star_ = true;        // day-of-week text started with '*'

  // Derived by Finish(); not part of equality (they follow from the above).
  bool can_fire_ = false;
  // weekday_days_[w] = the days of a month (bit d) whose weekday is in
  // weekdays_, for a month whose 1st falls on weekday w.
  std::array<std::uint32_t, 7> weekday_days_{};
};

// Longest accepted input, in characters.
inline constexpr std::size_t kMaxCronLength = 256;

// Parses a cron expression (syntax in the file comment). Leading and trailing
// whitespace is ignored. On failure returns kInvalidArgument with a message
// "<what> at position <p>: <reason>", where <what> is the field ("minute
// field", "hour field", "day-of-month field", "month field", "day-of-week
// field") or "expression" / "macro", and <p> is the 1-based character
// position in `text` of the offending token, e.g.
// "hour field at position 4: value 24 out of range 0-23". Rejects empty
// input, text longer than 256 characters, a field count other than five,
// values out of range, reversed ranges, steps out of range, unknown names and
// macros, and any other character.
[[nodiscard]] Result<CronExpr> ParseCron(std::string_view text);

// The first wall-clock minute strictly after `after` that `cron` matches, or
// nullopt when there is none up to 9999-12-31T23:59 (in particular whenever
// !cron.CanEverFire()). Jumps field by field (month, day, hour, minute), so a
// call costs a handful of bit operations per month it skips over, never a
// scan over minutes.
std::optional<LocalMinute> NextLocal(const CronExpr& cron, LocalMinute after);

}  // namespace taskengine
