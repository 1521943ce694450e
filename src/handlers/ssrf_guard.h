// The SSRF guard's address model: IP addresses, their classes (what the
// guard refuses unless exempted) and CIDR ranges. Pure functions and values;
// the `http` handler resolves and pins with them, and every outbound request
// of the server (webhooks too) goes through the same classes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace taskengine {

// "[::1]" -> "::1": an IPv6 literal of a URL without its brackets; other
// hosts unchanged.
std::string StripBrackets(std::string_view host);

// An IPv4 or IPv6 address. Immutable value.
struct IpAddress {
  bool v6 = false;
  // Network byte order; IPv4 uses the first 4 bytes.
  std::array<std::uint8_t, 16> bytes{};

  // "192.0.2.1", "::1", "[::1]", "::ffff:10.0.0.1". nullopt otherwise (no
  // host names, no zone ids, no shorthand such as "127.1").
  static std::optional<IpAddress> Parse(std::string_view text);
  // Canonical text (inet_ntop), without brackets.
  [[nodiscard]] std::string ToString() const;
  // The embedded IPv4 address of an IPv4-mapped (::ffff:0:0/96) address; nullopt otherwise.
  [[nodiscard]] std::optional<IpAddress> MappedV4() const;
  bool operator==(const IpAddress& other) const = default;
};

// What the SSRF guard thinks of an address. Everything but kPublic is refused
// unless exempted by allow_private.
enum class AddressClass {
  kPublic,
  kUnspecified,    // 0.0.0.0/8, ::
  kLoopback,       // 127.0.0.0/8, ::1
  kPrivate,        // 10/8, 172.16/12, 192.168/16
  kSharedCgnat,    // 100.64.0.0/10
  kLinkLocal,      // 169.254/16, fe80::/10
  kUniqueLocal,    // fc00::/7 (and the deprecated site-local fec0::/10)
  kMulticast,      // 224/4, ff00::/8
  kReserved,       // 240/4 incl. 255.255.255.255, 192.0.0/24, 198.18/15, 64:ff9b:1::/48,
                   // 100::/64, Teredo 2001::/32
  kDocumentation,  // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32
};
std::string_view ToString(AddressClass c);

// Classifies `address`. IPv6 forms that embed an IPv4 address (IPv4-mapped
// ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16)
// are classified by the embedded address (e.g. ::ffff:127.0.0.1 is kLoopback).
// Pure function; thread-safe.
AddressClass ClassifyAddress(const IpAddress& address);

// An address range. Immutable value.
struct CidrRange {
  IpAddress base;  // host bits cleared
  int prefix_len = 0;

  // "10.0.0.0/8", "fc00::/7", or a single address ("127.0.0.1" = /32, "::1" =
  // /128). Host bits set in the base are refused. nullopt when malformed.
  static std::optional<CidrRange> Parse(std::string_view text);
  // True when `address` is inside. IPv4-mapped IPv6 addresses match IPv4
  // ranges (and an IPv4 address matches a ::ffff:0:0/96-style range).
  [[nodiscard]] bool Contains(const IpAddress& address) const;
};

}  // namespace taskengine
