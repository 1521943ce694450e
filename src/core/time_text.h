// RFC 3339 text for stored times: the one place where taskengine turns a time
// (taskengine::Millis: milliseconds since the Unix epoch, UTC) into text and
// back, for the API, the CLI, logs and scheduled payloads.
// Pure: no I/O, no clock reads. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

// "2026-01-01T00:00:00.000Z": always UTC, always milliseconds. Defined for
// years 0000..9999; `ms` outside that range is clamped to it.
std::string FormatTime(Millis ms);

// "2026-01-01T00:00:00Z": UTC, whole seconds (floored). Scheduled payloads
// use it (their text is part of the admission fingerprint: never change it).
std::string FormatTimeSeconds(Millis ms);

// Parses an RFC 3339 date-time: "YYYY-MM-DDTHH:MM[:SS[.fraction]]" followed by
// "Z" or an offset "+HH:MM" / "-HH:MM" ('t', 'z' and a space instead of 'T'
// are accepted). The zone is required: a bare local time is ambiguous, so it
// is refused with a message saying to add "Z". Fractions finer than a
// millisecond are truncated; 23:59:60 folds into the next second. Times
// before 1970-01-01T00:00:00Z are refused (stored times are not negative).
// kInvalidArgument names `what` (e.g. "run_at") and what is wrong.
Result<Millis> ParseTime(std::string_view text, std::string_view what = "time");

}  // namespace taskengine
