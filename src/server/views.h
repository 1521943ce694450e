// JSON documents of the CLI's --json output. Field names are the glossary's
// words; times are RFC 3339 UTC strings (null when unset), durations integer
// milliseconds, payloads and results embedded as JSON values. Pure.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "server/operations.h"
#include "storage/store.h"
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

// {"key", "name", "state" ("reserved" | "committed"), "reserved_at",
//  "committed_at", "attempt", "claim_version", "detail"}
nlohmann::ordered_json EffectToJson(const EffectRecord& e);

// {"attempt", "claim_version", "worker", "started_at", "ended_at", "outcome",
//  "failure_class", "released", "error"}
nlohmann::ordered_json AttemptToJson(const AttemptRecord& a);

// {"id", "at", "actor", "tenant", "action", "target", "before", "after", "reason"}
nlohmann::ordered_json AuditToJson(const AuditRecord& r);

// {"tenant", "lane", "head", "head_status", "blocked", "queued", "running"};
// "tenant" is null for lanes of global jobs; "head" and "head_status" are
// null when every member is done.
nlohmann::ordered_json LaneToJson(const LaneStatus& lane);

// {"answer", "key", "detail", "committed_at"}: what effect:reserve answered.
nlohmann::ordered_json EffectReplyToJson(const EffectReply& r);

// ExecutionToJson plus "logs", "effects", "escaped_effects" (empty unless
// canceled or partially_canceled), "attempts" and "audit" (newest first).
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
