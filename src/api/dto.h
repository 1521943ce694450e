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

// --- tenants and workers ---

// {"id", "name", "active", "created_at"}
Json TenantToJson(const Tenant& tenant);

// What this API process learned about a remote worker from the worker
// protocol beyond the store's row (registration fields, leases in hand).
struct WorkerDetails {
  std::string name;                  // empty = not given
  std::string version;               // empty = not given
  std::vector<std::string> queues;   // as in its last lease request
  int concurrency = 0;               // 0 = not given
  std::vector<ExecutionId> current;  // executions it holds, by id
  Millis last_seen_at = 0;
};

// {"id", "name", "host", "pid", "version", "queues", "concurrency", "state",
//  "started_at", "last_seen_at", "processed", "failed", "current": ["42", ...]}
// Without `details` (a worker of another process or node), name, version and
// concurrency are null, queues empty and current from the store's row.
Json WorkerToJson(const WorkerInfo& worker, const WorkerDetails* details);

// A lease as the worker protocol hands it out (ids as decimal strings):
// {"id", "claim_version", "job", "tenant", "queue", "attempt", "payload",
//  "idempotency_key", "effect_key_prefix", "lease_ms", "lease_expires_at",
//  "handler", "handler_config"}. `job` is the execution's definition; null
// (handler and handler_config null) when it is gone.
Json LeaseToJson(const Lease& lease, const JobDefinition* job);

}  // namespace taskengine::api
