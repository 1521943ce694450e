// Percent-decoding (RFC 3986) of URL parts: paths and queries of the HTTP
// API, the user and password of database and Redis URLs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace taskengine {

// Percent-decodes `s` ('+' is a space only when plus_is_space). nullopt for a
// '%' not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space = false);

}  // namespace taskengine
