#include "core/time_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;

constexpr Millis k2026 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

TEST(TimeTextTest, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatTime(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTime(k2026), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatTime(k2026 + 59 * 86'400'000LL + 3'723'004), "2026-03-01T01:02:03.004Z");
  EXPECT_EQ(FormatTime(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatTime(951'782'400'000), "2000-02-29T00:00:00.000Z");  // leap day
}

TEST(TimeTextTest, ParsesRfc3339) {
  ASSERT_OK_AND_ASSIGN(Millis a, ParseTime("2026-01-01T00:00:00Z"));
  EXPECT_EQ(a, k2026);
  ASSERT_OK_AND_ASSIGN(Millis b, ParseTime("2026-01-01T00:00Z"));
  EXPECT_EQ(b, k2026);
  ASSERT_OK_AND_ASSIGN(Millis c, ParseTime("2026-01-01T02:30:00+02:30"));
  EXPECT_EQ(c, k2026);
  ASSERT_OK_AND_ASSIGN(Millis d, ParseTime("2025-12-31t19:00:00.5-05:00"));
  EXPECT_EQ(d, k2026 + 500);
  ASSERT_OK_AND_ASSIGN(Millis e, ParseTime("2026-01-01 00:00:00.123456z"));
  EXPECT_EQ(e, k2026 + 123);
}

TEST(TimeTextTest, RoundTrips) {
  for (Millis t :
       {Millis{0}, k2026, k2026 + 1, Millis{4'102'444'799'999}, Millis{253'402'300'799'999}}) {
    ASSERT_OK_AND_ASSIGN(Millis back, ParseTime(FormatTime(t)));
    EXPECT_EQ(back, t) << FormatTime(t);
  }
}

TEST(TimeTextTest, RefusesWhatIsNotRfc3339) {
  for (const char* bad :
       {"", "2026", "2026-01-01", "2026-1-01T00:00Z", "2026-01-01T00:00", "2026-02-30T00:00Z",
        "2026-13-01T00:00Z", "2026-01-01T24:00Z", "2026-01-01T00:60Z", "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00+0200", "2026-01-01T00:00Zjunk", "tomorrow", "2026-01-01T00:00:00 UTC",
        "1969-12-31T23:59:59.999Z"}) {
    auto r = ParseTime(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_THAT(r.status().message(), HasSubstr("RFC 3339")) << bad;
    }
  }
  EXPECT_THAT(ParseTime("2026-01-01T00:00").status().message(), HasSubstr("add 'Z'"));
}

TEST(TimeTextTest, FormatsWholeSecondsForPayloads) {
  EXPECT_EQ(FormatTimeSeconds(k2026), "2026-01-01T00:00:00Z");
  EXPECT_EQ(FormatTimeSeconds(k2026 + 5 * 60'000 + 999), "2026-01-01T00:05:00Z");
  EXPECT_EQ(FormatTimeSeconds(-1), "1969-12-31T23:59:59Z");
}

TEST(TimeTextTest, NamesWhatItParsed) {
  auto r = ParseTime("tomorrow", "run_at");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("invalid run_at 'tomorrow'"));
  EXPECT_THAT(ParseTime("1969-12-31T23:59:59Z").status().message(), HasSubstr("before 1970"));
  ASSERT_OK_AND_ASSIGN(Millis leap_second, ParseTime("2016-12-31T23:59:60Z"));
  EXPECT_EQ(FormatTime(leap_second), "2017-01-01T00:00:00.000Z");
}

}  // namespace
}  // namespace taskengine
