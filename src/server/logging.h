// Process-wide logging setup (spdlog): everything goes to stderr, so stdout
// stays free for command output (tables, --json documents).
#pragma once

#include <spdlog/common.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "server/config.h"
#include "taskengine/lifecycle.h"

namespace taskengine {

// Replaces spdlog's default logger with one writing to stderr.
// kText: "2026-01-01T00:00:00.000Z info message" (UTC).
// kJson: one object per line: {"ts": RFC 3339 UTC with milliseconds, "time"
// (the same; kept for older readers), "level", "msg"} plus the fields of
// LogEvent records. Strings are escaped as JSON requires; invalid UTF-8 is
// replaced, never emitted raw.
// `verbose` = info and above; otherwise warnings and errors only.
// Not thread-safe: call once at startup, before any thread logs.
void ConfigureLogging(LogFormat format, bool verbose);

// The format ConfigureLogging chose (kText before it was called).
LogFormat CurrentLogFormat();

// Logs `msg` with structured `fields` (a JSON object of scalars, in order): in JSON
// format they become top-level members of the record (never overriding ts,
// time, level or msg); in text format they follow the message as
// `key=value` pairs (strings JSON-quoted when they contain spaces, quotes or
// control characters). Thread-safe.
void LogEvent(spdlog::level::level_enum level, std::string_view msg,
              const nlohmann::ordered_json& fields);

// One info line for a lifecycle event: msg = its stable name
// (LifecycleEventName), fields "event" (the same), then for executions
// "execution_id", "job", "tenant" (null for global jobs), "queue", "status",
// "attempt", "duration_ms" (of the attempt that ended; null when none ran),
// "failure_class" (null when none), "worker" (null when none), and "trigger"
// and "run_at" for admissions and requeues; for workers "worker" and
// "threads". Thread-safe.
void LogLifecycle(const LifecycleEvent& event);

}  // namespace taskengine
