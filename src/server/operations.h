// Operator actions behind the CLI verbs, over an open Engine. The CLI only
// parses flags and prints; what a verb means lives here so that other
// front ends (and tests) share it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/config.h"
#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

// `job:dispatch` as typed on the command line.
struct CliDispatch {
  std::string job;
  std::string tenant;  // empty = none
  std::string payload_json = "{}";
  std::string idempotency_key;          // empty = none
  std::optional<double> delay_seconds;  // start no earlier than now + delay
  std::string run_at;                   // RFC 3339 with a zone; empty = none
  std::string lane_key;                 // empty = none
};

// "cli:<user name of the effective uid>" ("cli:uid-<n>" when it has no name).
std::string CliRequester();

// The engine request for `in`: trigger manual, requester CliRequester().
// kInvalidArgument for a negative, non-finite or absurd delay, a bad
// --run-at, or both given. Everything else is checked by Engine::Dispatch.
Result<DispatchRequest> BuildCliDispatch(const CliDispatch& in);

// One line of `queue:status`.
struct QueueStatusRow {
  std::string queue;
  bool configured = false;  // declared in the config (else only seen in the database)
  int priority = 0;
  int concurrency = 0;      // 0 = all workers
  std::int64_t queued = 0;  // queued, due or not
  std::int64_t due = 0;     // queued with run-at <= now
  std::int64_t running = 0;
  Millis oldest_queued_at = 0;  // 0 = nothing queued
  Millis oldest_age_ms = 0;     // now - oldest_queued_at; 0 = nothing queued
};

// Every configured queue (by priority, highest first, then name), then every
// other queue that has work in the database (by name).
Result<std::vector<QueueStatusRow>> QueueStatus(Store& store, const ServerConfig& config,
                                                Millis now);

// An execution with its logs (oldest first, at most `log_limit`).
struct ExecutionDetail {
  Execution execution;
  std::vector<LogEntry> logs;
};

// kNotFound naming the id when there is no such execution.
Result<ExecutionDetail> ShowExecution(Engine& engine, ExecutionId id, int log_limit);

}  // namespace taskengine
