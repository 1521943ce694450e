// Redis URLs and key names of the Redis transport (redis_transport.h), apart
// from it so that configuration checks need no Redis client library.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "taskengine/status.h"

namespace taskengine {

// redis://[[user]:password@]host[:port][/db]: port 6379 and db 0 by default;
// user and password percent-decoded. kInvalidArgument (naming the problem,
// never the password) for anything else, rediss:// (TLS) included.
struct RedisUrl {
  std::string host;
  int port = 6379;
  std::string user;      // empty: AUTH with the password only
  std::string password;  // empty: no AUTH
  int db = 0;
};
Result<RedisUrl> ParseRedisUrl(std::string_view url);

// True for 1..max characters of A-Z a-z 0-9 _ . : - (a part of a key name).
bool IsRedisKeyPart(std::string_view s, std::size_t max);
// kInvalidArgument unless `prefix` is a valid key prefix (1..64 such characters).
Status CheckRedisPrefix(std::string_view prefix);

}  // namespace taskengine
