#include "transport/redis_url.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "core/percent.h"

namespace taskengine {
namespace {

Status BadUrl(std::string_view why) {
  return InvalidArgument("bad Redis URL (want redis://[[user]:password@]host[:port][/db]): " +
                         std::string(why));
}

bool ParseInt(std::string_view text, int min, int max, int& out) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < min || v > max) return false;
  out = v;
  return true;
}

}  // namespace

bool IsRedisKeyPart(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

Status CheckRedisPrefix(std::string_view prefix) {
  if (!IsRedisKeyPart(prefix, 64)) {
    return InvalidArgument("the Redis key prefix must be 1..64 characters of A-Z a-z 0-9 _ . : -");
  }
  return Status::Ok();
}

Result<RedisUrl> ParseRedisUrl(std::string_view url) {
  constexpr std::string_view kScheme = "redis://";
  if (url.rfind("rediss://", 0) == 0) {
    return BadUrl(
        "rediss:// (TLS) is not supported; reach Redis over a trusted network or a "
        "TLS tunnel");
  }
  if (url.rfind(kScheme, 0) != 0) return BadUrl("it must start with redis://");
  std::string_view rest = url.substr(kScheme.size());
  RedisUrl out;
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  if (const std::size_t q = path.find('?'); q != std::string_view::npos) path = path.substr(0, q);
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const std::size_t colon = userinfo.find(':');
    std::optional<std::string> user = PercentDecode(userinfo.substr(0, colon));
    if (!user) return BadUrl("bad percent escape in the user");
    out.user = std::move(*user);
    if (colon != std::string_view::npos) {
      std::optional<std::string> password = PercentDecode(userinfo.substr(colon + 1));
      if (!password) return BadUrl("bad percent escape in the password");
      out.password = std::move(*password);
    } else if (!out.user.empty()) {
      // redis://secret@host: the one word is the password (as redis-cli reads it).
      out.password = std::move(out.user);
      out.user.clear();
    }
    if (!out.user.empty() && out.password.empty()) return BadUrl("a user needs a password");
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return BadUrl("unclosed '[' in the host");
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return BadUrl("junk after the host");
      port = after.substr(1);
    }
  } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return BadUrl("no host");
  out.host = std::string(host);
  if (!port.empty() && !ParseInt(port, 1, 65535, out.port)) {
    return BadUrl("the port must be 1..65535");
  }
  if (!path.empty() && !ParseInt(path, 0, 1'000'000, out.db)) {
    return BadUrl("the database must be a number");
  }
  return out;
}

}  // namespace taskengine
