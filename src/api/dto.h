// JSON DTOs of the REST API. Field names are the glossary's words (the same as
// the CLI's --json output); times are RFC 3339 UTC strings with milliseconds
// (null when unset), durations integer milliseconds, payloads embedded as JSON
// values. Pure: no I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "storage/store.h"
#include "taskengine/engine.h"
#include "taskengine/types.h"

namespace taskengine::api {

using Json = nlohmann::ordered_json;

// RFC 3339 string, or null when `ms` is 0 (unset).
Json TimeOrNull(Millis ms);
// A stored JSON text as a value; null when empty; the text as a string when it
// does not parse (which the store never holds).
Json EmbeddedJson(const std::string& text);

// "/api/v1/executions/<id>"
std::string ExecutionUrl(ExecutionId id);

// Every field of the definition (see docs/openapi.json, JobDefinition).
Json JobToJson(const JobDefinition& job);

// Every field of the execution except its result (only through result_url)
// and, unless `with_payload`, its payload. "duration_ms" is null until finished.
Json ExecutionToJson(const Execution& e, bool with_payload);

Json LogToJson(const LogEntry& log);
Json EffectToJson(const EffectRecord& effect);
Json AttemptToJson(const AttemptRecord& attempt);
Json AuditToJson(const AuditRecord& record);
// `now` gives "oldest_queued_age_ms".
Json QueueDepthToJson(const QueueDepth& depth, Millis now);
Json LaneToJson(const LaneStatus& lane);

// {"id", "status", "created", "status_url"}
Json DispatchResultToJson(const DispatchResult& r);

}  // namespace taskengine::api
