// Process-wide logging setup (spdlog): everything goes to stderr, so stdout
// stays free for command output (tables, --json documents).
#pragma once

#include "server/config.h"

namespace taskengine {

// Replaces spdlog's default logger with one writing to stderr.
// kText: "2026-01-01T00:00:00.000Z info message" (UTC).
// kJson: one object per line: {"time": RFC 3339 UTC, "level", "msg"}.
// `verbose` = info and above; otherwise warnings and errors only.
// Not thread-safe: call once at startup, before any thread logs.
void ConfigureLogging(LogFormat format, bool verbose);

}  // namespace taskengine
