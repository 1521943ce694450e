// JSON documents of the CLI's --json output. Field names are the glossary's
// words; times are RFC 3339 UTC strings (null when unset), durations integer
// milliseconds, payloads and results embedded as JSON values. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "server/operations.h"
#include "taskengine/engine.h"
#include "taskengine/types.h"

namespace taskengine {

// {"name", "display_name", "handler", "queue", "scope", "schedule", "timezone",
//  "timeout_ms", "lease_ms", "max_attempts", "backoff_base_ms", "backoff_cap_ms",
//  "max_permanent_attempts", "max_unsupported_schema_attempts",
//  "max_ambiguous_attempts", "max_consecutive_lease_expiries", "lane_template",
//  "accepted_schema_versions", "config", "enabled", "created_at", "updated_at"}
nlohmann::ordered_json JobToJson(const JobDefinition& job);

// Every field of the execution; "duration_ms" is null until it finished.
nlohmann::ordered_json ExecutionToJson(const Execution& e);

// {"attempt", "at", "level", "message"}
nlohmann::ordered_json LogToJson(const LogEntry& log);

// ExecutionToJson plus "logs": [...].
nlohmann::ordered_json ExecutionDetailToJson(const ExecutionDetail& d);

// {"id", "created", "status"}
nlohmann::ordered_json DispatchResultToJson(const DispatchResult& r);

// {"queue", "configured", "priority", "concurrency", "queued", "due", "running",
//  "oldest_queued_at", "oldest_age_ms"}
nlohmann::ordered_json QueueStatusToJson(const QueueStatusRow& row);

// A stored JSON text as a value; a string holding the text when it does not
// parse (which the store should never hold); null when empty.
nlohmann::ordered_json EmbeddedJson(const std::string& text);

// RFC 3339 string, or null when `ms` is 0 (unset).
nlohmann::ordered_json TimeOrNull(Millis ms);

}  // namespace taskengine
