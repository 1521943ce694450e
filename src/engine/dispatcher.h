// Dispatcher: validates dispatch requests and admits them through the store
// (A1-A5). The one place that decides what a valid dispatch is.
#pragma once

#include <functional>
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

 private:
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
