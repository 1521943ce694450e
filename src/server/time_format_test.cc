#include "server/time_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::testing::HasSubstr;

constexpr Millis k2026 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

TEST(TimeFormatTest, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatIso8601(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIso8601(k2026), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIso8601(k2026 + 59 * 86'400'000LL + 3'723'004), "2026-03-01T01:02:03.004Z");
  EXPECT_EQ(FormatIso8601(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatIso8601(951'782'400'000), "2000-02-29T00:00:00.000Z");  // leap day
}

TEST(TimeFormatTest, ParsesRfc3339) {
  ASSERT_OK_AND_ASSIGN(Millis a, ParseIso8601("2026-01-01T00:00:00Z"));
  EXPECT_EQ(a, k2026);
  ASSERT_OK_AND_ASSIGN(Millis b, ParseIso8601("2026-01-01T00:00Z"));
  EXPECT_EQ(b, k2026);
  ASSERT_OK_AND_ASSIGN(Millis c, ParseIso8601("2026-01-01T02:30:00+02:30"));
  EXPECT_EQ(c, k2026);
  ASSERT_OK_AND_ASSIGN(Millis d, ParseIso8601("2025-12-31t19:00:00.5-05:00"));
  EXPECT_EQ(d, k2026 + 500);
  ASSERT_OK_AND_ASSIGN(Millis e, ParseIso8601("2026-01-01 00:00:00.123456z"));
  EXPECT_EQ(e, k2026 + 123);
}

TEST(TimeFormatTest, RoundTrips) {
  for (Millis t : {Millis{0}, k2026, k2026 + 1, Millis{4'102'444'799'999}, Millis{-86'400'001}}) {
    ASSERT_OK_AND_ASSIGN(Millis back, ParseIso8601(FormatIso8601(t)));
    EXPECT_EQ(back, t) << FormatIso8601(t);
  }
}

TEST(TimeFormatTest, RefusesWhatIsNotRfc3339) {
  for (const char* bad :
       {"", "2026", "2026-01-01", "2026-1-01T00:00Z", "2026-01-01T00:00", "2026-02-30T00:00Z",
        "2026-13-01T00:00Z", "2026-01-01T24:00Z", "2026-01-01T00:60Z", "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00+0200", "2026-01-01T00:00Zjunk", "tomorrow", "2026-01-01T00:00:00 UTC"}) {
    auto r = ParseIso8601(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_THAT(r.status().message(), HasSubstr("RFC 3339")) << bad;
    }
  }
  EXPECT_THAT(ParseIso8601("2026-01-01T00:00").status().message(), HasSubstr("add 'Z'"));
}

TEST(TimeFormatTest, FormatsDurations) {
  EXPECT_EQ(FormatDuration(0), "0ms");
  EXPECT_EQ(FormatDuration(350), "350ms");
  EXPECT_EQ(FormatDuration(2'500), "2.5s");
  EXPECT_EQ(FormatDuration(59'999), "59.9s");
  EXPECT_EQ(FormatDuration(192'000), "3m12s");
  EXPECT_EQ(FormatDuration(3'720'000), "1h02m");
  EXPECT_EQ(FormatDuration(90'000'000), "1d01h");
  EXPECT_EQ(FormatDuration(-1), "-");
}

}  // namespace
}  // namespace taskengine
