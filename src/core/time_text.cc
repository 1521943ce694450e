#include "core/time_text.h"

#include <algorithm>
#include <chrono>

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

// Writes `v` (0 <= v < 10^width) as exactly `width` digits, zero-padded.
char* PutDigits(char* p, int v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

bool Expect(std::string_view s, std::size_t& pos, char c) {
  if (pos >= s.size() || s[pos] != c) return false;
  ++pos;
  return true;
}

Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  return InvalidArgument("invalid " + std::string(what) + " '" + std::string(text) + "': " +
                         std::string(why) + " (expected RFC 3339, e.g. 2026-03-01T12:00:00Z)");
}

}  // namespace

std::string FormatTime(Millis ms) {
  ms = std::clamp(ms, kMinFormattable, kMaxFormattable);
  const auto tp = std::chrono::sys_time<milliseconds>(milliseconds(ms));
  const auto day = std::chrono::floor<days>(tp);
  const std::chrono::year_month_day ymd(day);
  const std::chrono::hh_mm_ss<milliseconds> hms(tp - day);
  // No snprintf: API listings and scheduler cycles format many times.
  char buf[24];
  char* p = PutDigits(buf, int(ymd.year()), 4);
  *p++ = '-';
  p = PutDigits(p, int(unsigned(ymd.month())), 2);
  *p++ = '-';
  p = PutDigits(p, int(unsigned(ymd.day())), 2);
  *p++ = 'T';
  p = PutDigits(p, int(hms.hours().count()), 2);
  *p++ = ':';
  p = PutDigits(p, int(hms.minutes().count()), 2);
  *p++ = ':';
  p = PutDigits(p, int(hms.seconds().count()), 2);
  *p++ = '.';
  p = PutDigits(p, int(hms.subseconds().count()), 3);
  *p++ = 'Z';
  return std::string(buf, p);
}

Result<Millis> ParseTime(std::string_view text, std::string_view what) {
  std::size_t pos = 0;
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  if (!ReadDigits(text, pos, 4, y) || !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, mo) ||
      !Expect(text, pos, '-') || !ReadDigits(text, pos, 2, d)) {
    return Bad(what, text, "the date must be YYYY-MM-DD");
  }
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ')) {
    return Bad(what, text, "a time of day must follow the date after 'T'");
  }
  ++pos;
  if (!ReadDigits(text, pos, 2, h) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, mi)) {
    return Bad(what, text, "the time must be HH:MM[:SS[.fff]]");
  }
  Millis frac_ms = 0;
  if (pos < text.size() && text[pos] == ':') {
    ++pos;
    if (!ReadDigits(text, pos, 2, sec)) return Bad(what, text, "seconds must be two digits");
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
      if (digits == 0) return Bad(what, text, "a '.' must be followed by digits");
    }
  }
  Millis offset_min = 0;
  if (pos >= text.size()) {
    return Bad(what, text, "a time zone is required: add 'Z' for UTC or an offset like +02:00");
  }
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!ReadDigits(text, pos, 2, oh) || !Expect(text, pos, ':') || !ReadDigits(text, pos, 2, om) ||
        oh > 23 || om > 59) {
      return Bad(what, text, "the offset must be +HH:MM or -HH:MM");
    }
    offset_min = sign * (oh * 60 + om);
  } else {
    return Bad(what, text,
               "unexpected '" + std::string(1, text[pos]) + "' where the zone should be");
  }
  if (pos != text.size()) return Bad(what, text, "unexpected text after the zone");

  const std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(unsigned(mo)),
                                        std::chrono::day(unsigned(d))};
  if (!ymd.ok()) return Bad(what, text, "no such date");
  // 23:59:60 (a leap second) is folded into the next second, as POSIX time does.
  if (h > 23 || mi > 59 || sec > 60) return Bad(what, text, "no such time of day");
  const Millis day_ms =
      std::chrono::duration_cast<milliseconds>(sys_days(ymd).time_since_epoch()).count();
  const Millis t =
      day_ms + ((Millis(h) * 60 + mi) * 60 + sec) * 1000 + frac_ms - offset_min * 60'000;
  if (t < 0) return Bad(what, text, "times before 1970-01-01T00:00:00Z are not supported");
  return t;
}

std::string FormatTimeSeconds(Millis ms) {
  std::string s = FormatTime(ms - ((ms % 1000) + 1000) % 1000);
  s.erase(s.size() - 5, 4);  // ".000Z" -> "Z"
  return s;
}

}  // namespace taskengine
