#include "core/cron.h"

#include <date/date.h>

#include <bit>
#include <cstdio>
#include <string>
#include <utility>

#include "core/int_math.h"

namespace taskengine {
namespace {

constexpr std::int64_t kMinutesPerDay = 1440;

// Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil).
constexpr std::int64_t DaysFromCivil(int year, int month, int day) {
  const date::local_days days{date::year{year} / date::month{static_cast<unsigned>(month)} /
                              date::day{static_cast<unsigned>(day)}};
  return days.time_since_epoch().count();
}

int DaysInMonth(int year, int month) {
  const date::year_month_day_last last{date::year{year} /
                                       date::month{static_cast<unsigned>(month)} / date::last};
  return static_cast<int>(static_cast<unsigned>(last.day()));
}

// 0 = Sunday .. 6 = Saturday. 1970-01-01 was a Thursday (4).
int WeekdayOfDays(std::int64_t days) {
  const std::int64_t w = (days + 4) % 7;
  return static_cast<int>(w < 0 ? w + 7 : w);
}

// The range of wall-clock minutes NextLocal works in: years 1 to 9999.
constexpr LocalMinute kMinSupported{DaysFromCivil(1, 1, 1) * kMinutesPerDay};
constexpr LocalMinute kMaxSupported{DaysFromCivil(kMaxCronYear, 12, 31) * kMinutesPerDay +
                                    kMinutesPerDay - 1};

constexpr std::uint32_t kAllDays = 0xFFFF'FFFEu;  // bits 1-31
constexpr std::uint32_t kAllWeekdays = 0x7Fu;     // bits 0-6

// One of the five fields: its name in messages, its values and its names.
struct FieldSpec {
  const char* name;
  int low;
  int high;                  // the largest value accepted in text (7 for day-of-week)
  int max_step;              // the number of distinct values
  int last;                  // the largest value stored (6 for day-of-week)
  const char* const* names;  // three-letter names for values name_base.., or nullptr
  int name_count;
  int name_base;
};

constexpr const char* kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                       "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr const char* kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

enum FieldIndex { kMinuteField = 0, kHourField, kDomField, kMonthField, kDowField };

constexpr FieldSpec kFields[5] = {
    {"minute", 0, 59, 60, 59, nullptr, 0, 0},        // kMinuteField
    {"hour", 0, 23, 24, 23, nullptr, 0, 0},          // kHourField
    {"day-of-month", 1, 31, 31, 31, nullptr, 0, 0},  // kDomField
    {"month", 1, 12, 12, 12, kMonthNames, 12, 1},    // kMonthField
    {"day-of-week", 0, 7, 7, 6, kDayNames, 7, 0},    // kDowField
};

bool IsSpace(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char ToUpper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

// "'x'" for a printable character, "byte 0x07" otherwise.
std::string DescribeChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u > 0x20 && u < 0x7F) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02X", u);
  return buf;
}

Status ErrorAt(std::string_view what, std::size_t index, const std::string& reason) {
  return InvalidArgument(std::string(what) + " at position " + std::to_string(index + 1) + ": " +
                         reason);
}

// Parses one field, text[begin, end), into a bitset. Positions in errors are
// positions in `text`.
class FieldParser {
 public:
  FieldParser(std::string_view text, std::size_t begin, std::size_t end, const FieldSpec& spec)
      : text_(text),
        pos_(begin),
        end_(end),
        spec_(spec),
        what_(std::string(spec.name) + " field") {}

  Result<std::uint64_t> Parse() {
    std::uint64_t bits = 0;
    while (true) {
      TE_RETURN_IF_ERROR(ParseElement(bits));
      if (pos_ == end_) return bits;
      if (text_[pos_] != ',') {
        return Error(pos_, "unexpected character " + DescribeChar(text_[pos_]));
      }
      ++pos_;
    }
  }

 private:
  Status Error(std::size_t index, const std::string& reason) const {
    return ErrorAt(what_, index, reason);
  }

