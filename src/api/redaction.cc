#include "api/redaction.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace taskengine::api {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::array<std::string_view, 5> kSecretNames = {"password", "secret", "token", "api_key",
                                                          "authorization"};
constexpr std::array<std::string_view, 2> kSecretMaps = {"headers", "env"};

bool SameName(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return lower(x) == lower(y);
  });
}

template <typename Names>
bool Named(std::string_view name, const Names& names) {
  return std::any_of(names.begin(), names.end(),
                     [&](const auto& n) { return SameName(name, std::string_view(n)); });
}

// "scheme://user:pw@host/..." -> "scheme://[redacted]@host/..."; other text as is.
std::string WithoutUserInfo(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const std::size_t start = scheme + 3;
  const std::size_t end = url.find_first_of("/?#", start);
  const std::size_t at = url.rfind('@', end == std::string::npos ? url.size() : end);
  if (at == std::string::npos || at < start) return url;
  return url.substr(0, start) + kRedacted + url.substr(at);
}

Json Redact(const Json& value, const std::vector<std::string>& keys) {
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& item : value) out.push_back(Redact(item, keys));
    return out;
  }
  if (!value.is_object()) return value;
  Json out = Json::object();
  for (const auto& [name, member] : value.items()) {
    if (Named(name, kSecretNames) || Named(name, keys)) {
      out[name] = kRedacted;
    } else if (Named(name, kSecretMaps) && member.is_object()) {
      Json masked = Json::object();
      for (const auto& [entry, ignored] : member.items()) masked[entry] = kRedacted;
      out[name] = std::move(masked);
    } else if (Named(name, kSecretMaps) && !member.is_null()) {
      out[name] = kRedacted;
    } else if (SameName(name, "url") && member.is_string()) {
      out[name] = WithoutUserInfo(member.get<std::string>());
    } else {
      out[name] = Redact(member, keys);
    }
  }
  return out;
}

}  // namespace

Json RedactJobConfig(const Json& config, bool reveal, const std::vector<std::string>& keys) {
  if (reveal) return config;
  return Redact(config, keys);
}

}  // namespace taskengine::api
