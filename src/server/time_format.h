// Durations for people (CLI tables). Times as text: core/time_text.h.
// Pure: no I/O, no clock reads.
#pragma once

#include <string>
#include <string_view>

#include "taskengine/clock.h"

namespace taskengine {

// "350ms", "2.5s", "3m12s", "1h02m": a short human duration. Negative -> "-".
std::string FormatDuration(Millis ms);

}  // namespace taskengine
