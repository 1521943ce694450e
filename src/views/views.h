// The view layer: the one place where an execution, job, effect, attempt,
// audit record, queue, lane, tenant, worker or lease becomes a JSON document.
// The REST API (src/api) and the CLI's --json output (apps/taskengine) both
// call these functions, so a script sees the same document from either.
//
// Field names are the glossary's words (docs/architecture.md); times are
// RFC 3339 UTC strings with milliseconds (null when unset), durations integer
// milliseconds, payloads and configs embedded as JSON values, 64-bit ids as
// JSON integers (leases of the worker protocol: decimal strings).
// Pure: no I/O. Thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/job_schedules.h"
#include "storage/execution_detail.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "taskengine/types.h"

namespace taskengine {

using Json = nlohmann::ordered_json;

// RFC 3339 string, or null when `ms` is 0 (unset).
Json TimeOrNull(Millis ms);
// A stored JSON text as a value; null when empty; the text as a string when it
// does not parse (which the store never holds).
Json EmbeddedJson(const std::string& text);

// A page of a listing: {"items": items, "next_cursor": "<id>" | null}; pass
// the cursor of the next page (0 = this is the last page). Listings without
// pagination are {"items": items}.
Json PageToJson(Json items, std::int64_t next_cursor);

// "/api/v1/executions/<id>"
std::string ExecutionUrl(ExecutionId id);

// Every field of the definition ("config" is always an object, {} when
// none) and its schedule state: "next_fire", "last_fire", "skipped_fires",
// "last_skipped_at", "schedule_error" (null when none).
Json JobToJson(const JobDefinition& job, const JobScheduleInfo& schedule);

// Every field of the execution except its result, which is only served
// through "result_url" (checked against the caller at access time, I2), and,
// unless `with_payload`, its payload. "duration_ms" is null until finished.
Json ExecutionToJson(const Execution& e, bool with_payload);

// ExecutionToJson with the payload, plus "logs", "effects",
// "escaped_effects" (empty unless canceled or partially canceled),
// "attempts" and "audit" (newest first).
Json ExecutionDetailToJson(const ExecutionDetail& d);

// {"attempt", "at", "level", "message"}
Json LogToJson(const LogEntry& log);
// {"name", "key", "state" ("reserved" | "committed"), "attempt",
//  "claim_version", "reserved_at", "committed_at", "detail"}
Json EffectToJson(const EffectRecord& effect);
// {"answer", "key", "detail" (already_done only), "committed_at"}: what a
// reservation answered (E1).
Json EffectReplyToJson(const EffectReply& reply);
// {"attempt", "claim_version", "worker", "started_at", "ended_at", "outcome",
//  "failure_class", "released", "error"}
Json AttemptToJson(const AttemptRecord& attempt);
// {"id", "at", "actor", "tenant", "action", "target", "before", "after", "reason"}
Json AuditToJson(const AuditRecord& record);
// {"tenant", "lane", "head", "head_status", "blocked", "queued", "running"};
// "tenant" is null for lanes of global jobs; "head" and "head_status" are
// null when every member is done.
Json LaneToJson(const LaneStatus& lane);
// {"id", "status", "created", "status_url"}
Json DispatchResultToJson(const DispatchResult& r);
// DispatchResultToJson(r) as every response prints it, written without
// building the JSON value: the answer of each single dispatch.
std::string DispatchResultText(const DispatchResult& r);
// The answer of a single complete, fail or release call: {"status"}, and for
// a fail "run_at" too (when the execution is queued again: its next start;
// else null).
Json FinishReplyToJson(const FinishReply& reply, bool fail);
// FinishReplyToJson as every response prints it, written without building
// the JSON value.
std::string FinishReplyText(const FinishReply& reply, bool fail);
// {"id", "name", "active", "created_at"}
Json TenantToJson(const Tenant& tenant);
// A dashboard user with `role` (admin, operator, viewer or custom), never its
// password hash.
Json UserToJson(const User& user, std::string_view role);
// "live", "expired" (at `now`) or "revoked".
std::string_view TokenState(const ApiToken& token, Millis now);
// An API token with its state at `now`, never its secret or its hash.
Json TokenToJson(const ApiToken& token, Millis now);

// A queue as operators see it: its configuration in this process (when it
// is one of the configured queues) and its depth in the database.
struct QueueView {
  std::string queue;
  bool configured = false;  // declared in this process's configuration
  int priority = 0;
  int concurrency = 0;      // 0 = all workers
  std::int64_t queued = 0;  // queued, due or not
  std::int64_t due = 0;     // queued with run-at <= now
  std::int64_t running = 0;
  Millis oldest_queued_at = 0;  // 0 = nothing queued
  Millis oldest_age_ms = 0;     // now - oldest_queued_at; 0 = nothing queued
};

// Every configured queue (names are unique: the configuration refuses a
// repeated one) by priority, highest first, then name; then every
// other queue that has work in the database (by name).
std::vector<QueueView> QueueViews(std::vector<QueueDepth> depths,
                                  const std::vector<QueueConfig>& configured, Millis now);

// {"queue", "configured", "priority", "concurrency", "queued", "due",
//  "running", "oldest_queued_at", "oldest_queued_age_ms"}
Json QueueToJson(const QueueView& queue);

// What an API process learned about a remote worker from the worker protocol
// beyond the store's row (registration fields, leases in hand).
struct WorkerDetails {
  std::string name;                   // empty = not given
  std::string version;                // empty = not given
  std::vector<std::string> queues;    // as in its last lease request
  std::vector<std::string> handlers;  // as in its last lease request; empty = any
  int concurrency = 0;                // 0 = not given
  std::vector<ExecutionId> current;   // executions it holds, by id
  Millis last_seen_at = 0;
};

// {"id", "kind" ("pool" | "remote"), "name", "host", "pid", "version",
//  "queues", "handlers", "concurrency", "busy", "idle", "state", "started_at",
//  "last_seen_at", "stale_after_ms", "processed", "failed",
//  "current": ["42", ...]}
// "state" is LiveState at `now`: idle, busy, stopped or stale (no report for
// stale_after_ms). "concurrency" is a pool's handler threads or a remote
// worker's declared concurrency (null when unknown); "busy" the executions
// running now; "idle" concurrency - busy (null when concurrency is unknown,
// 0 when stopped or stale). Without `details` (a worker of another process
// or node), name, version are null, queues and handlers empty, and current
// from the store's row.
Json WorkerToJson(const WorkerInfo& worker, const WorkerDetails* details, Millis now);

// A lease as the worker protocol hands it out (ids as decimal strings),
// appended to `out` as JSON text:
// {"id", "claim_version", "job", "tenant", "queue", "attempt", "payload",
//  "idempotency_key", "effect_key_prefix", "lease_ms", "lease_expires_at",
//  "handler", "handler_config", "timeout_ms"}. `job` is the execution's
// definition; null (handler, handler_config and timeout_ms null) when it is
// gone. `handler_config` is the config's JSON text (HandlerConfigText, or a
// caller's expansion of it through EmbeddedJsonText). Written as text, not
// built as a Json: the payload, a stored JSON text, is copied as it is rather
// than parsed and printed again for every lease of a batch.
void AppendLeaseJson(std::string& out, const Lease& lease, const JobDefinition* job,
                     std::string_view handler_config);
// The handler config a lease of `job` carries, as JSON text: the stored
// config, {} when it has none.
std::string HandlerConfigText(const JobDefinition& job);
// EmbeddedJson(text) as JSON text.
std::string EmbeddedJsonText(const std::string& text);

}  // namespace taskengine