  Status ParseElement(std::uint64_t& bits) {
    const std::size_t element_begin = pos_;
    if (pos_ == end_ || text_[pos_] == ',') return Error(pos_, "empty list element");
    int first = 0;
    int last = 0;
    if (text_[pos_] == '*') {
      ++pos_;
      first = spec_.low;
      last = spec_.high;
    } else {
      bool sunday_name = false;
      TE_RETURN_IF_ERROR(ParseValue(first, sunday_name));
      last = first;
      if (pos_ < end_ && text_[pos_] == '-') {
        ++pos_;
        TE_RETURN_IF_ERROR(ParseValue(last, sunday_name));
        // In day-of-week, `FRI-SUN` ends on Sunday = 7 (but `SUN-SUN` is Sunday).
        if (sunday_name && &spec_ == &kFields[kDowField] && last == 0 && first > 0) last = 7;
        if (first > last) {
          return Error(element_begin,
                       "range " + std::string(text_.substr(element_begin, pos_ - element_begin)) +
                           " is reversed");
        }
      } else if (pos_ < end_ && text_[pos_] == '/') {
        last = spec_.high;  // `a/n` = `a-<last>/n`
      }
    }
    int step = 1;
    if (pos_ < end_ && text_[pos_] == '/') {
      ++pos_;
      const std::size_t step_begin = pos_;
      if (pos_ == end_ || !IsDigit(text_[pos_])) {
        return Error(pos_, pos_ == end_ ? "missing step after '/'"
                                        : "unexpected character " + DescribeChar(text_[pos_]));
      }
      const long long value = ReadNumber();
      if (value < 1 || value > spec_.max_step) {
        return Error(step_begin, "step " +
                                     std::string(text_.substr(step_begin, pos_ - step_begin)) +
                                     " out of range 1-" + std::to_string(spec_.max_step));
      }
      step = static_cast<int>(value);
    }
    for (int v = first; v <= last; v += step) {
      const int stored = (v == 7 && &spec_ == &kFields[kDowField]) ? 0 : v;
      bits |= std::uint64_t{1} << stored;
    }
    return Status::Ok();
  }

  // Reads a number or a name at pos_. `sunday_name` is set when the value
  // was written as the name SUN.
  Status ParseValue(int& value, bool& sunday_name) {
    const std::size_t begin = pos_;
    sunday_name = false;
    if (pos_ == end_) return Error(pos_, "missing value");
    const char c = text_[pos_];
    if (IsDigit(c)) {
      const long long n = ReadNumber();
      if (n < spec_.low || n > spec_.high) {
        return Error(begin, "value " + std::string(text_.substr(begin, pos_ - begin)) +
                                " out of range " + std::to_string(spec_.low) + "-" +
                                std::to_string(spec_.high));
      }
      value = static_cast<int>(n);
      return Status::Ok();
    }
    if (IsAlpha(c) && spec_.names != nullptr) {
      while (pos_ < end_ && IsAlpha(text_[pos_])) ++pos_;
      const std::string_view word = text_.substr(begin, pos_ - begin);
      if (word.size() == 3) {
        for (int i = 0; i < spec_.name_count; ++i) {
          const char* name = spec_.names[i];
          if (ToUpper(word[0]) == name[0] && ToUpper(word[1]) == name[1] &&
              ToUpper(word[2]) == name[2]) {
            value = spec_.name_base + i;
            sunday_name = (&spec_ == &kFields[kDowField] && i == 0);
            return Status::Ok();
          }
        }
      }
      return Error(begin, "unknown name " + std::string(word));
    }
    return Error(pos_, "unexpected character " + DescribeChar(c));
  }

  // Reads digits at pos_; saturates far above every field's range.
  long long ReadNumber() {
    long long n = 0;
    while (pos_ < end_ && IsDigit(text_[pos_])) {
      if (n < 1'000'000) n = n * 10 + (text_[pos_] - '0');
      ++pos_;
    }
    return n;
  }

  std::string_view text_;
  std::size_t pos_;
  std::size_t end_;
  const FieldSpec& spec_;
  std::string what_;
};

struct Macro {
  const char* name;
  const char* expansion;
};
constexpr Macro kMacros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ToUpper(a[i]) != ToUpper(b[i])) return false;
  }
  return true;
}

// Bits low, low+step, ... <= last.
std::uint64_t StepPattern(int low, int last, int step) {
  std::uint64_t bits = 0;
  for (int v = low; v <= last; v += step) bits |= std::uint64_t{1} << v;
  return bits;
}

std::uint64_t AllOf(const FieldSpec& spec) { return StepPattern(spec.low, spec.last, 1); }

