// Operator actions behind the CLI verbs, over an open Engine. The CLI only
// parses flags and prints; what a verb means lives here so that other
// front ends (and tests) share it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/config.h"
#include "storage/execution_detail.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "views/views.h"  // QueueView

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
// Every configured queue of `config` and every other queue with work in the
// database, as operators see them (views/views.h, QueueViews).
Result<std::vector<QueueView>> QueueStatus(Store& store, const ServerConfig& config, Millis now);

// The actor of an operator verb: "cli:<name>" for `--as NAME` (for scripts
// that act as several operators, e.g. four-eyes tests), else CliRequester().
// kInvalidArgument unless NAME is 1..64 characters of [A-Za-z0-9._@-].
Result<std::string> CliActor(std::string_view as_name);

// An execution with everything `execution:show` prints (at most `log_limit`
// log lines and kDetailAuditLimit audit records, as the API's detail).
// kNotFound naming the id when there is no such execution.
Result<ExecutionDetail> ShowExecution(Engine& engine, ExecutionId id, int log_limit);

// The lease a `command` job's script holds, from the variables the command
// handler sets: TASKENGINE_EXECUTION_ID and TASKENGINE_CLAIM_VERSION.
// kInvalidArgument naming the variable when one is unset or not a positive
// integer (the effect verbs only work inside a `command` job).
Result<LeaseRef> LeaseFromEnvironment(const EnvLookup& env);

}  // namespace taskengine
