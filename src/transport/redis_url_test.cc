#include "transport/redis_url.h"

#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

TEST(RedisUrlTest, ReadsHostPortPasswordAndDatabase) {
  ASSERT_OK_AND_ASSIGN(RedisUrl u, ParseRedisUrl("redis://127.0.0.1"));
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 6379);
  EXPECT_EQ(u.db, 0);
  EXPECT_TRUE(u.password.empty());
  ASSERT_OK_AND_ASSIGN(u, ParseRedisUrl("redis://:s%40cret@cache.internal:6380/3"));
  EXPECT_EQ(u.host, "cache.internal");
  EXPECT_EQ(u.port, 6380);
  EXPECT_EQ(u.db, 3);
  EXPECT_EQ(u.password, "s@cret");
  EXPECT_TRUE(u.user.empty());
  ASSERT_OK_AND_ASSIGN(u, ParseRedisUrl("redis://app:pw@[::1]:7000/"));
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 7000);
  EXPECT_EQ(u.user, "app");
  EXPECT_EQ(u.password, "pw");
  ASSERT_OK_AND_ASSIGN(u, ParseRedisUrl("redis://onlysecret@h"));
  EXPECT_EQ(u.password, "onlysecret");
  EXPECT_TRUE(u.user.empty());
}

TEST(RedisUrlTest, RefusesWhatItCannotUseWithoutEchoingThePassword) {
  for (const char* bad : {"", "http://h", "redis://", "redis://:pw@", "redis://h:0",
                          "redis://h:70000", "redis://h:x", "redis://h/db", "redis://h/-1",
                          "redis://[::1", "redis://[::1]x", "redis://u%zz:p@h", "redis://u:@h"}) {
    auto r = ParseRedisUrl(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  auto tls = ParseRedisUrl("rediss://:topsecret@h");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.status().message().find("TLS"), std::string::npos);
  auto bad_port = ParseRedisUrl("redis://:topsecret@h:99999");
  ASSERT_FALSE(bad_port.ok());
  EXPECT_EQ(bad_port.status().message().find("topsecret"), std::string::npos);
}

TEST(RedisUrlTest, KeyPrefixes) {
  EXPECT_OK(CheckRedisPrefix("taskengine"));
  EXPECT_OK(CheckRedisPrefix("prod:eu-1.jobs_a"));
  EXPECT_FALSE(CheckRedisPrefix("").ok());
  EXPECT_FALSE(CheckRedisPrefix("a b").ok());
  EXPECT_FALSE(CheckRedisPrefix("{tag}").ok());
  EXPECT_FALSE(CheckRedisPrefix(std::string(65, 'x')).ok());
}

}  // namespace
}  // namespace taskengine
