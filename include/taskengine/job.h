// What a handler sees and returns. Handlers are registered by name in the
// engine's registry (W1): the database names a handler, never code to load.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

struct HandlerResult;

// Whether a sink deduplicates by an idempotency key (E3). With kIdempotent,
// an ambiguous effect (an earlier claim reserved it and never confirmed) is
// performed again with the effect key as the sink's idempotency key; with
// kNotIdempotent the execution is quarantined as ambiguous instead.
enum class EffectSink { kNotIdempotent, kIdempotent };

// What the ledger said about one effect, and what came of it.
struct EffectResult {
  EffectAnswer answer = EffectAnswer::kProceed;
  std::string key;     // "<execution id>:<name>"
  std::string detail;  // performed now: what perform returned; already done: the recorded detail
  Status error;        // perform failed, or the ledger could not be reached: nothing committed
  // The effect happened exactly once (now or earlier): go on.
  bool done() const {
    return error.ok() && (answer == EffectAnswer::kProceed || answer == EffectAnswer::kAlreadyDone);
  }
  // What a handler returns when !done(): ambiguous -> HandlerResult::Ambiguous,
  // canceled -> Canceled, stale -> Retryable (publishes nothing anyway),
  // error -> Retryable with its message.
  HandlerResult ToHandlerResult() const;
};

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

  // --- the effect ledger (E1-E3). Thread-safe. ---
  // Reserves effect `name` before performing it. See EffectAnswer. Errors
  // only when the ledger cannot be reached (or a bad name); the answer is
  // durable before it is returned.
  virtual Result<EffectResult> ReserveEffect(std::string_view name) = 0;
  // Records effect `name` as done with `detail` (e.g. the sink's message id).
  virtual Status CommitEffect(std::string_view name, std::string_view detail) = 0;
  // Gives back this claim's reservation of an effect that certainly did not
  // happen (e.g. the connection was refused), so a retry proceeds instead of
  // meeting `ambiguous`. A committed effect is kept.
  virtual Status ReleaseEffect(std::string_view name) = 0;

  // Performs `perform(effect_key)` at most once per effect key: reserve,
  // perform, commit. `perform` returns the detail to record, or an error:
  // kUnavailable means "certainly not performed" (the reservation is given
  // back; a retry proceeds), any other error leaves the outcome unknown (a
  // retry meets `ambiguous`).
  EffectResult Effect(std::string_view name, EffectSink sink,
                      const std::function<Result<std::string>(const std::string& key)>& perform);
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
