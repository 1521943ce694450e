#include "core/schedule.h"

#include <date/tz.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "core/int_math.h"

namespace taskengine {
namespace {

constexpr Millis kMillisPerMinute = 60'000;
// Larger than any change of UTC offset at one transition (offsets lie within
// -12:00..+14:00; Pacific/Apia skipped a whole day in 2011).
constexpr Millis kMaxOffsetJump = 27LL * 3600 * 1000;

// A sys_info bound in milliseconds, clamped to a little beyond the supported
// range (the first and last intervals of a zone reach year -32767 / 32767).
Millis ClampedMillis(date::sys_seconds t) {
  constexpr std::int64_t kLow = kMinScheduleInstant / 1000 - 3 * 86400;
  constexpr std::int64_t kHigh = kMaxScheduleInstant / 1000 + 3 * 86400;
  return std::clamp<std::int64_t>(t.time_since_epoch().count(), kLow, kHigh) * 1000;
}

Millis ToMillis(LocalMinute m) { return m.value * kMillisPerMinute; }

// Zone names come from configuration and the API: quote them printably.
std::string QuoteName(std::string_view name) {
  std::string out = "\"";
  for (const char c : name.substr(0, 100)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7F && c != '"' && c != '\\') ? c : '?';
  }
  if (name.size() > 100) out += "...";
  return out + "\"";
}

// NextLocal calls for one NextAfter call. The queries come in almost
// ascending order, and an answer stays valid for every query point between
// the one that produced it and itself, so most repeat queries are free.
class NextLocalMemo {
 public:
  explicit NextLocalMemo(const CronExpr& cron) : cron_(cron) {}

  // The first matching wall-clock minute m with ToMillis(m) > wall_ms.
  std::optional<LocalMinute> FirstAfter(Millis wall_ms) {
    const LocalMinute from{FloorDiv(wall_ms, kMillisPerMinute)};
    if (valid_ && from >= from_ && (!result_ || from < *result_)) return result_;
    valid_ = true;
    from_ = from;
    result_ = NextLocal(cron_, from);
    return result_;
  }

 private:
  const CronExpr& cron_;
  bool valid_ = false;
  LocalMinute from_;
  std::optional<LocalMinute> result_;
};

}  // namespace

Result<Schedule> Schedule::Create(std::string_view cron, std::string_view iana_zone) {
  TE_ASSIGN_OR_RETURN(CronExpr expr, ParseCron(cron));
  return Create(expr, iana_zone);
}

Result<Schedule> Schedule::Create(const CronExpr& cron, std::string_view iana_zone) {
  if (iana_zone.empty()) return InvalidArgument("time zone is empty");
  // The date library reports failures with exceptions; none leave this function.
  try {
    date::get_tzdb();
  } catch (const std::exception& e) {
    return Unavailable(std::string("time zone database cannot be read: ") + e.what());
  }
  const date::time_zone* zone = nullptr;
  try {
    zone = date::locate_zone(iana_zone);
  } catch (const std::exception&) {
    return InvalidArgument("unknown time zone " + QuoteName(iana_zone));
  }
  try {
    // The zone's file is read on first use: do it now, so that NextAfter
    // never meets an exception.
    zone->get_info(date::sys_seconds{});
  } catch (const std::exception& e) {
    return Unavailable("time zone " + QuoteName(iana_zone) + " cannot be loaded: " + e.what());
  }
  return Schedule(cron, zone, std::string(iana_zone));
}

// The zone's history is a sequence of intervals [begin, end) of constant UTC
// offset. A wall-clock minute L (as milliseconds) fires at:
//   - L - offset, in the interval whose wall-clock range [begin + offset,
//     end + offset) holds it -- unless the previous interval's wall-clock
//     range holds it too (fall back: L is a second occurrence, and it fired
//     at its first occurrence already);
//   - L - previous offset, when L falls into the gap that opens an interval
//     (spring forward: [begin + previous, begin + offset) does not exist).
// Fires of an interval's own wall-clock range lie in [begin, end); fires of
// its gap lie in [begin, begin + gap). So walking the intervals from the one
// that holds `utc_ms`, and taking in each the first candidate of both kinds,
// the first interval with a candidate gives the answer (the loop still looks
// at later intervals that begin before the best candidate, which only
// matters if an interval were shorter than the gap that opens it).
std::optional<Millis> Schedule::NextAfter(Millis utc_ms) const {
  if (!cron_.CanEverFire() || utc_ms >= kMaxScheduleInstant) return std::nullopt;
  const Millis after = std::max(utc_ms, kMinScheduleInstant);

  date::sys_info info =
      zone_->get_info(date::sys_seconds{std::chrono::seconds{FloorDiv(after, 1000)}});
  Millis begin = ClampedMillis(info.begin);
  Millis end = ClampedMillis(info.end);
  Millis offset = info.offset.count() * 1000;
  // The previous interval matters only when `after` is close to `begin`.
  Millis prev_offset = offset;
  if (after - begin < kMaxOffsetJump) {
    prev_offset = zone_->get_info(info.begin - std::chrono::seconds{1}).offset.count() * 1000;
  }

  NextLocalMemo memo(cron_);
  std::optional<Millis> best;
  const auto offer = [&best](Millis t) {
    if (!best || t < *best) best = t;
  };
  // Each pass moves to a later interval; the bound only guards against a
  // malformed zone (real zones have a few intervals per year).
  for (int pass = 0; pass < 100'000; ++pass) {
    if (best && begin >= *best) break;
    if (offset > prev_offset) {
      // Spring forward at `begin`: wall clock [begin + prev, begin + offset) skipped.
      const std::optional<LocalMinute> skipped =
          memo.FirstAfter(std::max(after, begin - 1) + prev_offset);
      if (skipped && ToMillis(*skipped) < begin + offset) offer(ToMillis(*skipped) - prev_offset);
    }
    // After a fall back, [begin + offset, begin + prev) are second occurrences.
    const Millis first_wall = begin + std::max(offset, prev_offset);
    const std::optional<LocalMinute> local =
        memo.FirstAfter(std::max(after + offset, first_wall - 1));
    if (!local) break;  // nothing later matches at all
    if (ToMillis(*local) < end + offset) offer(ToMillis(*local) - offset);
    if (end > kMaxScheduleInstant) break;  // the zone's last interval
    const date::sys_seconds next_begin = info.end;
    info = zone_->get_info(next_begin);
    if (info.begin != next_begin) break;  // malformed: intervals must tile time
    prev_offset = offset;
    begin = ClampedMillis(info.begin);
    end = ClampedMillis(info.end);
    offset = info.offset.count() * 1000;
  }
  return best;
}

std::vector<Millis> Schedule::Preview(Millis from, int count) const {
  return FiresBetween(from, kMaxScheduleInstant, count);
}

std::vector<Millis> Schedule::FiresBetween(Millis after, Millis until, int max) const {
  std::vector<Millis> fires;
  if (max <= 0 || until <= after) return fires;
  fires.reserve(static_cast<std::size_t>(std::min(max, 1024)));
  Millis t = after;
  while (static_cast<int>(fires.size()) < max) {
    const std::optional<Millis> next = NextAfter(t);
    if (!next || *next > until) break;
    fires.push_back(*next);
    t = *next;
  }
  return fires;
}

}  // namespace taskengine
