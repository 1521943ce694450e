// ISO-8601 / RFC 3339 times for people and scripts (CLI output, --run-at).
//
// Stored times are milliseconds since the Unix epoch, UTC (taskengine::Millis).
// Pure: no I/O, no clock reads.
#pragma once

#include <string>
#include <string_view>

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

// "2026-01-01T00:00:00.000Z". Always UTC, always milliseconds. Defined for
// years 0000..9999; `ms` outside that range is clamped to it.
std::string FormatIso8601(Millis ms);

// Parses an RFC 3339 date-time: "YYYY-MM-DDTHH:MM[:SS[.fraction]]" followed by
// "Z" or an offset "+HH:MM" / "-HH:MM" ('t', 'z' and a space instead of 'T'
// are accepted). The zone is required: a bare local time is ambiguous, so it is
// refused with a message saying to add "Z". Fractions finer than a
// millisecond are truncated. kInvalidArgument names what is wrong.
Result<Millis> ParseIso8601(std::string_view text);

// "350ms", "2.5s", "3m12s", "1h02m": a short human duration. Negative -> "-".
std::string FormatDuration(Millis ms);

}  // namespace taskengine