// Whether `bits` is what `*` or `*/n` gives, with at least two values (a
// single value is written as itself).
bool IsStarPattern(std::uint64_t bits, const FieldSpec& spec) {
  if (std::popcount(bits) < 2) return false;
  for (int n = 1; n <= spec.max_step; ++n) {
    if (bits == StepPattern(spec.low, spec.last, n)) return true;
  }
  return false;
}

// "1,3-5,9": ascending values, runs of two or more as ranges.
std::string FormatList(std::uint64_t bits, const FieldSpec& spec) {
  std::string out;
  int v = spec.low;
  while (v <= spec.last) {
    if ((bits >> v & 1) == 0) {
      ++v;
      continue;
    }
    int run_end = v;
    while (run_end + 1 <= spec.last && (bits >> (run_end + 1) & 1) != 0) ++run_end;
    if (!out.empty()) out += ',';
    out += std::to_string(v);
    if (run_end > v) out += '-' + std::to_string(run_end);
    v = run_end + 1;
  }
  return out;
}

// Writes a field. `star` says the text must start with '*' (a day field the
// day rule treats as unrestricted); such a field always contains spec.low.
// Fields where the flag does not matter pass star_optional.
std::string FormatField(std::uint64_t bits, const FieldSpec& spec, bool star, bool star_optional) {
  const std::uint64_t all = AllOf(spec);
  if (bits == all && (star || star_optional)) return "*";
  if (!star && !(star_optional && IsStarPattern(bits, spec))) return FormatList(bits, spec);
  // The smallest `*/n` within the bits, then whatever else is in them.
  for (int n = 2; n <= spec.max_step; ++n) {
    const std::uint64_t pattern = StepPattern(spec.low, spec.last, n);
    if ((pattern & ~bits) != 0) continue;
    const std::uint64_t rest = bits & ~pattern;
    std::string out = "*/" + std::to_string(n);
    if (rest != 0) out += ',' + FormatList(rest, spec);
    return out;
  }
  // Unreachable: `*/max_step` is {low}, and a starred field contains low.
  TE_CHECK(false);
  return {};
}

}  // namespace

LocalMinute ToLocalMinute(const CivilTime& civil) {
  TE_DCHECK(civil.month >= 1 && civil.month <= 12);
  TE_DCHECK(civil.day >= 1 && civil.day <= DaysInMonth(civil.year, civil.month));
  TE_DCHECK(civil.hour >= 0 && civil.hour <= 23);
  TE_DCHECK(civil.minute >= 0 && civil.minute <= 59);
  return LocalMinute{DaysFromCivil(civil.year, civil.month, civil.day) * kMinutesPerDay +
                     civil.hour * 60 + civil.minute};
}

CivilTime ToCivil(LocalMinute minute) {
  const std::int64_t days = FloorDiv(minute.value, kMinutesPerDay);
  const auto in_day = static_cast<int>(minute.value - days * kMinutesPerDay);
  const date::year_month_day ymd{date::local_days{date::days{days}}};
  return CivilTime{static_cast<int>(ymd.year()),
                   static_cast<int>(static_cast<unsigned>(ymd.month())),
                   static_cast<int>(static_cast<unsigned>(ymd.day())), in_day / 60, in_day % 60};
}

std::string FormatLocalMinute(LocalMinute minute) {
  const CivilTime c = ToCivil(minute);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d", c.year, c.month, c.day, c.hour,
                c.minute);
  return buf;
}

bool CronExpr::HasMinute(int minute) const {
  return minute >= 0 && minute <= 59 && (minutes_ >> minute & 1) != 0;
}
bool CronExpr::HasHour(int hour) const {
  return hour >= 0 && hour <= 23 && (hours_ >> hour & 1) != 0;
}
bool CronExpr::HasDayOfMonth(int day) const {
  return day >= 1 && day <= 31 && (days_ >> day & 1) != 0;
}
bool CronExpr::HasMonth(int month) const {
  return month >= 1 && month <= 12 && (months_ >> month & 1) != 0;
}
bool CronExpr::HasDayOfWeek(int weekday) const {
  return weekday >= 0 && weekday <= 6 && (weekdays_ >> weekday & 1) != 0;
}

