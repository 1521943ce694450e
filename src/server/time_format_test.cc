#include "server/time_format.h"

#include <gtest/gtest.h>

namespace taskengine {
namespace {

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
