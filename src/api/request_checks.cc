#include "api/request_checks.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <iterator>

namespace taskengine::api {
namespace {

char LowerChar(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (LowerChar(a[i]) != LowerChar(b[i])) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A name character of a Host (RFC 3986 reg-name without percent-encoding and
// sub-delimiters, which no DNS name or address uses).
bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

// The canonical text of an IP literal (inet_ntop), or nullopt for a name.
std::optional<std::string> CanonicalAddress(const std::string& host) {
  char text[INET6_ADDRSTRLEN] = {0};
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if (inet_ntop(AF_INET, &v4, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::string(text);
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (inet_ntop(AF_INET6, &v6, text, sizeof(text)) == nullptr) return std::nullopt;
    return std::string(text);
  }
  return std::nullopt;
}

// "localhost", 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104.
bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

// The normalized form a name or address is compared in.
std::string Normalize(std::string host) {
  if (std::optional<std::string> address = CanonicalAddress(host)) return *address;
  return host;
}

// Fields the API reads once (the router and the routes take the first): a
// second copy would let two parties act on different values.
constexpr std::string_view kSingletonFields[] = {"authorization", "content-type",    "origin",
                                                 "x-csrf-token",  "idempotency-key", "expect"};

bool IsMutating(std::string_view method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

HeadProblem Problem(int status, std::string code, std::string message) {
  return HeadProblem{status, std::move(code), std::move(message)};
}

}  // namespace

std::optional<HostAndPort> ParseHostAndPort(std::string_view value) {
  HostAndPort out;
  std::string_view host;
  std::string_view rest;
  if (!value.empty() && value.front() == '[') {
    const std::size_t close = value.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = value.substr(1, close - 1);
    rest = value.substr(close + 1);
    if (host.empty()) return std::nullopt;
    for (char c : host) {
      const char l = LowerChar(c);
      if (!((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f') || l == ':' || l == '.')) {
        return std::nullopt;  // no zone ids, nothing but an address
      }
    }
    out.host.assign(host);
    for (char& c : out.host) c = LowerChar(c);
    in6_addr v6{};
    if (inet_pton(AF_INET6, out.host.c_str(), &v6) != 1) return std::nullopt;
  } else {
    const std::size_t colon = value.find(':');
    host = value.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : value.substr(colon);
    if (host.empty()) return std::nullopt;
    out.host.assign(host);
    for (char& c : out.host) c = LowerChar(c);
    for (char c : out.host) {
      if (!IsNameChar(c)) return std::nullopt;
    }
    if (out.host.back() == '.') out.host.pop_back();
    if (out.host.empty() || out.host.back() == '.') return std::nullopt;
  }
  if (!rest.empty()) {
    if (rest.front() != ':' || rest.size() < 2 || rest.size() > 6) return std::nullopt;
    int port = 0;
    for (char c : rest.substr(1)) {
      if (c < '0' || c > '9') return std::nullopt;
      port = port * 10 + (c - '0');
    }
    if (port > 65535) return std::nullopt;
    out.port = port;
  }
  return out;
}

HostAllowlist::HostAllowlist(std::string_view listen_host,
                             const std::vector<std::string>& public_hosts) {
  std::string listen(listen_host);
  if (listen.size() >= 2 && listen.front() == '[' && listen.back() == ']') {
    listen = listen.substr(1, listen.size() - 2);
  }
  for (char& c : listen) c = LowerChar(c);
  if (std::optional<std::string> address = CanonicalAddress(listen)) {
    if (*address != "0.0.0.0" && *address != "::") names_.push_back(*address);
  }
  for (const std::string& name : public_hosts) {
    std::optional<HostAndPort> parsed = ParseHostAndPort(name);
    if (!parsed) {
      // A bare IPv6 literal ("2001:db8::1") is allowed in the configuration.
      std::optional<HostAndPort> bracketed = ParseHostAndPort("[" + name + "]");
      if (!bracketed) continue;  // the config refuses these; never matches
      parsed = std::move(bracketed);
    }
    names_.push_back(Normalize(parsed->host));
  }
}

bool HostAllowlist::Allows(const std::string& normalized_host) const {
  if (IsLoopback(normalized_host)) return true;
  return std::find(names_.begin(), names_.end(), normalized_host) != names_.end();
}

bool HostAllowlist::AllowsHostHeader(std::string_view value) const {
  std::optional<HostAndPort> parsed = ParseHostAndPort(value);
  return parsed.has_value() && Allows(Normalize(parsed->host));
}

bool HostAllowlist::AllowsOrigin(std::string_view value) const {
  const std::size_t scheme_end = value.find("://");
  if (scheme_end == std::string_view::npos) return false;
  const std::string_view scheme = value.substr(0, scheme_end);
  if (!IEquals(scheme, "http") && !IEquals(scheme, "https")) return false;
  const std::string_view authority = value.substr(scheme_end + 3);
  if (authority.find_first_of("/?#@") != std::string_view::npos) return false;
  return AllowsHostHeader(authority);
}

std::optional<HeadProblem> CheckRequestHead(const RequestHead& head, const HostAllowlist& hosts) {
  if (head.target.empty() || head.target.front() != '/') {
    return Problem(400, "bad_request", "the request target must be a path (\"/...\")");
  }
  std::string_view host;
  int hosts_seen = 0;
  std::vector<std::string_view> transfer_encodings;
  int content_lengths = 0;
  bool content_length_list = false;
  std::optional<std::string_view> origin;
  int singleton_seen[std::size(kSingletonFields)] = {};
  for (const auto& [name, value] : head.fields) {
    if (std::any_of(value.begin(), value.end(),
                    [](char c) { return c == '\r' || c == '\n' || c == '\0'; })) {
      return Problem(400, "bad_request", "a header field value contains CR, LF or NUL");
    }
    for (std::size_t i = 0; i < std::size(kSingletonFields); ++i) {
      if (IEquals(name, kSingletonFields[i]) && ++singleton_seen[i] > 1) {
        return Problem(400, "bad_request",
                       "more than one " + std::string(kSingletonFields[i]) + " header");
      }
    }
    if (IEquals(name, "host")) {
      if (hosts_seen++ == 0) host = value;
    } else if (IEquals(name, "transfer-encoding")) {
      transfer_encodings.push_back(value);
    } else if (IEquals(name, "content-length")) {
      ++content_lengths;
      content_length_list = content_length_list || value.find(',') != std::string_view::npos;
    } else if (IEquals(name, "origin") && !origin) {
      origin = value;
    }
  }
  // Framing first: a request whose body length is in doubt must not be
  // answered as if it were understood.
  if (content_lengths > 1 || content_length_list) {
    return Problem(400, "bad_request", "more than one Content-Length");
  }
  if (!transfer_encodings.empty()) {
    if (head.version < 11) {
      return Problem(400, "bad_request", "Transfer-Encoding is not allowed in an HTTP/1.0 request");
    }
    if (content_lengths > 0) {
      return Problem(400, "bad_request",
                     "a request must not have both Transfer-Encoding and Content-Length");
    }
    std::vector<std::string_view> codings;
    for (std::string_view field : transfer_encodings) {
      while (!field.empty()) {
        const std::size_t comma = field.find(',');
        const std::string_view element = TrimOws(field.substr(0, comma));
        if (!element.empty()) codings.push_back(element);
        if (comma == std::string_view::npos) break;
        field.remove_prefix(comma + 1);
      }
    }
    const auto chunked = [](std::string_view c) { return IEquals(c, "chunked"); };
    if (codings.empty() || !chunked(codings.back()) ||
        std::count_if(codings.begin(), codings.end(), chunked) != 1) {
      return Problem(400, "bad_request",
                     "Transfer-Encoding must be exactly 'chunked' (RFC 9112 section 6.1)");
    }
    if (codings.size() > 1) {
      std::string coding(codings.front().substr(0, 40));
      return Problem(501, "not_implemented", "transfer coding '" + coding + "' is not supported");
    }
  }
  if (hosts_seen == 0) return Problem(400, "bad_request", "missing Host header");
  if (hosts_seen > 1) return Problem(400, "bad_request", "more than one Host header");
  const bool allowed_before = !head.allowed_host.empty() && host == head.allowed_host;
  if (!allowed_before && !ParseHostAndPort(host)) {
    return Problem(400, "bad_request", "malformed Host header");
  }
  if (!allowed_before && !hosts.AllowsHostHeader(host)) {
    return Problem(421, "misdirected_request",
                   "this server does not answer for that Host; add the name to "
                   "[http] public_hosts to serve it");
  }
  if (origin && IsMutating(head.method) && !hosts.AllowsOrigin(*origin)) {
    return Problem(403, "forbidden", "a mutation must come from an origin this server answers for");
  }
  return std::nullopt;
}

}  // namespace taskengine::api
