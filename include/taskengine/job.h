// What a handler sees and returns. Handlers are registered by name in the
// engine's registry (W1): the database names a handler, never code to load.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "taskengine/types.h"

namespace taskengine {

// What a liveness call (heartbeat, checkpoint) learned.
enum class LeaseState {
  kActive,           // keep going
  kCancelRequested,  // stop: cancellation was requested (C1)
  kLost,             // stop: this claim is no longer current (stale) or the execution is gone
};

// The handler's window on its execution. One per running execution; valid only
// during the handler call. Not thread-safe unless a method says so.
class JobContext {
 public:
  virtual ~JobContext() = default;

  virtual ExecutionId execution_id() const = 0;
  virtual const JobName& job() const = 0;
  virtual const TenantId& tenant() const = 0;  // empty for global jobs
  virtual int attempt() const = 0;             // 1 on the first run
  virtual ClaimVersion claim_version() const = 0;
  virtual const std::string& payload_json() const = 0;
  virtual const std::string& config_json() const = 0;  // the job definition's config
  virtual Millis timeout_ms() const = 0;               // the job definition's timeout
  // "<execution id>:": effect keys are this prefix plus the effect name.
  virtual std::string effect_key_prefix() const = 0;

  // Records progress (0..100, clamped). Thread-safe. Sent with the next heartbeat.
  virtual void SetProgress(int percent) = 0;
  // Appends a log line to the execution. Thread-safe. Lines of a lost claim are dropped.
  virtual void Log(LogLevel level, std::string_view message) = 0;
  // Extends the lease now and reports progress. Thread-safe. (The worker pool
  // also heartbeats on its own every lease/3, so handlers need not.)
  virtual LeaseState Heartbeat() = 0;
  // A cheap cancellation point: the state learned at the last heartbeat.
  // Thread-safe. Long handlers call it between units of work.
  virtual LeaseState Checkpoint() = 0;
};

// How a handler run ended.
struct HandlerResult {
  enum class Kind { kSuccess, kRetryable, kPermanent, kAmbiguous, kCanceled };
  Kind kind = Kind::kSuccess;
  std::string result_json;  // kSuccess: optional JSON value
  std::string error;        // failures: a message for operators
  Millis retry_after_ms = 0;

  static HandlerResult Success(std::string result_json = {}) {
    return {Kind::kSuccess, std::move(result_json), {}, 0};
  }
  static HandlerResult Retryable(std::string error, Millis retry_after_ms = 0) {
    return {Kind::kRetryable, {}, std::move(error), retry_after_ms};
  }
  static HandlerResult Permanent(std::string error) {
    return {Kind::kPermanent, {}, std::move(error), 0};
  }
  static HandlerResult Ambiguous(std::string error) {
    return {Kind::kAmbiguous, {}, std::move(error), 0};
  }
  // The handler stopped because its context reported kCancelRequested.
  static HandlerResult Canceled() { return {Kind::kCanceled, {}, {}, 0}; }
};

// A handler runs one execution to an outcome. It may be called concurrently
// for different executions, so it must be thread-safe. An exception escaping
// it is caught and counts as a retryable failure.
using Handler = std::function<HandlerResult(JobContext&)>;

}  // namespace taskengine
