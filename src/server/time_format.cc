#include "server/time_format.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace taskengine {
namespace {

using std::chrono::days;
using std::chrono::milliseconds;
using std::chrono::sys_days;

// -62167219200000 = 0000-01-01T00:00:00Z; 253402300799999 = 9999-12-31T23:59:59.999Z.
constexpr Millis kMinFormattable = -62'167'219'200'000;
constexpr Millis kMaxFormattable = 253'402'300'799'999;

// Reads exactly `n` decimal digits at `pos`, advancing it.
bool ReadDigits(std::string_view s, std::size_t& pos, int n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  pos += n;
  out = v;
  return true;
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

Status Bad(std::string_view text, std::string_view why) {
  return InvalidArgument("invalid time '" + std::string(text) + "': " + std::string(why) +
                         " (expected RFC 3339, e.g. 2026-03-01T12:00:00Z)");
}

}  // namespace

std::string FormatIso8601(Millis ms) {
  ms = std::clamp(ms, kMinFormattable, kMaxFormattable);
  const auto tp = std::chrono::sys_time<milliseconds>(milliseconds(ms));
  const auto day = std::chrono::floor<days>(tp);
  const std::chrono::year_month_day ymd(day);
  const std::chrono::hh_mm_ss<milliseconds> hms(tp - day);
  char buf[64];  // 24 bytes in the clamped range; room for what the compiler cannot prove
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", int(ymd.year()),
                unsigned(ymd.month()), unsigned(ymd.day()), int(hms.hours().count()),
                int(hms.minutes().count()), int(hms.seconds().count()),
                int(hms.subseconds().count()));
  return buf;
}

Result<Millis> ParseIso8601(std::string_view text) {
  std::size_t pos = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!ReadDigits(text, pos, 4, y) || !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, mo) ||
      !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, d)) {
    return Bad(text, "the date must be YYYY-MM-DD");
  }
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')) {
    return Bad(text, "a time of day must follow the date after 'T'");
  }
  ++pos;
  if (!ReadDigits(text, pos, 2, h) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, mi)) {
    return Bad(text, "the time must be HH:MM[:SS[.fff]]");
  }
  Millis frac_ms = 0;
  if (pos < text.size() && text[pos] == ':') {
    ++pos;
    if (!ReadDigits(text, pos, 2, sec)) return Bad(text, "seconds must be two digits");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      int digits = 0;
      Millis scale = 100;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        frac_ms += (text[pos] - '0') * scale;
        scale /= 10;
        ++digits;
        ++pos;
      }
      if (digits == 0) return Bad(text, "a '.' must be followed by digits");
    }
  }
  Millis offset_min = 0;
  if (pos >= text.size()) {
    return Bad(text, "a time zone is required: add 'Z' for UTC or an offset like +02:00");
  }
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!ReadDigits(text, pos, 2, oh) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, om) ||
        oh > 23 || om > 59) {
      return Bad(text, "the offset must be +HH:MM or -HH:MM");
    }
    offset_min = sign * (oh * 60 + om);
  } else {
    return Bad(text, "unexpected '" + std::string(1, text[pos]) + "' where the zone should be");
  }
  if (pos != text.size()) return Bad(text, "unexpected text after the zone");

  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(unsigned(mo)),
                                        std::chrono::day(unsigned(d))};
  if (!ymd.ok()) return Bad(text, "no such date");
  // 23:59:60 (a leap second) is folded into the next second, as POSIX time does.
  if (h > 23 || mi > 59 || sec > 60) return Bad(text, "no such time of day");
  const Millis day_ms =
      std::chrono::duration_cast<milliseconds>(sys_days(ymd).time_since_epoch()).count();
  return day_ms + ((Millis(h) * 60 + mi) * 60 + sec) * 1000 + frac_ms - offset_min * 60'000;
}

std::string FormatDuration(Millis ms) {
  if (ms < 0) return "-";
  char buf[48];
  if (ms < 1000) {
    std::snprintf(buf, sizeof(buf), "%lldms", static_cast<long long>(ms));
  } else if (ms < 60'000) {
    std::snprintf(buf, sizeof(buf), "%lld.%llds", static_cast<long long>(ms / 1000),
                  static_cast<long long>(ms % 1000 / 100));
  } else if (ms < 3'600'000) {
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", static_cast<long long>(ms / 60'000),
                  static_cast<long long>(ms / 1000 % 60));
  } else if (ms < 86'400'000) {
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", static_cast<long long>(ms / 3'600'000),
                  static_cast<long long>(ms / 60'000 % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lldd%02lldh", static_cast<long long>(ms / 86'400'000),
                  static_cast<long long>(ms / 3'600'000 % 24));
  }
  return buf;
}

}  // namespace taskengine
