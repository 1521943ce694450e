// Dispatcher: validates dispatch requests and admits them through the store
// (A1-A5). The one place that decides what a valid dispatch is.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

// Thread-safe.
//
// Job definitions: a dispatch is checked against its job's definition as
// this dispatcher last read it (no read per dispatch). Each admission carries
// the terms it was prepared from (AdmitRequest::prepared_with) and the store
// checks them in its transaction, so a definition changed elsewhere (another
// node, the CLI) never admits on old terms. A dispatch that a remembered
// definition refuses is prepared again from the stored definition; one whose
// admission fails is, when the stored definition turns out to differ, and is
// tried once more.
class Dispatcher {
 public:
  // `lifecycle` (may be empty) gets an execution.dispatched event for each
  // execution a commit created. (The store's work publisher wakes the
  // workers after such a commit: Store::SetWorkPublisher.)
  Dispatcher(Store* store, Clock* clock, std::size_t max_payload_bytes,
             std::function<void(const LifecycleEvent&)> lifecycle = nullptr);
  ~Dispatcher();

  Result<DispatchResult> Dispatch(const DispatchRequest& request);
  // All or none (A5).
  Result<std::vector<DispatchResult>> DispatchBatch(const std::vector<DispatchRequest>& requests);
  // DispatchBatch without waiting for the commit: the same checks on the
  // calling thread, then `done` receives what DispatchBatch would return,
  // once, only after the admissions are durable (or the error: nothing
  // admitted), on a thread of the store or on the calling thread
  // (Store::AdmitBatchAsync). `done` must be quick and must not block.
  using DispatchDone = std::function<void(Result<std::vector<DispatchResult>>)>;
  void DispatchBatchAsync(std::vector<DispatchRequest> requests, DispatchDone done);

 private:
  // Shared with the callbacks of asynchronous admissions, which may run
  // after the dispatcher is gone (the store drains its queue when it closes).
  struct Core;
  std::shared_ptr<Core> core_;
};

// kConflict for an admission that hit a used key with a different payload.
Status ConflictStatus(const DispatchRequest& request, ExecutionId existing);

}  // namespace taskengine