void CronExpr::Finish() {
  // Normalize the day rule without changing what matches, so that equal
  // behaviour mostly means equal values and ToString is short. With the OR
  // rule, a field that covers every day makes every day match. Once a field
  // covers every day (and is `*`), the AND rule applies and only the other
  // field's days matter; its flag then only decides how it is written: `*/n`
  // when its days are exactly such a step pattern, a plain list otherwise.
  if (DayFieldsOred() && (days_ == kAllDays || weekdays_ == kAllWeekdays)) {
    days_ = kAllDays;
    weekdays_ = kAllWeekdays;
  }
  if (days_ == kAllDays) {
    dom_star_ = true;
    dow_star_ = IsStarPattern(weekdays_, kFields[kDowField]);
  }
  if (weekdays_ == kAllWeekdays) {
    dow_star_ = true;
    dom_star_ = IsStarPattern(days_, kFields[kDomField]);
  }
  for (int first = 0; first < 7; ++first) {
    std::uint32_t mask = 0;
    for (int day = 1; day <= 31; ++day) {
      if ((weekdays_ >> ((first + day - 1) % 7) & 1) != 0) mask |= 1u << day;
    }
    weekday_days_[first] = mask;
  }
  // Every weekday falls on every (month, day) that exists at all, in some
  // year: a date's weekday moves by one or two a year, and Feb 29's moves by
  // five (mod 7) every four years, so each reaches all seven. Hence the
  // expression can fire iff some allowed month has some allowed day
  // (Feb 29 counts) -- or the OR rule lets any allowed weekday through.
  can_fire_ = false;
  if (minutes_ == 0 || hours_ == 0 || months_ == 0 || days_ == 0 || weekdays_ == 0) return;
  if (DayFieldsOred()) {
    can_fire_ = true;
    return;
  }
  for (int month = 1; month <= 12; ++month) {
    if ((months_ >> month & 1) == 0) continue;
    const int max_day = month == 2 ? 29 : DaysInMonth(2001, month);
    if ((days_ & (((std::uint64_t{1} << max_day) - 1) << 1)) != 0) can_fire_ = true;
  }
}

std::uint32_t CronExpr::MatchingDays(int year, int month) const {
  const int days_in_month = DaysInMonth(year, month);
  const std::uint32_t valid =
      static_cast<std::uint32_t>(((std::uint64_t{1} << days_in_month) - 1) << 1);
  const std::uint32_t by_weekday = weekday_days_[WeekdayOfDays(DaysFromCivil(year, month, 1))];
  const std::uint32_t days = DayFieldsOred() ? (days_ | by_weekday) : (days_ & by_weekday);
  return days & valid;
}

bool CronExpr::Matches(LocalMinute minute) const {
  if (minute < kMinSupported || minute > kMaxSupported) return false;
  const CivilTime c = ToCivil(minute);
  return (minutes_ >> c.minute & 1) != 0 && (hours_ >> c.hour & 1) != 0 &&
         (months_ >> c.month & 1) != 0 && (MatchingDays(c.year, c.month) >> c.day & 1) != 0;
}

std::string CronExpr::ToString() const {
  std::string out = FormatField(minutes_, kFields[kMinuteField], false, true);
  out += ' ';
  out += FormatField(hours_, kFields[kHourField], false, true);
  out += ' ';
  out += FormatField(days_, kFields[kDomField], dom_star_, false);
  out += ' ';
  out += FormatField(months_, kFields[kMonthField], false, true);
  out += ' ';
  out += FormatField(weekdays_, kFields[kDowField], dow_star_, false);
  return out;
}

