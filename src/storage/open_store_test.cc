#include "storage/open_store.h"

#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

TEST(OpenStoreTest, RecognizesPostgresUrls) {
  EXPECT_TRUE(IsPostgresUrl("postgres://u@h/db"));
  EXPECT_TRUE(IsPostgresUrl("postgresql://u@h:5432/db"));
  EXPECT_FALSE(IsPostgresUrl("mysql://u@h/db"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/te.db"));
  EXPECT_FALSE(IsPostgresUrl(""));
}

TEST(OpenStoreTest, RedactUrlHidesOnlyThePassword) {
  EXPECT_EQ(RedactUrl("postgres://app:s3cret@db:5432/jobs"), "postgres://app:***@db:5432/jobs");
  EXPECT_EQ(RedactUrl("postgres://app@db/jobs"), "postgres://app@db/jobs");
  EXPECT_EQ(RedactUrl("postgres://db:5432/jobs"), "postgres://db:5432/jobs");
  EXPECT_EQ(RedactUrl("redis://:s3cret@cache:6379/2"), "redis://:***@cache:6379/2");
  EXPECT_EQ(RedactUrl("redis://s3cret@cache"), "redis://***@cache");
  EXPECT_EQ(RedactUrl("redis://cache:6379"), "redis://cache:6379");
  EXPECT_EQ(RedactUrl("postgresql://a:p%40ss@h/d"), "postgresql://a:***@h/d");
}

TEST(OpenStoreTest, RefusesAnUrlOfAnotherScheme) {
  StoreLocation location;
  location.url = "mssql://u@h/db";
  auto opened = OpenStore(location, nullptr, nullptr);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kInvalidArgument);
}

TEST(OpenStoreTest, MariaDbUrlsSelectMariaDb) {
  EXPECT_TRUE(IsMariaDbUrl("mysql://u@h/db"));
  EXPECT_TRUE(IsMariaDbUrl("mariadb://u@h/db"));
  EXPECT_FALSE(IsMariaDbUrl("postgres://u@h/db"));
  StoreLocation location;
  // A malformed one is refused before anything connects.
  location.url = "mysql://u@h:99999/db";
  auto bad = OpenStore(location, nullptr, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  // A server that does not answer: unavailable (port 1 on loopback refuses).
  location.url = "mysql://u@127.0.0.1:1/db";
  auto down = OpenStore(location, nullptr, nullptr);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), ErrorCode::kUnavailable);
}

TEST(OpenStoreTest, OpensSqliteWithTheSystemClockByDefault) {
  TempDir dir;
  StoreLocation location;
  location.path = dir.File("sub/te.db");
  ASSERT_OK_AND_ASSIGN(OpenedStore opened, OpenStore(location, nullptr, nullptr));
  ASSERT_NE(opened.store, nullptr);
  EXPECT_EQ(opened.clock, SystemClock::Get());
  EXPECT_EQ(opened.owned_clock, nullptr);
  EXPECT_OK(opened.store->Migrate());
}

}  // namespace
}  // namespace taskengine
