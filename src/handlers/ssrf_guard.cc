// The SSRF guard's address model (ssrf_guard.h).
#include "handlers/ssrf_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace taskengine {
namespace {

// --- address classes ---------------------------------------------------------

IpAddress V4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  IpAddress ip;
  ip.bytes[0] = a;
  ip.bytes[1] = b;
  ip.bytes[2] = c;
  ip.bytes[3] = d;
  return ip;
}

// True when the first `bits` bits of `a` and `b` are equal.
bool PrefixEquals(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& b,
                  int bits) {
  int i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (a[i] != b[i]) return false;
  }
  if (bits == 0) return true;
  const auto mask = static_cast<std::uint8_t>(0xFF << (8 - bits));
  return (a[i] & mask) == (b[i] & mask);
}

struct Range {
  std::array<std::uint8_t, 16> base;
  int bits;
  AddressClass cls;
};

AddressClass ClassifyV4(const IpAddress& ip) {
  const std::uint8_t a = ip.bytes[0], b = ip.bytes[1], c = ip.bytes[2];
  if (a == 0) return AddressClass::kUnspecified;
  if (a == 127) return AddressClass::kLoopback;
  if (a == 10 || (a == 172 && (b & 0xF0) == 16) || (a == 192 && b == 168)) {
    return AddressClass::kPrivate;
  }
  if (a == 100 && (b & 0xC0) == 64) return AddressClass::kSharedCgnat;
  if (a == 169 && b == 254) return AddressClass::kLinkLocal;
  if ((a & 0xF0) == 224) return AddressClass::kMulticast;
  if ((a & 0xF0) == 240) return AddressClass::kReserved;  // incl. 255.255.255.255
  if (a == 192 && b == 0 && c == 0) return AddressClass::kReserved;
  if (a == 198 && (b & 0xFE) == 18) return AddressClass::kReserved;
  if ((a == 192 && b == 0 && c == 2) || (a == 198 && b == 51 && c == 100) ||
      (a == 203 && b == 0 && c == 113)) {
    return AddressClass::kDocumentation;
  }
  return AddressClass::kPublic;
}

IpAddress EmbeddedV4(const IpAddress& ip, int offset) {
  return V4(ip.bytes[offset], ip.bytes[offset + 1], ip.bytes[offset + 2], ip.bytes[offset + 3]);
}

}  // namespace

std::string StripBrackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::string(host);
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  std::string s = StripBrackets(text);
  IpAddress ip;
  if (s.find(':') != std::string::npos) {
    in6_addr a6{};
    if (inet_pton(AF_INET6, s.c_str(), &a6) != 1) return std::nullopt;
    ip.v6 = true;
    std::memcpy(ip.bytes.data(), &a6, 16);
    return ip;
  }
  if (s.size() != text.size()) return std::nullopt;  // brackets around IPv4
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) != 1) return std::nullopt;
  std::memcpy(ip.bytes.data(), &a4, 4);
  return ip;
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (v6) {
    inet_ntop(AF_INET6, bytes.data(), buf, sizeof(buf));
  } else {
    inet_ntop(AF_INET, bytes.data(), buf, sizeof(buf));
  }
  return buf;
}

std::optional<IpAddress> IpAddress::MappedV4() const {
  if (!v6) return std::nullopt;
  for (int i = 0; i < 10; ++i) {
    if (bytes[i] != 0) return std::nullopt;
  }
  if (bytes[10] != 0xFF || bytes[11] != 0xFF) return std::nullopt;
  return EmbeddedV4(*this, 12);
}

std::string_view ToString(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kSharedCgnat:
      return "shared address space (CGNAT)";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kUniqueLocal:
      return "unique-local";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kReserved:
      return "reserved";
    case AddressClass::kDocumentation:
      return "documentation";
  }
  return "unknown";
}

AddressClass ClassifyAddress(const IpAddress& address) {
  if (!address.v6) return ClassifyV4(address);
  const auto& b = address.bytes;
  bool first12_zero = true;
  for (int i = 0; i < 12; ++i) first12_zero = first12_zero && b[i] == 0;
  if (first12_zero) {
    // ::/96 (IPv4-compatible, incl. :: and ::1).
    bool rest_zero = b[12] == 0 && b[13] == 0 && b[14] == 0;
    if (rest_zero && b[15] == 0) return AddressClass::kUnspecified;
    if (rest_zero && b[15] == 1) return AddressClass::kLoopback;
    return ClassifyV4(EmbeddedV4(address, 12));
  }
  if (auto v4 = address.MappedV4()) return ClassifyV4(*v4);
  static const Range kRanges[] = {
      // 64:ff9b:1::/48 local-use NAT64 before the well-known 64:ff9b::/96.
      {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, AddressClass::kReserved},
      {{0x01, 0x00, 0, 0, 0, 0, 0, 0}, 64, AddressClass::kReserved},  // 100::/64
      {{0x20, 0x01, 0x0d, 0xb8}, 32, AddressClass::kDocumentation},   // 2001:db8::/32
      {{0x20, 0x01, 0x00, 0x00}, 32, AddressClass::kReserved},        // Teredo
      {{0xfc}, 7, AddressClass::kUniqueLocal},                        // fc00::/7
      {{0xfe, 0x80}, 10, AddressClass::kLinkLocal},                   // fe80::/10
      {{0xfe, 0xc0}, 10, AddressClass::kUniqueLocal},                 // fec0::/10
      {{0xff}, 8, AddressClass::kMulticast},                          // ff00::/8
  };
  for (const Range& r : kRanges) {
    if (PrefixEquals(b, r.base, r.bits)) return r.cls;
  }
  // NAT64 64:ff9b::/96 and 6to4 2002::/16 carry an IPv4 address.
  static const std::array<std::uint8_t, 16> kNat64 = {0x00, 0x64, 0xff, 0x9b};
  if (PrefixEquals(b, kNat64, 96)) return ClassifyV4(EmbeddedV4(address, 12));
  if (b[0] == 0x20 && b[1] == 0x02) return ClassifyV4(EmbeddedV4(address, 2));
  return AddressClass::kPublic;
}

std::optional<CidrRange> CidrRange::Parse(std::string_view text) {
  const std::size_t slash = text.find('/');
  auto base = IpAddress::Parse(text.substr(0, slash));
  if (!base) return std::nullopt;
  const int max_bits = base->v6 ? 128 : 32;
  int bits = max_bits;
  if (slash != std::string_view::npos) {
    std::string_view digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    bits = 0;
    for (char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      bits = bits * 10 + (c - '0');
    }
    if (bits > max_bits) return std::nullopt;
  }
  IpAddress masked = *base;
  for (int i = 0; i < 16; ++i) {
    const int keep = std::clamp(bits - 8 * i, 0, 8);
    masked.bytes[i] &= static_cast<std::uint8_t>(0xFF << (8 - keep));
  }
  if (!(masked == *base)) return std::nullopt;  // host bits set: probably a typo
  return CidrRange{*base, bits};
}

bool CidrRange::Contains(const IpAddress& address) const {
  // Compare IPv4 with IPv4 whenever either side is an IPv4-mapped address.
  IpAddress a = address;
  IpAddress b = base;
  int bits = prefix_len;
  if (auto v4 = a.MappedV4()) a = *v4;
  if (bits >= 96) {
    if (auto v4 = b.MappedV4()) {
      b = *v4;
      bits -= 96;
    }
  }
  if (a.v6 != b.v6) return false;
  return PrefixEquals(a.bytes, b.bytes, bits);
}

}  // namespace taskengine
