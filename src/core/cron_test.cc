#include "core/cron.h"

#include <date/date.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

LocalMinute At(int year, int month, int day, int hour = 0, int minute = 0) {
  return ToLocalMinute(CivilTime{year, month, day, hour, minute});
}

CronExpr MustParse(std::string_view text) {
  Result<CronExpr> r = ParseCron(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : CronExpr();
}

std::string Next(std::string_view text, LocalMinute after) {
  const std::optional<LocalMinute> next = NextLocal(MustParse(text), after);
  return next ? FormatLocalMinute(*next) : "none";
}

// The reference matcher: day rule and fields read through the public
// accessors, weekday from the date library. Independent of the bit masks
// NextLocal uses.
bool DayMatches(const CronExpr& cron, int year, int month, int day) {
  const date::local_days d{date::year{year} / date::month{static_cast<unsigned>(month)} /
                           date::day{static_cast<unsigned>(day)}};
  const auto weekday = static_cast<int>(date::weekday{d}.c_encoding());
  if (!cron.HasMonth(month)) return false;
  return cron.DayFieldsOred() ? (cron.HasDayOfMonth(day) || cron.HasDayOfWeek(weekday))
                              : (cron.HasDayOfMonth(day) && cron.HasDayOfWeek(weekday));
}

// Brute force: every minute after `after`, for `days` days, in order. The day
// test is evaluated once per day (it cannot change within one); the hour and
// minute tests once per minute.
std::optional<LocalMinute> BruteNextLocal(const CronExpr& cron, LocalMinute after, int days) {
  const LocalMinute end{after.value + std::int64_t{days} * 1440};
  LocalMinute m{after.value + 1};
  while (m <= end) {
    const CivilTime c = ToCivil(m);
    if (!DayMatches(cron, c.year, c.month, c.day)) {
      m.value += 1440 - (c.hour * 60 + c.minute);  // next midnight
      continue;
    }
    if (cron.HasHour(c.hour) && cron.HasMinute(c.minute)) return m;
    ++m.value;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------- civil time

TEST(LocalMinuteTest, RoundTripsCivilFields) {
  EXPECT_EQ(At(1970, 1, 1).value, 0);
  EXPECT_EQ(At(1969, 12, 31, 23, 59).value, -1);
  EXPECT_EQ(At(1970, 1, 2, 1, 1).value, 1440 + 61);
  for (const CivilTime c : {CivilTime{2028, 2, 29, 23, 59}, CivilTime{1900, 3, 1, 0, 0},
                            CivilTime{9999, 12, 31, 23, 59}, CivilTime{1, 1, 1, 0, 0}}) {
    EXPECT_EQ(ToCivil(ToLocalMinute(c)), c);
  }
  EXPECT_EQ(FormatLocalMinute(At(2026, 3, 8, 3, 30)), "2026-03-08T03:30");
}

// ---------------------------------------------------------------- parsing

TEST(ParseCronTest, NormalizesAcceptedExpressions) {
  const struct {
    const char* text;
    const char* normalized;
  } cases[] = {
      {"* * * * *", "* * * * *"},
      {"  0   12\t* * *  ", "0 12 * * *"},
      {"*/15 * * * *", "*/15 * * * *"},
      {"0,15,30,45 * * * *", "*/15 * * * *"},
      {"*/60 * * * *", "0 * * * *"},
      {"5/20 * * * *", "5,25,45 * * * *"},
      {"10-30/10 * * * *", "10,20,30 * * * *"},
      {"0-4,6,8-9 * * * *", "0-4,6,8-9 * * * *"},
      {"59 23 31 12 6", "59 23 31 12 6"},
      {"0 9 * jan-mar mon,wed", "0 9 * 1-3 1,3"},
      {"0 9 * JAN-Mar Mon,WED", "0 9 * 1-3 1,3"},
      {"0 0 * */3 *", "0 0 * */3 *"},
      {"0 0 * 1,4,7,10 *", "0 0 * */3 *"},
      {"0 0 * oct/1 *", "0 0 * 10-12 *"},
      {"0 0 * * 7", "0 0 * * 0"},
      {"0 0 * * 5-7", "0 0 * * 0,5-6"},
      {"0 0 * * FRI-SUN", "0 0 * * 0,5-6"},
      {"0 0 * * SUN-SUN", "0 0 * * 0"},
      {"0 0 * * SUN-SAT", "0 0 * * *"},
      {"0 0 * * 0-7", "0 0 * * *"},
      {"0 0 * * */2", "0 0 * * */2"},
      {"0 0 * * 0,2,4,6", "0 0 * * */2"},
      {"0 0 * * 1-5", "0 0 * * 1-5"},
      {"0 0 */31 * *", "0 0 1 * *"},
      {"0 0 1,15 * MON", "0 0 1,15 * 1"},
      {"0 0 */2 * 1", "0 0 */2 * 1"},
      {"0 0 */2,4 * 1", "0 0 */2,4 * 1"},
      {"0 0 1 * */7", "0 0 1 * */7"},
      {"0 0 1-31 * 1", "0 0 * * *"},  // OR rule with a full day-of-month: every day
      {"0 0 10 * 0-6", "0 0 * * *"},  // likewise with a full day-of-week
      {"0 0 10 * *", "0 0 10 * *"},
      {"0 0 * * 0-6", "0 0 * * *"},
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
      {" @Daily ", "0 0 * * *"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    ASSERT_OK_AND_ASSIGN(const CronExpr cron, ParseCron(c.text));
    EXPECT_EQ(cron.ToString(), c.normalized);
    ASSERT_OK_AND_ASSIGN(const CronExpr again, ParseCron(cron.ToString()));
    EXPECT_EQ(again, cron);
  }
}

TEST(ParseCronTest, RejectsWithFieldPositionAndReason) {
  const struct {
    std::string text;
    const char* message;
  } cases[] = {
      {"", "expression at position 1: empty"},
      {"  \t ", "expression at position 1: empty"},
      {std::string(257, '*'), "expression at position 257: longer than 256 characters"},
      {"* * * *", "expression at position 8: expected 5 fields, found 4"},
      {"* * * * * *", "expression at position 11: expected 5 fields, found 6"},
      {" 0 0 * * * x y", "expression at position 12: expected 5 fields, found 7"},
      {"60 * * * *", "minute field at position 1: value 60 out of range 0-59"},
      {"0 24 * * *", "hour field at position 3: value 24 out of range 0-23"},
      {"0 0 0 * *", "day-of-month field at position 5: value 0 out of range 1-31"},
      {"0 0 32 * *", "day-of-month field at position 5: value 32 out of range 1-31"},
      {"0 0 * 13 *", "month field at position 7: value 13 out of range 1-12"},
      {"0 0 * 0 *", "month field at position 7: value 0 out of range 1-12"},
      {"0 0 * * 8", "day-of-week field at position 9: value 8 out of range 0-7"},
      {"0 0 1 1 1,2,8", "day-of-week field at position 13: value 8 out of range 0-7"},
      {"99999999999999999999 * * * *",
       "minute field at position 1: value 99999999999999999999 out of range 0-59"},
      {"30-10 * * * *", "minute field at position 1: range 30-10 is reversed"},
      {"0 0 * * 5-1", "day-of-week field at position 9: range 5-1 is reversed"},
      {"0 0 * DEC-JAN *", "month field at position 7: range DEC-JAN is reversed"},
      {"*/0 * * * *", "minute field at position 3: step 0 out of range 1-60"},
      {"0 */25 * * *", "hour field at position 5: step 25 out of range 1-24"},
      {"0 0 * * 1-5/8", "day-of-week field at position 13: step 8 out of range 1-7"},
      {"0 0 1-10/ * *", "day-of-month field at position 10: missing step after '/'"},
      {"5/ * * * *", "minute field at position 3: missing step after '/'"},
      {"*/x * * * *", "minute field at position 3: unexpected character 'x'"},
      {"0 0 * FOO *", "month field at position 7: unknown name FOO"},
      {"0 0 * * MONDAY", "day-of-week field at position 9: unknown name MONDAY"},
      {"JAN * * * *", "minute field at position 1: unexpected character 'J'"},
      {"0 0 MON * *", "day-of-month field at position 5: unexpected character 'M'"},
      {"1,,2 * * * *", "minute field at position 3: empty list element"},
      {",1 * * * *", "minute field at position 1: empty list element"},
      {"1, * * * *", "minute field at position 3: empty list element"},
      {"1- * * * *", "minute field at position 3: missing value"},
      {"-5 * * * *", "minute field at position 1: unexpected character '-'"},
      {"*-5 * * * *", "minute field at position 2: unexpected character '-'"},
      {"0 0 ** * *", "day-of-month field at position 6: unexpected character '*'"},
      {"0 0 * * 1-2-3", "day-of-week field at position 12: unexpected character '-'"},
      {"0 0 * * ?", "day-of-week field at position 9: unexpected character '?'"},
      {std::string("0 0 * * \x01", 9),
       "day-of-week field at position 9: unexpected character byte 0x01"},
      {"0\n0 * * * *", "minute field at position 2: unexpected character byte 0x0A"},
      {"@reboot", "macro at position 1: unknown macro @reboot"},
      {"@", "macro at position 1: unknown macro @"},
      {"  @hourly2", "macro at position 3: unknown macro @hourly2"},
      {"@daily 0", "expression at position 7: unexpected text after @daily"},
      {"@daily!", "expression at position 7: unexpected text after @daily"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const Result<CronExpr> r = ParseCron(c.text);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), c.message);
  }
}

TEST(ParseCronTest, AcceptsExactlyTheLengthLimit) {
  std::string text = "0 0 * * *";
  text.insert(0, kMaxCronLength - text.size(), ' ');
  ASSERT_EQ(text.size(), kMaxCronLength);
  EXPECT_OK(ParseCron(text));
}

TEST(ParseCronTest, FieldsHoldTheParsedValues) {
  ASSERT_OK_AND_ASSIGN(const CronExpr cron, ParseCron("*/20 8-10 1,31 FEB SAT"));
  for (int m = 0; m < 60; ++m) EXPECT_EQ(cron.HasMinute(m), m % 20 == 0) << m;
  for (int h = 0; h < 24; ++h) EXPECT_EQ(cron.HasHour(h), h >= 8 && h <= 10) << h;
  for (int d = 1; d <= 31; ++d) EXPECT_EQ(cron.HasDayOfMonth(d), d == 1 || d == 31) << d;
  for (int mo = 1; mo <= 12; ++mo) EXPECT_EQ(cron.HasMonth(mo), mo == 2) << mo;
  for (int w = 0; w < 7; ++w) EXPECT_EQ(cron.HasDayOfWeek(w), w == 6) << w;
  EXPECT_FALSE(cron.HasMinute(60));
  EXPECT_FALSE(cron.HasDayOfWeek(7));
  EXPECT_TRUE(cron.DayFieldsOred());
}

// ---------------------------------------------------------------- day rule

TEST(CronDayRuleTest, BothRestrictedMeansEither) {
  // 2026-06-01 is a Monday; 2026-06-15 a Monday too; 2026-06-10 a Wednesday.
  const CronExpr cron = MustParse("0 0 10 * MON");
  EXPECT_TRUE(cron.DayFieldsOred());
  EXPECT_TRUE(cron.Matches(At(2026, 6, 1)));          // Monday, not the 10th
  EXPECT_TRUE(cron.Matches(At(2026, 6, 10)));         // the 10th, a Wednesday
  EXPECT_FALSE(cron.Matches(At(2026, 6, 11)));        // neither
  EXPECT_FALSE(cron.Matches(At(2026, 6, 10, 0, 1)));  // right day, wrong minute
  EXPECT_EQ(Next("0 0 10 * MON", At(2026, 6, 1)), "2026-06-08T00:00");
  EXPECT_EQ(Next("0 0 10 * MON", At(2026, 6, 8)), "2026-06-10T00:00");
}

TEST(CronDayRuleTest, AStarFieldMeansBoth) {
  // Day-of-month `*`: Mondays only.
  EXPECT_EQ(Next("0 0 * * MON", At(2026, 6, 1)), "2026-06-08T00:00");
  // Day-of-week `*`: the 10th only.
  EXPECT_EQ(Next("0 0 10 * *", At(2026, 6, 1)), "2026-06-10T00:00");
  // `*/2` starts with `*`, so it is unrestricted: odd days that are Mondays
  // (classic cron). June 2026: Mondays 1, 8, 15, 22, 29 -> 15 after the 1st.
  const CronExpr odd_mondays = MustParse("0 0 */2 * 1");
  EXPECT_FALSE(odd_mondays.DayFieldsOred());
  EXPECT_FALSE(odd_mondays.Matches(At(2026, 6, 3)));  // odd, a Wednesday
  EXPECT_FALSE(odd_mondays.Matches(At(2026, 6, 8)));  // Monday, even
  EXPECT_EQ(Next("0 0 */2 * 1", At(2026, 6, 1)), "2026-06-15T00:00");
  // And on the weekday side: the 1st of a month that is a Sunday.
  EXPECT_EQ(Next("0 0 1 * */7", At(2026, 1, 1)), "2026-02-01T00:00");
  EXPECT_EQ(Next("0 0 1 * */7", At(2026, 2, 1)), "2026-03-01T00:00");
  EXPECT_EQ(Next("0 0 1 * */7", At(2026, 3, 1)), "2026-11-01T00:00");
}

TEST(CronStepTest, StepsAndRanges) {
  EXPECT_EQ(Next("*/15 * * * *", At(2026, 1, 1, 0, 0)), "2026-01-01T00:15");
  EXPECT_EQ(Next("*/15 * * * *", At(2026, 1, 1, 0, 50)), "2026-01-01T01:00");
  EXPECT_EQ(Next("10-30/10 * * * *", At(2026, 1, 1, 0, 30)), "2026-01-01T01:10");
  EXPECT_EQ(Next("5/20 * * * *", At(2026, 1, 1, 0, 45)), "2026-01-01T01:05");
  EXPECT_EQ(Next("0 */6 * * *", At(2026, 1, 1, 18, 0)), "2026-01-02T00:00");
  EXPECT_EQ(Next("0 0 * * FRI-SUN", At(2026, 6, 1)), "2026-06-05T00:00");  // Friday
  EXPECT_EQ(Next("0 0 * * FRI-SUN", At(2026, 6, 6)), "2026-06-07T00:00");  // Sunday
}

// ---------------------------------------------------------------- next fire

TEST(NextLocalTest, IsStrictlyAfter) {
  EXPECT_EQ(Next("30 9 * * *", At(2026, 5, 5, 9, 29)), "2026-05-05T09:30");
  EXPECT_EQ(Next("30 9 * * *", At(2026, 5, 5, 9, 30)), "2026-05-06T09:30");
  EXPECT_EQ(Next("* * * * *", At(2026, 5, 5, 9, 30)), "2026-05-05T09:31");
}

TEST(NextLocalTest, CrossesMonthAndYearEnds) {
  EXPECT_EQ(Next("* * * * *", At(2026, 1, 31, 23, 59)), "2026-02-01T00:00");
  EXPECT_EQ(Next("0 0 31 * *", At(2026, 1, 31)), "2026-03-31T00:00");
  EXPECT_EQ(Next("0 0 31 * *", At(2026, 8, 31)), "2026-10-31T00:00");
  EXPECT_EQ(Next("* * * * *", At(2026, 12, 31, 23, 59)), "2027-01-01T00:00");
  EXPECT_EQ(Next("@yearly", At(2026, 6, 15)), "2027-01-01T00:00");
  EXPECT_EQ(Next("59 23 31 12 *", At(2026, 12, 31, 23, 59)), "2027-12-31T23:59");
  EXPECT_EQ(Next("0 12 * 2 *", At(2026, 2, 28, 12, 0)), "2027-02-01T12:00");
  EXPECT_EQ(Next("@monthly", At(2026, 12, 1)), "2027-01-01T00:00");
  EXPECT_EQ(Next("@weekly", At(2026, 6, 1)), "2026-06-07T00:00");  // Sunday
  EXPECT_EQ(Next("@hourly", At(2026, 6, 1, 23, 0)), "2026-06-02T00:00");
}

TEST(NextLocalTest, LeapYears) {
  EXPECT_EQ(Next("0 0 29 2 *", At(2026, 1, 1)), "2028-02-29T00:00");
  EXPECT_EQ(Next("0 0 29 2 *", At(2028, 2, 29)), "2032-02-29T00:00");
  // 2100 is not a leap year: eight years from 2096 to 2104.
  EXPECT_EQ(Next("0 0 29 2 *", At(2096, 3, 1)), "2104-02-29T00:00");
  // 2000 is.
  EXPECT_EQ(Next("0 0 29 2 *", At(1997, 1, 1)), "2000-02-29T00:00");
  EXPECT_EQ(Next("0 0 28-31 2 *", At(2027, 2, 28)), "2028-02-28T00:00");
  // Feb 29 that is a Sunday (AND rule through `*/7`): 2032, 2060, 2088, then
  // 2128 -- forty years, far beyond an eight-year search.
  EXPECT_EQ(Next("0 0 29 2 */7", At(2026, 1, 1)), "2032-02-29T00:00");
  EXPECT_EQ(Next("0 0 29 2 */7", At(2088, 3, 1)), "2128-02-29T00:00");
  const date::local_days d{date::year{2128} / 2 / 29};
  EXPECT_EQ(date::weekday{d}, date::Sunday);
}

TEST(NextLocalTest, ImpossibleDatesNeverFire) {
  for (const char* text :
       {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30-31 2 *", "0 0 31 2 */7", "0 0 30 2 */2"}) {
    SCOPED_TRACE(text);
    const CronExpr cron = MustParse(text);
    EXPECT_FALSE(cron.CanEverFire());
    EXPECT_EQ(NextLocal(cron, At(2026, 1, 1)), std::nullopt);
    EXPECT_EQ(NextLocal(cron, At(1, 1, 1)), std::nullopt);
  }
  // With the OR rule a weekday gets through even when the date cannot.
  for (const char* text : {"0 0 30 2 MON", "0 0 29 2 *", "0 0 31 * *", "0 0 31 1-4 *"}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(MustParse(text).CanEverFire());
  }
  EXPECT_EQ(Next("0 0 30 2 MON", At(2026, 1, 1)), "2026-02-02T00:00");
  EXPECT_FALSE(CronExpr().CanEverFire());
  EXPECT_EQ(NextLocal(CronExpr(), At(2026, 1, 1)), std::nullopt);
}

TEST(NextLocalTest, EndsAtYear9999) {
  EXPECT_EQ(Next("59 23 31 12 *", At(9999, 12, 31, 23, 58)), "9999-12-31T23:59");
  EXPECT_EQ(Next("59 23 31 12 *", At(9999, 12, 31, 23, 59)), "none");
  EXPECT_EQ(Next("0 0 1 1 *", At(9999, 1, 1)), "none");
  EXPECT_EQ(Next("* * * * *", LocalMinute{INT64_MAX}), "none");
  // Before year 1 the search starts at 0001-01-01T00:00.
  EXPECT_EQ(Next("* * * * *", LocalMinute{INT64_MIN}), "0001-01-01T00:00");
}

// ---------------------------------------------------------------- property

// A random valid expression, built from every element form.
class RandomCron {
 public:
  explicit RandomCron(std::uint64_t seed) : rng_(seed) {}

  std::string Next() {
    std::string text;
    text += Field(0, 59, nullptr, 0) + " ";
    text += Field(0, 23, nullptr, 0) + " ";
    // Rare or impossible days in some months, to reach far and to say "none".
    if (Uniform(0, 4) == 0) {
      text += std::to_string(Uniform(28, 31)) + " " + std::to_string(Uniform(1, 12)) + " ";
      text += Uniform(0, 1) ? "*" : Field(0, 7, kDays, 0);
      return text;
    }
    text += Field(1, 31, nullptr, 0) + " ";
    text += Field(1, 12, kMonths, 1) + " ";
    text += Field(0, 7, kDays, 0);
    return text;
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  static constexpr const char* kMonths[] = {"jan", "FEB", "Mar", "apr", "MAY", "jun",
                                            "JUL", "aug", "SEP", "oct", "Nov", "DEC"};
  static constexpr const char* kDays[] = {"sun", "MON", "Tue", "wed", "THU", "fri", "SAT"};

  std::string Value(int v, int lo, const char* const* names, int base) {
    if (names != nullptr && v - base < (names == kDays ? 7 : 12) && Uniform(0, 2) == 0) {
      return names[v - base];
    }
    return std::to_string(v);
  }

  std::string Element(int lo, int hi, const char* const* names, int base) {
    const int span = hi - lo + 1;
    switch (Uniform(0, 6)) {
      case 0:
        return "*";
      case 1:
        return "*/" + std::to_string(Uniform(1, std::min(span, hi == 7 ? 7 : span)));
      case 2: {
        const int a = Uniform(lo, hi);
        const int b = Uniform(a, hi);
        return Value(a, lo, names, base) + "-" + Value(b, lo, names, base) + "/" +
               std::to_string(Uniform(1, hi == 7 ? 7 : span));
      }
      case 3: {
        const int a = Uniform(lo, hi);
        return Value(a, lo, names, base) + "/" + std::to_string(Uniform(1, hi == 7 ? 7 : span));
      }
      case 4: {
        const int a = Uniform(lo, hi);
        return Value(a, lo, names, base) + "-" + Value(Uniform(a, hi), lo, names, base);
      }
      default:
        return Value(Uniform(lo, hi), lo, names, base);
    }
  }

  std::string Field(int lo, int hi, const char* const* names, int base) {
    std::string out = Element(lo, hi, names, base);
    for (int n = Uniform(0, 3) == 0 ? Uniform(1, 3) : 0; n > 0; --n) {
      out += ',';
      out += Element(lo, hi, names, base);
    }
    return out;
  }

  std::mt19937_64 rng_;
};

std::uint64_t TestSeed() {
  const char* env = std::getenv("TASKENGINE_TEST_SEED");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 20260308;
}

TEST(NextLocalPropertyTest, AgreesWithBruteForceOverAYear) {
  const std::uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with TASKENGINE_TEST_SEED=<seed>)");
  RandomCron gen(seed);
  constexpr int kWindowDays = 366;
  int found = 0;
  int none = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string text = gen.Next();
    SCOPED_TRACE(text);
    ASSERT_OK_AND_ASSIGN(const CronExpr cron, ParseCron(text));
    // Normalization round-trips.
    ASSERT_OK_AND_ASSIGN(const CronExpr again, ParseCron(cron.ToString()));
    ASSERT_EQ(again, cron) << cron.ToString();
    ASSERT_EQ(again.ToString(), cron.ToString());
    for (int k = 0; k < 2; ++k) {
      // 1970..2100, minute-aligned; half of them just before a month's end.
      LocalMinute after{std::uniform_int_distribution<std::int64_t>(
          0, std::int64_t{131} * 365 * 1440)(gen.rng())};
      if (k == 1) {
        const CivilTime c = ToCivil(after);
        const int last = static_cast<int>(static_cast<unsigned>(
            date::year_month_day_last{date::year{c.year} / date::month(c.month) / date::last}
                .day()));
        after = At(c.year, c.month, last, 23, gen.Uniform(0, 59));
      }
      SCOPED_TRACE("after " + FormatLocalMinute(after));
      const std::optional<LocalMinute> fast = NextLocal(cron, after);
      const std::optional<LocalMinute> brute = BruteNextLocal(cron, after, kWindowDays);
      if (brute) {
        ++found;
        ASSERT_TRUE(fast.has_value());
        ASSERT_EQ(FormatLocalMinute(*fast), FormatLocalMinute(*brute));
      } else {
        ++none;
        // Nothing within the year: NextLocal must not invent one.
        if (fast) {
          ASSERT_GT(fast->value, after.value + kWindowDays * 1440) << FormatLocalMinute(*fast);
          ASSERT_TRUE(cron.Matches(*fast));
        }
      }
      if (!cron.CanEverFire()) {
        ASSERT_FALSE(fast.has_value());
      }
      if (fast) {
        ASSERT_TRUE(cron.Matches(*fast));
      }
    }
  }
  // The generator reaches both outcomes.
  EXPECT_GT(found, 400);
  EXPECT_GT(none, 0);
}

}  // namespace
}  // namespace taskengine