Result<CronExpr> ParseCron(std::string_view text) {
  if (text.size() > kMaxCronLength) {
    return ErrorAt("expression", kMaxCronLength,
                   "longer than " + std::to_string(kMaxCronLength) + " characters");
  }
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && IsSpace(text[begin])) ++begin;
  while (end > begin && IsSpace(text[end - 1])) --end;
  if (begin == end) return ErrorAt("expression", 0, "empty");

  if (text[begin] == '@') {
    std::size_t word_end = begin + 1;
    while (word_end < end && (IsAlpha(text[word_end]) || IsDigit(text[word_end]))) ++word_end;
    const std::string_view word = text.substr(begin, word_end - begin);
    for (const Macro& macro : kMacros) {
      if (!EqualsIgnoreCase(word, macro.name)) continue;
      if (word_end != end) {
        return ErrorAt("expression", word_end, "unexpected text after " + std::string(macro.name));
      }
      Result<CronExpr> expanded = ParseCron(macro.expansion);
      TE_CHECK(expanded.ok());
      return expanded;
    }
    return ErrorAt("macro", begin, "unknown macro " + std::string(word));
  }

  // Split into fields at runs of whitespace.
  struct Span {
    std::size_t begin;
    std::size_t end;
  };
  Span fields[5];
  int count = 0;
  std::size_t pos = begin;
  while (pos < end) {
    const std::size_t field_begin = pos;
    while (pos < end && !IsSpace(text[pos])) ++pos;
    if (count == 5) {
      int total = count;
      for (std::size_t p = field_begin; p < end;) {
        ++total;
        while (p < end && !IsSpace(text[p])) ++p;
        while (p < end && IsSpace(text[p])) ++p;
      }
      return ErrorAt("expression", field_begin,
                     "expected 5 fields, found " + std::to_string(total));
    }
    fields[count++] = Span{field_begin, pos};
    while (pos < end && IsSpace(text[pos])) ++pos;
  }
  if (count < 5) {
    return ErrorAt("expression", end, "expected 5 fields, found " + std::to_string(count));
  }

  std::uint64_t bits[5];
  for (int i = 0; i < 5; ++i) {
    FieldParser parser(text, fields[i].begin, fields[i].end, kFields[i]);
    TE_ASSIGN_OR_RETURN(bits[i], parser.Parse());
  }
  CronExpr cron;
  cron.minutes_ = bits[kMinuteField];
  cron.hours_ = static_cast<std::uint32_t>(bits[kHourField]);
  cron.days_ = static_cast<std::uint32_t>(bits[kDomField]);
  cron.months_ = static_cast<std::uint32_t>(bits[kMonthField]);
  cron.weekdays_ = static_cast<std::uint32_t>(bits[kDowField]);
  cron.dom_star_ = text[fields[kDomField].begin] == '*';
  cron.dow_star_ = text[fields[kDowField].begin] == '*';
  cron.Finish();
  return cron;
}

std::optional<LocalMinute> NextLocal(const CronExpr& cron, LocalMinute after) {
  if (!cron.can_fire_ || after >= kMaxSupported) return std::nullopt;
  const LocalMinute start = after < kMinSupported ? kMinSupported : LocalMinute{after.value + 1};
  const CivilTime c = ToCivil(start);
  int year = c.year;
  int month = c.month;
  int day = c.day;
  int hour = c.hour;
  int minute = c.minute;
  // The calendar, weekdays included, repeats every 400 years (146097 days =
  // 20871 weeks), so an expression that can fire at all (can_fire_ is exact)
  // fires within any 400 consecutive years. Eight years would cover a plain
  // Feb 29 (2096 -> 2104 skips the non-leap 2100), but not Feb 29 restricted
  // to a weekday under the AND rule (`0 0 29 2 */7`: Sundays only, 2088 ->
  // 2128). The bound is a guard; the loop below costs O(1) per month visited.
  const int limit_year = year + 401;
  while (true) {
    if (year > kMaxCronYear || year > limit_year) return std::nullopt;
    const std::uint32_t months = cron.months_ >> month << month;
    if (months == 0) {
      ++year;
      month = 1;
      day = 1;
      hour = 0;
      minute = 0;
      continue;
    }
    const int next_month = std::countr_zero(months);
    if (next_month != month) {
      month = next_month;
      day = 1;
      hour = 0;
      minute = 0;
    }
    // day <= 32 here, so the shifts stay within 64 bits.
    const std::uint64_t days = std::uint64_t{cron.MatchingDays(year, month)} >> day << day;
    if (days == 0) {
      day = 1;
      hour = 0;
      minute = 0;
      if (++month > 12) {
        month = 1;
        ++year;
      }
      continue;
    }
    const int next_day = std::countr_zero(days);
    if (next_day != day) {
      day = next_day;
      hour = 0;
      minute = 0;
    }
    const std::uint64_t hours = std::uint64_t{cron.hours_} >> hour << hour;
    if (hours == 0) {
      ++day;  // may pass the month's end; the day step then moves on
      hour = 0;
      minute = 0;
      continue;
    }
    const int next_hour = std::countr_zero(hours);
    if (next_hour != hour) {
      hour = next_hour;
      minute = 0;
    }
    const std::uint64_t minutes = cron.minutes_ >> minute << minute;
    if (minutes == 0) {
      ++hour;  // may reach 24; the hour step then moves to the next day
      minute = 0;
      continue;
    }
    minute = std::countr_zero(minutes);
    return ToLocalMinute(CivilTime{year, month, day, hour, minute});
  }
}

}  // namespace taskengine
