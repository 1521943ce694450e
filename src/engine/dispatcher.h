// Dispatcher: validates dispatch requests and admits them through the store
// (A1-A5). The one place that decides what a valid dispatch is.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

// Thread-safe.
class Dispatcher {
 public:
  // `lifecycle` (may be empty) gets an execution.dispatched event for each
  // execution a commit created. (The store's work publisher wakes the
  // workers after such a commit: Store::SetWorkPublisher.)
  Dispatcher(Store* store, Clock* clock, std::size_t max_payload_bytes,
             std::function<void(const LifecycleEvent&)> lifecycle = nullptr)
      : store_(store),
        clock_(clock),
        max_payload_bytes_(max_payload_bytes),
        lifecycle_(std::move(lifecycle)) {}

  Result<DispatchResult> Dispatch(const DispatchRequest& request);
  // All or none (A5).
  Result<std::vector<DispatchResult>> DispatchBatch(const std::vector<DispatchRequest>& requests);
  // DispatchBatch without waiting for the commit: the same checks on the
  // calling thread, then `done` receives what DispatchBatch would return,
  // once, only after the admissions are durable (or the error: nothing
  // admitted), on a thread of the store or on the calling thread
  // (Store::AdmitBatchAsync). `done` must be quick and must not block.
  using DispatchDone = std::function<void(Result<std::vector<DispatchResult>>)>;
  void DispatchBatchAsync(const std::vector<DispatchRequest>& requests, DispatchDone done);

 private:
  // Checked admissions with the definitions of their jobs (read once each).
  struct Admissions {
    Millis now = 0;
    std::unordered_map<std::string, JobDefinition> jobs;
    std::vector<AdmitRequest> admits;  // in request order
  };
  // Checks every request against its job definition; the first error.
  Result<Admissions> PrepareBatch(const std::vector<DispatchRequest>& requests) const;
  // The answers to committed admissions; emits their lifecycle events to
  // `lifecycle` (may be empty).
  static std::vector<DispatchResult> Conclude(
      const Admissions& admissions, const std::vector<AdmitResult>& admitted,
      const std::function<void(const LifecycleEvent&)>& lifecycle);
  // Checks `r` against its job definition and builds the store request.
  Result<AdmitRequest> Prepare(const DispatchRequest& r, const JobDefinition& job,
                               Millis now) const;

  Store* const store_;
  Clock* const clock_;
  const std::size_t max_payload_bytes_;
  const std::function<void(const LifecycleEvent&)> lifecycle_;
};

// kConflict for an admission that hit a used key with a different payload.
Status ConflictStatus(const DispatchRequest& request, ExecutionId existing);

}  // namespace taskengine
